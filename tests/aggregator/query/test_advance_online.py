"""A discovery run round after round on a running one-machine server (issue 41): devices report through the
SDK, an operator closes each round with ``QueryService.AdvanceRound`` (role ``operate``) without stopping the
server, a report for a closed round is refused and not stored, the server restarts between rounds, and the
last round gives the planted heavy hitters."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from itertools import islice
from pathlib import Path

import grpc
import numpy as np
import pytest

from ldpsynth.aggregator.operate import states
from ldpsynth.aggregator.runtime.discovery import expand, state_file
from ldpsynth.aggregator.storage.datadir import DataDirError
from ldpsynth.aggregator.storage.log_layout import LogUnavailable
from ldpsynth.cli.aggregator_cmd import main as aggregator_main
from ldpsynth.client import AsyncClient, Client, PrivacyLedger, SubmitError
from ldpsynth.client.errors import QueryError
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.heavy_hitters.collection import (
    MECHANISM_VERSION,
    NOT_YET,
    PASSED,
    DiscoveryCard,
    DiscoverySchema,
    round_rows,
)
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from ldpsynth.shared.wire import query_pb2 as qpb
from ldpsynth.shared.wire import query_pb2_grpc as qpb_grpc

from ..conftest import RATINGS_CARD, ServerThread, stored_rows, verify_running

pytestmark = pytest.mark.ray

StartServer = Callable[..., ServerThread]
#: Three rounds (b0 = 10, then 8 and 7 more bits of the 25-bit codes).
SCHEMA = DiscoverySchema.from_json({
    "name": "words", "epsilon": 6.0,
    "attributes": [{"name": "word", "type": "string", "max_length": 5, "alphabet": "abcdefghijklmnopqrstuvwxyz"}],
    "discovery": {"first_bits": 10, "fragment_bits": 8, "top_k": 2, "salt": "3c" * 16,
                  "min_reports_per_round": 20}})
#: The device's token names the discovery only: it may use every round's sub-collection through it.
TOKENS = {"device": ("t-device", ["submit"], ["words"]), "analyst": ("t-analyst", ["query"], "*"),
          "operator": ("t-operator", ["operate"], "*")}


def tokens_file(path: Path) -> Path:
    path.write_text(json.dumps({"clients": [{"id": cid, "token": token, "collections": allowed, "roles": roles}
                                            for cid, (token, roles, allowed) in TOKENS.items()]}))
    os.chmod(path, 0o600)
    return path


def serve(start_server: StartServer, data: Path, tokens: Path) -> ServerThread:
    cards, discoveries = expand([RATINGS_CARD, SCHEMA], data)
    return start_server(data_dir=data, collections=cards, discoveries=discoveries, tokens_file=tokens)


def card_of(server: ServerThread) -> DiscoveryCard:
    with server.channel() as channel:
        message = pb_grpc.CollectionServiceStub(channel).GetCollection(
            pb.GetCollectionRequest(collection="words"), metadata=(("authorization", "Bearer t-device"),))
    assert message.mechanism_version == MECHANISM_VERSION
    return DiscoveryCard.from_json(message.card_json)


def submit_all(server: ServerThread, devices: list[tuple[PrivacyLedger, str]]) -> list[str]:
    with Client(server.address, token="t-device") as client:
        return [client.submit("words", {"word": [word]}, ledger=ledger).status for ledger, word in devices]


def advance(server: ServerThread, token: str = "t-operator", collection: str = "words") -> dict:
    with QueryClient(server.address, token=token) as operator:
        return operator.advance_round(collection)


def refused(server: ServerThread, token: str, collection: str) -> tuple[str, str]:
    with QueryClient(server.address, token=token) as operator, pytest.raises(QueryError) as error:
        operator.advance_round(collection)
    return error.value.status, error.value.details


def test_rounds_advance_on_the_running_server(start_server: StartServer, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    # Round keys and reports come from the OS CSPRNG (the device path), so the split is not seeded: with 540
    # devices each round holds about 180 (sd 11), far above min_reports_per_round = 20. The words are fixed (hello
    # 258, abc 208, the other three 74 together) and the failure rate was measured on the same protocol offline
    # (heavy_hitters.simulate with this schema, a fresh salt per run): 0 of 20,000 runs missed the top 2; with the
    # 270 devices and the 0.42 / 0.3 / 0.1 / 0.1 / 0.08 law this test had before, 50 of 3,000 did.
    rng = np.random.default_rng(7)
    words = rng.choice(["hello", "abc", "zebra", "quiet", "mango"], size=540, p=[0.5, 0.35, 0.05, 0.05, 0.05])
    devices = [(PrivacyLedger.for_simulation(), str(w)) for w in words]
    rounds = np.array([SCHEMA.device_round(ledger.round_key("words")) for ledger, _ in devices])
    assert SCHEMA.schedule.rounds == 3 and all((rounds == r).sum() >= 40 for r in range(3))
    data, tokens = tmp_path / "data", tokens_file(tmp_path / "tokens.json")
    server = serve(start_server, data, tokens)

    # round 0: only its devices send; an operator closes it without stopping the server
    card0 = card_of(server)
    assert card0.round == 0
    statuses = submit_all(server, devices)
    assert [s == "sent" for s in statuses] == list(rounds == 0)
    with Client(server.address, token="t-device") as client:
        round0 = client.get_collection("words/round-0")
    n0 = int((rounds == 0).sum())
    assert refused(server, "t-device", "words")[0] == "PERMISSION_DENIED"   # no role "operate"
    assert refused(server, "t-analyst", "words")[0] == "PERMISSION_DENIED"
    assert stored_rows(server, "words/round-0") == n0
    done = advance(server)
    assert done["collection"] == "words" and done["closed_round"] == 0 and done["reports"] == n0
    assert done["open_round"] == 1 and 1 <= done["candidates"] <= 4          # cap: 2k
    assert card_of(server).round == 1                                      # the new card, at once
    assert json.loads(state_file(data, "words").read_text())["round"] == 1  # stored durably

    # a report for the closed round (a late device of round 0, holding its card) is refused and not stored
    late = next(ledger for ledger in iter(PrivacyLedger.for_simulation, None)
                if SCHEMA.device_round(ledger.round_key("words")) == 0)
    with Client(server.address, token="t-device") as client, pytest.raises(SubmitError) as error:
        client.submit(round0, round_rows(card0, {"word": ["hello"]}), ledger=late)
    assert error.value.status == "FAILED_PRECONDITION" and "closed round" in error.value.details
    assert "fetch the discovery's card again" in error.value.details
    assert stored_rows(server, "words/round-0") == n0
    assert verify_running(server).rows.get("words/round-0") == n0
    assert submit_all(server, [(late, "hello")]) == [PASSED]              # the SDK's own path says so

    # an empty round is refused with its counts and stays open; the wrong names are told apart
    status, details = refused(server, "t-operator", "words")
    assert status == "FAILED_PRECONDITION" and "round 1 has 0" in details and "at least 20" in details
    assert card_of(server).round == 1
    assert refused(server, "t-operator", "nothing")[0] == "NOT_FOUND"
    status, details = refused(server, "t-operator", "ratings")
    assert status == "FAILED_PRECONDITION" and "not a discovery collection" in details

    # round 1: its devices send, round 0's are told their round has passed, round 2's to wait
    statuses = submit_all(server, devices)
    assert [s == "sent" for s in statuses] == list(rounds == 1)
    assert {s for s, r in zip(statuses, rounds, strict=True) if r == 0} == {PASSED}
    assert {s for s, r in zip(statuses, rounds, strict=True) if r == 2} == {NOT_YET}
    assert aggregator_main(["advance", "--server", server.address, "--collection", "words",  # the CLI's way
                            "--token", "t-operator"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert (done["closed_round"], done["reports"], done["open_round"]) == (1, int((rounds == 1).sum()), 2)
    assert aggregator_main(["advance", "--server", server.address, "--collection", "words",
                            "--token", "t-device"]) == 2
    assert "PERMISSION_DENIED" in capsys.readouterr().err

    # a restart between rounds serves the stored round
    server.stop()
    server = serve(start_server, data, tokens)
    assert card_of(server).round == 2
    statuses = submit_all(server, devices)
    assert [s == "sent" for s in statuses] == list(rounds == 2)
    follow = tmp_path / "words-values.json"                               # the last round by the CLI, with
    assert aggregator_main(["advance", "--server", server.address, "--collection", "words",  # --finite-out
                            "--token", "t-operator", "--finite-out", str(follow)]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["closed_round"] == 2 and "open_round" not in done
    found = {row["value"]: row for row in done["results"]["heavy_hitters"]}
    assert set(found) == {"hello", "abc"}
    finite = Schema.from_json(follow.read_text())                         # the discovered values, as categories
    assert done["finite_collection"] == str(follow) and finite.name == "words-values"
    assert finite.attribute("word").values == (*(row["value"] for row in done["results"]["heavy_hitters"]), "other")
    for value, row in found.items():
        assert row["ci_low"] <= row["count"] <= row["ci_high"]
        assert abs(row["count"] - (words == value).sum()) < 5 * row["std_error"]
    assert done["results"]["rounds"] == [int((rounds == r).sum()) for r in range(3)]
    assert json.loads(state_file(data, "words", ".results.json").read_text()) == done["results"]
    assert card_of(server).round is None
    status, details = refused(server, "t-operator", "words")
    assert status == "FAILED_PRECONDITION" and "finished" in details

    server.stop()                                                          # finished across a restart too
    server = serve(start_server, data, tokens)
    assert card_of(server).round is None
    with server.channel() as channel, pytest.raises(grpc.RpcError) as raw:
        qpb_grpc.QueryServiceStub(channel).AdvanceRound(qpb.AdvanceRoundRequest(collection="words"))
    assert raw.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_a_close_that_fails_reopens_the_round_and_a_publish_that_fails_is_finished_later(
        start_server: StartServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, tokens = tmp_path / "data", tokens_file(tmp_path / "tokens.json")
    server = serve(start_server, data, tokens)
    devices = [(ledger, "hello") for ledger in islice((ledger for ledger in iter(PrivacyLedger.for_simulation, None)
                                                       if SCHEMA.device_round(ledger.round_key("words")) == 0), 25)]
    assert submit_all(server, devices[:20]) == ["sent"] * 20
    with server.channel() as channel:   # the card as a device fetched it before the close
        stale = pb_grpc.CollectionServiceStub(channel).GetCollection(
            pb.GetCollectionRequest(collection="words"), metadata=(("authorization", "Bearer t-device"),))

    # the state cannot be written: the call fails, the state is as it was and the round takes reports again
    def full_disk(*args: object) -> None:
        raise DataDirError("cannot write the state (No space left on device)")

    monkeypatch.setattr(states, "store", full_disk)
    status, details = refused(server, "t-operator", "words")
    assert status == "UNAVAILABLE" and "could not be stored" in details and "No space left" in details
    assert json.loads(state_file(data, "words").read_text())["round"] == 0 and card_of(server).round == 0
    assert submit_all(server, devices[20:22]) == ["sent"] * 2
    monkeypatch.undo()

    # the log does not register the next round: UNAVAILABLE, the round stays closed; the next call only publishes
    log = server.server.backend.log
    register = log.register_card

    async def unavailable(name: str, card_json: str) -> None:
        raise LogUnavailable("the log did not answer (TimeoutError)")

    monkeypatch.setattr(log, "register_card", unavailable)
    status, details = refused(server, "t-operator", "words")
    assert status == "UNAVAILABLE" and "call AdvanceRound again" in details
    assert json.loads(state_file(data, "words").read_text())["round"] == 1   # closed and stored
    monkeypatch.setattr(log, "register_card", register)
    done = advance(server)
    assert (done["closed_round"], done["reports"], done["open_round"]) == (0, 22, 1)
    assert card_of(server).round == 1 and stored_rows(server, "words/round-0") == 22

    # a device that fetched the card before the close: the SDK fetches it again and says its round has passed
    fetches: list[str] = []
    fetch = AsyncClient._fetch

    async def stale_first(self: AsyncClient, name: str) -> pb.Collection:
        fetches.append(name)
        return stale if fetches == ["words"] else await fetch(self, name)

    monkeypatch.setattr(AsyncClient, "_fetch", stale_first)
    late = devices[22][0]
    with Client(server.address, token="t-device") as client:
        result = client.submit("words", {"word": ["hello"]}, ledger=late)
    assert fetches == ["words", "words/round-0", "words"]
    assert (result.status, result.sent, result.epsilon_spent) == (PASSED, 0, 0.0)   # refused before any charge
    assert stored_rows(server, "words/round-0") == 22
