"""A discovery collection on a real local aggregator: served as its open round's sub-collection, devices
report through the SDK in their own round only, ``aggregator advance`` closes rounds on the stopped server
(refusing an under-filled one) and the last one gives the heavy hitters."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np
import pytest

from ldpsynth.aggregator.runtime.config import Catalog
from ldpsynth.aggregator.runtime.discovery import advance, expand, state_file
from ldpsynth.cli.aggregator_cmd import main as aggregator_main
from ldpsynth.client import Client, PrivacyLedger
from ldpsynth.client.query import QueryClient
from ldpsynth.serving.errors import ConfigError, WrongState
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.heavy_hitters.collection import (
    MECHANISM_VERSION,
    NOT_YET,
    PASSED,
    DiscoveryCard,
    DiscoverySchema,
    RoundNotReady,
)
from ldpsynth.shared.heavy_hitters.finite import finite_values
from ldpsynth.shared.protocol import Limits
from ldpsynth.shared.queries.builders import marginal
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

from ..conftest import RATINGS_CARD, ServerThread

StartServer = Callable[..., ServerThread]
SCHEMA = DiscoverySchema.from_json({
    "name": "words", "epsilon": 6.0,
    "attributes": [{"name": "word", "type": "string", "max_length": 5, "alphabet": "abcdefghijklmnopqrstuvwxyz"}],
    "discovery": {"first_bits": 10, "fragment_bits": 15, "top_k": 2, "salt": "5a" * 16,
                  "min_reports_per_round": 20}})


def serve(start_server: StartServer, data: Path) -> ServerThread:
    cards, discoveries = expand([RATINGS_CARD, SCHEMA], data)
    return start_server(data_dir=data, collections=cards, discoveries=discoveries)


def card_of(server: ServerThread) -> DiscoveryCard:
    with server.channel() as channel:
        message = pb_grpc.CollectionServiceStub(channel).GetCollection(pb.GetCollectionRequest(collection="words"))
    assert message.mechanism_version == MECHANISM_VERSION and message.name == "words"
    return DiscoveryCard.from_json(message.card_json)


def submit_all(server: ServerThread, devices: list[tuple[PrivacyLedger, str]]) -> list[str]:
    with Client(server.address) as client:
        return [client.submit("words", {"word": [word]}, ledger=ledger).status for ledger, word in devices]


def test_a_discovery_runs_its_rounds_on_a_local_server(start_server: StartServer, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # The devices' round keys and reports come from the OS CSPRNG (the real device path), so this run is not
    # seeded: the words are fixed (hello 182, abc 156, the other three 62 together) and the failure rate was
    # measured on the same protocol offline (heavy_hitters.simulate with this schema, a fresh salt per run, so a
    # fresh round split): 0 of 20,000 runs missed the top 2 ({"hello", "abc"}); with the 150 devices and the
    # 0.45 / 0.3 / 0.1 / 0.1 / 0.05 law this test had before, 142 of 2,000 did (the top 2 is read from round 1's
    # half of the devices, scaled to the population: the round split's sampling dominates).
    rng = np.random.default_rng(41)
    words = rng.choice(["hello", "abc", "zebra", "quiet", "mango"], size=400, p=[0.5, 0.35, 0.05, 0.05, 0.05])
    devices = [(PrivacyLedger.for_simulation(), str(w)) for w in words]
    rounds = np.array([SCHEMA.device_round(ledger.round_key("words")) for ledger, _ in devices])
    assert 20 <= (rounds == 0).sum() <= 380
    data = tmp_path / "data"

    server = serve(start_server, data)
    assert card_of(server).round == 0
    statuses = submit_all(server, devices)
    assert [s == "sent" for s in statuses] == list(rounds == 0)
    assert {s for s, r in zip(statuses, rounds, strict=True) if r == 1} == {NOT_YET}
    spent = [ledger.spent("words") for ledger, _ in devices]
    assert [x > 0 for x in spent] == list(rounds == 0)                 # charged under the parent, once
    assert all(ledger.spent("words/round-0") == 0 for ledger, _ in devices)
    server.stop()

    done = asyncio.run(advance(str(data), "words"))
    assert done == {"collection": "words", "closed_round": 0, "reports": int((rounds == 0).sum()),
                    "open_round": 1, "candidates": 4}

    server = serve(start_server, data)
    assert card_of(server).round == 1
    server.stop()
    with pytest.raises(RoundNotReady, match="round 1 has 0"):          # refused; the round stays open
        asyncio.run(advance(str(data), "words"))

    server = serve(start_server, data)
    statuses = submit_all(server, devices)
    assert [s == "sent" for s in statuses] == list(rounds == 1)
    assert {s for s, r in zip(statuses, rounds, strict=True) if r == 0} == {PASSED}
    server.stop()

    follow = tmp_path / "words-values.json"
    assert aggregator_main(["advance", "--data-dir", str(data), "--collection", "words",
                            "--finite-out", str(follow)]) == 0
    printed = json.loads(capsys.readouterr().out)
    found = {row["value"]: row for row in printed["results"]["heavy_hitters"]}
    assert set(found) == {"hello", "abc"}
    for value, row in found.items():
        assert row["ci_low"] <= row["count"] <= row["ci_high"]
        assert abs(row["count"] - (words == value).sum()) < 5 * row["std_error"]
    assert json.loads(state_file(data, "words", ".results.json").read_text()) == printed["results"]

    # the discovered values as a finite attribute: the follow-up collection, asked with E like any other
    finite = Schema.from_json(follow.read_text())
    assert printed["finite_collection"] == str(follow) and finite.name == "words-values"
    assert finite.attribute("word").values == (*printed_values(printed), "other")
    values = finite_values(SCHEMA, finite, [str(w) for w in words])
    assert Counter(values) == {"hello": (words == "hello").sum(), "abc": (words == "abc").sum(),
                               "other": len(words) - (words == "hello").sum() - (words == "abc").sum()}
    again = start_server(collections=(MechanismCard.for_schema(finite),), data_dir=tmp_path / "data2")
    with Client(again.address) as client:
        for value in values:
            client.submit("words-values", {"word": [value]}, ledger=PrivacyLedger.for_simulation())
    with QueryClient(again.address) as analyst:
        answers = analyst.estimate("words-values", queries=[marginal("word")])
    assert answers.n == len(words) and len(answers.records()) == 3
    again.stop()

    server = serve(start_server, data)                                  # finished: nothing more to report
    assert card_of(server).round is None
    assert submit_all(server, devices[:3]) == [PASSED] * 3
    with Client(server.address) as client, pytest.raises(ValidationError, match="discovery collection"):
        client.get_collection("words")
    with server.channel() as channel, pytest.raises(grpc.RpcError) as refused:
        pb_grpc.CollectionServiceStub(channel).SubmitBatch(
            pb.ReportBatch(collection="words", mechanism_version=MECHANISM_VERSION))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "discovery collection" in (refused.value.details() or "")


def test_the_catalog_answers_the_discovery_card_and_refuses_reports_to_the_parent(tmp_path: Path) -> None:
    cards, discoveries = expand([RATINGS_CARD, SCHEMA], tmp_path)
    assert [c.schema.name for c in cards] == ["ratings", "words/round-0"]
    catalog = Catalog(cards, Limits(), discoveries=discoveries)
    message = catalog.proto("words")
    assert message.mechanism_version == MECHANISM_VERSION
    assert DiscoveryCard.from_json(message.card_json).to_json() == discoveries[0].to_json()
    with pytest.raises(WrongState, match="discovery collection.*words/round-0"):
        catalog.get("words")
    assert catalog.get("words/round-0").card.schema.private_attributes[0].name == "cell"


def test_a_discovery_needs_a_data_dir_and_keeps_its_schema(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--data-dir"):
        expand([SCHEMA], None)
    expand([SCHEMA], tmp_path)
    other = DiscoverySchema.from_json({**SCHEMA.to_json(), "epsilon": 2.0})
    with pytest.raises(ConfigError, match="differs"):
        expand([other], tmp_path)
    state_file(tmp_path, "words").write_text("{}")
    with pytest.raises(ConfigError, match="not a sound discovery state"):
        expand([SCHEMA], tmp_path)
    with pytest.raises(ConfigError, match="no discovery"):
        asyncio.run(advance(str(tmp_path), "nothing"))


def printed_values(printed: dict) -> tuple[str, ...]:
    return tuple(row["value"] for row in printed["results"]["heavy_hitters"])
