"""The storage layer without Ray: checked files, log records, the on-disk id index, and shard
workers writing to an embedded NATS log (127.0.0.1) in the test's directory.

Damage is refused, never served: a flipped byte, a truncated or foreign file, a missing record.
A damaged snapshot (a view of the log) is rebuilt from the log; a damaged log stops the shard.
"""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest

from ldpsynth.aggregator.errors import PinExpired, ShardDamaged, ShardUnavailable
from ldpsynth.aggregator.runtime.nats_process import EmbeddedNats
from ldpsynth.aggregator.runtime.verify import verify_log
from ldpsynth.aggregator.storage import snapshots
from ldpsynth.aggregator.storage.acknowledged import ACKNOWLEDGED_SECONDS, read_acknowledged
from ldpsynth.aggregator.storage.checked_file import CheckedFileError, read_checked, write_checked
from ldpsynth.aggregator.storage.datadir import DataDir, DataDirError
from ldpsynth.aggregator.storage.idindex import SortedIds, merge_sorted_ids, sort_ids
from ldpsynth.aggregator.storage.idstore import DiskIdIndex, RunOwner, merge_runs, write_run
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import Layout, LayoutError, LogSettings
from ldpsynth.aggregator.storage.log_records import (
    LogCorruption,
    Section,
    card_digest,
    decode,
    encode_genesis,
    encode_reports,
)
from ldpsynth.aggregator.storage.record_ranges import READ_THROUGH, RecordRanges
from ldpsynth.aggregator.storage.segments import RowChunk, Segment, SegmentPack
from ldpsynth.aggregator.storage.shard_worker import ShardWorker, WorkerSpec
from ldpsynth.aggregator.storage.snapshot import MANIFEST
from ldpsynth.aggregator.storage.stats import StatsAccumulator
from ldpsynth.shared.estimators.engine import row_block_sums
from ldpsynth.shared.reports import new_report_ids

from ..conftest import GRAPH_CARD, RATINGS_CARD

T = TypeVar("T")


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


# ----- checked files -------------------------------------------------------------------------------
def test_checked_file_round_trip_and_every_kind_of_damage(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    arrays = {"a": np.arange(1000, dtype=np.uint64), "b": np.array([[1.5, 2.5]]), "empty": np.zeros(0, np.int64)}
    write_checked(path, "kind/1", {"x": 1}, arrays)
    meta, read = read_checked(path, "kind/1")
    assert meta == {"x": 1}
    for name, array in arrays.items():
        assert np.array_equal(read[name], array) and read[name].dtype == array.dtype
    good = path.read_bytes()

    def damaged(data: bytes, kind: str = "kind/1") -> str:
        path.write_bytes(data)
        with pytest.raises(CheckedFileError) as info:
            read_checked(path, kind)
        assert str(path) in str(info.value)
        return str(info.value)

    assert "checksum" in damaged(good[:300] + bytes([good[300] ^ 1]) + good[301:])  # one flipped bit
    assert "truncated" in damaged(good[:40]) or "checksum" in damaged(good[:len(good) // 2])
    assert "bad magic" in damaged(b"garbage" * 20)
    assert "'other/1' file was expected" in damaged(good, "other/1")
    path.unlink()
    with pytest.raises(CheckedFileError, match="missing"):
        read_checked(path, "kind/1")


# ----- log records ---------------------------------------------------------------------------------
def _section(n: int, rng: np.random.Generator, collection: str = "ratings") -> Section:
    return Section(collection, "c" * 32, new_report_ids(n), rng.integers(0, 100, n), rng.integers(0, 5, n),
                   {"device-1": n})


def test_records_round_trip_and_refuse_damage_and_displacement() -> None:
    rng = np.random.default_rng(1)
    bits = _section(4, rng, "bitsets")                    # a frequency oracle's reports: bit sets of 3 bytes
    bits = Section(bits.collection, bits.card, bits.report_ids, bits.public_keys,
                   rng.integers(0, 256, (4, 3)).astype(np.uint8), bits.quota)
    sections = [_section(50, rng), _section(3, rng, "graph"), bits]
    data = encode_reports("layout1", 2, 7, 1000, sections, {"ratings": (100, 5, 0), "graph": (4096 * 4096, 2, 0),
                                                            "bitsets": (100, 0, 3)})
    record = decode(data, layout="layout1", shard=2, sequence=7)
    assert (record.kind, record.before, record.reports) == ("reports", 1000, 57)
    for got, sent in zip(record.sections, sections):
        assert np.array_equal(got.report_ids, sent.report_ids) and np.array_equal(got.public_keys, sent.public_keys)
        assert np.array_equal(got.private_codes, sent.private_codes) and got.quota == sent.quota
    genesis = decode(encode_genesis("layout1", 2, 4), layout="layout1", shard=2, sequence=1)
    assert genesis.kind == "genesis" and genesis.meta == {"shards": 4}
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x10  # a private code changed to another valid one, say
    for bad, where, fragment in [(bytes(flipped), (2, 7), "checksum"), (data[:-9] + data[-4:], (2, 7), "checksum"),
                                 (data, (2, 8), "another stream or position"), (data, (3, 7), "another stream"),
                                 (b"not a record at all", (2, 7), "not an ldpsynth log record")]:
        with pytest.raises(LogCorruption, match=fragment):
            decode(bad, layout="layout1", shard=where[0], sequence=where[1])
    with pytest.raises(LogCorruption, match="another stream"):
        decode(data, layout="another", shard=2, sequence=7)


# ----- the on-disk id index ------------------------------------------------------------------------
def _ids(values: np.ndarray) -> np.ndarray:
    """Report ids whose first 8 bytes are ``values`` (small: ties in ``hi`` happen) and last 8 random."""
    ids = new_report_ids(len(values))
    ids[:, :8] = np.asarray(values, "<u8").view(np.uint8).reshape(-1, 8)
    return ids


OWNER = RunOwner("layout1", 0, "ratings")


def test_disk_index_is_an_exact_set_through_flushes_and_merges(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    index, truth = DiskIdIndex(), set()
    for step in range(12):
        ids = _ids(rng.integers(0, 300, 200))  # many equal hi: the slow path is exercised
        ordered = sort_ids(ids)
        known = index.contains(ordered)
        expected = np.array([bytes(ids[i]) in truth for i in ordered.order])
        assert np.array_equal(known, expected)
        fresh = {bytes(i) for i in ids} - truth
        keep = np.array([bytes(ids[i]) in fresh for i in ordered.order]) & ~np.r_[False, (
            (ordered.hi[1:] == ordered.hi[:-1]) & (ordered.lo[1:] == ordered.lo[:-1]))]
        index.add(SortedIds(ordered.order[keep], ordered.hi[keep], ordered.lo[keep]))
        truth |= fresh
        if step % 3 == 2:  # flush the tail to a run file
            tail = index.freeze()
            assert tail is not None
            index.flushed(tail, write_run(tmp_path, OWNER, "c", step, step, *tail.merged()))
        if len(index.runs) >= 2:
            first, second = index.runs[-2], index.runs[-1]
            index.replace(first, second, merge_runs(tmp_path, OWNER, "c", first, second, chunk=7))
        assert len(index) == len(truth)
    everything = np.frombuffer(b"".join(sorted(truth)), np.uint8).reshape(-1, 16)
    assert index.contains(sort_ids(everything)).all()
    assert index.memory_ids < len(truth)


def test_merge_streams_in_chunks_and_keeps_every_id(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    a_hi, b_hi = (np.sort(rng.integers(0, 50, 1000).astype(np.uint64)),
                  np.sort(rng.integers(0, 50, 777).astype(np.uint64)))
    a = write_run(tmp_path, OWNER, "c", 2, 5, a_hi, rng.integers(0, 2**63, 1000).astype(np.uint64))
    b = write_run(tmp_path, OWNER, "c", 6, 9, b_hi, rng.integers(0, 2**63, 777).astype(np.uint64))
    merged = merge_runs(tmp_path, OWNER, "c", a, b, chunk=13)
    assert (merged.entry.first, merged.entry.last, merged.entry.count) == (2, 9, 1777)
    assert np.all(np.diff(merged.hi.astype(np.int64)) >= 0)
    pairs = sorted(zip(np.r_[a.hi, b.hi].tolist(), np.r_[a.lo, b.lo].tolist()))
    assert sorted(zip(merged.hi.tolist(), merged.lo.tolist())) == pairs
    assert not glob.glob(str(tmp_path / ".merge-*"))


# ----- shard workers on an embedded log ------------------------------------------------------------
class Log:
    """An embedded NATS log in a directory, with the test collections registered."""

    def __init__(self, directory: Path, shards: int = 1):
        self.directory = directory
        self.nats = EmbeddedNats(directory / "log")
        self.settings = LogSettings((self.nats.start(),))
        self.layout = run(self._open(shards))

    async def _open(self, shards: int) -> Layout:
        log = await ReplicatedLog.connect(self.settings, "test")
        try:
            layout = await log.open_layout(shards)
            for card in (RATINGS_CARD, GRAPH_CARD):
                await log.register_card(card.schema.name, card.dumps())
            return layout
        finally:
            await log.close()

    def spec(self, shard: int = 0, name: str = "w", **changes: Any) -> WorkerSpec:
        return WorkerSpec(self.layout, shard, self.settings, str(self.directory / name), **changes)

    def restart(self) -> None:
        self.nats.stop()
        self.settings = LogSettings((self.nats.start(),))

    def block_files(self) -> list[str]:
        return glob.glob(str(self.directory / "log" / "jetstream" / "$G" / "streams" / f"LDPSYNTH_{self.layout.id}_*"
                             / "msgs" / "*.blk"))


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    embedded = Log(tmp_path)
    yield embedded
    embedded.nats.stop()


def segment(n: int, rng: np.random.Generator, ids: np.ndarray | None = None, credential: str = "dev") -> Segment:
    ids = new_report_ids(n) if ids is None else ids
    return Segment("ratings", credential, ids, rng.integers(0, 100, len(ids)), rng.integers(0, 5, len(ids)))


async def _status_after(spec: WorkerSpec, action: Callable[[ShardWorker], Coroutine[Any, Any, Any]] | None = None
                        ) -> dict[str, Any]:
    worker = ShardWorker(spec)
    try:
        await worker.start()
        if action is not None:
            await action(worker)
        return await worker.status()
    finally:
        await worker.close()


def test_worker_stores_each_id_once_and_counts_quota(log: Log) -> None:
    rng = np.random.default_rng(4)

    async def scenario() -> None:
        worker = ShardWorker(log.spec())
        await worker.start()
        ids = new_report_ids(300)
        first = await worker.commit([segment(0, rng, ids[:200]), segment(0, rng, ids[100:300], "other")])
        assert first.results == ((200, 0), (100, 100))  # the second repeats 100 of the first's ids
        assert first.quota == {("ratings", "dev"): 200, ("ratings", "other"): 100}
        repeated = np.concatenate([ids[:5], ids[:5], new_report_ids(2)])
        again = await worker.commit([segment(0, rng, repeated)])
        assert again.results == ((2, 10),)
        assert await worker.count_existing("ratings", repeated) == 7  # distinct ids already stored
        pin, offset, rows = await worker.pin("ratings")
        assert rows == 302 and (await worker.pinned_stats(pin, "ratings")).n == 302
        chunk = await worker.rows(pin, "ratings")
        assert len(chunk) == 302 and len({bytes(i) for i in chunk.report_ids}) == 302
        await worker.commit([segment(50, rng)])  # later rows leave the pin as it was
        assert (await worker.pinned_stats(pin, "ratings")).n == 302 and len(await worker.rows(pin, "ratings")) == 302
        await worker.close()

    run(scenario())


def test_restart_replays_only_records_after_the_snapshot(log: Log) -> None:
    """A restart reads the snapshot and at most ``flush_ids`` ids from the log, however much the
    shard holds: the work of a restart does not grow with the stored count."""
    rng = np.random.default_rng(5)
    spec = log.spec(flush_ids=1000)

    async def fill(worker: ShardWorker, batches: int) -> None:
        for _ in range(batches):
            await worker.commit([segment(250, rng)])
        await asyncio.sleep(0)  # let the last snapshot start
        if worker._snapshots.writing is not None:
            await worker._snapshots.writing

    for batches, stored in ((8, 2000), (80, 22000)):
        status = run(_status_after(spec, lambda w, b=batches: fill(w, b)))
        assert sum(status.rows.values()) == stored
        # Kill-like restart: no close (no final snapshot), a new worker on the same directory.
        restarted = run(_status_after(spec))
        assert restarted.rows == status.rows
        assert restarted.replayed <= 1000 // 250  # records after the last snapshot, never the whole log
        assert restarted.memory_ids <= 1000


def test_commits_wait_for_a_slow_snapshot_rather_than_leave_more_than_two_intervals_to_replay(
        log: Log, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commits faster than the snapshots (each takes 0.3 s here): the ids after the last written snapshot,
    what a restart replays, never exceed 2 * flush_ids; a kill-like restart replays at most that."""
    rng = np.random.default_rng(14)
    spec = log.spec(flush_ids=1000)
    write_state = snapshots.write_state

    def slow_write_state(*args: Any) -> Any:
        time.sleep(0.3)
        return write_state(*args)

    monkeypatch.setattr(snapshots, "write_state", slow_write_state)
    unwritten: list[int] = []

    async def fill(worker: ShardWorker) -> None:
        for _ in range(20):
            await worker.commit([segment(300, rng)])
            status = await worker.status()
            unwritten.append((status.offset - status.snapshot_offset) * 300)  # reports after the written snapshot

    run(_status_after(spec, fill))
    assert max(unwritten) <= 2 * 1000 and max(unwritten) > 1000  # the snapshots fell behind, and were waited for
    restarted = run(_status_after(spec))
    assert restarted.replayed * 300 <= 2 * 1000


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


# ----- layout, registry, data directory ------------------------------------------------------------
def test_layout_and_registry_refuse_what_does_not_match(log: Log) -> None:
    async def scenario() -> None:
        replicated = await ReplicatedLog.connect(log.settings, "test")
        try:
            assert (await replicated.open_layout(None)).id == log.layout.id
            with pytest.raises(LayoutError, match="holds 1 shards; it cannot be served with --shards 3"):
                await replicated.open_layout(3)
            with pytest.raises(LayoutError, match="different deployments"):
                await replicated.open_layout(None, expected_id="0123456789ab")
            with pytest.raises(LayoutError, match="different mechanism card"):
                await replicated.register_card("ratings", GRAPH_CARD.dumps())
        finally:
            await replicated.close()

    run(scenario())


def test_a_missing_stream_is_named(tmp_path: Path) -> None:
    log = Log(tmp_path, shards=2)
    try:
        log.nats.stop()
        stream = tmp_path / "log" / "jetstream" / "$G" / "streams" / f"LDPSYNTH_{log.layout.id}_001"
        for path in sorted(stream.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        stream.rmdir()
        log.settings = LogSettings((log.nats.start(),))

        async def reopen() -> None:
            replicated = await ReplicatedLog.connect(log.settings, "test")
            try:
                await replicated.open_layout(None, expected_id=log.layout.id)
            finally:
                await replicated.close()

        with pytest.raises(LayoutError, match=f"LDPSYNTH_{log.layout.id}_001 .shard 1 of 2. is missing"):
            run(reopen())
    finally:
        log.nats.stop()


def test_data_dir_lock_and_refusals(tmp_path: Path) -> None:
    first, second = DataDir(tmp_path / "d"), DataDir(tmp_path / "d")
    first.acquire()
    with pytest.raises(DataDirError, match="in use by another aggregator"):
        second.acquire()
    first.release()
    assert first.recorded_layout() is None
    first.record_layout("abc", 2)
    assert first.recorded_layout() == ("abc", 2)
    (tmp_path / "d" / "layout.json").write_text("{not json")
    with pytest.raises(DataDirError, match="damaged or edited"):
        first.recorded_layout()
    (tmp_path / "f").write_text("x")
    with pytest.raises(DataDirError, match="not a directory"):
        DataDir(tmp_path / "f").acquire()
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "shard-000.sqlite").write_bytes(b"")
    with pytest.raises(DataDirError, match="SQLite shard files of an earlier ldpsynth"):
        DataDir(tmp_path / "old").acquire()
    assert not os.path.exists(tmp_path / "d" / "layout.tmp")


def test_records_are_as_large_as_the_message_limit_allows(log: Log) -> None:
    """A group of reports goes into as few records as the log's message size allows (each one an
    fsynced append): 100,000 reports at the embedded server's 8 MiB limit fit in one record."""
    rng = np.random.default_rng(9)

    async def scenario() -> dict[str, Any]:
        worker = ShardWorker(log.spec())
        await worker.start()
        await worker.commit([segment(100_000, rng)])
        status = await worker.status()
        await worker.close()
        return status

    status = run(scenario())
    assert status.offset == 2 and status.rows == {"ratings": 100_000}  # genesis + one record


def test_a_group_of_two_collections_counts_each_segment_and_credential(log: Log) -> None:
    """One pack, as a replica's group commit sends it: segments of two collections and three credentials
    interleaved, ids repeated within a segment, across segments and across collections (a collection's ids
    are its own). Each segment gets its own (accepted, duplicates), each credential its new reports."""
    rng = np.random.default_rng(10)
    ids = new_report_ids(40)

    def graph(ids: np.ndarray, credential: str) -> Segment:
        return Segment("graph", credential, ids, rng.integers(0, 2048 * 2048, len(ids)), rng.integers(0, 2, len(ids)))

    async def scenario() -> None:
        worker = ShardWorker(log.spec())
        await worker.start()
        await worker.commit([segment(0, rng, ids[30:35])])  # stored before: duplicates from now on
        pack = SegmentPack.of([
            segment(0, rng, np.concatenate([ids[:10], ids[:2]]), "a"),  # 10 new, 2 repeated in the segment
            graph(ids[:10], "a"),  # the same ids in another collection: all new there
            segment(0, rng, ids[5:15], "b"),  # 5 seen in the first segment, 5 new
            graph(ids[10:12], "c"),
            segment(0, rng, ids[28:33], "c"),  # 2 new (28, 29), 3 stored before
        ])
        outcome = await worker.commit_pack(pack)
        assert outcome.results == ((10, 2), (10, 0), (5, 5), (2, 0), (2, 3))
        assert outcome.quota == {("ratings", "a"): 10, ("graph", "a"): 10, ("ratings", "b"): 5,
                                 ("graph", "c"): 2, ("ratings", "c"): 2}
        status = await worker.status()
        assert status.rows == {"ratings": 5 + 17, "graph": 12}
        assert await worker.count_existing("ratings", ids[:35]) == 22
        assert await worker.count_existing("graph", ids[:35]) == 12
        await worker.close()

    run(scenario())


def _count_reads(worker: ShardWorker) -> list[tuple[int, int]]:
    """The ``(first, last)`` sequences of every log read ``worker`` starts from now on."""
    assert worker._log is not None
    calls: list[tuple[int, int]] = []
    read = worker._log.read

    def counted(shard: int, first: int, last: int) -> Any:
        calls.append((first, last))
        return read(shard, first, last)

    worker._log.read = counted  # type: ignore[method-assign]
    return calls


def test_rows_read_only_the_records_of_their_collection_and_come_in_id_order(log: Log) -> None:
    """Export and dense queries read a collection's records only (issue 29 item 3): the log holds 3
    records of ratings, 2 * READ_THROUGH of graph, 2 of ratings; a read of ratings skips the graph run
    (two spans), a read of graph is one span of its own, before and after a restart from the snapshot
    (the runs are in it). The rows are the ids stored, merged in id order; a pin reads up to its sequence."""
    rng = np.random.default_rng(11)
    spec = log.spec(flush_ids=1)  # a snapshot after every commit
    graph_records = 2 * READ_THROUGH

    def graph(n: int) -> Segment:
        return Segment("graph", "dev", new_report_ids(n), rng.integers(0, 2048 * 2048, n), rng.integers(0, 2, n))

    async def rows(worker: ShardWorker, collection: str) -> RowChunk:
        pin, _, _ = await worker.pin(collection)
        return await worker.rows(pin, collection)

    ratings_ids: list[np.ndarray] = []

    async def fill(worker: ShardWorker) -> None:
        for _ in range(3):
            ratings_ids.append(new_report_ids(20))
            await worker.commit([segment(0, rng, ratings_ids[-1])])
        pin, _, _ = await worker.pin("ratings")  # before the rest: reads records 2..4 only
        for _ in range(graph_records):
            await worker.commit([graph(3)])
        for _ in range(2):
            ratings_ids.append(new_report_ids(20))
            await worker.commit([segment(0, rng, ratings_ids[-1])])
        assert len(await worker.rows(pin, "ratings")) == 60
        await worker.flush()

    async def check(worker: ShardWorker) -> None:
        calls = _count_reads(worker)
        chunk = await rows(worker, "ratings")
        after = 4 + graph_records
        assert calls == [(2, 4), (after + 1, after + 2)]
        stored = np.concatenate(ratings_ids)
        assert np.array_equal(chunk.report_ids, stored[sort_ids(stored).order])
        calls.clear()
        chunk = await rows(worker, "graph")
        assert calls == [(5, after)] and len(chunk) == 3 * graph_records

    run(_status_after(spec, fill))
    restarted = run(_status_after(spec, check))
    assert restarted.replayed == 0  # the runs came from the snapshot, not from a replay


def test_dense_sums_are_computed_where_the_rows_are_from_one_read_per_pin(log: Log) -> None:
    """A dense block's sums (issue 29 item 3): the worker reads its pinned rows once (row_ids), keeps them with
    the pin, and sums the weight lists it is sent over them: the same sums as over the rows exported. The rows
    go with the pin; a released pin is refused."""
    rng = np.random.default_rng(13)
    mechanism = RATINGS_CARD.mechanism

    async def scenario() -> None:
        worker = ShardWorker(log.spec())
        await worker.start()
        try:
            for _ in range(3):
                await worker.commit([segment(40, rng)])
            pin, _, rows = await worker.pin("ratings")
            reads = _count_reads(worker)
            ids = await worker.row_ids(pin, "ratings")
            chunk = await worker.rows(pin, "ratings")
            assert np.array_equal(ids, chunk.report_ids) and rows == 120
            weights = rng.random((2, rows, mechanism.domain_size))
            reads.clear()
            sums = await worker.dense_sums(pin, "ratings", weights)
            assert reads == []  # from the rows kept with the pin
            expected = row_block_sums(weights, chunk.private_codes, mechanism, workers=1)
            for name in ("t_hat", "v_hat", "low", "high", "spread", "a_min", "b_max", "c_min", "varying"):
                assert np.array_equal(getattr(sums, name), getattr(expected, name)), name
            await worker.unpin(pin)
            with pytest.raises(PinExpired):
                await worker.dense_sums(pin, "ratings", weights)
        finally:
            await worker.close()

    run(scenario())


def test_record_ranges_join_near_runs_and_refuse_a_damaged_snapshot_of_them() -> None:
    ranges = RecordRanges()
    for sequence, before in ((2, 0), (3, 10), (3, 10), (9, 50), (9 + READ_THROUGH + 1, 90)):
        ranges.add(sequence, before)
    assert ranges.to_array().tolist() == [[2, 3, 0], [9, 9, 50], [10 + READ_THROUGH, 10 + READ_THROUGH, 90]]
    assert ranges.spans(upto=100) == [(2, 9, 0)]  # 5 records of others between: read through
    assert ranges.spans(upto=2) == [(2, 2, 0)]
    assert ranges.spans(upto=10**6) == [(2, 9, 0), (10 + READ_THROUGH, 10 + READ_THROUGH, 90)]
    restored = RecordRanges.from_array(ranges.to_array(), offset=10 + READ_THROUGH)
    assert restored.to_array().tolist() == ranges.to_array().tolist()
    for damaged, offset in (([[1, 3, 0]], 5), ([[2, 6, 0]], 5), ([[2, 3, 0], [4, 4, 9]], 5), ([[3, 2, 0]], 5),
                            ([[2, 2, 9], [4, 4, 3]], 5), ([[2, 2]], 5)):
        with pytest.raises(ValueError):
            RecordRanges.from_array(np.array(damaged), offset)


def test_merge_sorted_ids_orders_runs_as_sort_ids_does_with_ties_on_hi() -> None:
    rng = np.random.default_rng(12)
    runs = []
    for _ in range(5):
        ids = new_report_ids(200)
        ids[:40, :8] = 7  # the same first 64 bits in every run: ties ranked by lo
        runs.append(ids[sort_ids(ids).order])
    ids = np.concatenate(runs)
    merged, sorted_ = merge_sorted_ids(ids), sort_ids(ids[rng.permutation(len(ids))])
    assert np.array_equal(merged.hi, sorted_.hi) and np.array_equal(merged.lo, sorted_.lo)
    assert np.array_equal(merged.order, sort_ids(ids).order)


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


def test_the_acknowledged_file_follows_the_log_within_a_second(log: Log) -> None:
    """The worker writes the shard's acknowledged file at start, within about a second of the last
    commit (also when no commit follows), never past what the log confirmed, and at close."""
    rng = np.random.default_rng(13)
    path = log.directory / "acknowledged" / "shard-000"
    spec = log.spec(acknowledged=str(path))

    async def scenario() -> None:
        worker = ShardWorker(spec)
        await worker.start()
        assert read_acknowledged(path, log.layout.id, 0).sequence == 1  # the genesis record
        for _ in range(3):
            await worker.commit([segment(50, rng)])
        await asyncio.sleep(ACKNOWLEDGED_SECONDS + 0.5)  # no commit, no close
        status = await worker.status()
        ack = read_acknowledged(path, log.layout.id, 0)
        assert (ack.sequence, ack.total) == (status.offset, 150)
        await worker.commit([segment(50, rng)])
        await worker.close()
        assert read_acknowledged(path, log.layout.id, 0).total == 200

    run(scenario())
