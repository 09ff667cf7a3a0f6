"""QueryClient and ``ldpsynth query`` against the fake query service (issue 16): requests cut to the
server's message limit, the empty batch, and retries of UNAVAILABLE / ABORTED with backoff."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import grpc
import numpy as np
import pytest

from ldpsynth import client as sdk
from ldpsynth.cli import main as cli_main
from ldpsynth.client.errors import QueryError
from ldpsynth.client.query import QUERY_RETRYABLE_STATUSES, QueryClient
from ldpsynth.client.retry import RetryPolicy
from ldpsynth.shared import queries as Q
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.protocol import Limits

from .client_fakes import FakeCollectionService, FakeQueryService, Faults, ServerThread, ratings_info

LIMIT = 4096
ROWS = 500
#: Fast backoff: waits in [0.025, 0.05], [0.05, 0.1], [0.1, 0.2] s after failures 1, 2, 3.
FAST = RetryPolicy(max_attempts=4, initial_backoff=0.05, max_backoff=1.0, multiplier=2.0)
SMALL_QUERIES = [{"kind": "marginal", "attributes": ["rating"], "label": f"m{j}"} if j % 2 else
                 {"kind": "linear", "weights": list(range(10)), "normalization": "sum"} for j in range(300)]


@contextmanager
def query_server(failures: Sequence[grpc.StatusCode] = (), faults: Faults | None = None
                 ) -> Iterator[tuple[ServerThread, FakeCollectionService, FakeQueryService]]:
    """A fake aggregator with a 4 KiB message limit (enforced on what it receives, like the real one)."""
    info = ratings_info(limits=Limits(max_message_bytes=LIMIT))
    rng = np.random.default_rng(5)
    queries = FakeQueryService(info, rng.integers(0, 300, ROWS), rng.integers(0, 10, ROWS), failures=failures)
    collections = FakeCollectionService(info, faults)
    with ServerThread(collections, queries=queries, max_receive_message_bytes=LIMIT) as server:
        yield server, collections, queries


def test_requests_are_cut_to_the_servers_message_limit() -> None:
    linear = np.random.default_rng(6).random((2000, 10))
    with query_server() as (server, collections, fake), QueryClient(server.target) as client:
        answers = client.estimate("ratings", queries=SMALL_QUERIES, linear=linear)
        again = client.estimate("ratings", queries=SMALL_QUERIES[:3])
    sizes = [request.ByteSize() for request in fake.batches[0]]
    assert max(sizes) <= LIMIT and len(sizes) >= 40 and sum(sizes) > 40 * LIMIT * 0.9
    assert len(answers) == 150 + 150 * 5 + 2000 and len(again) == 1 + 5 + 1
    assert answers.labels[1] == "m1[rating=1]" and answers.labels[-1] == f"q{len(answers) - 1}"
    sent = [json.loads(r.queries_json) for r in fake.batches[0] if r.WhichOneof("queries") == "queries_json"]
    assert [q for chunk in sent for q in chunk] == SMALL_QUERIES  # whole queries, in order
    assert collections.get_collection_calls == 1  # the limit is learnt once per collection


def test_a_query_larger_than_the_limit_is_named_before_anything_is_sent() -> None:
    big = {"kind": "dense", "table": np.ones((ROWS, 10)).tolist()}
    with query_server() as (server, _, fake), QueryClient(server.target) as client:
        with pytest.raises(ValidationError) as raised:
            client.estimate("ratings", queries=[*SMALL_QUERIES[:2], big])
        assert fake.starts["Estimate"] == []
    assert raised.value.field == "queries[2]" and f"message limit of {LIMIT} bytes" in str(raised.value)


def test_estimate_with_no_queries_answers_an_empty_table() -> None:
    with query_server() as (server, _, fake), QueryClient(server.target) as client:
        answers = client.estimate("ratings")
    assert len(answers) == 0 and answers.records() == []
    assert [r.queries_json for r in fake.batches[0]] == ["[]"]


def test_builder_queries_are_sent_as_their_json_and_answer_like_json_queries() -> None:
    built = [Q.marginal("rating", label="m"), Q.predicate(Q.condition("watched", "==", 1), normalization="mean"),
             Q.linear(np.arange(10.0), normalization="eq10")]
    as_json = Q.queries_to_json(built)
    assert as_json[2]["normalization"] == "range"
    with query_server() as (server, _, fake), sdk.QueryClient(server.target) as client:
        from_builders = client.estimate("ratings", queries=built)
        from_json = client.estimate("ratings", queries=as_json)
        mixed = client.estimate("ratings", queries=(as_json[0], built[1], as_json[2]))
    sent = [[q for r in batch if r.WhichOneof("queries") == "queries_json" for q in json.loads(r.queries_json)]
            for batch in fake.batches]
    assert sent == [as_json] * 3
    assert from_builders.records() == from_json.records() == mixed.records()
    assert from_builders.labels == ("m[rating=1]", "m[rating=2]", "m[rating=3]", "m[rating=4]", "m[rating=5]",
                                    "predicate#1", "linear#2")


def test_packed_linear_queries_default_to_range() -> None:
    linear = np.random.default_rng(9).random((4, 10))
    with query_server() as (server, _, fake), QueryClient(server.target) as client:
        default = client.estimate("ratings", linear=linear)
        former = client.estimate("ratings", linear=linear, normalization="eq10")
    assert [r.linear.normalization for r in fake.batches[0]] == ["range"]
    assert [r.linear.normalization for r in fake.batches[1]] == ["eq10"]   # the server reads it as range
    assert default.records() == former.records()


def test_unavailable_and_aborted_are_retried_with_backoff() -> None:
    failures = [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED, grpc.StatusCode.UNAVAILABLE]
    with query_server(failures) as (server, _, fake), QueryClient(server.target, retry=FAST) as client:
        answers = client.estimate("ratings", queries=SMALL_QUERIES)
    assert len(answers) == 150 * 6 and len(fake.starts["Estimate"]) == 4
    gaps = np.diff(fake.starts["Estimate"])
    assert np.all(gaps >= [0.025, 0.05, 0.1]) and gaps.sum() < 5.0  # backoff c_k / 2 <= wait <= c_k
    first = [r.SerializeToString() for r in fake.batches[0]]
    assert all([r.SerializeToString() for r in batch] == first for batch in fake.batches)  # the same stream


def test_an_export_dropped_mid_stream_is_downloaded_again_from_the_start() -> None:
    failures = [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAVAILABLE]
    with query_server(failures) as (server, _, fake), QueryClient(server.target, retry=FAST) as client:
        release = client.export("ratings")
    assert len(fake.starts["Export"]) == 3 and len(release) == ROWS
    np.testing.assert_array_equal(release.private_codes(), fake.private_codes)
    np.testing.assert_array_equal(release.public_keys(), fake.public_keys)


def test_get_collection_is_retried() -> None:
    with query_server(faults=Faults(get_collection_unavailable=2)) as (server, collections, _), \
            QueryClient(server.target, retry=FAST) as client:
        assert len(client.estimate("ratings", queries=SMALL_QUERIES[:1])) == 1
    assert collections.get_collection_calls == 3


@pytest.mark.parametrize("status", [grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
                                    grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.PERMISSION_DENIED,
                                    grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.DEADLINE_EXCEEDED,
                                    grpc.StatusCode.INTERNAL])
def test_final_statuses_are_not_retried(status: grpc.StatusCode) -> None:
    assert status.name not in QUERY_RETRYABLE_STATUSES
    with query_server([status] * 3) as (server, _, fake), QueryClient(server.target, retry=FAST) as client:
        with pytest.raises(QueryError) as estimate:
            client.estimate("ratings", queries=SMALL_QUERIES[:1])
        with pytest.raises(QueryError) as export:
            client.export("ratings")
    assert estimate.value.status == export.value.status == status.name
    assert len(fake.starts["Estimate"]) == len(fake.starts["Export"]) == 1


def test_attempts_are_bounded() -> None:
    policy = RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.02)
    with query_server([grpc.StatusCode.UNAVAILABLE] * 10) as (server, _, fake), \
            QueryClient(server.target, retry=policy) as client, pytest.raises(QueryError) as raised:
        client.estimate("ratings", queries=SMALL_QUERIES[:1])
    assert raised.value.status == "UNAVAILABLE" and "after 3 attempts" in raised.value.details
    assert len(fake.starts["Estimate"]) == 3


# ----- ldpsynth query -------------------------------------------------------------------------
@pytest.fixture
def only_query_command(monkeypatch):
    """Build the real ``ldpsynth`` parser with just the query commands (others may need extras)."""
    assert "ldpsynth.cli.query_cmd" in cli_main.SUBCOMMAND_MODULES
    monkeypatch.setattr(cli_main, "SUBCOMMAND_MODULES", ("ldpsynth.cli.query_cmd",))


def run_query(target: str, queries: object, tmp_path, *extra: str) -> int:
    path = tmp_path / "queries.json"
    path.write_text(json.dumps(queries), encoding="utf-8")
    return cli_main.main(["query", "--target", target, "--collection", "ratings", "--queries", str(path), *extra])


def test_cli_query_chunks_a_large_file_to_the_limit(only_query_command, tmp_path, capsys) -> None:
    with query_server() as (server, _, fake):
        assert run_query(server.target, SMALL_QUERIES, tmp_path) == 0
    records = json.loads(capsys.readouterr().out)
    assert len(records) == 150 * 6 and records[1]["label"] == "m1[rating=1]"
    assert len(fake.batches[0]) >= 5 and max(r.ByteSize() for r in fake.batches[0]) <= LIMIT
    assert len((tmp_path / "queries.json").read_bytes()) > 4 * LIMIT


def test_cli_query_on_an_empty_array_prints_an_empty_array(only_query_command, tmp_path, capsys) -> None:
    with query_server() as (server, _, _fake):
        assert run_query(server.target, [], tmp_path) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == [] and captured.out.strip() == "[]" and captured.err == ""


def test_cli_query_names_a_query_over_the_limit(only_query_command, tmp_path, capsys) -> None:
    big = {"kind": "dense", "table": np.ones((ROWS, 10)).tolist()}
    with query_server() as (server, _, fake):
        assert run_query(server.target, [SMALL_QUERIES[0], big], tmp_path) == 2
        assert fake.starts["Estimate"] == []
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert "queries[1]" in captured.err and str(LIMIT) in captured.err and "Traceback" not in captured.err


def test_cli_query_retries_unavailable_and_aborted_up_to_max_attempts(only_query_command, tmp_path, capsys) -> None:
    with query_server([grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED]) as (server, _, fake):
        assert run_query(server.target, SMALL_QUERIES[:2], tmp_path, "--max-attempts", "3") == 0
    assert len(json.loads(capsys.readouterr().out)) == 6 and len(fake.starts["Estimate"]) == 3
    with query_server([grpc.StatusCode.UNAVAILABLE] * 3) as (server, _, fake):
        assert run_query(server.target, SMALL_QUERIES[:2], tmp_path, "--max-attempts", "2") == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "UNAVAILABLE" in captured.err
    assert len(fake.starts["Estimate"]) == 2


def test_cli_query_refuses_json_past_the_limits_in_one_line(only_query_command, tmp_path, capsys) -> None:
    """JSON nested 1,000 deep, or an integer of 5,000 digits, in the queries file: one line naming
    the limit, exit 2 (it used to be a RecursionError / ValueError traceback)."""
    for text in ("[" * 1000 + "]" * 1000, '[{"kind": "linear", "weights": [' + "9" * 5000 + "]}]"):
        path = tmp_path / "queries.json"
        path.write_text(text, encoding="utf-8")
        assert cli_main.main(["query", "--target", "127.0.0.1:1", "--collection", "ratings",
                              "--queries", str(path)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--queries" in err and "Traceback" not in err


def test_cli_query_an_empty_token_variable_means_no_token(only_query_command, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("LDPSYNTH_TOKEN", "")
    with query_server() as (server, collections, _):
        assert run_query(server.target, SMALL_QUERIES[:1], tmp_path) == 0, capsys.readouterr().err
    assert collections.metadata and all(not m.get("authorization") for m in collections.metadata)
