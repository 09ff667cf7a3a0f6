"""Damaged shards on an embedded NATS log (127.0.0.1) in the test's directory.

Damage is refused, never served. A damaged snapshot (a view of the log) is rebuilt from the log; a damaged
or shortened log stops the shard; a stale writer is fenced off.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpsynth.aggregator.errors import ShardDamaged, ShardUnavailable
from ldpsynth.aggregator.runtime.verify import verify_log
from ldpsynth.aggregator.storage.checked_file import write_checked
from ldpsynth.aggregator.storage.idindex import sort_ids
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import LogSettings
from ldpsynth.aggregator.storage.log_records import card_digest
from ldpsynth.aggregator.storage.shard_worker import ShardWorker
from ldpsynth.aggregator.storage.snapshot import MANIFEST
from ldpsynth.aggregator.storage.stats import StatsAccumulator
from ldpsynth.shared.reports import new_report_ids

from ..conftest import RATINGS_CARD
from ._helpers import Log, _status_after, run, segment


@pytest.mark.parametrize("damage", ["flip a byte of a run", "truncate the state", "delete a run", "garbage manifest",
                                    "another shard's snapshot", "a foreign run under a listed name",
                                    "an earlier run under a listed name", "a snapshot of the old format"])
def test_damaged_snapshot_is_rebuilt_from_the_log(log: Log, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    rng = np.random.default_rng(6)
    spec = log.spec(flush_ids=500)
    ids = new_report_ids(3000)

    async def fill(worker: ShardWorker) -> None:
        for start in range(0, 3000, 500):
            await worker.commit([segment(0, rng, ids[start:start + 500])])

    earlier = Path(spec.directory).parent / "earlier"
    if damage == "an earlier run under a listed name":  # a snapshot of the first 500 ids, kept aside
        run(_status_after(spec, lambda w: w.commit([segment(0, rng, ids[:500])])))
        shutil.copytree(spec.directory, earlier)  # (fill then finds these 500 stored: no record of them)

    before = run(_status_after(spec, fill))  # closes with a final snapshot
    directory = Path(spec.directory)
    runs = sorted(directory.glob("ids-*.run"))
    state = next(directory.glob("state-*.bin"))
    if damage == "flip a byte of a run":
        data = bytearray(runs[0].read_bytes())
        data[len(data) // 2] ^= 0x01
        runs[0].write_bytes(bytes(data))
    elif damage == "truncate the state":
        state.write_bytes(state.read_bytes()[:100])
    elif damage == "delete a run":
        runs[0].unlink()
    elif damage == "garbage manifest":
        (directory / MANIFEST).write_bytes(b"\x00" * 64)
    elif damage == "an earlier run under a listed name":
        runs[0].write_bytes(sorted(earlier.glob("ids-*.run"))[0].read_bytes())
    elif damage == "a snapshot of the old format":
        # What main 5612345 wrote (no identity): here a consistent-looking snapshot at the log's end
        # whose run holds only half of the ids. Only the log can tell; it is rebuilt from the log.
        for path in directory.iterdir():
            path.unlink()
        _old_format_snapshot(directory, log.layout.id, before.offset, ids[:1500])
    else:
        other = Log(directory.parent / "other")
        try:
            run(_status_after(other.spec(name="w"), lambda w: w.commit([segment(10, rng)])))
        finally:
            other.nats.stop()
        if damage == "a foreign run under a listed name":
            runs[0].write_bytes(sorted((directory.parent / "other" / "w").glob("ids-*.run"))[0].read_bytes())
        else:
            for path in directory.iterdir():
                path.unlink()
            for path in (directory.parent / "other" / "w").iterdir():
                (directory / path.name).write_bytes(path.read_bytes())
    with caplog.at_level("WARNING"):
        after = run(_status_after(spec, lambda w: _assert_dedup(w, ids)))
    assert "rebuilding it from the log" in caplog.text
    assert after.rows == before.rows == {"ratings": 3000}
    assert after.replayed == before.offset - 1  # every reports record


def _old_format_snapshot(directory: Path, layout: str, offset: int, ids: np.ndarray) -> None:
    """A snapshot in the format of main 5612345: the run says only its count, the manifest lists
    the files by name."""
    ordered = sort_ids(ids)
    run_name = "ids-0123456789ab-0123456789abcdef.run"
    write_checked(directory / run_name, "ldpsynth.id-run/1", {"count": len(ids)}, {"hi": ordered.hi, "lo": ordered.lo})
    stats = StatsAccumulator(100, 5)
    stats.add(np.zeros(3000, np.int64), np.zeros(3000, np.int64))
    snap = stats.snapshot()
    state_name = f"state-{offset}-01234567.bin"
    write_checked(directory / state_name, "ldpsynth.shard-state/1",
                  {"layout": layout, "shard": 0, "offset": offset,
                   "collections": {"ratings": {"index": 0, "rows": 3000, "public": 100, "private": 5}},
                   "quota": [["ratings", "dev", 3000]]},
                  {"0.keys": snap.keys, "0.codes": snap.codes, "0.counts": snap.counts})
    write_checked(directory / MANIFEST, "ldpsynth.shard-manifest/1",
                  {"layout": layout, "shard": 0, "offset": offset, "total": 3000, "state": state_name,
                   "collections": {"ratings": {"card": card_digest(RATINGS_CARD.dumps()), "runs": [run_name]}}})


async def _assert_dedup(worker: ShardWorker, ids: np.ndarray) -> None:
    outcome = await worker.commit([segment(0, np.random.default_rng(0), ids)])
    assert outcome.results == ((0, 3000),)


def test_a_damaged_log_record_stops_the_shard(log: Log) -> None:
    """A flipped byte in a stored record: NATS's own check drops it or ours refuses it; either way
    the shard is damaged and refuses service (and says which record), never serves a partial log."""
    rng = np.random.default_rng(7)
    spec = log.spec(flush_ids=10**9)
    run(_status_after(spec, lambda w: _commits(w, rng, 5)))
    for path in Path(spec.directory).iterdir():  # no snapshot: the restart replays every record
        path.unlink()
    log.nats.stop()
    (blk,) = log.block_files()
    data = bytearray(Path(blk).read_bytes())
    at = [i for i in range(len(data)) if data.startswith(b"LDPSLOG1", i)][3]  # the third reports record
    data[at + 300] ^= 0x01
    Path(blk).write_bytes(bytes(data))
    log.settings = LogSettings((log.nats.start(),))
    with pytest.raises(ShardDamaged, match="log of shard 0"):
        run(_status_after(log.spec(flush_ids=10**9)))
    verification = run(_verify(log))
    assert not verification.ok and "shard 0" in verification.problems[0]


async def _commits(worker: ShardWorker, rng: np.random.Generator, count: int) -> None:
    for _ in range(count):
        await worker.commit([segment(100, rng)])


async def _verify(log: Log) -> Any:
    replicated = await ReplicatedLog.connect(log.settings, "verify")
    try:
        return await verify_log(replicated, log.layout.id)
    finally:
        await replicated.close()


def test_a_stale_writer_is_fenced_off(log: Log) -> None:
    """Two workers for one shard (a zombie and the worker Ray restarted elsewhere): the log takes a
    record only from the writer that has seen every record before it, so no id is stored twice."""
    rng = np.random.default_rng(8)

    async def scenario() -> None:
        zombie, successor = ShardWorker(log.spec(name="a")), ShardWorker(log.spec(name="b"))
        await zombie.start()
        shared = new_report_ids(100)
        await zombie.commit([segment(0, rng, shared[:50])])
        await successor.start()
        assert (await successor.commit([segment(0, rng, shared)])).results == ((50, 50),)
        with pytest.raises(ShardUnavailable, match="records past sequence"):
            await zombie.commit([segment(0, rng, shared[50:])])  # fenced: it has not seen the successor's record
        assert (await zombie.commit([segment(0, rng, shared)])).results == ((0, 100),)  # caught up first
        await zombie.close()
        await successor.close()
        verification = await _verify(log)
        assert verification.ok and verification.rows == {"ratings": 100}

    run(scenario())


def test_a_lost_last_record_is_missing_not_late(log: Log) -> None:
    """The log server drops a record that fails its own hash; when it is the last one no later
    record shows the gap: the reader asks the stream, finds it missing and stops the shard."""
    rng = np.random.default_rng(11)
    spec = log.spec(flush_ids=10**9)
    run(_status_after(spec, lambda w: _commits(w, rng, 3)))
    for path in Path(spec.directory).iterdir():
        path.unlink()
    log.nats.stop()
    (blk,) = log.block_files()
    data = bytearray(Path(blk).read_bytes())
    at = [i for i in range(len(data)) if data.startswith(b"LDPSLOG1", i)][-1]
    data[at + 300] ^= 0x01
    Path(blk).write_bytes(bytes(data))
    log.settings = LogSettings((log.nats.start(),))
    started = time.monotonic()
    with pytest.raises(ShardDamaged, match="sequence 4 is missing"):
        run(_status_after(log.spec(flush_ids=10**9)))
    assert time.monotonic() - started < 10


def test_a_cluster_worker_and_verify_refuse_a_log_behind_the_published_snapshot(log: Log) -> None:
    """In a cluster the snapshot in the object store remembers an acknowledged sequence: a worker
    starting from it on a shorter log refuses, and ``verify --nats`` says so in the same words."""
    rng = np.random.default_rng(12)
    run(_status_after(log.spec(name="a", flush_ids=200, publish_snapshots=True), lambda w: _commits(w, rng, 6)))
    log.nats.stop()
    (blk,) = log.block_files()
    Path(blk).write_bytes(Path(blk).read_bytes()[:Path(blk).stat().st_size // 2])
    for index in Path(blk).parent.glob("index.db"):
        index.unlink()
    log.settings = LogSettings((log.nats.start(),))
    with pytest.raises(ShardDamaged) as refused:  # a worker on another node: it downloads the snapshot
        run(_status_after(log.spec(name="b", flush_ids=200, publish_snapshots=True)))
    assert "acknowledged records were lost" in str(refused.value)
    assert f"LDPSYNTH_{log.layout.id}_SNAP/0/MANIFEST" in str(refused.value)

    async def check() -> Any:
        replicated = await ReplicatedLog.connect(log.settings, "verify")
        try:
            return await verify_log(replicated, log.layout.id, published_snapshots=True)
        finally:
            await replicated.close()

    verification = run(check())
    assert str(refused.value) in verification.problems
