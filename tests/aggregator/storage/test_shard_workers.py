"""Shard workers writing to an embedded NATS log (127.0.0.1) in the test's directory: each id stored
once, restarts from snapshots, the layout, registry and data directory, reads of a collection's records.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpsynth.aggregator.errors import PinExpired
from ldpsynth.aggregator.storage import snapshots
from ldpsynth.aggregator.storage.acknowledged import ACKNOWLEDGED_SECONDS, read_acknowledged
from ldpsynth.aggregator.storage.datadir import DataDir, DataDirError
from ldpsynth.aggregator.storage.idindex import sort_ids
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import LayoutError, LogSettings
from ldpsynth.aggregator.storage.record_ranges import READ_THROUGH
from ldpsynth.aggregator.storage.segments import RowChunk, Segment, SegmentPack
from ldpsynth.aggregator.storage.shard_worker import ShardWorker
from ldpsynth.shared.estimators.engine import row_block_sums
from ldpsynth.shared.reports import new_report_ids

from ..conftest import GRAPH_CARD, RATINGS_CARD
from ._helpers import Log, _status_after, run, segment


# ----- shard workers on an embedded log ------------------------------------------------------------
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
