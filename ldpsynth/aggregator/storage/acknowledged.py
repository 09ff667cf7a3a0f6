"""The highest acknowledged sequence of each shard, remembered outside the log and the snapshots.

``DIR/acknowledged/shard-NNN`` (one machine) is a small checked file per shard: the layout and
shard, a log sequence the shard worker saw durable in the log, the reports up to it, the CRC-32
of the record at that sequence, and the losses an operator accepted (``--accept-lost-records``).

Why here. The log is the store of record, so the log itself cannot say that it lost records:
a log restored from an older backup brings its older stream metadata with it. The shard
snapshots remember their sequence too, but they are a cache (a damaged one is rebuilt), and
deleting ``DIR/shards`` must not make a shorter log servable. So the sequence is kept in a file
of its own, in the data directory but outside ``DIR/log`` and ``DIR/shards``, which a start
compares with the log's end (and with the record at that sequence: a log of another history of
the same length is refused too). Once a data directory has these files (``layout.json`` format
3) a missing one is refused as well.

The worker writes it (:class:`AcknowledgedWriter`) after it caught up with the log at start, within
about a second of each commit (at most once a second, off the acknowledgement path: a batch never
waits for it) and when it closes. It never names a sequence the log had not confirmed durable, so
it is never ahead of a sound log; it may lag the last acknowledgement by about a second, so a
restore that loses only the records of the last second before a crash is not detected.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ldpsynth.aggregator.storage.checked_file import CheckedFileError, read_checked, write_checked
from ldpsynth.aggregator.storage.snapshot import Position
from ldpsynth.serving.observe import events

log = events.get(__name__)

ACKNOWLEDGED_KIND = "ldpsynth.acknowledged/1"
#: Seconds between two writes of the acknowledged file while commits go on.
ACKNOWLEDGED_SECONDS = 1.0


@dataclass(frozen=True)
class Loss:
    """A loss accepted by the operator."""

    time: str
    log_end: int
    acknowledged: int
    reports: int | None
    why: str

    def to_json(self) -> dict[str, Any]:
        return {"time": self.time, "log_end": self.log_end, "acknowledged": self.acknowledged,
                "reports": self.reports, "why": self.why}


@dataclass(frozen=True)
class Acknowledged:
    """What one shard's file says."""

    layout: str
    shard: int
    sequence: int
    total: int
    record_crc: int
    losses: tuple[Loss, ...] = field(default_factory=tuple)


def read_acknowledged(path: Path, layout: str, shard: int) -> Acknowledged | None:
    """The file at ``path`` (``None`` if there is none); :class:`CheckedFileError` if it is damaged
    or belongs to another layout or shard."""
    if not path.exists():
        return None
    meta, _ = read_checked(path, ACKNOWLEDGED_KIND, mmap=False)
    if (meta.get("layout"), meta.get("shard")) != (layout, shard):
        raise CheckedFileError(f"{path}: of layout {meta.get('layout')}, shard {meta.get('shard')}, not of layout "
                               f"{layout}, shard {shard}")
    try:
        losses = tuple(Loss(str(x["time"]), int(x["log_end"]), int(x["acknowledged"]),
                            None if x["reports"] is None else int(x["reports"]), str(x["why"]))
                       for x in meta["losses"])
        return Acknowledged(layout, shard, int(meta["sequence"]), int(meta["total"]), int(meta["record_crc"]), losses)
    except (KeyError, TypeError, ValueError):
        raise CheckedFileError(f"{path}: malformed") from None


def write_acknowledged(path: Path, ack: Acknowledged) -> None:
    """Write ``ack`` durably and atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_checked(path, ACKNOWLEDGED_KIND, {
        "layout": ack.layout, "shard": ack.shard, "sequence": ack.sequence, "total": ack.total,
        "record_crc": ack.record_crc, "losses": [loss.to_json() for loss in ack.losses]})


class AcknowledgedWriter:
    """Keeps one shard's file at the position its worker applied, ``applied()`` (see the module
    docstring); ``path`` ``None``: no file is kept (a cluster)."""

    def __init__(self, path: Path | None, layout: str, shard: int, applied: Callable[[], Position]):
        self.path = path
        self._layout = layout
        self._shard = shard
        self._applied = applied
        #: What the file says: read at start (:func:`~ldpsynth.aggregator.storage.store_check.check_position`), then
        #: what was last written.
        self.last: Acknowledged | None = None
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()  # set at close: write now
        self._at = 0.0

    def soon(self) -> None:
        """After a commit: make sure the file reaches the applied sequence within about
        :data:`ACKNOWLEDGED_SECONDS` (one writer task at a time, which catches up with every commit
        made while it waited or wrote)."""
        if self.path is not None and (self._task is None or self._task.done()):
            self._task = asyncio.ensure_future(self._write_soon())

    async def _write_soon(self) -> None:
        while True:
            delay = self._at + ACKNOWLEDGED_SECONDS - time.monotonic()
            if delay > 0 and not self._wake.is_set():
                try:
                    await asyncio.wait_for(self._wake.wait(), delay)
                except asyncio.TimeoutError:
                    pass
            if not await self.write() or (self.last is not None and self.last.sequence >= self._applied().offset):
                return

    async def write(self) -> bool:
        """Write the position applied (confirmed durable by the log) to the file; ``False`` if the
        write failed."""
        if self.path is None:
            return True
        async with self._lock:
            self._at = time.monotonic()
            losses = self.last.losses if self.last is not None else ()
            applied = self._applied()
            ack = Acknowledged(self._layout, self._shard, applied.offset, applied.total, applied.record_crc, losses)
            if self.last is not None and self.last.sequence >= ack.sequence:
                return True
            try:
                await asyncio.to_thread(write_acknowledged, self.path, ack)
            except OSError as exc:
                log.warning("shard.acknowledged_not_written", f"shard {self._shard}: {self.path} not written ({exc}); "
                            "the log keeps every record", shard=self._shard, detail=str(exc))
                return False
            self.last = ack
            return True

    async def close(self) -> None:
        """The worker closes: write now (after the writer task, if one is waiting)."""
        self._wake.set()
        if self._task is not None:
            await self._task
        await self.write()
