"""Conversions between domain types and the wire messages of ``proto/ldpsynth/v1``.

``to_proto``/``from_proto`` pairs, tested by round trips. Parsing is strict: a malformed
message raises :class:`~ldpsynth.shared.errors.ValidationError` naming the field (the server
maps it to INVALID_ARGUMENT), never a generic exception.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanisms.olh import OLH
from ldpsynth.shared.mechanisms.registry import REPORT_FIELDS, Mechanism, layout_of, name_of
from ldpsynth.shared.reports import REPORT_ID_BYTES, Reports, mechanism_of
from ldpsynth.shared.schema import MAX_DOMAIN_SIZE, Schema
from ldpsynth.shared.sealing import (
    AEAD_ID,
    KDF_ID,
    KEM_ID,
    PUBLIC_KEY_BYTES,
    SUITE_NAME,
    SealingKey,
    sealed_report_bytes,
)
from ldpsynth.shared.validation import check_codes
from ldpsynth.shared.wire import collection_pb2 as pb

__all__ = [
    "FIELD_HEADER_BYTES",
    "private_to_wire",
    "private_from_wire",
    "private_rows",
    "report_bytes",
    "rows_that_fit",
    "Limits",
    "CollectionInfo",
    "reports_to_proto",
    "reports_from_proto",
    "sealing_to_proto",
    "sealing_from_proto",
]

_LE_U64 = np.dtype("<u8")
#: Bound on the bytes a length-delimited field (bytes, string, sub-message) adds to a message besides
#: its payload: a one-byte tag and a length varint (at most 5 bytes below 2^35).
FIELD_HEADER_BYTES = 1 + 5


_ALL_FIELDS = sorted({f for fields in REPORT_FIELDS.values() for f, _, _ in fields})


def report_bytes(public_attributes: int, private_bytes: int = 8) -> int:
    """Wire bytes of one report: a 16-byte id, 8 bytes per public code and ``private_bytes`` for its private
    part (:func:`~ldpsynth.shared.mechanisms.registry.private_wire`; 8, E's code, by default)."""
    return REPORT_ID_BYTES + 8 * public_attributes + private_bytes


def private_to_wire(mechanism: Mechanism, reports: np.ndarray) -> dict[str, bytes]:
    """The wire fields of the private parts of ``reports`` (E's codes or the oracle's reports)."""
    name = name_of(mechanism)
    if isinstance(mechanism, OLH):
        words = np.asarray(reports).astype(np.uint64)
        shift = np.uint64(mechanism.hash_bits)
        return {"olh_seeds": (words >> shift).astype("<u8").tobytes(),
                "olh_buckets": (words & np.uint64(mechanism.hash_range - 1)).astype("<u2").tobytes()}
    ((field, _, dtype),) = REPORT_FIELDS[name]
    return {field: np.ascontiguousarray(reports, dtype=dtype).tobytes()}


def _field_array(data: bytes, n: int, width: int, dtype: str, field: str) -> np.ndarray:
    if len(data) != n * width:
        raise ValidationError(field, f"{n} reports of {width} bytes ({n * width} bytes)", f"got {len(data)} bytes")
    arr = np.frombuffer(data, dtype=dtype)
    return arr.reshape(n, width) if dtype == "u1" else arr


def private_rows(mechanism: Mechanism, message: Any) -> int:
    """How many reports the private fields of ``message`` hold (an ``ExportChunk``, which has no id column)."""
    field, size, _ = REPORT_FIELDS[name_of(mechanism)][0]
    width = size or layout_of(mechanism).width
    data = getattr(message, field)
    if len(data) % width:
        raise ValidationError(field, f"a multiple of {width} bytes (one report each)", f"got {len(data)} bytes")
    return len(data) // width


def private_from_wire(mechanism: Mechanism, message: Any, n: int) -> np.ndarray:
    """The private parts of the ``n`` reports of ``message`` (a ``ReportBatch`` or an ``ExportChunk``), checked:
    the mechanism's fields exactly n reports long, the others empty, every report in its range (else a
    :class:`ValidationError` naming the field, the position and the legal range)."""
    name = name_of(mechanism)
    own = REPORT_FIELDS[name]
    for field in _ALL_FIELDS:
        if field not in {f for f, _, _ in own} and getattr(message, field):
            raise ValidationError(field, f"empty for a collection of mechanism {name} (its reports travel in "
                                  f"{' and '.join(f for f, _, _ in own)})", f"got {len(getattr(message, field))} bytes")
    layout = layout_of(mechanism)
    if name == "E":
        return _column(message.private_codes, n, "private_codes", layout.bound)
    if isinstance(mechanism, OLH):
        seeds = _field_array(message.olh_seeds, n, 8, "<u8", "olh_seeds")
        buckets = _field_array(message.olh_buckets, n, 2, "<u2", "olh_buckets")
        seed_bits = 2 * mechanism.field_bits
        if seeds.size and int(seeds.max()) >> seed_bits:
            raise ValidationError("olh_seeds", f"seeds in [0, 2^{seed_bits} - 1] (the card's seed_bits)",
                                  "out of range", int(np.flatnonzero(seeds >> np.uint64(seed_bits))[0]))
        if buckets.size and int(buckets.max()) >= mechanism.hash_range:
            raise ValidationError("olh_buckets", f"buckets in [0, {mechanism.hash_range - 1}] (the card's hash_range)",
                                  "out of range", int(np.flatnonzero(buckets >= mechanism.hash_range)[0]))
        words = (seeds << np.uint64(mechanism.hash_bits)) | buckets.astype(np.uint64)
        return layout.check(words.astype(np.int64), "olh_seeds")
    ((field, size, dtype),) = own
    arr = _field_array(getattr(message, field), n, size or layout.width, dtype, field)
    return layout.check(arr if layout.bitmap else arr.astype(np.int64), field)



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


def sealing_to_proto(key: SealingKey, card: MechanismCard) -> pb.Sealing:
    """``Collection.sealing`` of ``card``'s collection under ``key``."""
    return pb.Sealing(suite=SUITE_NAME, kem_id=KEM_ID, kdf_id=KDF_ID, aead_id=AEAD_ID, public_key=key.public_key,
                      key_id=key.key_id, sealed_report_bytes=sealed_report_bytes(card.schema, card.version))


def sealing_from_proto(msg: pb.Sealing, card: MechanismCard) -> SealingKey:
    """The key of a ``Collection.sealing``, after checking it names this suite, that its key id is the
    public key's and that its report size is the collection's (a device seals nothing it cannot
    account for)."""
    if (msg.kem_id, msg.kdf_id, msg.aead_id) != (KEM_ID, KDF_ID, AEAD_ID):
        ids = ", ".join(f"0x{i:04x}" for i in (msg.kem_id, msg.kdf_id, msg.aead_id))
        raise ValidationError("sealing", f"the suite {SUITE_NAME} (ids 0x{KEM_ID:04x}, 0x{KDF_ID:04x}, "
                              f"0x{AEAD_ID:04x})", f"got ids {ids}")
    if len(msg.public_key) != PUBLIC_KEY_BYTES:
        raise ValidationError("sealing.public_key", f"{PUBLIC_KEY_BYTES} bytes (an X25519 public key)",
                              f"got {len(msg.public_key)} bytes")
    key = SealingKey(bytes(msg.public_key))
    if bytes(msg.key_id) != key.key_id:
        raise ValidationError("sealing.key_id", "SHA-256(suite_id || public_key)[0:16]", "does not match the key")
    expected = sealed_report_bytes(card.schema, card.version)
    if msg.sealed_report_bytes != expected:
        raise ValidationError("sealing.sealed_report_bytes", f"{expected} for this collection",
                              f"got {msg.sealed_report_bytes}")
    return key


@dataclass(frozen=True)
class CollectionInfo:
    """What ``GetCollection`` returns: the verified card (with its schema), the limits, and the
    aggregator's sealing key (``None``: it takes no sealed reports)."""

    card: MechanismCard
    limits: Limits
    sealing: SealingKey | None = None
    #: Why a published ``Collection.sealing`` is not usable here (another suite, a key id that does not
    #: match): only a device that seals refuses the collection for it (:meth:`sealing_key`).
    sealing_refused: str = ""

    def sealing_key(self) -> SealingKey:
        """The key to seal reports for this collection with; ValidationError when it publishes none
        or one this SDK cannot use (a device sending in clear never asks)."""
        if self.sealing_refused:
            raise ValidationError("sealing", "a sealing key of the suite this SDK seals with", self.sealing_refused)
        if self.sealing is None:
            raise ValidationError("shuffler", "a collection that publishes a sealing key (Collection.sealing)",
                                  f"collection {self.schema.name!r} takes no sealed reports; submit without a "
                                  "shuffler to send in clear")
        return self.sealing

    @property
    def schema(self) -> Schema:
        return self.card.schema

    def to_proto(self) -> pb.Collection:
        msg = pb.Collection(name=self.card.schema.name, schema_json=self.card.schema.dumps(),
                            card_json=self.card.dumps(), mechanism_version=self.card.version,
                            limits=self.limits.to_proto())
        if self.sealing is not None:
            msg.sealing.CopyFrom(sealing_to_proto(self.sealing, self.card))
        return msg

    @classmethod
    def from_proto(cls, msg: pb.Collection) -> CollectionInfo:
        card = MechanismCard.from_json(msg.card_json)
        if card.schema.name != msg.name or card.version != msg.mechanism_version:
            raise ValidationError("collection", "a card whose schema name and version match the message",
                                  "inconsistent collection message")
        sealing, refused = None, ""
        if msg.HasField("sealing"):
            try:
                sealing = sealing_from_proto(msg.sealing, card)
            except ValidationError as exc:  # refused by a device that seals, not by one that sends in clear
                refused = str(exc)
        return cls(card, Limits.from_proto(msg.limits), sealing, refused)


def _column(data: bytes, n: int, field: str, size: int = MAX_DOMAIN_SIZE) -> np.ndarray:
    """``n`` little-endian uint64 codes, each in ``[0, size)``, as int64 (checked once, before the cast)."""
    if len(data) != 8 * n:
        raise ValidationError(field, f"{n} little-endian uint64 codes ({8 * n} bytes)", f"got {len(data)} bytes")
    return check_codes(np.frombuffer(data, dtype=_LE_U64), field, size)


def reports_to_proto(reports: Reports, collection: str, mechanism_version: str, sequence: int,
                     mechanism: Mechanism | None = None) -> pb.ReportBatch:
    """Encode a batch (columnar, little-endian) for ``SubmitReports``; ``mechanism`` says where the private
    parts go (:data:`REPORT_FIELDS`; None: E's ``private_codes``)."""
    private = ({"private_codes": np.ascontiguousarray(reports.private_codes, dtype=_LE_U64).tobytes()}
               if mechanism is None else private_to_wire(mechanism, reports.private_codes))
    return pb.ReportBatch(
        collection=collection,
        mechanism_version=mechanism_version,
        sequence=sequence,
        report_ids=np.ascontiguousarray(reports.report_ids, dtype=np.uint8).tobytes(),
        public_codes=[np.ascontiguousarray(reports.public_codes[:, j], dtype=_LE_U64).tobytes()
                      for j in range(reports.public_codes.shape[1])],
        **private,
    )


def reports_from_proto(msg: pb.ReportBatch, schema: Schema) -> Reports:
    """Decode and validate a batch against ``schema`` (shapes and every code's range; the private parts in
    the fields of the schema's mechanism, :func:`private_from_wire`)."""
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
    private = private_from_wire(mechanism_of(schema), msg, n)
    public = np.empty((n, m), np.int64)
    for j, attr in enumerate(schema.public_attributes):
        public[:, j] = _column(msg.public_codes[j], n, f"public_codes[{attr.name}]", attr.size)
    # Every column was checked against its own range above (the checks Reports.validate makes).
    return Reports(np.frombuffer(ids, dtype=np.uint8).reshape(n, REPORT_ID_BYTES), private, public)
