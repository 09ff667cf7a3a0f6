"""The checks a start makes before it serves a shard, shared by the replica, the shard workers and ``verify``.

* :func:`check_position`: the log of a shard holds every sequence that was acknowledged: the
  sequence in ``DIR/acknowledged/shard-NNN`` (:mod:`~ldpsynth.aggregator.storage.acknowledged`) and the
  one the shard's snapshot reflects (whatever the snapshot's format), and the record at the
  acknowledged sequence is the one acknowledged there. Otherwise :class:`StoreRefused`.
* :func:`load_snapshot`: the shard's snapshot, every file bound to its manifest, and the manifest
  bound to the log (the record at its sequence is the one it was taken at, with as many reports
  before it). Otherwise :class:`~ldpsynth.aggregator.storage.checked_file.CheckedFileError`, and the
  worker rebuilds the snapshot from the log (the log is intact: :func:`check_position` passed).
* :func:`check_data_dir`: both for every shard of a one-machine data directory; the replica runs
  it before it starts the workers (refusing on a problem, or recording the loss the operator
  accepted with ``--accept-lost-records``), and ``verify`` runs it without writing anything. So a
  store is refused by ``serve`` exactly when ``verify`` reports a problem, in the same words.
"""

from __future__ import annotations

import datetime
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ldpsynth.aggregator.storage.acknowledged import Acknowledged, Loss, read_acknowledged, write_acknowledged
from ldpsynth.aggregator.storage.checked_file import CheckedFileError
from ldpsynth.aggregator.storage.datadir import DataDir, DataDirError, os_problem
from ldpsynth.aggregator.storage.idstore import Run, RunOwner, open_run
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import Layout
from ldpsynth.aggregator.storage.log_records import decode, record_crc
from ldpsynth.aggregator.storage.refusals import (
    ACCEPTABLE,
    ACKNOWLEDGED_UNKNOWN,
    LOST,
    REPLACED,
    StoreRefused,
    acknowledged_unknown,
    history_replaced,
    in_snapshot,
    loss_given_up,
    no_snapshot,
    records_lost,
    snapshot_rebuilt,
    snapshot_restored,
)
from ldpsynth.aggregator.storage.snapshot import MANIFEST, Position, Snapshot, read_snapshot, snapshot_position


async def log_position(replicated: ReplicatedLog, layout: Layout, shard: int, sequence: int) -> Position | None:
    """The position of the log's record at ``sequence`` (``None``: there is no such record)."""
    data = await replicated.record(shard, sequence)
    if data is None:
        return None
    record = decode(data, layout=layout.id, shard=shard, sequence=sequence)
    return Position(sequence, record.before + record.reports, record_crc(data))


@dataclass(frozen=True)
class ShardPosition:
    log_end: int
    acknowledged: Acknowledged | None


def published_manifest(layout: Layout, shard: int) -> str:
    """How a refusal names a shard's manifest in a cluster's object store."""
    return f"{layout.snapshot_bucket}/{shard}/{MANIFEST}"


async def check_position(replicated: ReplicatedLog, layout: Layout, shard: int, shard_dir: Path,
                         acknowledged_path: Path | None, require_acknowledged: bool,
                         one_machine: bool = True, snapshot_name: str | None = None) -> ShardPosition:
    """Check the log of ``shard`` still holds what was acknowledged (see the module docstring);
    ``snapshot_name``: how to name the snapshot (default: its manifest's path)."""
    log_end = (await replicated.state(shard)).last
    ack = None
    if acknowledged_path is not None:
        try:
            ack = read_acknowledged(acknowledged_path, layout.id, shard)
        except CheckedFileError as exc:
            raise StoreRefused(ACKNOWLEDGED_UNKNOWN, acknowledged_unknown(shard, str(exc))) from None
        if ack is None and require_acknowledged:
            raise StoreRefused(ACKNOWLEDGED_UNKNOWN, acknowledged_unknown(shard, f"{acknowledged_path}: missing"))
    claims: list[tuple[int, str]] = []
    if ack is not None:
        claims.append((ack.sequence, f"recorded in {acknowledged_path}"))
    snap = snapshot_position(shard_dir, layout.id, shard)
    if snap is not None:
        claims.append((snap.offset, in_snapshot(snapshot_name or str(shard_dir / MANIFEST))))
    for sequence, where in sorted(claims, reverse=True):
        if log_end < sequence:
            raise StoreRefused(LOST, records_lost(shard, log_end, sequence, where, one_machine))
    if ack is not None:
        found = await log_position(replicated, layout, shard, ack.sequence)
        if found is None or (found.total, found.record_crc) != (ack.total, ack.record_crc):
            raise StoreRefused(REPLACED, history_replaced(shard, ack.sequence, f"recorded in {acknowledged_path}",
                                                          one_machine))
    return ShardPosition(log_end, ack)


async def check_published_snapshots(replicated: ReplicatedLog, layout: Layout) -> list[str]:
    """A cluster's refusals that the object store's snapshots cause (``verify --nats``): a shard's
    published manifest reflecting a sequence its log no longer holds; the same words as the worker's."""
    bucket = await replicated.existing_snapshots()
    if bucket is None:
        return []
    problems = []
    with tempfile.TemporaryDirectory(prefix="ldpsynth-verify-") as scratch:
        for shard in range(layout.shards):
            directory = Path(scratch) / str(shard)
            directory.mkdir()
            if not await bucket.get(f"{shard}/{MANIFEST}", directory / MANIFEST):
                continue
            try:
                await check_position(replicated, layout, shard, directory, None, False, one_machine=False,
                                     snapshot_name=published_manifest(layout, shard))
            except StoreRefused as exc:
                problems.append(str(exc))
    return problems


async def load_snapshot(directory: Path, layout: Layout, shard: int,
                        replicated: ReplicatedLog) -> tuple[Snapshot, dict[str, list[Run]]] | None:
    """The snapshot of ``directory`` with its runs opened, after checking each file against the
    manifest and the manifest against the log (``None``: no snapshot).

    :class:`~ldpsynth.aggregator.storage.checked_file.CheckedFileError` says why it cannot be used."""
    snapshot = read_snapshot(directory, layout.id, shard)
    if snapshot is None:
        return None
    found = await log_position(replicated, layout, shard, snapshot.offset)
    if found != snapshot.position:
        raise CheckedFileError(f"{directory / MANIFEST}: taken at sequence {snapshot.offset} of another history "
                               f"of the log (the log's record there is not the one it was taken at)")
    runs = {name: [open_run(directory, RunOwner(layout.id, shard, name), entry) for entry in c.runs]
            for name, c in snapshot.collections.items()}
    return snapshot, runs


async def snapshot_note(directory: Path, layout: Layout, shard: int, replicated: ReplicatedLog,
                        log_end: int) -> tuple[bool, str]:
    """What a worker starting now says of its snapshot: ``(usable, note)`` (``verify``: read only)."""
    try:
        loaded = await load_snapshot(directory, layout, shard, replicated)
    except CheckedFileError as exc:
        return False, snapshot_rebuilt(shard, str(exc))
    if loaded is None:
        return True, no_snapshot(shard, log_end - 1)
    return True, snapshot_restored(shard, loaded[0].offset, log_end - loaded[0].offset)


@dataclass
class StoreCheck:
    """What :func:`check_data_dir` found: refusals (``problems``), what a start repairs or did
    (``notes``), and the losses accepted so far (``losses``)."""

    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)


def _describe(shard: int, loss: Loss) -> str:
    return loss_given_up(shard, loss.log_end, loss.acknowledged, loss.reports, loss.time, loss.why)


async def check_data_dir(datadir: DataDir, replicated: ReplicatedLog, layout: Layout, *, write: bool,
                         accept_loss: bool = False, inspect_snapshots: bool = False) -> StoreCheck:
    """Check every shard of a one-machine data directory (see the module docstring).

    ``write``: write the acknowledged file of a shard that has none (a new or upgraded directory);
    ``accept_loss``: record an acceptable refusal as a loss, start the shard's acknowledged
    sequence again at the log's end and move its snapshot aside; ``inspect_snapshots``: also say
    what each worker will do with its snapshot (``verify``)."""
    check = StoreCheck()
    require = datadir.keeps_acknowledged()
    for shard in range(layout.shards):
        path, shard_dir = datadir.acknowledged_file(shard), datadir.shard_dir(shard)
        try:
            position = await check_position(replicated, layout, shard, shard_dir, path, require)
        except StoreRefused as exc:
            if not (accept_loss and exc.kind in ACCEPTABLE):
                check.problems.append(str(exc))
                continue
            loss = await _accept(datadir, replicated, layout, shard, str(exc))
            check.notes.append(_describe(shard, loss))
            position = await check_position(replicated, layout, shard, shard_dir, path, True)
        if position.acknowledged is None and write:
            end = await log_position(replicated, layout, shard, position.log_end)
            assert end is not None
            _write(datadir, path, Acknowledged(layout.id, shard, end.offset, end.total, end.record_crc))
        ack = position.acknowledged or read_acknowledged(path, layout.id, shard)
        if ack is not None:
            check.losses += [_describe(shard, loss) for loss in ack.losses]
        if inspect_snapshots:
            usable, note = await snapshot_note(shard_dir, layout, shard, replicated, position.log_end)
            if not usable:
                check.notes.append(note)
    return check


async def _accept(datadir: DataDir, replicated: ReplicatedLog, layout: Layout, shard: int, why: str) -> Loss:
    """Record that the operator gives up what shard ``shard``'s log lost; return the loss."""
    path, shard_dir = datadir.acknowledged_file(shard), datadir.shard_dir(shard)
    try:
        previous = read_acknowledged(path, layout.id, shard)
    except CheckedFileError:
        previous = None
    log_end = (await replicated.state(shard)).last
    end = await log_position(replicated, layout, shard, log_end)
    assert end is not None
    claims = [p for p in (None if previous is None else Position(previous.sequence, previous.total,
                                                                   previous.record_crc),
                          snapshot_position(shard_dir, layout.id, shard)) if p is not None]
    acknowledged = max(claims, key=lambda p: p.offset) if claims else None
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    loss = Loss(now, log_end, acknowledged.offset if acknowledged else log_end,
                max(0, acknowledged.total - end.total) if acknowledged else None, why)
    losses = (previous.losses if previous else ()) + (loss,)
    try:
        if shard_dir.exists():  # ahead of the log, or of another history: kept aside, never served
            shard_dir.rename(shard_dir.with_name(f"{shard_dir.name}.given-up-{now.replace(':', '')}"))
    except OSError as exc:
        raise DataDirError(f"--data-dir {datadir.path}: cannot move {shard_dir} aside ({os_problem(exc)})") from None
    _write(datadir, path, Acknowledged(layout.id, shard, end.offset, end.total, end.record_crc, losses))
    return loss


def _write(datadir: DataDir, path: Path, ack: Acknowledged) -> None:
    try:
        write_acknowledged(path, ack)
    except OSError as exc:
        raise DataDirError(f"--data-dir {datadir.path}: cannot write {path} ({os_problem(exc)})") from None
