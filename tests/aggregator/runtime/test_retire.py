"""``ldpsynth aggregator retire``: a closed collection, exported, is removed from a stopped aggregator's
log (records it shared with another collection are rewritten without it) and its snapshots; the other
collection keeps every report exactly once; verify lists the retirement; the retired card is refused;
an interrupted retirement is refused by serve and verify and finished by running it again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np
import pytest

from ldpsynth.aggregator.runtime import retire as retire_module
from ldpsynth.aggregator.runtime.backend import BackendError
from ldpsynth.aggregator.runtime.retire import RetireRefused, retire
from ldpsynth.aggregator.storage.datadir import DataDirInUse
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.cli.aggregator_cmd import main as aggregator_main
from ldpsynth.client import RetryPolicy
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.protocol import reports_to_proto
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

from ..conftest import RATINGS, RATINGS_CARD, ServerThread, batch, make_reports, stored_rows, submit, verify
from ..ingress.test_lifecycle import CARD as WINDOWED_CARD
from ..ingress.test_lifecycle import CLOSES, OPENS, Clock, reports

StartServer = Callable[..., ServerThread]


def fill(start_server: StartServer, data: Path, rng: np.random.Generator) -> tuple[list[Reports], list[Reports]]:
    """A server on ``data`` with both collections, batches of the two interleaved in one stream (their group
    commits share records), the windowed collection exported once closed; then stopped."""
    clock = Clock(OPENS)
    server = start_server(clock=clock, data_dir=data, collections=(RATINGS_CARD, WINDOWED_CARD))
    stub = pb_grpc.CollectionServiceStub(server.channel())
    windowed = [reports(i % 4, 100, rng) for i in range(20)]
    ratings = [make_reports(RATINGS, 100, rng) for _ in range(20)]
    batches: list[pb.ReportBatch] = []
    for w, r in zip(windowed, ratings):
        batches += [reports_to_proto(w, "windowed", WINDOWED_CARD.version, len(batches)), batch(r)]
    acks, code, _ = submit(stub, batches)
    assert code == grpc.StatusCode.OK and sum(a.accepted for a in acks) == 4000
    with pytest.raises(DataDirInUse):  # never from under a running aggregator
        asyncio.run(retire(str(data), "windowed", lambda: CLOSES))
    clock.now = CLOSES
    with QueryClient(server.address, retry=RetryPolicy(max_attempts=1)) as analyst:
        assert len(analyst.export("windowed")) == 2000  # closed: exported, then retired
    server.stop()
    return windowed, ratings


def ratings_ids(data: Path) -> set[bytes]:
    found = verify(data, keep_rows=True)
    return {bytes(i) for (_, name), rows in found.stored.items() if name == "ratings" for i in rows.report_ids}


def test_a_closed_collection_is_retired_and_the_other_keeps_every_report_once(
        start_server: StartServer, tmp_path: Path, rng: np.random.Generator) -> None:
    data = tmp_path / "data"
    windowed, ratings = fill(start_server, data, rng)
    before = verify(data)
    assert before.ok and before.rows == {"ratings": 2000, "windowed": 2000}
    for collection, clock, refusal in (("windowed", lambda: CLOSES - 1, "it closes at 2027-01-01T00:00:00Z"),
                                       ("ratings", lambda: CLOSES, "it never closes"),
                                       ("nope", lambda: CLOSES, "'nope' is not a collection of this log")):
        with pytest.raises(RetireRefused, match=refusal):
            asyncio.run(retire(str(data), collection, clock))
    assert verify(data).rows == before.rows and verify(data).layout == before.layout  # refused: nothing changed

    done = asyncio.run(retire(str(data), "windowed", lambda: CLOSES))
    assert (done.removed, done.kept, done.old_layout) == (2000, {"ratings": 2000}, before.layout)
    assert done.rewritten > 0  # records holding both collections were rewritten without the retired one
    assert done.retired_at == "2027-01-01T00:00:00Z"
    after = verify(data)
    assert after.ok and after.rows == {"ratings": 2000} and after.layout == done.new_layout != before.layout
    assert after.retired["windowed"]["retired_at"] == "2027-01-01T00:00:00Z"
    assert not (data / "shards").exists()  # the snapshots went with the old layout
    assert ratings_ids(data) == {bytes(i) for r in ratings for i in r.report_ids}
    with pytest.raises(RetireRefused, match="retired already"):
        asyncio.run(retire(str(data), "windowed", lambda: CLOSES))

    # Served again: every report of the other collection, exactly once (retries are duplicates).
    again = start_server(data_dir=data, collections=(RATINGS_CARD,))
    assert stored_rows(again, "ratings") == 2000
    stub = pb_grpc.CollectionServiceStub(again.channel())
    acks, code, _ = submit(stub, [batch(ratings[0]), batch(make_reports(RATINGS, 50, rng))])
    assert code == grpc.StatusCode.OK and [(a.accepted, a.duplicates) for a in acks] == [(0, 100), (50, 0)]
    again.stop()
    assert verify(data).rows == {"ratings": 2050}
    # The retired collection is not served again under its name.
    with pytest.raises(BackendError, match="collection 'windowed' was retired at 2027-01-01T00:00:00Z"):
        start_server(data_dir=data, collections=(RATINGS_CARD, WINDOWED_CARD))


def test_an_interrupted_retirement_is_refused_until_run_again(start_server: StartServer, tmp_path: Path,
                                                              rng: np.random.Generator,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    _, ratings = fill(start_server, data, rng)
    layout = verify(data).layout

    async def cut(*args: object) -> None:
        raise OSError("the power went out")

    # Cut before the switch: the old log is still the log; the half-made copy is made again.
    monkeypatch.setattr(ReplicatedLog, "switch_layout", cut)
    with pytest.raises(OSError, match="power"):
        asyncio.run(retire(str(data), "windowed", lambda: CLOSES))
    monkeypatch.undo()
    interrupted = (f"the retirement of collection 'windowed' was interrupted (retiring.json); finish it: ldpsynth "
                   f"aggregator retire --data-dir {data} --collection windowed")
    assert verify(data).problems == [f"--data-dir {data}: {interrupted}"]
    assert verify(data).layout == ""
    with pytest.raises(BackendError, match="was interrupted"):
        start_server(data_dir=data, collections=(RATINGS_CARD,))
    # Cut after the switch: the copy is the log now; what is left is finished.
    monkeypatch.setattr(retire_module, "_finish", cut)
    with pytest.raises(OSError, match="power"):
        asyncio.run(retire(str(data), "windowed", lambda: CLOSES))
    monkeypatch.undo()
    assert "was interrupted" in verify(data).problems[0]
    with pytest.raises(RetireRefused, match="finish it first"):
        asyncio.run(retire(str(data), "ratings", lambda: CLOSES))

    assert aggregator_main(["retire", "--data-dir", str(data), "--collection", "windowed"]) == 0  # by its plan
    printed = capsys.readouterr().out
    assert '"removed_reports": 2000' in printed and '"ratings": 2000' in printed and f'"old": "{layout}"' in printed
    after = verify(data)
    assert after.ok and after.rows == {"ratings": 2000} and "windowed" in after.retired
    assert ratings_ids(data) == {bytes(i) for r in ratings for i in r.report_ids}
