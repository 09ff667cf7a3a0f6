"""Conversions between domain types and the wire messages of ``proto/ldpsynth/v1``.

``to_proto``/``from_proto`` pairs, tested by round trips. Parsing is strict: a malformed
message raises :class:`~ldpsynth.shared.errors.ValidationError` naming the field (the server
maps it to INVALID_ARGUMENT), never a generic exception.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.reports import REPORT_ID_BYTES, Reports
from ldpsynth.shared.schema import MAX_DOMAIN_SIZE, Schema
from ldpsynth.shared.validation import check_codes
from ldpsynth.shared.wire import collection_pb2 as pb

__all__ = [
    "FIELD_HEADER_BYTES",
    "report_bytes",
    "rows_that_fit",
    "Limits",
    "CollectionInfo",
    "reports_to_proto",
    "reports_from_proto",
]

_LE_U64 = np.dtype("<u8")
#: Bound on the bytes a length-delimited field (bytes, string, sub-message) adds to a message besides
#: its payload: a one-byte tag and a length varint (at most 5 bytes below 2^35).
FIELD_HEADER_BYTES = 1 + 5


def report_bytes(public_attributes: int) -> int:
    """Wire bytes of one report: a 16-byte id and 8 bytes per code (the private one and each public one)."""
    return REPORT_ID_BYTES + 8 * (1 + public_attributes)


def rows_that_fit(limit: int, envelope: int, row_bytes: int, columns: int) -> int:
    """Rows of ``row_bytes`` each that fit a message of at most ``limit`` bytes besides its ``envelope``
    (the other fields) and the headers of its ``columns`` length-delimited columns: the one message-size
    rule of device batches, export chunks and answer pages."""
    return (limit - envelope - columns * FIELD_HEADER_BYTES) // row_bytes


@dataclass(frozen=True)
class Limits:
    """Server limits published with a collection."""

    max_rows_per_client: int = 0  # 0: unlimited
    max_batch_reports: int = 65536
    max_message_bytes: int = 64 * 1024 * 1024

    def to_proto(self) -> pb.Limits:
        return pb.Limits(max_rows_per_client=self.max_rows_per_client, max_batch_reports=self.max_batch_reports,
                         max_message_bytes=self.max_message_bytes)

    @classmethod
    def from_proto(cls, msg: pb.Limits) -> Limits:
        return cls(int(msg.max_rows_per_client), int(msg.max_batch_reports), int(msg.max_message_bytes))


@dataclass(frozen=True)
class CollectionInfo:
    """What ``GetCollection`` returns: the verified card (with its schema) and the limits."""

    card: MechanismCard
    limits: Limits

    @property
    def schema(self) -> Schema:
        return self.card.schema

    def to_proto(self) -> pb.Collection:
        return pb.Collection(name=self.card.schema.name, schema_json=self.card.schema.dumps(),
                             card_json=self.card.dumps(), mechanism_version=self.card.version,
                             limits=self.limits.to_proto())

    @classmethod
    def from_proto(cls, msg: pb.Collection) -> CollectionInfo:
        card = MechanismCard.from_json(msg.card_json)
        if card.schema.name != msg.name or card.version != msg.mechanism_version:
            raise ValidationError("collection", "a card whose schema name and version match the message",
                                  "inconsistent collection message")
        return cls(card, Limits.from_proto(msg.limits))


def _column(data: bytes, n: int, field: str) -> np.ndarray:
    if len(data) != 8 * n:
        raise ValidationError(field, f"{n} little-endian uint64 codes ({8 * n} bytes)", f"got {len(data)} bytes")
    return check_codes(np.frombuffer(data, dtype=_LE_U64), field, MAX_DOMAIN_SIZE)


def reports_to_proto(reports: Reports, collection: str, mechanism_version: str, sequence: int) -> pb.ReportBatch:
    """Encode a batch (columnar, little-endian) for ``SubmitReports``."""
    return pb.ReportBatch(
        collection=collection,
        mechanism_version=mechanism_version,
        sequence=sequence,
        report_ids=np.ascontiguousarray(reports.report_ids, dtype=np.uint8).tobytes(),
        private_codes=np.ascontiguousarray(reports.private_codes, dtype=_LE_U64).tobytes(),
        public_codes=[np.ascontiguousarray(reports.public_codes[:, j], dtype=_LE_U64).tobytes()
                      for j in range(reports.public_codes.shape[1])],
    )


def reports_from_proto(msg: pb.ReportBatch, schema: Schema) -> Reports:
    """Decode and validate a batch against ``schema`` (shapes and every code's range)."""
    ids = msg.report_ids
    if len(ids) % REPORT_ID_BYTES:
        raise ValidationError("report_ids", f"a multiple of {REPORT_ID_BYTES} bytes", f"got {len(ids)} bytes")
    n = len(ids) // REPORT_ID_BYTES
    if n == 0:
        raise ValidationError("report_ids", "at least one report per batch", "empty batch")
    m = len(schema.public_attributes)
    if len(msg.public_codes) != m:
        raise ValidationError("public_codes", f"{m} columns (one per public attribute)",
                              f"got {len(msg.public_codes)}")
    private = _column(msg.private_codes, n, "private_codes")
    public = np.empty((n, m), np.int64)
    for j, attr in enumerate(schema.public_attributes):
        public[:, j] = _column(msg.public_codes[j], n, f"public_codes[{attr.name}]")
    reports = Reports(np.frombuffer(ids, dtype=np.uint8).reshape(n, REPORT_ID_BYTES), private, public)
    return reports.validate(schema)
