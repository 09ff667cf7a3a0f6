"""The deduplication index on disk: one collection's stored report ids in one shard.

Exactly-once delivery needs "is this report id already stored?" for every incoming report. The
ids are random 128-bit numbers, so a B-tree on disk rewrites nearly every leaf page at each
commit once it outgrows memory, and a key-value store binding answers one Python call per key, far
slower than a vectorised search. The index is therefore
the in-memory :class:`~ldpsynth.aggregator.storage.idindex.IdIndex` made durable as a log-structured set
of **runs**:

* new ids go to an in-memory *tail* (bounded: the shard worker flushes it every
  ``flush_ids`` ids, see :mod:`~ldpsynth.aggregator.storage.snapshots`);
* a flush writes the tail as one immutable run file (the ids sorted by their first 64 bits,
  :mod:`~ldpsynth.aggregator.storage.checked_file` format: checksummed, written atomically);
* runs are merged like a binary counter (a run is merged into the one before it when that one is
  at most twice its size), so a shard holds :math:`O(\\log n)` runs and each id is rewritten
  :math:`O(\\log n)` times; a merge streams both runs in chunks (bounded memory).

Each run is bound to the log it indexes: its header names the layout, the shard and the
collection, the log sequences whose ids it holds (``first``..``last``), its count and a SHA-256
of its ids; the snapshot's manifest lists each run by that :class:`RunEntry` and the file's
:class:`~ldpsynth.aggregator.storage.checked_file.Seal`, so a run of another directory, shard or time
put under a listed name is refused, never searched.

Lookups search every run (memory-mapped: the heap does not grow with the data; the page cache
keeps the hot pages) and the tail. Opening an index maps its run files after verifying their
checksums (one sequential read), instead of re-reading and sorting every stored id.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ldpsynth.aggregator.storage.checked_file import CheckedFileError, Seal, read_checked, write_checked
from ldpsynth.aggregator.storage.idindex import IdIndex, SortedIds, run_contains

RUN_KIND = "ldpsynth.id-run/2"
#: Ids merged per step of a streaming merge (2 x 16 MiB of temporaries).
MERGE_CHUNK = 1 << 20


@dataclass(frozen=True)
class RunOwner:
    """Whose ids a run holds: a layout's shard's collection."""

    layout: str
    shard: int
    collection: str


@dataclass(frozen=True)
class RunEntry:
    """How a manifest lists a run: file name and seal, and what the run says it holds."""

    file: str
    seal: Seal
    count: int
    digest: str
    first: int
    last: int

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "seal": self.seal.to_json(), "count": self.count, "digest": self.digest,
                "first": self.first, "last": self.last}

    @classmethod
    def from_json(cls, obj: Any) -> RunEntry:
        return cls(str(obj["file"]), Seal.from_json(obj["seal"]), int(obj["count"]), str(obj["digest"]),
                   int(obj["first"]), int(obj["last"]))


@dataclass(frozen=True)
class Run:
    """An immutable run file: ids sorted by ``hi``, ``lo`` alongside (memory maps)."""

    entry: RunEntry
    hi: np.ndarray
    lo: np.ndarray

    @property
    def file(self) -> str:
        return self.entry.file

    def __len__(self) -> int:
        return int(self.hi.size)


def run_file_name(collection_key: str) -> str:
    return f"ids-{collection_key}-{uuid.uuid4().hex[:16]}.run"


def _digest(hi: np.ndarray, lo: np.ndarray, chunk: int = MERGE_CHUNK) -> str:
    """SHA-256 of the run's ids: every ``hi``, then every ``lo`` (little-endian uint64)."""
    digest = hashlib.sha256()
    for half in (hi, lo):
        for start in range(0, half.size, chunk):
            digest.update(np.ascontiguousarray(half[start:start + chunk], "<u8").tobytes())
    return digest.hexdigest()


def _write(directory: Path, owner: RunOwner, key: str, first: int, last: int, hi: np.ndarray,
           lo: np.ndarray) -> RunEntry:
    name = run_file_name(key)
    digest = _digest(hi, lo)
    meta = {"layout": owner.layout, "shard": owner.shard, "collection": owner.collection, "first": first,
            "last": last, "count": int(hi.size), "digest": digest}
    seal = write_checked(directory / name, RUN_KIND, meta, {"hi": hi, "lo": lo})
    return RunEntry(name, seal, int(hi.size), digest, first, last)


def write_run(directory: Path, owner: RunOwner, key: str, first: int, last: int, hi: np.ndarray,
              lo: np.ndarray) -> Run:
    """Write ``(hi, lo)`` (sorted by ``hi``): the ids of ``owner`` in log sequences ``first..last``, as a
    new run file in ``directory``, and map it."""
    return open_run(directory, owner, _write(directory, owner, key, first, last, hi, lo))


def open_run(directory: Path, owner: RunOwner, entry: RunEntry) -> Run:
    """Map the run file ``entry`` lists after verifying it is that file and holds ``owner``'s ids
    (:class:`~ldpsynth.aggregator.storage.checked_file.CheckedFileError` otherwise)."""
    path = directory / entry.file
    meta, arrays = read_checked(path, RUN_KIND, seal=entry.seal)
    found = (meta.get("layout"), meta.get("shard"), meta.get("collection"), meta.get("first"), meta.get("last"),
             meta.get("count"), meta.get("digest"))
    wanted = (owner.layout, owner.shard, owner.collection, entry.first, entry.last, entry.count, entry.digest)
    if found != wanted:
        raise CheckedFileError(f"{path}: ids of layout {found[0]}, shard {found[1]}, collection {found[2]!r}, "
                               f"sequences {found[3]}..{found[4]}, not those the manifest lists")
    if arrays["hi"].size != entry.count:
        raise CheckedFileError(f"{path}: holds {arrays['hi'].size} ids, its header says {entry.count}")
    return Run(entry, arrays["hi"], arrays["lo"])


def merge_runs(directory: Path, owner: RunOwner, key: str, first: Run, second: Run,
               chunk: int = MERGE_CHUNK) -> Run:
    """Merge two runs into a new run file, streaming ``chunk`` ids at a time.

    Each step takes, from both runs, the ids up to the smaller of the two chunk ends (so every
    step consumes at least one whole chunk and the output stays sorted by ``hi``).
    """
    total = len(first) + len(second)
    scratch = directory / f".merge-{uuid.uuid4().hex[:16]}"
    hi_file = np.memmap(f"{scratch}.hi", np.uint64, "w+", shape=(max(total, 1),))
    lo_file = np.memmap(f"{scratch}.lo", np.uint64, "w+", shape=(max(total, 1),))
    out_hi, out_lo = hi_file[:total], lo_file[:total]
    try:
        i = j = k = 0
        na, nb = len(first), len(second)
        while i < na or j < nb:
            ia, jb = min(i + chunk, na), min(j + chunk, nb)
            if i < na and j < nb:
                pivot = min(first.hi[ia - 1], second.hi[jb - 1])
                ia = i + int(np.searchsorted(first.hi[i:ia], pivot, side="right"))
                jb = j + int(np.searchsorted(second.hi[j:jb], pivot, side="right"))
            hi = np.concatenate((first.hi[i:ia], second.hi[j:jb]))
            lo = np.concatenate((first.lo[i:ia], second.lo[j:jb]))
            order = np.argsort(hi, kind="stable")
            out_hi[k:k + hi.size] = hi[order]
            out_lo[k:k + hi.size] = lo[order]
            k += hi.size
            i, j = ia, jb
        hi_file.flush()
        lo_file.flush()
        entry = _write(directory, owner, key, min(first.entry.first, second.entry.first),
                       max(first.entry.last, second.entry.last), out_hi, out_lo)
    finally:
        del out_hi, out_lo, hi_file, lo_file
        for suffix in (".hi", ".lo"):
            Path(f"{scratch}{suffix}").unlink(missing_ok=True)
    return open_run(directory, owner, entry)


def merge_plan(runs: Sequence[Run]) -> tuple[int, int] | None:
    """The two adjacent runs to merge next (binary-counter rule), or ``None``."""
    for position in range(len(runs) - 1, 0, -1):
        if len(runs[position - 1]) <= 2 * len(runs[position]):
            return position - 1, position
    return None


class DiskIdIndex:
    """The stored ids of one collection in one shard: run files plus in-memory tails.

    ``frozen`` tails are being written as runs (still searched until the run replaces them).
    """

    def __init__(self, runs: Sequence[Run] = ()):
        self.runs: list[Run] = list(runs)
        self.frozen: list[IdIndex] = []
        self.tail = IdIndex()

    def __len__(self) -> int:
        return sum(len(r) for r in self.runs) + sum(len(f) for f in self.frozen) + len(self.tail)

    @property
    def memory_ids(self) -> int:
        """Ids held in memory (not yet on disk)."""
        return sum(len(f) for f in self.frozen) + len(self.tail)

    def contains(self, ids: SortedIds) -> np.ndarray:
        """Mask (in sorted order) of the ids already stored."""
        found = self.tail.contains(ids)
        for frozen in self.frozen:
            found |= frozen.contains(ids)
        for run in self.runs:
            found |= run_contains(run.hi, run.lo, ids)
        return found

    def add(self, ids: SortedIds) -> None:
        """Insert new distinct ids (the caller filtered repeats and stored ones)."""
        self.tail.add(ids)

    def freeze(self) -> IdIndex | None:
        """Start a flush: the tail becomes frozen (returned) and a new tail begins."""
        if not len(self.tail):
            return None
        frozen, self.tail = self.tail, IdIndex()
        self.frozen.append(frozen)
        return frozen

    def flushed(self, frozen: IdIndex, run: Run) -> None:
        """``frozen`` is now on disk as ``run``."""
        self.frozen.remove(frozen)
        self.runs.append(run)

    def replace(self, first: Run, second: Run, merged: Run) -> None:
        """Two adjacent runs were merged into ``merged``."""
        position = self.runs.index(first)
        if self.runs[position + 1] is not second:
            raise RuntimeError("runs changed during a merge")
        self.runs[position:position + 2] = [merged]


def remove_unreferenced(directory: Path, keep: set[str], prefix: str = "ids-") -> None:
    """Delete run files of ``directory`` that no manifest refers to (left by merges and crashes)."""
    for entry in os.scandir(directory):
        if entry.name.startswith(prefix) and entry.name not in keep:
            Path(entry.path).unlink(missing_ok=True)
