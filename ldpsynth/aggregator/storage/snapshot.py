"""A shard worker's snapshot: what its id runs and statistics reflect, at which log sequence.

A snapshot is a set of :mod:`~ldpsynth.aggregator.storage.checked_file` files in the worker's directory:

* ``MANIFEST``: the layout and shard it belongs to, the log sequence it reflects (``offset``), the
  shard's reports up to there (``total``), the CRC-32 of the log's record at ``offset``, the state
  file and, per collection, its card digest, rows and id run files, each file bound by its
  :class:`~ldpsynth.aggregator.storage.checked_file.Seal` (size and CRC-32), each run also by what it
  says it holds (:class:`~ldpsynth.aggregator.storage.idstore.RunEntry`);
* a *state* file: per collection its domain sizes, stored rows, the sufficient statistics
  (counts per cell; a frequency oracle's collection: per public key its reports and their tally) and
  the runs of log records holding its reports (:mod:`~ldpsynth.aggregator.storage.record_ranges`), and
  the quota counters of every (collection, credential);
* the id *run* files (:mod:`~ldpsynth.aggregator.storage.idstore`).

Each file is checksummed and written atomically, and the manifest is written last, so a crash at
any moment leaves the previous snapshot or the new one. :func:`read_snapshot` refuses a file that
is damaged, of another layout, shard or sequence, or intact but not the file the manifest lists
(another directory's, an earlier one), a snapshot of the format before these identities (kind
``/1``) and a state file without the record runs (kind ``/2``); the worker then checks the snapshot
against the log itself (the record at ``offset`` must be the one the snapshot was taken at). A
snapshot is a view the log can rebuild: a worker that finds none, or one that fails a check,
replays the log from its first record and says so (:mod:`~ldpsynth.aggregator.storage.refusals`).

In a cluster the files are also uploaded to the layout's object store
(:class:`~ldpsynth.aggregator.storage.snapshot_bucket.SnapshotBucket`, replicated like the log), so a worker
restarted on another node downloads the last snapshot instead of replaying everything.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ldpsynth.aggregator.storage.checked_file import CheckedFileError, Seal, read_checked, write_checked
from ldpsynth.aggregator.storage.idstore import RunEntry
from ldpsynth.aggregator.storage.record_ranges import RecordRanges
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.estimators.tallies import KeyedTallies

MANIFEST = "MANIFEST"
MANIFEST_KIND = "ldpsynth.shard-manifest/2"
STATE_KIND = "ldpsynth.shard-state/3"
#: The state's kind of statistics of a frequency oracle's collection (E's counts have none: the format before).
TALLIES = "tallies"
#: The manifest kind of main 5612345 and before (files listed by name only).
OLD_MANIFEST_KIND = "ldpsynth.shard-manifest/1"

QuotaKey = tuple[str, str]


def collection_key(name: str) -> str:
    """A file-name-safe key of a collection name."""
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class TallyArrays:
    """A frequency oracle's tallies as a snapshot stores them (the shard worker binds them to its card's oracle:
    :meth:`~ldpsynth.shared.estimators.tallies.KeyedTallies.restore`)."""

    public_domain_size: int
    keys: np.ndarray
    sizes: np.ndarray
    tallies: np.ndarray


@dataclass(frozen=True)
class CollectionSnapshot:
    card: str
    runs: tuple[RunEntry, ...]
    rows: int
    stats: SufficientStatistics | TallyArrays
    records: RecordRanges


@dataclass(frozen=True)
class Position:
    """Where in the log a snapshot stands: sequence, reports up to it, CRC-32 of the record there."""

    offset: int
    total: int
    record_crc: int


@dataclass(frozen=True)
class Snapshot:
    """A verified snapshot (run files listed, not yet opened)."""

    layout: str
    shard: int
    position: Position
    state_file: str
    collections: Mapping[str, CollectionSnapshot]
    quota: Mapping[QuotaKey, int]

    @property
    def offset(self) -> int:
        return self.position.offset

    @property
    def total(self) -> int:
        return self.position.total

    @property
    def files(self) -> list[str]:
        """Every file of the snapshot, the manifest last."""
        return [run.file for c in self.collections.values() for run in c.runs] + [self.state_file, MANIFEST]


def _identity(layout: str, shard: int, position: Position) -> dict[str, Any]:
    return {"layout": layout, "shard": shard, "offset": position.offset, "total": position.total,
            "record_crc": position.record_crc}


def write_state(directory: Path, layout: str, shard: int, position: Position,
                collections: Mapping[str, tuple[int, SufficientStatistics | KeyedTallies, np.ndarray]],
                quota: Mapping[QuotaKey, int]) -> tuple[str, Seal]:
    """Write the statistics, record runs (:meth:`RecordRanges.to_array`) and quota counters at ``position``;
    return the new state file's name and seal."""
    arrays: dict[str, np.ndarray] = {}
    described: dict[str, Any] = {}
    for i, (name, (rows, stats, records)) in enumerate(sorted(collections.items())):
        described[name] = {"index": i, "rows": rows, "public": stats.public_domain_size,
                           "private": stats.domain_size}
        arrays[f"{i}.records"] = records
        if isinstance(stats, KeyedTallies):
            described[name]["kind"] = TALLIES
            arrays[f"{i}.keys"], arrays[f"{i}.sizes"] = stats.present_keys, stats.group_sizes
            arrays[f"{i}.tallies"] = stats.table
            continue
        arrays[f"{i}.keys"], arrays[f"{i}.codes"], arrays[f"{i}.counts"] = stats.keys, stats.codes, stats.counts
    name = f"state-{position.offset}-{uuid.uuid4().hex[:8]}.bin"
    seal = write_checked(directory / name, STATE_KIND,
                         {**_identity(layout, shard, position), "collections": described,
                          "quota": sorted([c, k, int(v)] for (c, k), v in quota.items())}, arrays)
    return name, seal


def write_manifest(directory: Path, layout: str, shard: int, position: Position, state: tuple[str, Seal],
                   collections: Mapping[str, tuple[str, int, list[RunEntry]]]) -> None:
    """Write the manifest (last: it makes the snapshot current). ``collections[name] = (card digest,
    rows, runs)``."""
    write_checked(directory / MANIFEST, MANIFEST_KIND, {
        **_identity(layout, shard, position), "state": {"file": state[0], "seal": state[1].to_json()},
        "collections": {name: {"card": card, "rows": rows, "runs": [r.to_json() for r in runs]}
                        for name, (card, rows, runs) in sorted(collections.items())}})


def snapshot_position(directory: Path, layout: str, shard: int) -> Position | None:
    """The position the manifest in ``directory`` claims for ``layout``'s ``shard``, whatever its
    format (also main 5612345's): a sequence that was durable in the log when it was written.
    ``None`` if there is none, or it is unreadable or of another layout or shard."""
    for kind in (MANIFEST_KIND, OLD_MANIFEST_KIND):
        try:
            meta, _ = read_checked(directory / MANIFEST, kind)
        except CheckedFileError:
            continue
        if (meta.get("layout"), meta.get("shard")) != (layout, shard):
            return None
        try:
            return Position(int(meta["offset"]), int(meta["total"]), int(meta.get("record_crc", -1)))
        except (KeyError, TypeError, ValueError):
            return None
    return None


def read_snapshot(directory: Path, layout: str, shard: int) -> Snapshot | None:
    """The snapshot in ``directory`` after checking it (``None`` if there is no manifest).

    Raises :class:`~ldpsynth.aggregator.storage.checked_file.CheckedFileError` if a file is damaged,
    belongs to another layout, shard or position, is not the file the manifest lists, or the
    snapshot is of main 5612345's format (no identities: it cannot be checked against the log).
    """
    if not (directory / MANIFEST).exists():
        return None
    try:
        meta, _ = read_checked(directory / MANIFEST, MANIFEST_KIND)
    except CheckedFileError:
        try:
            read_checked(directory / MANIFEST, OLD_MANIFEST_KIND)
        except CheckedFileError:
            pass
        else:
            raise CheckedFileError(f"{directory / MANIFEST}: written by an earlier ldpsynth (files listed by name "
                                   "only, no log identity)") from None
        raise
    if (meta.get("layout"), meta.get("shard")) != (layout, shard):
        raise CheckedFileError(f"{directory / MANIFEST}: the snapshot of layout {meta.get('layout')}, shard "
                               f"{meta.get('shard')}, not of layout {layout}, shard {shard}")
    try:
        position = Position(int(meta["offset"]), int(meta["total"]), int(meta["record_crc"]))
        state_file, state_seal = str(meta["state"]["file"]), Seal.from_json(meta["state"]["seal"])
        listed = {str(n): (str(c["card"]), int(c["rows"]), tuple(RunEntry.from_json(r) for r in c["runs"]))
                  for n, c in meta["collections"].items()}
    except (KeyError, TypeError, ValueError, AttributeError):
        raise CheckedFileError(f"{directory / MANIFEST}: malformed manifest") from None
    state, arrays = read_checked(directory / state_file, STATE_KIND, mmap=False, seal=state_seal)
    if any(state.get(k) != v for k, v in _identity(layout, shard, position).items()):
        raise CheckedFileError(f"{directory / state_file}: state of layout {state.get('layout')}, shard "
                               f"{state.get('shard')}, offset {state.get('offset')}; the manifest wants offset "
                               f"{position.offset}")
    collections = {}
    try:
        described = state["collections"]
        for name, (card, rows, runs) in listed.items():
            d = described[name]
            i = int(d["index"])
            if int(d["rows"]) != rows or sum(r.count for r in runs) != rows:
                raise CheckedFileError(f"{directory / MANIFEST}: collection {name!r} has {rows} rows, its state "
                                       f"{d['rows']}, its runs {sum(r.count for r in runs)} ids")
            if any(r.first < 1 or r.last > position.offset for r in runs):
                raise CheckedFileError(f"{directory / MANIFEST}: a run of {name!r} holds ids past sequence "
                                       f"{position.offset}")
            stats: SufficientStatistics | TallyArrays
            if d.get("kind") == TALLIES:
                sizes = arrays[f"{i}.sizes"].astype(np.int64)
                if int(sizes.sum()) != rows:
                    raise CheckedFileError(f"{directory / state_file}: collection {name!r} has {rows} rows, its "
                                           f"tallies {int(sizes.sum())} reports")
                stats = TallyArrays(int(d["public"]), arrays[f"{i}.keys"].astype(np.int64), sizes,
                                    np.array(arrays[f"{i}.tallies"], dtype=np.int64))
            else:
                stats = SufficientStatistics(int(d["public"]), int(d["private"]),
                                             arrays[f"{i}.keys"].astype(np.int64),
                                             arrays[f"{i}.codes"].astype(np.int64),
                                             arrays[f"{i}.counts"].astype(np.int64))
            collections[name] = CollectionSnapshot(card, runs, rows, stats,
                                                   RecordRanges.from_array(arrays[f"{i}.records"], position.offset))
        quota = {(str(c), str(k)): int(v) for c, k, v in state["quota"]}
    except (KeyError, TypeError, ValueError):
        raise CheckedFileError(f"{directory / state_file}: does not describe the manifest's collections") from None
    return Snapshot(layout, shard, position, state_file, collections, quota)
