"""Files that prove what they are: a kind, a JSON header, numpy arrays and a CRC-32 of it all.

The shard workers' snapshots (id runs, statistics, manifests) are written in this one format so
that a reader never serves a file that is truncated, damaged, of another kind or of another
shard: :func:`read_checked` verifies the magic, the kind, the length and the checksum before it
returns anything, and raises :class:`CheckedFileError` naming the file and what is wrong.

Layout (little-endian)::

    b"LDPSFILE"  u32 header length H  header JSON (H bytes, UTF-8)  padding to 64
    array 0 (raw, 64-byte aligned)  array 1  ...  u32 CRC-32 of every byte before it

The header holds ``{"kind", "meta", "arrays": [{"name", "dtype", "shape", "offset"}]}``. Arrays
are returned as read-only memory maps (``mmap=True``): a large id run costs page cache, not heap.
Writes go to a temporary file that is fsynced, renamed over the target, and the directory fsynced.

A file's :class:`Seal` (its size and the CRC-32 it ends with) is what a manifest binds it by: a
reader given the seal refuses a file that is intact but not the one that was listed (another
directory's file under the same name, an earlier file of the same kind).
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.files import fsync_directory

MAGIC = b"LDPSFILE"
_ALIGN = 64
_CRC_CHUNK = 1 << 24


class CheckedFileError(LdpsynthError):
    """A checked file is missing, truncated, damaged, or not the file that was expected."""


class Seal(NamedTuple):
    """A checked file's size in bytes and its CRC-32 (of every byte before the last four)."""

    size: int
    crc: int

    def to_json(self) -> dict[str, int]:
        return {"size": self.size, "crc": self.crc}

    @classmethod
    def from_json(cls, obj: Any) -> Seal:
        return cls(int(obj["size"]), int(obj["crc"]))


def _aligned(offset: int) -> int:
    return -(-offset // _ALIGN) * _ALIGN


def _layout(kind: str, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> tuple[bytes, list[int]]:
    """The header bytes and the arrays' offsets (the header's length fixes where the data starts,
    and the offsets are in the header: found by a fixed point, at most a few rounds)."""
    offsets = [0] * len(arrays)
    while True:
        specs = [{"name": name, "dtype": np.asarray(a).dtype.str, "shape": list(np.shape(a)), "offset": off}
                 for (name, a), off in zip(arrays.items(), offsets)]
        header = json.dumps({"kind": kind, "meta": meta, "arrays": specs}, sort_keys=True).encode("utf-8")
        position = _aligned(len(MAGIC) + 4 + len(header))
        fresh = []
        for a in arrays.values():
            fresh.append(position)
            position = _aligned(position + np.asarray(a).nbytes)
        if fresh == offsets:
            return header, offsets
        offsets = fresh


def write_checked(path: str | Path, kind: str, meta: Mapping[str, Any],
                  arrays: Mapping[str, np.ndarray] | None = None, *, mode: int = 0o666) -> Seal:
    """Write ``arrays`` with ``meta`` as a checked file of ``kind`` at ``path``, durably and atomically;
    return its seal. ``mode``: the new file's permissions (less the umask), from its creation on
    (0o600 for a secret: no moment where others could read it)."""
    path = Path(path)
    arrays = dict(arrays or {})
    header, offsets = _layout(kind, meta, arrays)
    tmp = path.with_name(path.name + ".tmp")
    with suppress(FileNotFoundError):
        tmp.unlink()  # a leftover of a crash: created afresh with ``mode``
    crc = 0
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "wb") as fh:
        def put(data: bytes | memoryview) -> None:
            nonlocal crc
            fh.write(data)
            crc = zlib.crc32(data, crc)

        put(MAGIC + struct.pack("<I", len(header)) + header)
        written = len(MAGIC) + 4 + len(header)
        for array, offset in zip(arrays.values(), offsets):
            put(b"\0" * (offset - written))
            data = np.ascontiguousarray(array)
            view = data.reshape(-1).view(np.uint8).data if data.size else memoryview(b"")
            for start in range(0, len(view), _CRC_CHUNK):
                put(view[start:start + _CRC_CHUNK])
            written = offset + data.nbytes
        fh.write(struct.pack("<I", crc))
        fh.flush()
        os.fsync(fh.fileno())
        size = fh.tell()
    os.replace(tmp, path)
    fsync_directory(path.parent)
    return Seal(size, crc)


def _crc_of(path: Path, length: int) -> int:
    crc = 0
    with open(path, "rb") as fh:
        remaining = length
        while remaining:
            data = fh.read(min(_CRC_CHUNK, remaining))
            if not data:
                break
            crc = zlib.crc32(data, crc)
            remaining -= len(data)
    return crc


def read_checked(path: str | Path, kind: str, mmap: bool = True,
                 seal: Seal | None = None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The ``meta`` and arrays of the checked file ``path`` of ``kind``, after verifying it whole.

    Raises :class:`CheckedFileError` (naming the file) if it is missing, unreadable, truncated,
    fails its checksum, is of another kind, or (``seal`` given) is not the file that was sealed.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(len(MAGIC) + 4)
            if len(head) < len(MAGIC) + 4 or head[:len(MAGIC)] != MAGIC:
                raise CheckedFileError(f"{path}: not an ldpsynth checked file (bad magic)")
            (length,) = struct.unpack("<I", head[len(MAGIC):])
            if len(MAGIC) + 4 + length + 4 > size:
                raise CheckedFileError(f"{path}: truncated (header length {length}, file size {size})")
            header_bytes = fh.read(length)
            fh.seek(size - 4)
            (stored,) = struct.unpack("<I", fh.read(4))
        if _crc_of(path, size - 4) != stored:
            raise CheckedFileError(f"{path}: checksum mismatch (the file is damaged or was altered)")
        if seal is not None and Seal(size, stored) != seal:
            raise CheckedFileError(f"{path}: not the file the manifest lists (size {size}, CRC-32 {stored:08x}; "
                                   f"listed: size {seal.size}, CRC-32 {seal.crc:08x}): a file of another "
                                   "directory or time under this name")
    except FileNotFoundError:
        raise CheckedFileError(f"{path}: missing") from None
    except OSError as exc:
        raise CheckedFileError(f"{path}: unreadable ({exc.strerror})") from None
    try:
        header = json.loads(header_bytes)
        specs = header["arrays"]
        found = header["kind"]
    except (ValueError, KeyError, TypeError):
        raise CheckedFileError(f"{path}: malformed header") from None
    if found != kind:
        raise CheckedFileError(f"{path}: a {found!r} file where a {kind!r} file was expected")
    arrays: dict[str, np.ndarray] = {}
    for spec in specs:
        dtype, shape, offset = np.dtype(spec["dtype"]), tuple(spec["shape"]), int(spec["offset"])
        count = int(np.prod(shape, dtype=np.int64))
        if offset + count * dtype.itemsize > size - 4:
            raise CheckedFileError(f"{path}: array {spec['name']!r} lies beyond the end of the file")
        if count == 0:
            arrays[spec["name"]] = np.zeros(shape, dtype)
        elif mmap:
            arrays[spec["name"]] = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)
        else:
            arrays[spec["name"]] = np.fromfile(path, dtype=dtype, count=count, offset=offset).reshape(shape)
    return header.get("meta", {}), arrays
