"""Collections of the frequency oracles through a real server: reports on the wire, shards, snapshots,
every query kind served equal to the offline answers of the export, bad reports refused.

One server per test (port 0, the session's Ray cluster, two shards) serving a collection per oracle
(``movies-oue`` ..., |D| = 200 with a public user) and a graph collection per oracle (cut queries).
Reports are drawn by each oracle's exact sampler on a seeded Generator (``perturb``) and sent over
``SubmitReports``; answers come from :class:`~ldpsynth.client.query.QueryClient`; the reference is
:func:`~ldpsynth.shared.estimators.offline.estimate_release` on the export.
"""

from __future__ import annotations

import json
from collections import Counter

import grpc
import numpy as np
import pytest

from ldpsynth.cli.main import main as cli_main
from ldpsynth.client import Client, PrivacyLedger
from ldpsynth.client.device import prepare_reports
from ldpsynth.client.query import QueryClient
from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators.offline import estimate_release
from ldpsynth.shared.estimators.tallies import KeyedTallies
from ldpsynth.shared.mechanisms.registry import layout_of
from ldpsynth.shared.protocol import CollectionInfo, Limits, reports_to_proto
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

from ..conftest import ServerThread, stored_rows, submit

pytestmark = pytest.mark.ray

ORACLES = ("OUE", "OLH", "HR", "SS")
FIELDS = ("estimate", "proper_estimate", "std_error", "ci_low", "ci_high", "bound", "bound_proper")
USERS, MOVIES, ROWS, VERTICES = 10, 200, 3000, 12


def movies(name: str) -> MechanismCard:
    return MechanismCard.for_schema(Schema.from_json({
        "name": f"movies-{name.lower()}", "epsilon": 2.0, "mechanism": name, "attributes": [
            {"name": "user", "type": "integer", "min": 0, "max": USERS - 1, "public": True},
            {"name": "movie", "type": "integer", "min": 0, "max": MOVIES - 1}]}))


def graph(name: str) -> MechanismCard:
    return MechanismCard.for_schema(Schema.from_json({
        "name": f"graph-{name.lower()}", "epsilon": 1.0, "mechanism": name, "attributes": [
            {"name": "i", "type": "integer", "min": 0, "max": VERTICES - 1, "public": True},
            {"name": "j", "type": "integer", "min": 0, "max": VERTICES - 1, "public": True},
            {"name": "edge", "type": "binary"}, {"name": "weight", "type": "integer", "min": 0, "max": 2}]}))


CARDS = tuple(card for name in ORACLES for card in (movies(name), graph(name)))


def perturbed(card: MechanismCard, codes: np.ndarray, public: np.ndarray, seed: int) -> Reports:
    reports = card.mechanism.perturb(codes, np.random.default_rng(seed))
    return Reports(new_report_ids(len(codes)), reports if reports.ndim == 2 else reports.astype(np.int64), public)


def movie_reports(card: MechanismCard, seed: int, rows: int = ROWS) -> Reports:
    rng = np.random.default_rng(seed)
    codes = np.minimum(rng.zipf(1.3, rows) - 1, MOVIES - 1)
    return perturbed(card, codes, rng.integers(0, USERS, (rows, 1)), seed + 1)


def graph_reports(card: MechanismCard, seed: int) -> Reports:
    rng = np.random.default_rng(seed)
    i, j = np.nonzero(~np.eye(VERTICES, dtype=bool))
    i, j = np.repeat(i, 4), np.repeat(j, 4)                      # four rows per ordered pair
    edge = (rng.random(len(i)) < 0.3 + 0.4 * (i < j)).astype(np.int64)
    return perturbed(card, edge * 3 + rng.integers(0, 3, len(i)), np.column_stack([i, j]), seed + 1)


def send(server: ServerThread, card: MechanismCard, reports: Reports, chunk: int = 1000
         ) -> tuple[list, grpc.StatusCode, str]:
    with server.channel() as channel:
        stub = pb_grpc.CollectionServiceStub(channel)
        batches = [reports_to_proto(reports.slice(s, s + chunk), card.schema.name, card.version, n, card.mechanism)
                   for n, s in enumerate(range(0, len(reports), chunk))]
        return submit(stub, batches)


def assert_same(served, offline) -> None:
    assert len(served) == len(offline)
    for name in FIELDS:
        np.testing.assert_allclose(getattr(served, name), getattr(offline, name), rtol=1e-9, atol=1e-9,
                                   err_msg=name)
    np.testing.assert_array_equal(served.exact, offline.exact)
    assert (served.n, served.epsilon) == (offline.n, offline.epsilon)


def movie_queries(rows: int) -> list[dict]:
    dense = np.random.default_rng(5).random((rows, MOVIES))
    return [{"kind": "linear", "weights": list(np.linspace(0.0, 1.0, MOVIES)), "normalization": "mean"},
            {"kind": "predicate", "where": [{"attribute": "movie", "op": "<", "value": 10}], "label": "top ten"},
            {"kind": "marginal", "attributes": ["movie"]},
            {"kind": "grouped", "attribute": "user", "tables": [{"value": 2, "weights": [1.0] * 5 + [0.0] * 195}],
             "default": [0.0] * 195 + [1.0] * 5, "normalization": "sum"},
            {"kind": "dense", "table": dense.tolist(), "normalization": "sum"}]


GRAPH_QUERIES = [{"kind": "cut", "S": [0, 1, 2, 3], "T": [6, 7, 8], "source": "i", "target": "j", "edge": "edge"},
                 {"kind": "cut", "S": [5], "T": [0, 11], "source": "i", "target": "j", "edge": "edge"},
                 {"kind": "marginal", "attributes": ["edge"]}]


def test_every_mechanism_serves_every_query_kind_as_the_offline_answers_of_its_export(start_server, tmp_path):
    server = start_server(collections=CARDS)
    for n, card in enumerate(CARDS):
        reports = movie_reports(card, 10 * n) if card.schema.name.startswith("movies") else graph_reports(card, 10 * n)
        acks, code, details = send(server, card, reports)
        assert code == grpc.StatusCode.OK, details
        assert sum(a.accepted for a in acks) == len(reports)
    with QueryClient(server.address) as client:
        for card in CARDS:
            name = card.schema.name
            release = client.export(name)
            assert release.card.dumps() == card.dumps() and release.reports is not None
            queries = movie_queries(len(release)) if name.startswith("movies") else GRAPH_QUERIES
            served = client.estimate(name, queries=queries, level=0.9)
            release.write(tmp_path / name, parquet=False)
            offline = estimate_release(tmp_path / name, queries, level=0.9)
            assert_same(served, offline)
            records = served.records()
            assert {r["proper_kind"] for r in records} == {"clipped"}, name
            assert all(r["std_error"] > 0 and r["bound"] >= r["std_error"] * 0.5 for r in records), name


@pytest.mark.parametrize("name, field, data", [
    ("OUE", "report_bitmaps", b"\xff" * 25),                       # 200 bits = 25 bytes: one report too few
    ("SS", "report_bitmaps", b"\x00" * 25 * 20),                   # no bit set: not a subset of the size
    ("OLH", "olh_buckets", np.full(20, 1 << 15, "<u2").tobytes()),  # beyond the hash range
    ("OLH", "olh_seeds", np.full(20, 1 << 63, "<u8").tobytes()),    # beyond the seed bits
    ("HR", "hadamard_reports", np.zeros(20, "<u4").tobytes()),      # row 0 does not exist
    ("HR", "private_codes", np.zeros(20, "<u8").tobytes()),         # E's field in an HR collection
])
def test_bad_reports_of_each_kind_are_invalid_argument_and_nothing_is_stored(start_server, name, field, data):
    server = start_server(collections=CARDS)
    card = movies(name)
    good = movie_reports(card, 1, rows=20)
    bad = movie_reports(card, 2, rows=20)
    with server.channel() as channel:
        stub = pb_grpc.CollectionServiceStub(channel)
        first = reports_to_proto(good, card.schema.name, card.version, 0, card.mechanism)
        broken = reports_to_proto(bad, card.schema.name, card.version, 1, card.mechanism)
        setattr(broken, field, data)
        acks, code, details = submit(stub, [first, broken])
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert details.startswith(field) and "legal range" in details
    assert [a.sequence for a in acks] == [0]
    assert stored_rows(server, card.schema.name) == 20               # the good batch only: nothing of the bad one


def test_tallies_are_snapshotted_and_restored_equal_to_a_recount(start_server, tmp_path):
    cards = tuple(movies(name) for name in ORACLES)
    server = start_server(collections=cards, data_dir=tmp_path / "data")
    sent = {}
    for n, card in enumerate(cards):
        sent[card.schema.name] = movie_reports(card, 100 + n)
        assert send(server, card, sent[card.schema.name])[1] == grpc.StatusCode.OK
    before = {c.schema.name: server.run(server.server.statistics(c.schema.name)) for c in cards}
    server.stop()                                                   # a graceful stop writes the snapshots
    again = start_server(collections=cards, data_dir=tmp_path / "data")
    statuses = again.run(again.server.workers.status())
    assert sum(s.replayed for s in statuses) == 0                   # restored from the snapshot, nothing replayed
    for card in cards:
        name = card.schema.name
        reports = sent[name]
        recount = KeyedTallies.from_rows(card.mechanism, reports.public_keys(card.schema), reports.private_codes,
                                         public_domain_size=USERS)
        for stats in (before[name], again.run(again.server.statistics(name))):
            assert isinstance(stats, KeyedTallies)
            np.testing.assert_array_equal(stats.present_keys, recount.present_keys)
            np.testing.assert_array_equal(stats.group_sizes, recount.group_sizes)
            np.testing.assert_array_equal(stats.table, recount.table)
        with QueryClient(again.address) as client:
            release = client.export(name)
        order = np.argsort([bytes(i) for i in reports.report_ids])
        assert len(release) == ROWS and layout_of(card.mechanism).check(release.reports).shape[0] == ROWS
        assert sorted(map(bytes, release.reports.reshape(ROWS, -1))) == \
            sorted(map(bytes, reports.private_codes[order].reshape(ROWS, -1)))


@pytest.mark.parametrize("name", ["OUE", "OLH"])
def test_devices_submit_through_the_sdk_and_the_cli_memoized_in_their_ledger(start_server, tmp_path, capsys, name):
    """The SDK perturbs on the device (the oracle's exact sampler on os.urandom), memoizes every report in
    the ledger (OUE's bit sets in the ledger's table of bit sets; OLH's words as integers) and batches
    them within the message limit; submitting the same rows again sends the memoized reports (duplicates,
    no ε); ``ldpsynth client submit`` does the same from a CSV."""
    card = movies(name)
    server = start_server(collections=(card,), limits=Limits(max_message_bytes=4096))
    rows = {"user": np.arange(300) // 30, "movie": np.arange(300) % MOVIES}    # 300 distinct rows
    with PrivacyLedger(tmp_path / "ledger.sqlite", budget=1000.0) as ledger, Client(server.address) as client:
        first = client.submit(card.schema.name, rows, ledger=ledger)
        second = client.submit(card.schema.name, rows, ledger=ledger)
        spent = ledger.spent(card.schema.name)
    assert (first.acknowledged, first.duplicates) == (300, 0) and first.batches > 1
    assert (second.acknowledged, second.duplicates, second.epsilon_spent) == (0, 300, 0.0)
    assert spent == pytest.approx(300 * card.mechanism.epsilon)
    csv = tmp_path / "rows.csv"
    csv.write_text("user,movie\n" + "".join(f"{u},{m}\n" for u, m in zip(range(5), range(150, 155))))
    argv = ["client", "submit", "--target", server.address, "--collection", card.schema.name, "--rows", str(csv),
            "--ledger", str(tmp_path / "ledger.sqlite")]
    assert cli_main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["acknowledged"] == 5 and summary["epsilon_spent"] == pytest.approx(5 * card.mechanism.epsilon)
    assert cli_main(argv) == 0 and json.loads(capsys.readouterr().out)["duplicates"] == 5
    with QueryClient(server.address) as query:
        release = query.export(card.schema.name)
    assert len(release) == 305
    with PrivacyLedger(tmp_path / "ledger.sqlite") as ledger:
        memoized = prepare_reports(CollectionInfo(card, Limits()), encode_columns(card.schema, rows), ledger)
    assert memoized.memoized == 300
    exported = Counter(np.asarray(r).tobytes() for r in release.reports)
    exported.subtract(np.asarray(r).tobytes() for r in memoized.reports.private_codes)
    assert min(exported.values()) >= 0 and sum(exported.values()) == 5   # the memoized reports are the stored ones
