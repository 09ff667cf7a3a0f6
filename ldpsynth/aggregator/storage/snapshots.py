"""When and how a shard worker writes its snapshot (the files' format: :mod:`~ldpsynth.aggregator.storage.snapshot`).

A snapshot is written every ``flush_ids`` new ids (held in memory, not yet in a run file) or
``flush_seconds``, in the background: the frozen id tails become run files, runs are merged
(:func:`~ldpsynth.aggregator.storage.idstore.merge_plan`), then the state file and the manifest are
written, and files no longer listed are removed. A commit that would leave more than
``2 * flush_ids`` reports after the last written snapshot (what a restart replays) waits for the
snapshot being written, so the bound holds however fast reports come. A failed write only makes a
restart replay more (the log keeps every record). In a cluster the files are also uploaded to the
layout's object store, and a worker starting on a node without them downloads them. The reasoning:
docs/internals.md, ``ldpsynth.aggregator.storage.shard_worker``.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from ldpsynth.aggregator.storage.checked_file import CheckedFileError, read_checked
from ldpsynth.aggregator.storage.idstore import RunOwner, merge_plan, merge_runs, remove_unreferenced, write_run
from ldpsynth.aggregator.storage.log_layout import LogUnavailable
from ldpsynth.aggregator.storage.shard_state import ShardState
from ldpsynth.aggregator.storage.snapshot import (
    MANIFEST,
    MANIFEST_KIND,
    Snapshot,
    collection_key,
    write_manifest,
    write_state,
)
from ldpsynth.aggregator.storage.snapshot_bucket import SnapshotBucket
from ldpsynth.serving.observe import events

log = events.get(__name__)


class Snapshots:
    """The snapshots of one shard's state (see the module docstring) in ``directory``."""

    def __init__(self, state: ShardState, directory: Path, layout: str, flush_ids: int, flush_seconds: float):
        self._state = state
        self._directory = directory
        self._layout = layout
        self._flush_ids = flush_ids
        self._flush_seconds = flush_seconds
        #: The layout's object store (a cluster's workers; set at start), or ``None``.
        self.bucket: SnapshotBucket | None = None
        #: The snapshot being written, if any.
        self.writing: asyncio.Task[None] | None = None
        #: The log sequence the last written snapshot reflects, and the shard's reports up to it.
        self.offset = 1
        self.total = 0
        self._last_write = time.monotonic()
        self._published: set[str] = set()
        self._frozen_upto = 1  # ids of records up to here are in runs or frozen tails
        self._ranges: dict[int, tuple[int, int]] = {}  # id(frozen tail) -> its records' sequences

    def restored(self, snapshot: Snapshot) -> None:
        """The worker restored ``snapshot``."""
        self.offset = self._frozen_upto = snapshot.offset
        self.total = snapshot.total
        self._published = set(snapshot.files) if self.bucket is not None else set()

    async def download(self) -> None:
        """The shard's snapshot from the object store into the directory, the manifest last (nothing if
        the store has none); :class:`CheckedFileError` if its manifest is damaged."""
        assert self.bucket is not None
        prefix = f"{self._state.shard}/"
        if not await self.bucket.get(prefix + MANIFEST, self._directory / (MANIFEST + ".remote")):
            return
        staging = self._directory / (MANIFEST + ".remote")
        meta, _ = read_checked(staging, MANIFEST_KIND)
        try:
            files = [str(meta["state"]["file"])] + [str(r["file"]) for c in meta["collections"].values()
                                                    for r in c["runs"]]
        except (KeyError, TypeError, AttributeError):
            raise CheckedFileError(f"{staging}: malformed manifest") from None
        for name in files:
            if not (self._directory / name).exists():
                await self.bucket.get(prefix + name, self._directory / name)
        staging.replace(self._directory / MANIFEST)

    async def room_for(self, reports: int) -> None:
        """Wait for the snapshot being written if ``reports`` more would take the reports after the last
        written snapshot (what a restart replays) past two snapshot intervals (``2 * flush_ids``)."""
        if self.writing is None or self.writing.done():
            return
        if self._state.total - self.total + reports > 2 * self._flush_ids:
            await asyncio.shield(self.writing)

    def maybe_write(self) -> None:
        """After a commit: start writing a snapshot if one is due and none is being written."""
        memory = self._state.memory_ids
        due = memory >= self._flush_ids or (
            memory and time.monotonic() - self._last_write >= self._flush_seconds)
        if due and (self.writing is None or self.writing.done()):
            self.writing = asyncio.ensure_future(self._write())

    async def flush(self) -> None:
        """Write a snapshot of everything applied so far (and wait for it)."""
        if self.writing is not None:
            await asyncio.shield(self.writing)
        if self._state.offset != self.offset:
            self.writing = asyncio.ensure_future(self._write())
            await asyncio.shield(self.writing)

    async def _write(self) -> None:
        """Tails -> run files, merge runs, state file, manifest (then upload; then clean up)."""
        self._last_write = time.monotonic()
        state = self._state
        position, quota = state.position, dict(state.quota)
        offset = position.offset
        for coll in state.collections.values():
            frozen = coll.index.freeze()
            if frozen is not None:
                self._ranges[id(frozen)] = (self._frozen_upto + 1, offset)
        self._frozen_upto = offset
        written = {name: (c.rows, c.stats.snapshot(), c.records.to_array()) for name, c in state.collections.items()}
        layout, shard, directory = self._layout, state.shard, self._directory
        try:
            # The collections in the state: one made while this snapshot is written is in the next one.
            for name, coll in [(name, state.collections[name]) for name in written]:
                owner, key = RunOwner(layout, shard, name), collection_key(name)
                for tail in list(coll.index.frozen):  # also tails a failed snapshot left frozen
                    hi, lo = tail.merged()
                    first, last = self._ranges[id(tail)]
                    run = await asyncio.to_thread(write_run, directory, owner, key, first, last, hi, lo)
                    coll.index.flushed(tail, run)
                    self._ranges.pop(id(tail), None)
                while (plan := merge_plan(coll.index.runs)) is not None:
                    a, b = coll.index.runs[plan[0]], coll.index.runs[plan[1]]
                    merged = await asyncio.to_thread(merge_runs, directory, owner, key, a, b)
                    coll.index.replace(a, b, merged)
            state_file = await asyncio.to_thread(write_state, directory, layout, shard, position, written, quota)
            listed = {name: (c.digest, written[name][0], [r.entry for r in c.index.runs])
                      for name, c in state.collections.items() if name in written}
            await asyncio.to_thread(write_manifest, directory, layout, shard, position, state_file, listed)
        except OSError as exc:
            # A snapshot is a view the log can rebuild: a failed write only makes a restart replay more.
            # Tails that were not written stay frozen (searched) and are written by the next snapshot.
            log.warning("shard.snapshot_not_written", f"shard {shard}: snapshot not written ({exc}); the "
                        "log keeps every record", shard=shard, detail=str(exc))
            return
        self.offset, self.total = offset, position.total
        keep = {state_file[0], MANIFEST} | {r.file for _, _, runs in listed.values() for r in runs}
        await self._publish(keep)
        remove_unreferenced(directory, keep, prefix="ids-")
        remove_unreferenced(directory, keep, prefix="state-")

    async def _publish(self, keep: set[str]) -> None:
        """Upload the files of the snapshot just written (the manifest last), delete those it no longer lists."""
        if self.bucket is None:
            return
        prefix = f"{self._state.shard}/"
        try:
            for name in sorted(keep - self._published - {MANIFEST}):
                await self.bucket.put(prefix + name, self._directory / name)
            await self.bucket.put(prefix + MANIFEST, self._directory / MANIFEST)
            await self.bucket.delete([prefix + name for name in self._published - keep])
            self._published = set(keep)
        except LogUnavailable as exc:
            log.warning("shard.snapshot_not_uploaded", f"shard {self._state.shard}: snapshot not uploaded ({exc}); "
                        "a restart elsewhere replays more of the log", shard=self._state.shard, detail=str(exc))
