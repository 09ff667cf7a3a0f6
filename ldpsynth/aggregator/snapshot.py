"""A shard worker's snapshot: what its id runs and statistics reflect, at which log sequence.

A snapshot is a set of :mod:`~ldpsynth.aggregator.checked_file` files in the worker's directory:

* ``MANIFEST``: the layout and shard it belongs to, the log sequence it reflects (``offset``), the
  shard's reports up to there (``total``), the state file and, per collection, its card digest
  and its id run files;
* a *state* file: per collection its domain sizes, stored rows and the sufficient statistics
  (counts per cell), and the quota counters of every (collection, credential);
* the id *run* files (:mod:`~ldpsynth.aggregator.idstore`).

Each file is checksummed and written atomically, and the manifest is written last, so a crash at
any moment leaves the previous snapshot or the new one, and a damaged or foreign file is detected.
A snapshot is a view the log can rebuild: a worker that finds none, or one that fails its checks,
replays the log from its first record (and says so in its log).

In a cluster the files are also uploaded to the layout's object store
(:class:`~ldpsynth.aggregator.jetstream.SnapshotBucket`, replicated like the log), so a worker
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

from ldpsynth.shared.statistics import SufficientStatistics

from .checked_file import CheckedFileError, read_checked, write_checked

MANIFEST = "MANIFEST"
MANIFEST_KIND = "ldpsynth.shard-manifest/1"
STATE_KIND = "ldpsynth.shard-state/1"

QuotaKey = tuple[str, str]


def collection_key(name: str) -> str:
    """A file-name-safe key of a collection name."""
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[:12]


@dataclass(frozen=True)
class CollectionSnapshot:
    card: str
    runs: tuple[str, ...]
    rows: int
    stats: SufficientStatistics


@dataclass(frozen=True)
class Snapshot:
    """A verified snapshot (run files named, not yet opened)."""

    layout: str
    shard: int
    offset: int
    total: int
    state_file: str
    collections: Mapping[str, CollectionSnapshot]
    quota: Mapping[QuotaKey, int]

    @property
    def files(self) -> list[str]:
        """Every file of the snapshot, the manifest last."""
        return [run for c in self.collections.values() for run in c.runs] + [self.state_file, MANIFEST]


def write_state(directory: Path, layout: str, shard: int, offset: int,
                collections: Mapping[str, tuple[int, SufficientStatistics]], quota: Mapping[QuotaKey, int]) -> str:
    """Write the statistics and quota counters at ``offset``; return the new state file's name."""
    arrays: dict[str, np.ndarray] = {}
    described: dict[str, Any] = {}
    for i, (name, (rows, stats)) in enumerate(sorted(collections.items())):
        described[name] = {"index": i, "rows": rows, "public": stats.public_domain_size,
                           "private": stats.domain_size}
        arrays[f"{i}.keys"], arrays[f"{i}.codes"], arrays[f"{i}.counts"] = stats.keys, stats.codes, stats.counts
    name = f"state-{offset}-{uuid.uuid4().hex[:8]}.bin"
    write_checked(directory / name, STATE_KIND,
                  {"layout": layout, "shard": shard, "offset": offset, "collections": described,
                   "quota": sorted([c, k, int(v)] for (c, k), v in quota.items())}, arrays)
    return name


def write_manifest(directory: Path, layout: str, shard: int, offset: int, total: int, state_file: str,
                   collections: Mapping[str, tuple[str, list[str]]]) -> None:
    """Write the manifest (last: it makes the snapshot current). ``collections[name] = (card digest, runs)``."""
    write_checked(directory / MANIFEST, MANIFEST_KIND, {
        "layout": layout, "shard": shard, "offset": offset, "total": total, "state": state_file,
        "collections": {name: {"card": card, "runs": list(runs)}
                        for name, (card, runs) in sorted(collections.items())}})


def read_snapshot(directory: Path, layout: str, shard: int) -> Snapshot | None:
    """The snapshot in ``directory`` after checking it (``None`` if there is no manifest).

    Raises :class:`~ldpsynth.aggregator.checked_file.CheckedFileError` if a file is damaged or
    belongs to another layout, shard or offset.
    """
    if not (directory / MANIFEST).exists():
        return None
    meta, _ = read_checked(directory / MANIFEST, MANIFEST_KIND)
    if (meta.get("layout"), meta.get("shard")) != (layout, shard):
        raise CheckedFileError(f"{directory / MANIFEST}: the snapshot of layout {meta.get('layout')}, shard "
                               f"{meta.get('shard')}, not of layout {layout}, shard {shard}")
    try:
        offset, total, state_file = int(meta["offset"]), int(meta["total"]), str(meta["state"])
        listed = {str(n): (str(c["card"]), tuple(str(r) for r in c["runs"])) for n, c in meta["collections"].items()}
    except (KeyError, TypeError, ValueError, AttributeError):
        raise CheckedFileError(f"{directory / MANIFEST}: malformed manifest") from None
    state, arrays = read_checked(directory / state_file, STATE_KIND, mmap=False)
    if (state.get("layout"), state.get("shard"), state.get("offset")) != (layout, shard, offset):
        raise CheckedFileError(f"{directory / state_file}: state of layout {state.get('layout')}, shard "
                               f"{state.get('shard')}, offset {state.get('offset')}; the manifest wants offset "
                               f"{offset}")
    collections = {}
    try:
        described = state["collections"]
        for name, (card, runs) in listed.items():
            d = described[name]
            i = int(d["index"])
            stats = SufficientStatistics(int(d["public"]), int(d["private"]), arrays[f"{i}.keys"].astype(np.int64),
                                         arrays[f"{i}.codes"].astype(np.int64), arrays[f"{i}.counts"].astype(np.int64))
            collections[name] = CollectionSnapshot(card, runs, int(d["rows"]), stats)
        quota = {(str(c), str(k)): int(v) for c, k, v in state["quota"]}
    except (KeyError, TypeError, ValueError):
        raise CheckedFileError(f"{directory / state_file}: does not describe the manifest's collections") from None
    return Snapshot(layout, shard, offset, total, state_file, collections, quota)
