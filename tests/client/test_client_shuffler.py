"""The device's path through a shuffler (docs/contract.md §16), against fakes on real sockets: the
collection (with its sealing key) from the aggregator, each report sealed on its own and sent to the
shuffler, retried with the same sealed bytes, the ledger and memoization as without a shuffler."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest

from ldpsynth.cli import main as cli_main
from ldpsynth.client import Client, PrivacyLedger, RetryPolicy, Shuffler, SubmitError
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.protocol import Limits
from ldpsynth.shared.sealing import OpeningKey, decode_plaintexts, plaintext_bytes, sealed_report_bytes

from .client_fakes import FakeCollectionService, FakeShufflerService, ServerThread, ratings_info, ratings_rows

ROOT = Path(__file__).resolve().parents[2]
KEY = OpeningKey.generate()
FAST = RetryPolicy(max_attempts=4, initial_backoff=0.01, max_backoff=0.05)


def sealed_info(limits: Limits | None = None):
    return dataclasses.replace(ratings_info(limits=limits), sealing=KEY.public)


def opened(shuffler: FakeShufflerService, info) -> dict[bytes, tuple[int, tuple[int, ...]]]:
    """What the replicas would store of what the shuffler received: report id -> (code, public codes)."""
    rows = np.frombuffer(b"".join(shuffler.sealed), np.uint8).reshape(len(shuffler.sealed), -1)
    plaintexts, ok = KEY.open_all(rows, info.schema.name, plaintext_bytes(info.schema, info.card.version))
    assert ok.all()
    decoded = decode_plaintexts(plaintexts, info.schema, info.card.version)
    assert decoded.valid.all()
    r = decoded.reports
    return {bytes(i): (int(c), tuple(int(x) for x in p)) for i, c, p in zip(r.report_ids, r.private_codes,
                                                                             r.public_codes)}


@pytest.fixture
def servers():
    info = sealed_info(Limits(max_batch_reports=7))
    aggregator = FakeCollectionService(info)
    shuffler = FakeShufflerService(sealed_report_bytes(info.schema, info.card.version), token="shuffler-token",
                                   unavailable_calls=2)
    with ServerThread(aggregator) as agg, ServerThread(None, shuffler=shuffler) as shuf:
        yield info, aggregator, shuffler, agg.target, shuf.target


def one_key(rows: dict[str, list]) -> dict[str, list]:
    """``rows`` with the public attributes of the first row everywhere: one public key, one pool."""
    return {name: [column[0]] * len(column) if name in ("movie", "region") else column for name, column in rows.items()}


def test_submit_through_a_shuffler_seals_each_report_and_retries_with_the_same_bytes(servers, tmp_path) -> None:
    info, aggregator, shuffler, agg, shuf = servers
    rows = one_key(ratings_rows(20, seed=4))
    with PrivacyLedger(tmp_path / "l.sqlite", budget=100.0) as ledger, \
            Client(agg, retry=FAST, shuffler=Shuffler(shuf, token="shuffler-token")) as client:
        result = client.submit("ratings", rows, ledger=ledger, batch_size=5)
        memo = {bytes(i): c for i, c in zip(*_memo(ledger))}
    distinct = len(memo)  # identical rows (one public key, 10 private values) share a memoized report
    assert result.shuffled and (result.sent, result.acknowledged, result.duplicates) == (distinct, distinct, 0)
    assert result.batches == -(-distinct // 5) and result.retries >= 1  # two UNAVAILABLE calls, resent
    assert aggregator.stored == {} and aggregator.attempts == 0  # nothing in clear to the aggregator
    assert all(m["authorization"] == "Bearer shuffler-token" for m in shuffler.metadata)
    assert all(b.key_id == KEY.key_id and b.collection == "ratings" for b in shuffler.batches)
    assert len(shuffler.sealed) == distinct == len(set(shuffler.sealed))
    stored = opened(shuffler, info)
    assert {i: c for i, (c, _) in stored.items()} == memo  # the memoized ids and perturbed codes
    key = info.schema.fold_public_codes(np.array([next(iter(stored.values()))[1]]))[0]
    assert {b.pool_key for b in shuffler.batches} == {key}


def test_a_devices_rows_travel_in_one_batch_per_public_key(servers, tmp_path) -> None:
    """Rows of 3 public keys (4 identical rows each: one memoized report per key): one call per key, its
    pool_key the key every report in it holds."""
    info, _, shuffler, agg, shuf = servers
    rows = ratings_rows(3, seed=6)
    rows = {name: [v for v in column for _ in range(4)] for name, column in rows.items()}  # 4 rows per key
    with Client(agg, retry=FAST, shuffler=Shuffler(shuf, token="shuffler-token")) as client:
        result = client.submit("ratings", rows, ledger=PrivacyLedger.for_simulation(budget=100.0))
    assert (result.rows, result.acknowledged, result.batches) == (12, 3, 3)
    for batch in shuffler.batches:
        plain, ok = KEY.open_all(np.frombuffer(batch.reports, np.uint8).reshape(-1, len(shuffler.sealed[0])),
                                 "ratings", plaintext_bytes(info.schema, info.card.version))
        decoded = decode_plaintexts(plain, info.schema, info.card.version)
        assert ok.all() and set(info.schema.fold_public_codes(decoded.reports.public_codes).tolist()) == {
            batch.pool_key}


def _memo(ledger: PrivacyLedger) -> tuple[list[bytes], list[int]]:
    rows = ledger._conn.execute("SELECT report_id, private_code FROM memo").fetchall()
    return [r[0] for r in rows], [r[1] for r in rows]


def test_memoized_rows_are_sealed_afresh_and_cost_nothing(servers, tmp_path) -> None:
    info, _, shuffler, agg, shuf = servers
    rows = ratings_rows(6, seed=5)
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger, \
            Client(agg, retry=FAST, shuffler=Shuffler(shuf, token="shuffler-token")) as client:
        first = client.submit("ratings", rows, ledger=ledger)
        before = list(shuffler.sealed)
        again = client.submit("ratings", rows, ledger=ledger)
    assert again.memoized == 6 and again.epsilon_spent == 0.0 and again.epsilon_total == first.epsilon_total
    after = shuffler.sealed[len(before):]
    assert len(after) == 6 and not set(after) & set(before)  # new ciphertexts ...
    reopened = opened(shuffler, info)  # ... of the same reports
    assert len(reopened) == 6


def test_rows_sent_in_clear_are_never_sealed_later_nor_the_reverse(servers, tmp_path) -> None:
    """A collection that is not shuffled takes both paths, but a memoized report keeps the one it was first sent
    by: resending it the other way would link the report to this device. Refused before anything is charged
    or sent."""
    _, aggregator, shuffler, agg, shuf = servers
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:
        with Client(agg, retry=FAST) as clear, \
                Client(agg, retry=FAST, shuffler=Shuffler(shuf, token="shuffler-token")) as sealed:
            assert clear.submit("ratings", ratings_rows(2, seed=8), ledger=ledger).acknowledged == 2
            with pytest.raises(ValidationError, match="rows: .*first sent in clear; sending it sealed would link"):
                sealed.submit("ratings", ratings_rows(2, seed=8), ledger=ledger)
            assert shuffler.calls == 0 and ledger.reports("ratings") == 2
            assert sealed.submit("ratings", ratings_rows(1, seed=8, start=9), ledger=ledger).shuffled
            calls, stored = shuffler.calls, dict(aggregator.stored)
            with pytest.raises(ValidationError, match="rows: .*first sent sealed, through a shuffler; sending it in "
                                                      "clear would link"):
                clear.submit("ratings", ratings_rows(1, seed=8, start=9), ledger=ledger)
            assert (shuffler.calls, aggregator.stored, ledger.reports("ratings")) == (calls, stored, 3)


def test_a_final_status_from_the_shuffler_is_not_retried(tmp_path) -> None:
    info = sealed_info()
    shuffler = FakeShufflerService(sealed_report_bytes(info.schema, info.card.version), refuse=frozenset({0}),
                                   refuse_status=grpc.StatusCode.FAILED_PRECONDITION)
    with ServerThread(FakeCollectionService(info)) as agg, ServerThread(None, shuffler=shuffler) as shuf:
        with Client(agg.target, retry=FAST, shuffler=shuf.target) as client:
            with pytest.raises(SubmitError) as caught:
                client.submit("ratings", one_key(ratings_rows(3)), ledger=PrivacyLedger.for_simulation())
    error = caught.value
    assert (error.method, error.status, error.attempts, error.sent) == ("SubmitSealed", "FAILED_PRECONDITION", 1, 3)
    assert shuffler.calls == 1


def test_a_collection_without_a_key_is_refused_before_anything_is_charged() -> None:
    info = ratings_info()
    shuffler = FakeShufflerService(84)
    ledger = PrivacyLedger.for_simulation()
    with ServerThread(FakeCollectionService(info)) as agg, ServerThread(None, shuffler=shuffler) as shuf:
        with Client(agg.target, retry=FAST, shuffler=shuf.target) as client:
            with pytest.raises(ValidationError, match="takes no sealed reports"):
                client.submit("ratings", ratings_rows(3), ledger=ledger)
    assert ledger.spent("ratings") == 0 and shuffler.calls == 0


def test_cli_submit_through_a_shuffler(servers, tmp_path, capsys, monkeypatch) -> None:
    info, _, shuffler, agg, shuf = servers
    monkeypatch.setattr(cli_main, "SUBCOMMAND_MODULES", ("ldpsynth.cli.client_cmd",))
    monkeypatch.setenv("LDPSYNTH_SHUFFLER_TOKEN", "shuffler-token")
    csv = tmp_path / "rows.csv"
    csv.write_text("movie,region,rating,watched\n" + "".join(f"{i},us,{1 + i % 5},{i % 2}\n" for i in range(9)))
    code = cli_main.main(["client", "submit", "--target", agg, "--collection", "ratings", "--rows", str(csv),
                          "--ledger", str(tmp_path / "l.sqlite"), "--shuffler", shuf, "--max-attempts", "4"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["shuffled"] is True and (summary["sent"], summary["acknowledged"]) == (9, 9)
    assert len(opened(shuffler, info)) == 9


def test_without_the_shuffle_extra_a_shuffler_is_refused_naming_it() -> None:
    code = ("import sys\nsys.modules['cryptography'] = None\nimport ldpsynth.client as c\n"
            "from ldpsynth.shared.sealing import SealingUnavailable\n"
            "print('cryptography' in sys.modules and sys.modules['cryptography'] is not None)\n"
            "try:\n    c.Client('127.0.0.1:1', shuffler='127.0.0.1:2')\n"
            "except SealingUnavailable as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    hint = "sealed reports need the `cryptography` package (pip install 'ldpsynth[shuffle]')"
    assert done.stdout.splitlines() == ["False", hint]
