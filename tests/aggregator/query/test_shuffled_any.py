"""Any ε0-LDP mechanism behind a real shuffler (issues 41 and 42): a numeric (HM) collection and a discovery (E in
every round, as any shuffled discovery), each device sealing its report and sending it through a ShufflerServer on
127.0.0.1. Every answer and export states the central guarantee of the collection's bound: FMT21's clones for HM,
k-RR's blanket for E (docs/shuffle-accountant.md §9). OUE's bit sets,
sealed and forwarded as a pool, are stored and answered the same way."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpsynth.aggregator.runtime.discovery import advance, expand
from ldpsynth.client import AsyncClient, PrivacyLedger, RetryPolicy, Shuffler, SubmitError
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.amplification import central_epsilon
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators.offline import estimate_release
from ldpsynth.shared.heavy_hitters.collection import DiscoverySchema
from ldpsynth.shared.mechanisms.registry import name_of
from ldpsynth.shared.protocol import CollectionInfo
from ldpsynth.shared.queries.builders import marginal, mean
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.sealing import seal_reports
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from tests.shuffler.conftest import ShufflerThread

from ..conftest import ServerThread, stored_rows

pytestmark = pytest.mark.ray

StartServer = Callable[..., ServerThread]
CLONES = "fmt21-numerical"
DELTA = 1e-6
HOURS = Schema.from_json({
    "name": "hours", "epsilon": 1.0,
    "attributes": [{"name": "hours", "type": "numeric", "range": [0, 10], "mechanism": "HM"}],
    "shuffle": {"delta": DELTA, "min_batch": 100, "shuffler": "independent"}})
WORDS = DiscoverySchema.from_json({
    "name": "words", "epsilon": 6.0,
    "attributes": [{"name": "word", "type": "string", "max_length": 5, "alphabet": "abcdefghijklmnopqrstuvwxyz"}],
    "shuffle": {"delta": 1e-9, "min_batch": 20, "shuffler": "independent"},
    "discovery": {"first_bits": 10, "fragment_bits": 5, "top_k": 2, "salt": "5a" * 16,
                  "min_reports_per_round": 20}})


def send(server: ServerThread, threshold: int, collection: str, rows: Sequence[dict[str, list[Any]]],
         ledgers: Sequence[PrivacyLedger]) -> list[Any]:
    """Every device's row sent at once through a fresh shuffler: its result, or None when its pool missed the
    threshold within max_wait (nothing stored)."""
    shuffler = ShufflerThread(server, threshold=threshold, max_wait=5.0, anonymous_devices=True,
                              max_reports_per_device=None)

    async def fleet() -> list[Any]:
        async with AsyncClient(server.address, shuffler=Shuffler(shuffler.address),
                               retry=RetryPolicy(max_attempts=1)) as client:
            async def device(row: dict[str, list[Any]], ledger: PrivacyLedger) -> Any:
                try:
                    return await client.submit(collection, row, ledger=ledger)
                except SubmitError:
                    return None

            return list(await asyncio.gather(*(device(r, ledger) for r, ledger in zip(rows, ledgers))))

    try:
        return asyncio.run(fleet())
    finally:
        shuffler.stop()


def test_a_shuffled_numeric_collection_answers_its_mean_with_the_clone_bound(start_server: StartServer) -> None:
    card = MechanismCard.for_schema(HOURS)
    server = start_server(collections=[card])
    values = np.random.default_rng(7).uniform(0.0, 10.0, 300)
    results = send(server, 100, "hours", [{"hours": [float(v)]} for v in values],
                   [PrivacyLedger.for_simulation() for _ in values])
    sent = np.array([r is not None for r in results])
    # pools of one public key released at a threshold in [100, 125]: at most 124 wait past max_wait, refused
    assert sent.sum() >= len(values) - 124 and all(r.shuffled for r in results if r is not None)
    assert stored_rows(server, "hours") == sent.sum()
    with QueryClient(server.address) as analyst:
        answers = analyst.estimate("hours", queries=[mean("hours")])
        release = analyst.export("hours")
    expected = central_epsilon(card.mechanism.epsilon, card.mechanism.domain_size, 99, DELTA, bound=CLONES)
    assert 0.6 < expected < 0.7 < card.mechanism.epsilon                 # 99 honest reports per pool amplify
    g = answers.guarantees
    assert g is not None and g.bound == CLONES and g.evaluated_at == 99 and g.central == (expected, DELTA)
    assert g.analysts.epsilon == g.operator.epsilon == expected and g.against("shuffler").epsilon == g.local_epsilon
    record = answers.records()[0]
    assert record["analysts_epsilon"] == expected and record["local_epsilon"] == card.mechanism.epsilon
    # HM's SE at eps 1 is about 1.9 / sqrt(n) of the half range: |error| < 5 SE fails with probability < 1e-6
    assert abs(record["estimate"] - values[sent].mean()) < 5 * record["std_error"]
    assert release.guarantees is not None and release.guarantees.bound == CLONES
    offline = estimate_release(release, [mean("hours")])
    assert offline.guarantees is not None and offline.guarantees.central == g.central
    assert offline.records()[0]["estimate"] == record["estimate"]


def test_a_shuffled_discovery_takes_E_in_every_round_and_finds_its_heavy_hitters(
        start_server: StartServer, tmp_path: Path) -> None:
    words = np.random.default_rng(41).choice(["hello", "abc", "zebra", "quiet", "mango"], size=240,
                                             p=[0.45, 0.3, 0.1, 0.1, 0.05])
    ledgers = [PrivacyLedger.for_simulation() for _ in words]
    rows = [{"word": [str(w)]} for w in words]
    rounds = np.array([WORDS.device_round(ledger.round_key("words")) for ledger in ledgers])
    data = tmp_path / "data"
    delivered = []
    for r in range(WORDS.schedule.rounds):   # 10 bits, then 5 a round: 4 rounds of E over at most 1,024 cells
        cards, discoveries = expand([WORDS], data)
        server = start_server(data_dir=data, collections=cards, discoveries=discoveries)
        (card,) = cards
        assert card.schema.name == f"words/round-{r}" and card.schema.shuffle == WORDS.shuffle
        assert name_of(card.mechanism) == "E"       # its blanket bound amplifies far more than the oracles' clones
        mine = np.flatnonzero(rounds == r)
        results = send(server, 20, "words", [rows[i] for i in mine], [ledgers[i] for i in mine])
        sent = sum(res is not None for res in results)
        assert sent >= len(mine) - 24 and stored_rows(server, card.schema.name) == sent
        delivered.append(sent)
        with QueryClient(server.address) as analyst:
            release = analyst.export(card.schema.name)
            if r == 0:
                answers = analyst.estimate(card.schema.name, queries=[marginal("cell")])
                assert answers.guarantees is not None and answers.guarantees.bound == "blanket"
        g = release.guarantees
        eps0 = card.mechanism.epsilon
        central = central_epsilon(eps0, card.mechanism.domain_size, 19, 1e-9, bound="blanket")
        if r == 0:  # at eps0 = 6 and 19 honest reports per pool E's blanket amplifies a little (5.08 at |D| = 1,024);
            # the clone bound would not at all (the local 6 at this pool floor); later rounds' small |D| do not amplify
            assert central < eps0 <= central_epsilon(eps0, card.mechanism.domain_size, 19, 1e-9, bound=CLONES)
        assert g is not None and g.bound == "blanket"
        assert g.central == ((central, 1e-9) if central < eps0 else (eps0, 0.0)) and g.analysts.epsilon == g.central[0]
        server.stop()
        done = asyncio.run(advance(str(data), "words"))
        assert done["closed_round"] == r and done["reports"] == sent
    # "hello" (45 %) stands far above the rest: about 27 of a round's 60 reports against 6 for "zebra", with E's
    # noise at eps 6 below 1 report per cell
    assert "hello" in {row["value"] for row in done["results"]["heavy_hitters"]}
    assert sum(delivered) >= len(words) - 24 * WORDS.schedule.rounds


def test_sealed_bit_sets_of_a_shuffled_oue_collection_are_stored_and_answered(start_server: StartServer) -> None:
    """OUE's reports are bit sets: forwarded sealed as a pool (as the shuffler forwards one), a malformed one is
    counted invalid on its own, the rest stored and answered with the clone bound's guarantee."""
    schema = Schema.from_json({"name": "items", "epsilon": 2.0, "mechanism": "OUE",
                               "attributes": [{"name": "item", "type": "integer", "min": 0, "max": 20}],
                               "shuffle": {"delta": DELTA, "min_batch": 100, "shuffler": "independent"}})
    card = MechanismCard.for_schema(schema)
    server = start_server(collections=[card])
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 21, 301)
    reports = Reports(new_report_ids(301), card.mechanism.perturb(codes, rng), np.zeros((301, 0), np.int64))
    reports.private_codes[0, -1] |= 0x80                                   # a bit beyond the 21 values
    stub = pb_grpc.CollectionServiceStub(server.channel())
    key = CollectionInfo.from_proto(stub.GetCollection(pb.GetCollectionRequest(collection="items"))).sealing_key()
    ack = stub.SubmitShuffled(pb.SealedBatch(collection="items", key_id=key.key_id, pool_key=0,
                                             reports=seal_reports(key, "items", card.version, reports).tobytes()),
                              timeout=120)
    assert (ack.accepted, ack.invalid, ack.undecryptable) == (300, 1, 0)
    assert stored_rows(server, "items") == 300
    with QueryClient(server.address) as analyst:
        answers = analyst.estimate("items", queries=[marginal("item", normalization="sum")])
    g = answers.guarantees
    expected = central_epsilon(card.mechanism.epsilon, 21, 99, DELTA, bound=CLONES)
    assert answers.n == 300 and g is not None and (g.bound, g.central) == (CLONES, (expected, DELTA))
    # each count's interval at 95 %: at most a few of 21 miss the truth (P[more than 6 miss] < 1e-3 for
    # independent misses at 5 %; the counts are nearly independent)
    truth = np.bincount(codes[1:], minlength=21)
    misses = sum(not (r["ci_low"] <= t <= r["ci_high"]) for r, t in zip(answers.records(), truth))
    assert misses <= 6
