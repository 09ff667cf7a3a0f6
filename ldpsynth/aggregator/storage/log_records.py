"""Records of the replicated log: what a shard worker appends and what every reader verifies.

The log (one JetStream stream per shard, :mod:`~ldpsynth.aggregator.storage.jetstream`) is the store of
record: an acknowledged report is in it, exactly once. Each message is one record:

* a **genesis** record at stream sequence 1, naming the layout (its random id, the shard count)
  and the shard: a stream can never be mistaken for another shard's or another deployment's;
* a **reports** record per group commit: the reports a shard worker stored, in sections by
  collection, each with its collection's card digest (the codes mean nothing under another
  card), the reports' ids, public keys and perturbed private codes (little-endian, the smallest
  unsigned width fitting the domain; a frequency oracle's reports: its numbers likewise, its bit sets
  as ``width`` bytes each), and the quota charges of the credentials that sent them.

Every record carries the stream sequence it was written at and the number of reports of the
shard before it, and ends with a CRC-32 of everything before it. A reader checks all four, so a
flipped byte, a record moved to another position or shard, and a missing record are each
refused (:class:`LogCorruption`), never served.

Layout (little-endian)::

    b"LDPSLOG1"  u32 header length H  header JSON (H bytes)  body  u32 CRC-32

with body = for each section, ``ids (16 n) | keys (n x key width) | codes (n x code width)``.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.reports import REPORT_ID_BYTES

MAGIC = b"LDPSLOG1"
LAYOUT_FORMAT = "ldpsynth.log-layout/1"
GENESIS = "genesis"
REPORTS = "reports"
#: Fixed cost of a record per collection section (magic, lengths, checksum, header JSON).
RECORD_OVERHEAD_BYTES = 1024
#: Most bytes one report takes in a record (its id and two 8-byte codes).
REPORT_RECORD_BYTES = REPORT_ID_BYTES + 16


class LogCorruption(LdpsynthError):
    """A log record fails its checksum, or is not the record expected at its position."""


def code_dtype(size: int) -> np.dtype:
    """Smallest little-endian unsigned integer type holding codes ``0 .. size-1``."""
    for dtype in ("u1", "<u2", "<u4"):
        if size <= np.iinfo(dtype).max + 1:
            return np.dtype(dtype)
    return np.dtype("<u8")


def card_digest(card_json: str) -> str:
    """The identity of a mechanism card: SHA-256 of its canonical JSON (hex, 32 characters)."""
    return hashlib.sha256(card_json.encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class Section:
    """The reports of one collection in one record (int64 columns; ids ``(n, 16)`` uint8)."""

    collection: str
    card: str
    report_ids: np.ndarray
    public_keys: np.ndarray
    private_codes: np.ndarray
    quota: Mapping[str, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.private_codes.shape[0])


@dataclass(frozen=True)
class Record:
    """One log message, decoded and verified."""

    kind: str
    layout: str
    shard: int
    sequence: int
    before: int
    sections: tuple[Section, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def reports(self) -> int:
        return sum(len(s) for s in self.sections)


def _encode(header: dict[str, Any], body: Sequence[bytes]) -> bytes:
    head = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    data = b"".join([MAGIC, struct.pack("<I", len(head)), head, *body])
    return data + struct.pack("<I", zlib.crc32(data))


def encode_genesis(layout: str, shard: int, shards: int) -> bytes:
    """The first record of shard ``shard``'s stream (sequence 1)."""
    return _encode({"kind": GENESIS, "format": LAYOUT_FORMAT, "layout": layout, "shard": shard, "sequence": 1,
                    "before": 0, "meta": {"shards": shards}}, [])


def encode_reports(layout: str, shard: int, sequence: int, before: int, sections: Sequence[Section],
                   domains: Mapping[str, tuple[int, int, int]]) -> bytes:
    """A reports record to be written at stream ``sequence``; ``domains[collection]`` is the
    collection's (public domain size, bound of its private codes, bytes of a bit-set report or 0),
    which fix the column widths."""
    specs, body = [], []
    for s in sections:
        public_size, private_size, width = domains[s.collection]
        key_type, code_type = code_dtype(public_size), code_dtype(private_size) if not width else np.dtype("u1")
        spec = {"collection": s.collection, "card": s.card, "n": len(s), "key": key_type.str, "code": code_type.str,
                "quota": dict(s.quota)}
        if width:
            spec["width"] = width
        specs.append(spec)
        body += [np.ascontiguousarray(s.report_ids, np.uint8).tobytes(), s.public_keys.astype(key_type).tobytes(),
                 np.ascontiguousarray(s.private_codes, dtype=code_type).tobytes()]
    return _encode({"kind": REPORTS, "layout": layout, "shard": shard, "sequence": sequence, "before": before,
                    "sections": specs}, body)


def record_crc(data: bytes) -> int:
    """The CRC-32 a record ends with (its identity in a snapshot's or an acknowledgement's position)."""
    (crc,) = struct.unpack_from("<I", data, len(data) - 4)
    return int(crc)


def reports_per_record(max_bytes: int, collections: int, report_bytes: int = REPORT_RECORD_BYTES) -> int:
    """How many reports a record of ``collections`` sections can hold within ``max_bytes`` (at
    least one), counting every column at its widest (8-byte codes; ``report_bytes`` per report, the
    largest of the sections' collections: a frequency oracle's bit sets are wider)."""
    return max(1, (max_bytes - RECORD_OVERHEAD_BYTES * max(1, collections)) // max(report_bytes, REPORT_RECORD_BYTES))


def decode(data: bytes, *, layout: str, shard: int, sequence: int) -> Record:
    """Verify and decode the record read at stream ``sequence`` of shard ``shard``'s stream."""
    where = f"log of shard {shard}, sequence {sequence}"
    if len(data) < len(MAGIC) + 8 or data[:len(MAGIC)] != MAGIC:
        raise LogCorruption(f"{where}: not an ldpsynth log record")
    (stored,) = struct.unpack_from("<I", data, len(data) - 4)
    if zlib.crc32(memoryview(data)[:-4]) != stored:
        raise LogCorruption(f"{where}: checksum mismatch (the record is damaged or was altered)")
    (length,) = struct.unpack_from("<I", data, len(MAGIC))
    start = len(MAGIC) + 4
    try:
        header = json.loads(data[start:start + length])
        kind, found = header["kind"], (header["layout"], int(header["shard"]), int(header["sequence"]))
        before = int(header["before"])
    except (ValueError, KeyError, TypeError):
        raise LogCorruption(f"{where}: malformed record header") from None
    if found != (layout, shard, sequence):
        raise LogCorruption(f"{where}: the record belongs to layout {found[0]}, shard {found[1]}, sequence "
                            f"{found[2]} (a record of another stream or position)")
    if kind == GENESIS:
        return Record(kind, layout, shard, sequence, before, meta=header.get("meta", {}))
    if kind != REPORTS:
        raise LogCorruption(f"{where}: unknown record kind {kind!r}")
    position = start + length
    sections = []
    try:
        for spec in header["sections"]:
            n = int(spec["n"])
            key_type, code_type = np.dtype(spec["key"]), np.dtype(spec["code"])
            ids = np.frombuffer(data, np.uint8, n * REPORT_ID_BYTES, position).reshape(n, REPORT_ID_BYTES)
            position += n * REPORT_ID_BYTES
            keys = np.frombuffer(data, key_type, n, position).astype(np.int64)
            position += n * key_type.itemsize
            width = int(spec.get("width", 0))
            if width:       # a frequency oracle's bit sets
                codes = np.frombuffer(data, np.uint8, n * width, position).reshape(n, width)
                position += n * width
            else:
                codes = np.frombuffer(data, code_type, n, position).astype(np.int64)
                position += n * code_type.itemsize
            quota = {str(k): int(v) for k, v in spec["quota"].items()}
            sections.append(Section(str(spec["collection"]), str(spec["card"]), ids, keys, codes, quota))
    except (ValueError, KeyError, TypeError):
        raise LogCorruption(f"{where}: sections do not match the record's length") from None
    if position != len(data) - 4:
        raise LogCorruption(f"{where}: sections do not match the record's length")
    return Record(kind, layout, shard, sequence, before, tuple(sections))
