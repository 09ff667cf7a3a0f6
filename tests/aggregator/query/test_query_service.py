"""The query service (issue 4): answers over the live synthetic database, export, errors, scale.

Real servers on port 0 with Ray shards. Reference answers come from the offline estimator
(:func:`ldpsynth.shared.estimators.estimate`) on the exported release; the server must return
the same numbers (to float rounding of sums taken in another order).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import grpc
import numpy as np
import pytest

from ldpsynth.aggregator.ingress import query_service
from ldpsynth.client.errors import QueryError
from ldpsynth.client.query import QueryClient
from ldpsynth.shared import queries as Q
from ldpsynth.shared.estimators import Answers, estimate
from ldpsynth.shared.estimators.offline import estimate_release
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.protocol import Limits
from ldpsynth.shared.queries.wire import AnswerTable, estimate_requests
from ldpsynth.shared.release import Release
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from ldpsynth.shared.wire import query_pb2 as qpb
from ldpsynth.shared.wire import query_pb2_grpc as qpb_grpc

from ..conftest import GRAPH, GRAPH_CARD, RATINGS, RATINGS_CARD, batch, make_reports, submit

pytestmark = pytest.mark.ray

FIELDS = ("estimate", "proper_estimate", "std_error", "ci_low", "ci_high", "bound", "bound_proper")
RATINGS_QUERIES = [
    {"kind": "linear", "weights": [1, 2, 3, 4, 5], "normalization": "mean"},
    {"kind": "linear", "weights": [0.5, -1, 2, 0, 3.25]},
    {"kind": "predicate", "where": [{"attribute": "rating", "op": ">=", "value": 4}]},
    {"kind": "marginal", "attributes": ["rating"], "normalization": "mean"},
    {"kind": "grouped", "attribute": "movie", "tables": [{"value": 3, "weights": [0, 0, 0, 1, 1]},
                                                         {"value": 7, "weights": [1, 0, 0, 0, 2]}],
     "default": [0, 1, 0, 1, 0], "label": "heterogeneous"},
]


def graph_reports(vertices: int, rng: np.random.Generator, density: float = 0.2) -> Reports:
    """One report per ordered pair i != j of the first ``vertices`` vertices, edge bits perturbed by E."""
    i, j = np.nonzero(~np.eye(vertices, dtype=bool))
    truth = (rng.random(len(i)) < density).astype(np.int64)
    return Reports(make_reports(GRAPH, len(i), rng).report_ids, GRAPH_CARD.mechanism.perturb(truth, rng),
                   np.column_stack([i, j]))


def cut_queries(vertices: int, count: int, rng: np.random.Generator) -> list[dict]:
    out = []
    for _ in range(count):
        order = rng.permutation(vertices)
        half = vertices // 2
        out.append({"kind": "cut", "S": sorted(order[:half].tolist()), "T": sorted(order[half:].tolist())})
    return out


def store(server, reports: Reports, schema=RATINGS, chunk: int = 20000) -> None:
    with server.channel() as channel:
        stub = pb_grpc.CollectionServiceStub(channel)
        batches = [batch(reports.slice(s, s + chunk), schema, n) for n, s in enumerate(range(0, len(reports), chunk))]
        acks, code, details = submit(stub, batches)
        assert code == grpc.StatusCode.OK, details


def offline(release: Release, queries: list[dict], level: float = 0.95) -> Answers:
    """The offline estimator on an exported release."""
    schema = release.card.schema
    codes = release.private_codes()
    stats = SufficientStatistics.from_schema(schema, release.public_keys() if schema.public_attributes else None,
                                             codes)
    return estimate(Q.compile_queries(Q.queries_from_json(queries), schema), stats, release.card.mechanism,
                    level=level, codes=codes)


def assert_same(server: AnswerTable, reference: Answers | AnswerTable, rtol: float = 1e-9) -> None:
    assert len(server) == len(reference)
    for name in FIELDS:
        np.testing.assert_allclose(getattr(server, name), getattr(reference, name), rtol=rtol, atol=1e-9,
                                   err_msg=name)
    np.testing.assert_array_equal(server.exact, reference.exact)
    assert (server.n, server.level, server.epsilon) == (reference.n, reference.level, reference.epsilon)


@pytest.fixture
def ratings_server(start_server):
    server = start_server()
    store(server, make_reports(RATINGS, 30000, np.random.default_rng(41)))
    return server


def test_server_answers_equal_the_offline_estimator_on_the_export(ratings_server):
    with QueryClient(ratings_server.address) as client:
        release = client.export("ratings")
        table = np.random.default_rng(3).random((len(release), 5))
        queries = [*RATINGS_QUERIES, {"kind": "dense", "table": table.tolist(), "normalization": "mean"}]
        answers = client.estimate("ratings", queries=queries, level=0.9)
    assert len(release) == 30000 and release.card.dumps() == RATINGS_CARD.dumps()
    reference = offline(release, queries, level=0.9)
    assert_same(answers, reference)
    assert answers.labels == tuple(reference.batch.label(j) for j in range(len(reference)))
    assert answers.labels[-2] == "heterogeneous"


def test_builders_served_equal_estimate_release_on_the_export_in_memory_and_on_disk(ratings_server, tmp_path):
    built = [Q.linear([1, 2, 3, 4, 5], normalization="mean"), Q.linear([0.5, -1, 2, 0, 3.25], normalization="eq10"),
             Q.predicate(Q.condition("rating", ">=", 4)), Q.marginal("rating", normalization="mean"),
             Q.grouped("movie", {3: [0, 0, 0, 1, 1], 7: [1, 0, 0, 0, 2]}, default=[0, 1, 0, 1, 0],
                       label="heterogeneous")]
    with QueryClient(ratings_server.address) as client:
        served = client.estimate("ratings", queries=built, level=0.9)
        as_json = client.estimate("ratings", queries=RATINGS_QUERIES, level=0.9)
        release = client.export("ratings")
    assert served.records() == as_json.records()           # the builders are RATINGS_QUERIES
    release.write(tmp_path / "release")
    for source in (release, tmp_path / "release"):
        assert_same(served, estimate_release(source, built, level=0.9))


def test_cli_query_equals_cli_estimate_on_the_cli_export(ratings_server, tmp_path):
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps(RATINGS_QUERIES))
    run = [sys.executable, "-m", "ldpsynth.cli"]
    common = ["--target", ratings_server.address, "--collection", "ratings"]
    served = subprocess.run([*run, "query", *common, "--queries", str(queries)], capture_output=True, text=True,
                            timeout=300, check=True)
    exported = subprocess.run([*run, "export", *common, "--out", str(tmp_path / "release")], capture_output=True,
                              text=True, timeout=300, check=True)
    summary = json.loads(exported.stdout)
    assert summary["rows"] == 30000 and summary["collection"] == "ratings"
    assert {Path(f).name for f in summary["files"]} == {"card.json", "synthetic.csv", "synthetic.parquet"}
    local = subprocess.run([*run, "estimate", "--synthetic", str(tmp_path / "release" / "synthetic.csv"),
                            "--card", str(tmp_path / "release" / "card.json"), "--queries", str(queries)],
                           capture_output=True, text=True, timeout=300, check=True)
    assert json.loads(served.stdout) == json.loads(local.stdout)


def test_cut_and_dense_answers_do_not_depend_on_the_number_of_shards(start_server):
    rng = np.random.default_rng(42)
    reports = graph_reports(60, rng)
    cuts = cut_queries(60, 12, rng)
    dense = {"kind": "dense", "table": rng.random((len(reports), 2)).tolist(), "normalization": "sum"}
    queries = [*cuts, {"kind": "marginal", "attributes": ["edge"]}, dense]
    answers = []
    for shards in (1, 3):
        server = start_server(shards=shards)
        store(server, reports, GRAPH)
        with QueryClient(server.address) as client:
            answers.append(client.estimate("graph", queries=queries))
            release = client.export("graph")
        assert_same(answers[-1], offline(release, queries))
        server.stop(0)
    assert_same(answers[0], answers[1], rtol=1e-12)


def test_a_batch_of_2_to_the_20_linear_queries_completes(ratings_server):
    weights = np.random.default_rng(7).random((1 << 20, 5))
    with QueryClient(ratings_server.address, chunk_bytes=1 << 22) as client:
        answers = client.estimate("ratings", linear=weights, normalization="mean")
        release = client.export("ratings")
    assert len(answers) == 1 << 20 and answers.labels[-1] == f"q{(1 << 20) - 1}"
    sample = np.random.default_rng(8).choice(1 << 20, 200, replace=False)
    reference = offline(release, [{"kind": "linear", "weights": w.tolist(), "normalization": "mean"}
                                  for w in weights[sample]])
    for name in FIELDS:
        np.testing.assert_allclose(getattr(answers, name)[sample], getattr(reference, name), rtol=1e-9, atol=1e-12)


BAD_QUERIES = [
    ([{"kind": "predicate", "where": [{"attribute": "genre", "op": "==", "value": 1}]}], "queries[0]"),
    ([{"kind": "linear", "weights": [1, 2, 3]}], "queries[0].weights"),
    ([{"kind": "grouped", "attribute": "movie", "tables": [{"value": 1, "weights": [1, 2]}]}], "queries[0]"),
    ([RATINGS_QUERIES[0], {"kind": "linear", "weights": [1, "NaN", 0, 0, 0]}], "queries[1].weights"),
    ([{"kind": "dense", "table": [[0, 1, 0, 0, 0]]}], "queries[0].table"),
    ([{"kind": "linear", "weights": [1, 1, 1, 1, 1]}], "queries[0].normalization"),
    ([{"kind": "mystery"}], "queries[0].kind"),
]
BAD_CUTS = [
    ([{"kind": "cut", "S": [], "T": [1, 2]}], "queries[0].S"),
    ([{"kind": "cut", "S": [0, 1], "T": [1, 2]}], "queries[0]"),
    ([{"kind": "cut", "S": [0], "T": [5000]}], "queries[0].T"),
]


@pytest.mark.parametrize(("queries", "field"), BAD_QUERIES)
def test_every_invalid_query_is_invalid_argument_naming_it(ratings_server, queries, field):
    with QueryClient(ratings_server.address) as client, pytest.raises(QueryError) as raised:
        client.estimate("ratings", queries=queries)
    assert raised.value.status == "INVALID_ARGUMENT" and field in raised.value.details, raised.value.details


def test_invalid_cut_queries_and_statuses_of_the_call(start_server, monkeypatch):
    server = start_server()
    with QueryClient(server.address) as client:
        with pytest.raises(QueryError) as empty:
            client.estimate("graph", queries=[{"kind": "cut", "S": [0], "T": [1]}])
        assert empty.value.status == "FAILED_PRECONDITION" and "no reports" in empty.value.details
        store(server, graph_reports(10, np.random.default_rng(1)), GRAPH)
        for queries, field in BAD_CUTS:
            with pytest.raises(QueryError) as raised:
                client.estimate("graph", queries=queries)
            assert raised.value.status == "INVALID_ARGUMENT" and field in raised.value.details, raised.value.details
        with pytest.raises(QueryError) as unknown:
            client.estimate("nope", queries=[{"kind": "cut", "S": [0], "T": [1]}])
        assert unknown.value.status == "FAILED_PRECONDITION"
        with pytest.raises(QueryError) as level:
            client.estimate("graph", queries=[{"kind": "cut", "S": [0], "T": [1]}], level=1.0)
        assert level.value.status == "INVALID_ARGUMENT" and "level" in level.value.details
        monkeypatch.setattr(query_service, "MAX_BATCH_QUERIES", 100)
        with pytest.raises(QueryError) as large:
            client.estimate("graph", linear=np.ones((101, 2)))
        assert large.value.status == "RESOURCE_EXHAUSTED"
        with pytest.raises(QueryError) as release:
            client.export("nope")
        assert release.value.status == "FAILED_PRECONDITION"
    with server.channel() as channel:
        stub = qpb_grpc.QueryServiceStub(channel)
        estimate = channel.stream_stream("/ldpsynth.v1.QueryService/Estimate")
        with pytest.raises(grpc.RpcError) as garbage:
            list(estimate(iter([b"\xff\xff\xff"]), timeout=30))
        assert garbage.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as nothing:
            list(stub.Estimate(iter([qpb.EstimateRequest(collection="graph")]), timeout=30))
        assert nothing.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_json_past_the_limits_is_invalid_argument_naming_the_limit(start_server):
    """JSON nested 1,000 deep and a 5,000-digit integer were INTERNAL (RecursionError, ValueError); an
    overflowing float is named as such. Sent as raw ``queries_json`` (the Python client could not even
    encode the nesting), to a server without rows: the batch is refused while it is read."""
    server = start_server()
    limits = [("[" * 1000 + "]" * 1000, "nested at most 64 levels"),
              ('[{"kind": "linear", "weights": [' + "9" * 5000 + ", 1, 1, 1, 1]}]", "at most 308 digits"),
              ('[{"kind": "linear", "weights": [1e400, 1, 1, 1, 1]}]', "float64 range")]
    with server.channel() as channel:
        stub = qpb_grpc.QueryServiceStub(channel)
        for text, limit in limits:
            with pytest.raises(grpc.RpcError) as raised:
                list(stub.Estimate(iter([qpb.EstimateRequest(collection="ratings", queries_json=text)]), timeout=60))
            assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT, raised.value.details()
            assert "queries" in raised.value.details() and limit in raised.value.details()


def test_export_to_a_file_is_one_line_and_exit_2(start_server, tmp_path, capsys):
    """``ldpsynth export --out FILE`` (an existing file): today FileExistsError and a traceback."""
    from ldpsynth.cli import main as cli_main

    server = start_server()
    taken = tmp_path / "release"
    taken.write_text("a file")
    assert cli_main.main(["export", "--target", server.address, "--collection", "ratings", "--out", str(taken)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ldpsynth export: error: out: ") and str(taken) in err, err
    assert "exists and is not a folder" in err and taken.read_text() == "a file"


def test_query_role_is_required(start_server, tmp_path):
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"clients": [
        {"id": "device", "token": "d-token", "collections": "*", "roles": ["submit"]},
        {"id": "analyst", "token": "a-token", "collections": ["ratings"], "roles": ["query"]}]}))
    tokens.chmod(0o600)  # bearer secrets: a file others may read is refused
    server = start_server(tokens_file=tokens)
    query = [{"kind": "marginal", "attributes": ["rating"]}]
    for token, collection, status in ((None, "ratings", "UNAUTHENTICATED"), ("wrong", "ratings", "UNAUTHENTICATED"),
                                      ("d-token", "ratings", "PERMISSION_DENIED"),
                                      ("a-token", "graph", "PERMISSION_DENIED")):
        with QueryClient(server.address, token=token) as client, pytest.raises(QueryError) as raised:
            client.estimate(collection, queries=query)
        assert raised.value.status == status
    with QueryClient(server.address, token="a-token") as client, pytest.raises(QueryError) as no_rows:
        client.estimate("ratings", queries=query)
    assert no_rows.value.status == "FAILED_PRECONDITION"


def test_cut_intervals_cover_the_true_cut_over_repeated_releases(start_server):
    """Seed 43, α = 1e-3: 100 independent releases of a 24-vertex graph (552 pairs, density 0.2, ε = 1), each
    stored in its own collection of one server; 6 cut queries per release, 95 % intervals from the server.
    The releases are independent (the queries of one release are not), so the failure rate is tested with the
    spread of the per-release failure counts: |mean - 0.05| <= z_{1-α/2} · sd / sqrt(R). 30 expected failures."""
    from scipy import stats

    from ldpsynth.shared.card import MechanismCard
    from ldpsynth.shared.schema import Schema

    releases, vertices = 100, 24
    schemas = [Schema.from_json({**json.loads(GRAPH.dumps()), "name": f"g{r}"}) for r in range(releases)]
    server = start_server(collections=tuple(MechanismCard.for_schema(s) for s in schemas))
    rng = np.random.default_rng(43)
    i, j = np.nonzero(~np.eye(vertices, dtype=bool))
    truth = (rng.random(len(i)) < 0.2).astype(np.int64)
    queries = cut_queries(vertices, 6, rng)
    adjacency = np.zeros((vertices, vertices), np.int64)
    adjacency[i, j] = truth
    true_cuts = np.array([adjacency[np.ix_(q["S"], q["T"])].sum() for q in queries])
    failures = np.empty(releases)
    with QueryClient(server.address) as client:
        for r, schema in enumerate(schemas):
            reports = Reports(make_reports(schema, len(i), rng).report_ids,
                              GRAPH_CARD.mechanism.perturb(truth, rng), np.column_stack([i, j]))
            store(server, reports, schema)
            answers = client.estimate(schema.name, queries=queries)
            failures[r] = np.mean((true_cuts < answers.ci_low) | (true_cuts > answers.ci_high))
    z = stats.norm.ppf(1 - 1e-3 / 2)
    assert abs(failures.mean() - 0.05) <= z * failures.std(ddof=1) / np.sqrt(releases), failures.mean()


# ----- issue 16: replies within the message limit, the empty batch --------------------------
SMALL_LIMIT = 4096


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ldpsynth.cli", *args], capture_output=True, text=True, timeout=300)


def test_replies_fit_a_4_kib_message_limit(start_server, tmp_path):
    """--max-message-bytes 4096: every Export chunk (2^16 rows) and Estimate page (2^14 answers)
    is at most 4096 bytes, and Export, Estimate, ``ldpsynth export`` and ``ldpsynth query`` work."""
    server = start_server(limits=Limits(max_message_bytes=SMALL_LIMIT))
    store(server, make_reports(RATINGS, 1 << 16, np.random.default_rng(44)), chunk=100)
    options = [("grpc.max_receive_message_length", SMALL_LIMIT), ("grpc.max_send_message_length", SMALL_LIMIT)]
    weights = np.random.default_rng(45).random((1 << 14, 5))
    with grpc.insecure_channel(server.address, options=options) as channel:
        stub = qpb_grpc.QueryServiceStub(channel)
        chunks = list(stub.Export(qpb.ExportRequest(collection="ratings"), timeout=120))
        pages = list(stub.Estimate(iter(estimate_requests("ratings", linear=weights, chunk_bytes=SMALL_LIMIT)),
                                   timeout=120))
    assert max(c.ByteSize() for c in chunks) <= SMALL_LIMIT and len(chunks) > 200
    assert chunks[0].rows == sum(len(c.private_codes) // 8 for c in chunks) == 1 << 16
    assert max(p.ByteSize() for p in pages) <= SMALL_LIMIT and len(pages) > 200
    with QueryClient(server.address) as client:
        release = client.export("ratings")
        answers = AnswerTable.from_pages(pages)
        again = client.estimate("ratings", linear=weights)
    sample = np.random.default_rng(46).choice(1 << 14, 100, replace=False)
    reference = offline(release, [{"kind": "linear", "weights": w.tolist()} for w in weights[sample]])
    for name in FIELDS:
        np.testing.assert_allclose(getattr(answers, name)[sample], getattr(reference, name), rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(getattr(again, name), getattr(answers, name))
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps(RATINGS_QUERIES * 40))
    assert queries.stat().st_size > 2 * SMALL_LIMIT
    common = ["--target", server.address, "--collection", "ratings"]
    served = cli("query", *common, "--queries", str(queries))
    exported = cli("export", *common, "--out", str(tmp_path / "release"))
    assert served.returncode == 0 and exported.returncode == 0, served.stderr + exported.stderr
    assert json.loads(exported.stdout)["rows"] == 1 << 16
    assert len(json.loads(served.stdout)) == 40 * len(offline(release, RATINGS_QUERIES))


def test_an_empty_batch_answers_ok_with_no_answers(start_server, tmp_path):
    """``[]`` is OK with one page of no answers (n = 0, no shard asked), with or without rows; not ABORTED."""
    server = start_server()
    with server.channel() as channel:
        stub = qpb_grpc.QueryServiceStub(channel)
        pages = list(stub.Estimate(iter([qpb.EstimateRequest(collection="ratings", level=0.9, queries_json="[]")]),
                                   timeout=30))
        with pytest.raises(grpc.RpcError) as unknown:
            list(stub.Estimate(iter([qpb.EstimateRequest(collection="nope", queries_json="[]")]), timeout=30))
    assert [(p.total, p.n, p.level, len(p.estimate)) for p in pages] == [(0, 0, 0.9, 0)]
    assert unknown.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    store(server, make_reports(RATINGS, 100, np.random.default_rng(47)))
    with QueryClient(server.address) as client:
        assert len(client.estimate("ratings")) == 0 and client.estimate("ratings", queries=[]).records() == []
    queries = tmp_path / "empty.json"
    queries.write_text("[]")
    run = cli("query", "--target", server.address, "--collection", "ratings", "--queries", str(queries))
    assert (run.returncode, run.stdout.strip(), run.stderr) == (0, "[]", "")


def test_queries_under_ingest_are_answered_on_one_snapshot(start_server) -> None:
    """Batches of several blocks (table and cut queries, dense rows) while three clients stream
    reports: every batch is answered (never ABORTED), every answer of a batch counts the same rows,
    and the row count never goes back (issue 16, item 3)."""
    server = start_server(shards=2)
    stub = pb_grpc.CollectionServiceStub(server.channel())
    rng = np.random.default_rng(31)
    assert submit(stub, [batch(make_reports(RATINGS, 200, rng))])[1] == grpc.StatusCode.OK
    stop = threading.Event()
    streamed: list[int] = []

    def stream(seed: int) -> None:
        local = np.random.default_rng(seed)
        channel_stub = pb_grpc.CollectionServiceStub(server.channel())
        while not stop.is_set():
            acks, code, _ = submit(channel_stub, [batch(make_reports(RATINGS, 50, local)) for _ in range(4)])
            assert code == grpc.StatusCode.OK
            streamed.append(sum(a.accepted for a in acks))

    threads = [threading.Thread(target=stream, args=(s,)) for s in (1, 2, 3)]
    for t in threads:
        t.start()
    counts = []
    try:
        with QueryClient(server.address) as analyst:
            for _ in range(25):
                answers = analyst.estimate(RATINGS.name, queries=RATINGS_QUERIES)
                counts.append(int(answers.n))
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert sum(streamed) > 0 and counts == sorted(counts) and counts[-1] > counts[0], counts
