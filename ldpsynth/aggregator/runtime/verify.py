"""Verify a log end to end: what ``ldpsynth aggregator verify`` runs, and what the crash tests check.

Reads every record of every shard's stream and checks that each is intact and in its place
(checksum, layout, shard, sequence, the running report count), that no report id is stored twice
in a collection (across all shards), that each collection's reports were written under its
registered card, and that the quota charges add up to the stored reports. On one machine it
opens the data directory itself (the server must be stopped: it takes the directory's lock and
starts the embedded log read-only in effect; it creates nothing) and also makes every check a
start makes (:func:`~ldpsynth.aggregator.storage.store_check.check_data_dir`: the log holds every
acknowledged sequence, ``layout.json`` matches the log, and what each shard worker will do with
its snapshot), in the same words: ``problems`` are exactly what makes ``aggregator serve``
refuse (and what the log's records fail), ``notes`` what a start repairs by itself (a snapshot
rebuilt from the log), ``losses`` the losses an operator accepted with ``--accept-lost-records``.
A log that cannot be opened is a problem too. In a cluster it connects to the NATS servers and
checks the log and the shard snapshots of its object store (those a worker starts from) against it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ldpsynth.aggregator.runtime.nats_process import EmbeddedNats
from ldpsynth.aggregator.storage.datadir import DataDir, DataDirError, DataDirInUse
from ldpsynth.aggregator.storage.idindex import repeats, sort_ids
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import Layout, LayoutError, LogSettings, LogUnavailable
from ldpsynth.aggregator.storage.log_records import LogCorruption, Section, card_digest, decode
from ldpsynth.aggregator.storage.refusals import (
    damaged_log,
    layout_edited,
    record_out_of_place,
    record_under_another_card,
)
from ldpsynth.aggregator.storage.sealing_key import FILE_NAME as SEALING_KEY_FILE
from ldpsynth.aggregator.storage.sealing_key import SealingKeyError, data_dir_key
from ldpsynth.aggregator.storage.segments import RowChunk
from ldpsynth.aggregator.storage.store_check import check_data_dir, check_published_snapshots
from ldpsynth.shared.errors import LdpsynthError


@dataclass
class Verification:
    """What :func:`verify_log` found: rows per collection and the problems (empty: all good)."""

    layout: str = ""
    shards: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    quota: dict[tuple[str, str], int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    losses: list[str] = field(default_factory=list)
    #: With ``keep_rows``: every stored report, per (shard, collection).
    stored: dict[tuple[int, str], RowChunk] = field(default_factory=dict)
    #: Collections retired from the log (``ldpsynth aggregator retire``): what each retirement recorded.
    retired: dict[str, dict[str, object]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, object]:
        return {"layout": self.layout, "shards": self.shards, "rows": dict(sorted(self.rows.items())),
                "retired": dict(sorted(self.retired.items())), "problems": self.problems, "notes": self.notes,
                "losses": self.losses, "ok": self.ok}


async def verify_log(replicated: ReplicatedLog, expected_layout: str | None = None,
                     keep_rows: bool = False, published_snapshots: bool = False) -> Verification:
    """Check every record of the log ``replicated`` is connected to (see the module docstring);
    with ``keep_rows``, also return every stored report (``Verification.stored``); with
    ``published_snapshots`` (a cluster), also check the snapshots in the object store against the
    log, as a shard worker does when it starts from them."""
    result = Verification()
    layout = await _open(replicated, expected_layout, result)
    if layout is not None:
        if published_snapshots:
            try:
                result.problems += await check_published_snapshots(replicated, layout)
            except LogUnavailable as exc:
                result.problems.append(str(exc))
        await _verify_records(replicated, layout, result, keep_rows)
    return result


async def _open(replicated: ReplicatedLog, expected_layout: str | None, result: Verification) -> Layout | None:
    """The log's layout (creating nothing), or ``None`` with the reason in ``result.problems``."""
    try:
        layout = await replicated.open_layout(None, expected_id=expected_layout, create=False)
    except (LayoutError, LogUnavailable) as exc:
        result.problems.append(str(exc))
        return None
    except LogCorruption as exc:
        result.problems.append(damaged_log(str(exc)))
        return None
    result.layout, result.shards = layout.id, layout.shards
    return layout


async def _verify_records(replicated: ReplicatedLog, layout: Layout, result: Verification, keep_rows: bool) -> None:
    ids: dict[str, list[np.ndarray]] = defaultdict(list)
    kept: dict[tuple[int, str], list[Section]] = defaultdict(list)
    cards: dict[str, str | None] = {}
    result.retired = await replicated.retired()
    for shard in range(layout.shards):
        state = await replicated.state(shard)
        total = 0
        try:
            async for sequence, data in replicated.read(shard, 2, state.last):
                record = decode(data, layout=layout.id, shard=shard, sequence=sequence)
                if record.before != total:
                    raise LogCorruption(record_out_of_place(shard, sequence, record.before, total))
                total += record.reports
                for section in record.sections:
                    if section.collection in result.retired:
                        result.problems.append(f"collection {section.collection!r} was retired, but shard {shard}, "
                                               f"sequence {sequence} holds {len(section)} of its reports")
                        continue
                    if section.collection not in cards:
                        card = await replicated.card(section.collection)
                        cards[section.collection] = None if card is None else card_digest(card)
                    if section.card != cards[section.collection]:
                        result.problems.append(damaged_log(record_under_another_card(shard, sequence,
                                                                                     section.collection)))
                    result.rows[section.collection] = result.rows.get(section.collection, 0) + len(section)
                    ids[section.collection].append(section.report_ids)
                    if keep_rows:
                        kept[(shard, section.collection)].append(section)
                    for credential, count in section.quota.items():
                        quota_key = (section.collection, credential)
                        result.quota[quota_key] = result.quota.get(quota_key, 0) + count
        except LogCorruption as exc:
            result.problems.append(damaged_log(str(exc)))
        except LogUnavailable as exc:
            result.problems.append(str(exc))
    for key, sections in kept.items():
        result.stored[key] = RowChunk(np.concatenate([x.report_ids for x in sections]),
                                      np.concatenate([x.public_keys for x in sections]),
                                      np.concatenate([x.private_codes for x in sections]))
    for collection, parts in ids.items():
        ordered = sort_ids(np.concatenate(parts))
        if repeats(ordered).any():
            result.problems.append(f"collection {collection!r}: a report id is stored more than once")
    for collection, rows in result.rows.items():
        charged = sum(v for (c, _), v in result.quota.items() if c == collection)
        if charged != rows:
            result.problems.append(f"collection {collection!r}: quota charges sum to {charged}, {rows} reports stored")


async def verify_data_dir(path: str, keep_rows: bool = False) -> Verification:
    """Verify a stopped one-machine aggregator's data directory: every check ``serve`` makes at
    start, then every record of the log.

    Raises :class:`~ldpsynth.aggregator.storage.datadir.DataDirError` only when there is nothing to check
    (no such directory) or it is in use by a running aggregator; everything else is reported."""
    datadir = DataDir(path)
    datadir.check_exists()
    result = Verification()
    try:
        datadir.acquire()
    except DataDirInUse:
        raise
    except DataDirError as exc:
        result.problems.append(str(exc))
        return result
    embedded = EmbeddedNats(datadir.log_dir)
    try:
        try:
            interrupted = datadir.interrupted_retirement()
            if interrupted is not None:
                result.problems.append(interrupted)
                return result
            recorded = datadir.recorded_layout()
            url = embedded.start()
        except DataDirError as exc:
            result.problems.append(str(exc))
            return result
        except (OSError, LdpsynthError) as exc:
            result.problems.append(f"--data-dir {datadir.path}: cannot start the embedded log "
                                   f"({getattr(exc, 'strerror', None) or exc})")
            return result
        try:
            replicated = await ReplicatedLog.connect(LogSettings((url,), replicas=1), name="ldpsynth-verify")
        except LogUnavailable as exc:
            result.problems.append(str(exc))
            return result
        try:
            layout = await _open(replicated, None if recorded is None else recorded[0], result)
            if layout is None:
                return result
            if recorded is not None and recorded[1] != layout.shards:
                result.problems.append(layout_edited(str(datadir.path / "layout.json"), recorded[1], layout.shards))
            try:  # the sealing key, as serve checks it (contract §16)
                if data_dir_key(datadir.path, await replicated.sealing_key_id(), create=False)[0] is None:
                    result.notes.append(f"{datadir.path / SEALING_KEY_FILE}: none yet; serve creates it at its next "
                                        "start")
            except SealingKeyError as exc:
                result.problems.append(str(exc))
            try:
                check = await check_data_dir(datadir, replicated, layout, write=False, inspect_snapshots=True)
            except LogCorruption as exc:
                result.problems.append(damaged_log(str(exc)))
            except (LayoutError, LogUnavailable) as exc:
                result.problems.append(str(exc))
            else:
                result.problems += check.problems
                result.notes += check.notes
                result.losses += check.losses
            await _verify_records(replicated, layout, result, keep_rows)
            return result
        finally:
            await replicated.close()
    finally:
        embedded.stop()
        datadir.release()
