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

The worker writes it after it caught up with the log at start, within about a second of each
commit (at most once a second, off the acknowledgement path: a batch never waits for it) and when
it closes. It never names a sequence the log had not confirmed durable, so it is never ahead of a
sound log; it may lag the last acknowledgement by about a second, so a restore that loses only
the records of the last second before a crash is not detected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ldpsynth.aggregator.storage.checked_file import CheckedFileError, read_checked, write_checked

ACKNOWLEDGED_KIND = "ldpsynth.acknowledged/1"


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
