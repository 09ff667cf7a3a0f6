"""``ldpsynth aggregator retire``: remove a closed collection's reports and snapshots from a stopped
one-machine aggregator's data directory, keeping every other collection's reports exactly once.

A shard's log is one stream of records, and a record (a group commit) may hold sections of several
collections; the streams deny deletes (an acknowledged record is never removed from a running log).
So a retirement **copies** the log: every record of every shard is read and checked, the retired
collection's sections are dropped (a record left empty is dropped), and what remains is written to
the streams of a **new layout** (a new id: every record, snapshot and acknowledged file names the
layout it belongs to, so nothing of the old copy can be mistaken for the new one), with new
sequences and report counts; the sections of the other collections keep their report ids, codes,
card digests and quota charges. The new copy is checked (the reports per collection are the old
ones, less the retired collection's) before the log's layout key is switched to it: the one atomic
step. Then the retired collection is recorded in the log's registry (its card unregistered: a
replica given its card again is refused), the old streams are deleted, the shard snapshots removed
(the next start rebuilds them from the new log), the acknowledged files rewritten for the new log,
and ``layout.json`` names the new layout.

``DIR/retiring.json`` records the plan before the copy starts and is removed last: while it exists
``serve`` and ``verify`` refuse the directory (naming this command), and running the command again
finishes the retirement from where it stopped (a copy not yet switched to is made again).

A collection is retired only once it is closed (its schema's ``closes`` has passed by ``clock``) and
only from a store ``verify`` finds sound. A cluster's log is not retired by this command.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ldpsynth.aggregator.runtime.offline_log import embedded_log
from ldpsynth.aggregator.storage.acknowledged import Acknowledged, read_acknowledged, write_acknowledged
from ldpsynth.aggregator.storage.checked_file import CheckedFileError
from ldpsynth.aggregator.storage.datadir import DataDir, DataDirError, os_problem
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import Layout
from ldpsynth.aggregator.storage.log_records import LogCorruption, card_digest, decode, encode_reports
from ldpsynth.aggregator.storage.refusals import record_out_of_place
from ldpsynth.aggregator.storage.store_check import check_data_dir, log_position
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.lifecycle import format_time
from ldpsynth.shared.mechanisms.registry import layout_of


class RetireRefused(LdpsynthError):
    """The collection cannot be retired (not closed, unknown, already retired) or the store is not sound."""


@dataclass
class Retirement:
    """What a retirement did."""

    collection: str
    old_layout: str
    new_layout: str
    retired_at: str
    #: Reports of the retired collection removed, and the reports kept per other collection.
    removed: int = 0
    kept: dict[str, int] = field(default_factory=dict)
    #: Records copied, dropped (they held the retired collection only), and rewritten without its section.
    copied: int = 0
    dropped: int = 0
    rewritten: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"collection": self.collection, "retired_at": self.retired_at, "removed_reports": self.removed,
                "kept_reports": dict(sorted(self.kept.items())), "layout": {"old": self.old_layout,
                                                                         "new": self.new_layout},
                "records": {"copied": self.copied, "dropped": self.dropped, "rewritten": self.rewritten}}


async def retire(path: str, collection: str, clock: Callable[[], float] = time.time) -> Retirement:
    """Retire ``collection`` from the stopped aggregator's data directory ``path`` (module docstring)."""
    datadir = DataDir(path)
    datadir.check_exists()
    async with embedded_log(datadir) as settings:
        old = await ReplicatedLog.connect(settings, name="ldpsynth-retire")
        try:
            new = await ReplicatedLog.connect(settings, name="ldpsynth-retire-copy")
        except BaseException:
            await old.close()
            raise
        try:
            return await _retire(datadir, old, new, collection, clock)
        finally:
            await old.close()
            await new.close()


async def _retire(datadir: DataDir, old: ReplicatedLog, new: ReplicatedLog, collection: str,
                  clock: Callable[[], float]) -> Retirement:
    plan = datadir.retiring()
    if plan is None:
        plan = await _plan(datadir, old, collection, clock)
        datadir.record_retiring(plan)
    elif plan["collection"] != collection:
        raise RetireRefused(f"--collection: the retirement of {plan['collection']!r} was interrupted; finish it "
                            "first (ldpsynth aggregator retire --collection " f"{plan['collection']})")
    before, after = (Layout(str(plan[key]), int(str(plan["shards"])), int(str(plan["replicas"])))
                     for key in ("old_layout", "new_layout"))
    done = Retirement(collection, before.id, after.id, str(plan["retired_at"]))
    if await old.layout_id() == before.id:
        old.layout = before
        await new.delete_streams(after)  # a copy an interruption left half made
        await _copy(old, new, before, after, collection, done)
        plan = {**plan, "copy": {"removed": done.removed, "copied": done.copied, "dropped": done.dropped,
                                 "rewritten": done.rewritten}}
        datadir.record_retiring(plan)  # what the copy did, for a finish run again
        await new.switch_layout(before, after)
    else:  # switched already: the copy is the log; finish what the interruption left
        new.layout = after
        copy = plan["copy"]
        done.removed, done.copied, done.dropped, done.rewritten = (int(copy[k]) for k in ("removed", "copied",
                                                                                           "dropped", "rewritten"))
        await _count(new, after, done)
    await _finish(datadir, new, before, after, plan, done)
    return done


async def _plan(datadir: DataDir, log: ReplicatedLog, collection: str, clock: Callable[[], float]) -> dict[str, Any]:
    """Check the collection may be retired and the store is sound; the plan of the retirement."""
    recorded = datadir.recorded_layout()
    if recorded is None:
        raise RetireRefused(f"--data-dir {datadir.path}: holds no log yet")
    layout = await log.open_layout(None, expected_id=recorded[0], create=False)
    check = await check_data_dir(datadir, log, layout, write=False)
    if check.problems:
        raise RetireRefused(f"--data-dir {datadir.path}: not sound ({check.problems[0]}); run ldpsynth aggregator "
                            "verify and repair it first")
    if collection in await log.retired():
        raise RetireRefused(f"--collection: {collection!r} is retired already")
    card_json = await log.card(collection)
    if card_json is None:
        raise RetireRefused(f"--collection: {collection[:128]!r} is not a collection of this log")
    schema = MechanismCard.from_json(card_json).schema
    now = clock()
    if schema.closes is None or now < schema.closes:
        when = "it never closes (its schema has no closes)" if schema.closes is None else \
            f"it closes at {format_time(schema.closes)}"
        raise RetireRefused(f"--collection: {collection!r} is not closed ({when}); only a closed collection is "
                            "retired, once exported")
    return {"collection": collection, "card": card_digest(card_json), "old_layout": layout.id,
            "new_layout": uuid.uuid4().hex[:12], "shards": layout.shards, "replicas": layout.replicas,
            "retired_at": format_time(int(now))}


async def _domains(log: ReplicatedLog, names: set[str], cache: dict[str, tuple[int, int, int]]) -> None:
    """Add what fixes the log's columns of the collections ``names`` to ``cache``: (public domain size,
    bound of the private codes, bytes of a bit-set report or 0), as the shard workers write them."""
    for name in names - set(cache):
        card_json = await log.card(name)
        if card_json is None:
            raise LogCorruption(f"the log holds reports of collection {name!r}, which is not registered")
        card = MechanismCard.from_json(card_json)
        layout = layout_of(card.mechanism)
        cache[name] = (card.schema.public_domain_size, layout.bound, layout.width)


async def _copy(old: ReplicatedLog, new: ReplicatedLog, before: Layout, after: Layout, collection: str,
                done: Retirement) -> None:
    """Every shard's records, without ``collection``'s sections, into the streams of ``after``; then the
    copy's reports per collection checked against the original's."""
    await new.create_streams(after)
    new.layout = after
    domains: dict[str, tuple[int, int, int]] = {}
    expected: dict[str, int] = {}
    for shard in range(before.shards):
        last, total, written, kept_total = (await old.state(shard)).last, 0, 1, 0
        async for sequence, data in old.read(shard, 2, last):
            record = decode(data, layout=before.id, shard=shard, sequence=sequence)
            if record.before != total:
                raise LogCorruption(record_out_of_place(shard, sequence, record.before, total))
            total += record.reports
            kept = [s for s in record.sections if s.collection != collection]
            removed = record.reports - sum(len(s) for s in kept)
            done.removed += removed
            for section in kept:
                expected[section.collection] = expected.get(section.collection, 0) + len(section)
            if not kept:
                done.dropped += 1
                continue
            done.rewritten += 1 if removed else 0
            await _domains(old, {s.collection for s in kept}, domains)
            written = await new.append(shard, encode_reports(after.id, shard, written + 1, kept_total, kept, domains),
                                       written)
            kept_total += sum(len(s) for s in kept)
            done.copied += 1
    await _count(new, after, done)
    if done.kept != expected:
        raise LogCorruption(f"the copy of the log holds {done.kept} reports per collection, not {expected}")


async def _count(log: ReplicatedLog, layout: Layout, done: Retirement) -> None:
    """The reports per collection in ``layout``'s streams (read and checked)."""
    done.kept = {}
    for shard in range(layout.shards):
        total = 0
        async for sequence, data in log.read(shard, 2, (await log.state(shard)).last):
            record = decode(data, layout=layout.id, shard=shard, sequence=sequence)
            if record.before != total:
                raise LogCorruption(record_out_of_place(shard, sequence, record.before, total))
            total += record.reports
            for section in record.sections:
                done.kept[section.collection] = done.kept.get(section.collection, 0) + len(section)


async def _finish(datadir: DataDir, log: ReplicatedLog, before: Layout, after: Layout, plan: dict[str, Any],
                  done: Retirement) -> None:
    """After the switch: the registry, the old streams, the snapshots, the acknowledged files, layout.json."""
    await log.retire_card(done.collection, {"retired_at": done.retired_at, "card": plan["card"],
                                            "layout_before": before.id, "layout_after": after.id})
    await log.delete_streams(before)
    try:
        shutil.rmtree(datadir.path / "shards", ignore_errors=False)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise DataDirError(f"--data-dir {datadir.path}: cannot remove the snapshots ({os_problem(exc)})") from None
    for shard in range(after.shards):
        path = datadir.acknowledged_file(shard)
        previous = None  # never written (a format-2 directory)
        for layout in (before, after):  # the new layout's already, if an interrupted finish wrote it
            try:
                previous = read_acknowledged(path, layout.id, shard)
                break
            except CheckedFileError:
                continue
        end = await log_position(log, after, shard, (await log.state(shard)).last)
        assert end is not None
        try:
            write_acknowledged(path, Acknowledged(after.id, shard, end.offset, end.total, end.record_crc,
                                                  previous.losses if previous else ()))
        except OSError as exc:
            raise DataDirError(f"--data-dir {datadir.path}: cannot write {path} ({os_problem(exc)})") from None
    datadir.record_layout(after.id, after.shards)
    datadir.clear_retiring()
