"""Query batches in chunks and answers in pages (shared/queries/wire.py), without a server."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ldpsynth.shared import queries as Q
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators import estimate
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.queries.wire import (
    PAGE_ENVELOPE_BYTES,
    AnswerTable,
    BatchReader,
    BatchTooLarge,
    answer_pages,
    estimate_requests,
)
from ldpsynth.shared.wire import query_pb2 as qpb
from ldpsynth.simulation.datasets import ratings_schema

SCHEMA = ratings_schema(1.0, movies=6, name="r")
QUERIES = [{"kind": "linear", "weights": [1, 2, 3, 4, 5]}, {"kind": "marginal", "attributes": ["rating"]},
           {"kind": "grouped", "attribute": "movie", "tables": [{"value": 2, "weights": [1, 0, 0, 0, 1]}]},
           {"kind": "predicate", "where": [{"attribute": "rating", "op": "<", "value": 3}], "label": "low"}]


def read(requests) -> Q.QueryBatch:
    reader = BatchReader(SCHEMA, max_queries=1 << 20, max_weights=1 << 24)
    for request in requests:
        reader.add(qpb.EstimateRequest.FromString(request.SerializeToString()))
    return reader.batch()


def stats(seed: int = 1) -> SufficientStatistics:
    rng = np.random.default_rng(seed)
    return SufficientStatistics.from_schema(SCHEMA, rng.integers(0, 6, 2000), rng.integers(0, 5, 2000))


def test_chunked_batch_answers_like_the_whole_batch():
    linear = np.random.default_rng(2).random((300, 5))
    requests = list(estimate_requests("r", queries=QUERIES * 40, linear=linear, chunk_bytes=1024))
    assert len(requests) > 10 and requests[0].collection == "r" and not requests[1].collection
    assert all(r.ByteSize() <= 1024 for r in requests)
    chunked = read(requests)
    whole = Q.concat_batches([Q.compile_queries(Q.queries_from_json(QUERIES * 40), SCHEMA),
                              Q.linear_batch(SCHEMA, linear)], [160, 300])
    assert chunked.size == whole.size == 40 * 8 + 300
    assert chunked.labels == whole.labels and chunked.labels[-1] == f"q{whole.size - 1}"
    assert chunked.labels[5 * 8 + 7] == "low" and chunked.labels[8] == "linear#4"
    mechanism = MechanismCard.for_schema(SCHEMA).mechanism
    a, b = estimate(chunked, stats(), mechanism), estimate(whole, stats(), mechanism)
    np.testing.assert_allclose(a.estimate, b.estimate, rtol=1e-12)
    np.testing.assert_array_equal(chunked.origins, whole.origins)


def test_errors_name_the_query_by_its_index_in_the_whole_batch():
    bad = [*QUERIES, {"kind": "linear", "weights": [1, 2]}]
    with pytest.raises(ValidationError, match=r"queries\[8\]\.weights"):
        read(estimate_requests("r", queries=QUERIES + bad, chunk_bytes=1024))
    nan = np.ones((40, 5))
    nan[33, 2] = np.nan
    with pytest.raises(ValidationError, match=r"queries\[37\]\.weights"):
        read(estimate_requests("r", queries=QUERIES, linear=nan, chunk_bytes=1024))


def test_limits_raise_batch_too_large():
    reader = BatchReader(SCHEMA, max_queries=10, max_weights=1 << 20)
    with pytest.raises(BatchTooLarge):
        for request in estimate_requests("r", linear=np.ones((11, 5))):
            reader.add(request)


def test_pages_reassemble_every_answer_in_order():
    batch = Q.compile_queries(Q.queries_from_json(QUERIES * 30), SCHEMA)
    answers = estimate(batch, stats(), MechanismCard.for_schema(SCHEMA).mechanism, level=0.8)
    pages = list(answer_pages(answers, max_bytes=1 << 20, page=7))
    assert len(pages) == -(-answers.estimate.size // 7)
    table = AnswerTable.from_pages(pages)
    assert table.records() == answers.records()
    with pytest.raises(ValidationError, match="offset"):
        AnswerTable.from_pages(pages[:1] + pages[2:])
    with pytest.raises(ValidationError, match="answers"):
        AnswerTable.from_pages(pages[:-1])


def test_every_request_fits_its_limit_and_queries_stay_whole():
    """Requests of whole queries within chunk_bytes; a longer query alone within the message limit."""
    long = {"kind": "linear", "weights": [0.1234567890123] * 5, "label": "x" * 250}
    queries = [*QUERIES, long] * 30
    requests = estimate_requests("r", queries=queries, linear=np.ones((500, 5)), chunk_bytes=1024,
                                 max_message_bytes=4096)
    sizes = [r.ByteSize() for r in requests]
    assert max(sizes) <= 1024 and len(sizes) > 30
    assert [r.SerializeToString() for r in requests] == [r.SerializeToString() for r in requests]  # re-iterable
    sent = [q for r in requests if r.WhichOneof("queries") == "queries_json" for q in json.loads(r.queries_json)]
    assert sent == queries and read(requests).size == 30 * 9 + 500
    alone = {"kind": "dense", "table": [[0.5] * 5] * 60}  # 1.1 KB of JSON: over chunk_bytes, under the limit
    big = list(estimate_requests("r", queries=[QUERIES[0], alone, QUERIES[1]], chunk_bytes=1024,
                                 max_message_bytes=4096))
    assert [len(json.loads(r.queries_json)) for r in big] == [1, 1, 1] and 1024 < big[1].ByteSize() <= 4096


def test_a_query_or_weight_row_over_the_message_limit_names_itself_and_the_limit():
    too_big = {"kind": "dense", "table": [[0.5] * 5] * 300}
    with pytest.raises(ValidationError, match=r"queries\[4\]: it is \d+ bytes.*message limit of 4096 bytes"):
        estimate_requests("r", queries=[*QUERIES, too_big], chunk_bytes=1024, max_message_bytes=4096)
    with pytest.raises(ValidationError, match=r"^linear: .*message limit of 1024 bytes"):
        estimate_requests("r", linear=np.ones((2, 200)), chunk_bytes=1024)


@pytest.mark.parametrize("labelled", [False, True])
def test_pages_fit_the_message_limit(labelled):
    """2^14 answers in pages of at most 4 KiB each, reassembled in order; pages are full, not just small."""
    rng = np.random.default_rng(9)
    if labelled:  # 250-character labels: about 12 answers a page
        batch = Q.compile_queries(Q.queries_from_json(
            [{"kind": "linear", "weights": w.tolist(), "label": f"{j:03d}" + "y" * 247}
             for j, w in enumerate(rng.random((1 << 10, 5)))]), SCHEMA)
    else:
        batch = Q.linear_batch(SCHEMA, rng.random((1 << 14, 5)))
    answers = estimate(batch, stats(), MechanismCard.for_schema(SCHEMA).mechanism)
    pages = list(answer_pages(answers, max_bytes=4096))
    sizes = np.array([page.ByteSize() for page in pages])
    per_answer = 57 + (6 + 250 if labelled else 0)
    assert sizes.max() <= 4096 and np.all(sizes[:-1] > 4096 - PAGE_ENVELOPE_BYTES - per_answer)
    assert AnswerTable.from_pages(pages).records() == answers.records()


def test_an_answer_too_large_for_a_page_is_batch_too_large():
    batch = Q.compile_queries(Q.queries_from_json([QUERIES[0], {**QUERIES[1], "label": "z" * 256}]), SCHEMA)
    answers = estimate(batch, stats(), MechanismCard.for_schema(SCHEMA).mechanism)
    with pytest.raises(BatchTooLarge, match=r"message limit of 300 bytes \(answer 1, of queries\[1\]"):
        next(answer_pages(answers, max_bytes=300))


def test_the_empty_batch_is_one_request_and_one_empty_page():
    requests = list(estimate_requests("r", queries=[]))
    assert [(r.collection, r.queries_json) for r in requests] == [("r", "[]")]
    batch = read(requests)
    assert batch.size == 0
    answers = estimate(batch, stats(), MechanismCard.for_schema(SCHEMA).mechanism, level=0.8)
    pages = list(answer_pages(answers, max_bytes=1024))
    assert len(pages) == 1 and pages[0].total == 0 and pages[0].level == 0.8
    table = AnswerTable.from_pages(pages)
    assert len(table) == 0 and table.records() == [] and table.level == 0.8


def test_a_packed_arrays_normalisation_empty_or_eq10_is_range():
    linear = np.random.default_rng(4).random((3, 5))

    def packed(name: str) -> qpb.EstimateRequest:
        return qpb.EstimateRequest(collection="r", linear=qpb.LinearQueries(weights=linear.tobytes(),
                                                                            normalization=name))

    for name in ("", "eq10", "range"):
        assert list(read([packed(name)]).blocks[0].normalization) == [Q.RANGE] * 3, name
    mechanism = MechanismCard.for_schema(SCHEMA).mechanism
    answers = [estimate(read([packed(name)]), stats(), mechanism).records() for name in ("eq10", "range")]
    assert answers[0] == answers[1]
    with pytest.raises(ValidationError, match="one of 'range', 'sum', 'mean'"):
        read([packed("max")])
    assert [r.linear.normalization for r in estimate_requests("r", linear=linear)] == ["range"]
