"""Sealed reports: one report encrypted to the aggregator's public key with HPKE, for a shuffler to mix.

The shuffle model (encode, shuffle, analyze; Bittau et al., SOSP 2017; docs/contract.md §16): a
device seals each report on its own, so that a shuffler, which sees who sends what but cannot read
it, can mix the reports of many devices; the replicas open them once shuffled, and store them as
any report. Both sides of that agreement are here, with no network and no key storage:

* **The suite** (RFC 9180): DHKEM(X25519, HKDF-SHA256) (KEM id ``0x0020``), HKDF-SHA256 (KDF id
  ``0x0001``), AES-128-GCM (AEAD id ``0x0001``), base mode, single shot: ``enc || ct`` with a fresh
  ephemeral key per report, so two seals of one report share no byte a shuffler could match.
* **The key id**: the first 16 bytes of SHA-256(``suite_id || pkR``), with RFC 9180's
  ``suite_id = "HPKE" || I2OSP(kem_id, 2) || I2OSP(kdf_id, 2) || I2OSP(aead_id, 2)``: it names the
  suite and the key, so a batch sealed to another key is refused whole, before any opening.
* **The context**: ``info = "ldpsynth.v1/sealed-report" || 0x00 || collection name (UTF-8)``;
  ``aad`` is empty (RFC 9180 §8.1: a single-shot application binds its context in ``info``; both
  are authenticated). A report sealed for one collection does not open in another, nor under
  another protocol version.
* **The plaintext** (fixed length for a collection, so a ciphertext's length says nothing of what
  it holds)::

      offset   bytes  field
      0        1      v, the length of the mechanism version (1..255)
      1        v      the mechanism version, ASCII ("E/1")
      1+v      16     report id
      17+v     r      the report's private part: r = 8, a uint64 little-endian (E's perturbed code in
                      [0, |D|), a numeric mechanism's output index, HR's and OLH's numbers, each in its
                      layout's range); r = ceil(|D|/8), the bit set of OUE and SS
      17+v+r   8m     the m public codes, schema order, uint64 little-endian each

  A sealed report is ``enc`` (32 bytes) || the AES-128-GCM ciphertext of the plaintext with its
  16-byte tag: :func:`sealed_report_bytes` = 32 + 17 + v + r + 8m + 16 bytes (84 for one public
  attribute and ``"E/1"``). What a private part may hold is the collection's
  :class:`~ldpsynth.shared.mechanisms.registry.ReportLayout`, the same check as a batch sent in clear.

The HPKE itself is the ``cryptography`` package's (PyCA; :mod:`cryptography.hazmat.primitives.hpke`,
since 47.0), imported when a report is sealed or opened: the ``[shuffle]`` extra on a device, the
``[aggregator]`` extra on a replica. Everything else here (layouts, key ids, validity) is numpy.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ldpsynth.shared.errors import LdpsynthError, ValidationError
from ldpsynth.shared.mechanisms.registry import ReportLayout, layout_of, make_mechanism
from ldpsynth.shared.reports import REPORT_ID_BYTES, Reports
from ldpsynth.shared.schema import Schema

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

__all__ = [
    "KEM_ID",
    "KDF_ID",
    "AEAD_ID",
    "SUITE_NAME",
    "SUITE_ID",
    "ENC_BYTES",
    "PUBLIC_KEY_BYTES",
    "PRIVATE_KEY_BYTES",
    "TAG_BYTES",
    "KEY_ID_BYTES",
    "INFO_PREFIX",
    "SealingUnavailable",
    "require_hpke",
    "key_id",
    "info",
    "report_layout",
    "plaintext_bytes",
    "sealed_report_bytes",
    "SealingKey",
    "OpeningKey",
    "encode_plaintexts",
    "Decoded",
    "decode_plaintexts",
    "seal_reports",
    "split_sealed",
]

#: RFC 9180 identifiers of the suite (§7.1-7.3).
KEM_ID = 0x0020  # DHKEM(X25519, HKDF-SHA256)
KDF_ID = 0x0001  # HKDF-SHA256
AEAD_ID = 0x0001  # AES-128-GCM
SUITE_NAME = "DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM"
#: RFC 9180 §5.1 ``suite_id``.
SUITE_ID = b"HPKE" + struct.pack(">HHH", KEM_ID, KDF_ID, AEAD_ID)
#: Bytes of ``enc`` (the ephemeral X25519 public key), of a public key, of a private key, of the AEAD tag.
ENC_BYTES = 32
PUBLIC_KEY_BYTES = 32
PRIVATE_KEY_BYTES = 32
TAG_BYTES = 16
KEY_ID_BYTES = 16
#: What ``info`` starts with: the protocol (ldpsynth.v1) and what is sealed; then 0x00 and the collection.
INFO_PREFIX = b"ldpsynth.v1/sealed-report\x00"
_LE_U64 = np.dtype("<u8")

EXTRA_HINT = "sealed reports need the `cryptography` package (pip install 'ldpsynth[shuffle]')"


class SealingUnavailable(LdpsynthError):
    """The HPKE library is not installed (a device without the ``[shuffle]`` extra)."""


def _hpke() -> Any:
    try:
        from cryptography.hazmat.primitives import hpke
    except ImportError:
        raise SealingUnavailable(EXTRA_HINT) from None
    return hpke


def require_hpke() -> None:
    """Raise :class:`SealingUnavailable` now, naming the extra, unless the HPKE library is installed
    (a device checks before it charges its ledger for reports it could not seal)."""
    _hpke()


def _suite() -> Any:
    hpke = _hpke()
    return hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_128_GCM)


def key_id(public_key: bytes) -> bytes:
    """The 16-byte id of an X25519 public key under this suite: SHA-256(suite_id || pkR)[:16]."""
    if len(public_key) != PUBLIC_KEY_BYTES:
        raise ValidationError("public_key", f"{PUBLIC_KEY_BYTES} bytes (an X25519 public key)",
                              f"got {len(public_key)} bytes")
    return hashlib.sha256(SUITE_ID + bytes(public_key)).digest()[:KEY_ID_BYTES]


def info(collection: str) -> bytes:
    """The HPKE ``info`` of reports sealed for ``collection``."""
    return INFO_PREFIX + collection.encode("utf-8")


def report_layout(schema: Schema) -> ReportLayout:
    """The layout of a report of ``schema``'s mechanism (its private part in a plaintext)."""
    return layout_of(make_mechanism(schema.mechanism, schema.epsilon, schema.private_domain_size))


def _private_bytes(layout: ReportLayout) -> int:
    return layout.width if layout.bitmap else 8


def plaintext_bytes(schema: Schema, mechanism_version: str) -> int:
    """Bytes of one report's plaintext in ``schema``'s collection."""
    private = _private_bytes(report_layout(schema))
    return 1 + len(_version_bytes(mechanism_version)) + REPORT_ID_BYTES + private + 8 * len(schema.public_attributes)


def sealed_report_bytes(schema: Schema, mechanism_version: str) -> int:
    """Bytes of one sealed report (``enc || ct``) in ``schema``'s collection: every one has this length."""
    return ENC_BYTES + plaintext_bytes(schema, mechanism_version) + TAG_BYTES


def _version_bytes(mechanism_version: str) -> bytes:
    data = mechanism_version.encode("ascii", "replace")
    if not 1 <= len(data) <= 255 or not mechanism_version.isascii():
        raise ValidationError("mechanism_version", "1 to 255 ASCII characters", f"got {len(data)} characters")
    return data


@dataclass(frozen=True)
class SealingKey:
    """The public half, as a collection publishes it (``Collection.sealing``): enough to seal."""

    public_key: bytes

    def __post_init__(self) -> None:
        key_id(self.public_key)  # checks the length

    @property
    def key_id(self) -> bytes:
        return key_id(self.public_key)

    @property
    def suite(self) -> str:
        return SUITE_NAME

    def _pyca(self) -> X25519PublicKey:
        from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey
        return X25519PublicKey.from_public_bytes(self.public_key)


class OpeningKey:
    """The aggregator's private key (its storage is the aggregator's business): opens sealed reports."""

    def __init__(self, private_key: bytes):
        if len(private_key) != PRIVATE_KEY_BYTES:
            raise ValidationError("private_key", f"{PRIVATE_KEY_BYTES} bytes (an X25519 private key)",
                                  f"got {len(private_key)} bytes")
        _hpke()
        from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
        self._key: X25519PrivateKey = X25519PrivateKey.from_private_bytes(bytes(private_key))
        self.public = SealingKey(self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))

    @classmethod
    def generate(cls) -> OpeningKey:
        """A new key pair from the OS CSPRNG."""
        _hpke()
        from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
        from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
        raw = X25519PrivateKey.generate().private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        return cls(raw)

    def private_bytes(self) -> bytes:
        """The 32 raw bytes of the private key (for the key file only: never logged, never sent)."""
        from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
        return bytes(self._key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption()))

    @property
    def key_id(self) -> bytes:
        return self.public.key_id

    def __repr__(self) -> str:  # never the private key
        return f"OpeningKey(key_id={self.key_id.hex()})"

    def open_all(self, sealed: np.ndarray, collection: str, plaintext_length: int) -> tuple[np.ndarray, np.ndarray]:
        """Open every row of ``sealed`` (``(n, L)`` uint8, one sealed report per row).

        Returns ``(plaintexts, opened)``: ``(k, plaintext_length)`` uint8 of the reports that opened, in
        order, and the ``(n,)`` bool mask of which did. A report opens only if its tag verifies under
        this key and ``collection``'s ``info`` (tampered, another key's, another collection's, garbage:
        it does not), and its plaintext has the length given."""
        suite = _suite()
        from cryptography.exceptions import InvalidTag
        context = info(collection)
        key = self._key
        opened = np.zeros(len(sealed), bool)
        out = []
        for i, row in enumerate(sealed):
            try:
                plain = suite.decrypt(row.data, key, info=context)
            except (InvalidTag, ValueError):
                continue
            if len(plain) == plaintext_length:
                out.append(plain)
                opened[i] = True
        plaintexts = np.frombuffer(b"".join(out), np.uint8).reshape(len(out), plaintext_length)
        return plaintexts, opened


def encode_plaintexts(reports: Reports, mechanism_version: str) -> np.ndarray:
    """The plaintext of every report, ``(n, L)`` uint8 (one row each; the layout in the module docstring)."""
    version = _version_bytes(mechanism_version)
    n, m = len(reports), reports.public_codes.shape[1]
    v = len(version)
    private = reports.private_codes
    bitmap = private.ndim == 2  # a bit set per report (OUE, SS), else one number
    r = private.shape[1] if bitmap else 8
    out = np.empty((n, 1 + v + REPORT_ID_BYTES + r + 8 * m), np.uint8)
    out[:, 0] = v
    out[:, 1:1 + v] = np.frombuffer(version, np.uint8)
    start = 1 + v
    out[:, start:start + REPORT_ID_BYTES] = reports.report_ids
    start += REPORT_ID_BYTES
    out[:, start:start + r] = (private if bitmap else
                               np.ascontiguousarray(private, _LE_U64).view(np.uint8).reshape(n, 8))
    start += r
    if m:
        out[:, start:] = np.ascontiguousarray(reports.public_codes, _LE_U64).view(np.uint8).reshape(n, 8 * m)
    return out


@dataclass(frozen=True)
class Decoded:
    """What the plaintexts of a batch hold: the valid reports, and which plaintexts were invalid."""

    reports: Reports
    valid: np.ndarray  # (k,) bool over the plaintexts given

    @property
    def invalid(self) -> int:
        return int((~self.valid).sum())


def decode_plaintexts(plaintexts: np.ndarray, schema: Schema, mechanism_version: str) -> Decoded:
    """Decode and check ``(k, L)`` plaintexts against the collection: a plaintext is *valid* when it
    names ``mechanism_version``, its private part is a report of the collection's layout and every public code
    lies in its range (the checks of a device batch, report by report); the valid ones are returned as reports,
    in order."""
    version = _version_bytes(mechanism_version)
    k = len(plaintexts)
    v, m = len(version), len(schema.public_attributes)
    layout = report_layout(schema)
    r = _private_bytes(layout)
    expected = 1 + v + REPORT_ID_BYTES + r + 8 * m
    if plaintexts.ndim != 2 or plaintexts.shape[1] != expected:
        raise ValidationError("plaintexts", f"rows of {expected} bytes", f"got shape {plaintexts.shape}")
    header = np.frombuffer(bytes([v]) + version, np.uint8)
    valid = (plaintexts[:, :1 + v] == header).all(axis=1)
    start = 1 + v
    ids = plaintexts[:, start:start + REPORT_ID_BYTES]
    start += REPORT_ID_BYTES
    raw = np.ascontiguousarray(plaintexts[:, start:start + r])
    private = raw if layout.bitmap else raw.view(_LE_U64).reshape(k)
    valid &= layout.valid_rows(private)
    start += r
    public = np.ascontiguousarray(plaintexts[:, start:]).view(_LE_U64).reshape(k, m)
    for j, attr in enumerate(schema.public_attributes):
        valid &= public[:, j] < np.uint64(attr.size)
    kept = private[valid] if layout.bitmap else private[valid].astype(np.int64)
    reports = Reports(np.ascontiguousarray(ids[valid]), kept, public[valid].astype(np.int64))
    return Decoded(reports, valid)


def seal_reports(key: SealingKey, collection: str, mechanism_version: str, reports: Reports) -> np.ndarray:
    """Seal every report on its own to ``key`` for ``collection``: ``(n, sealed_report_bytes)`` uint8.

    The plaintexts are laid out at once (numpy); each seal is one HPKE single-shot encryption with a
    fresh ephemeral key from the OS CSPRNG (``cryptography``), so sealing the same report twice
    gives two unrelated ciphertexts."""
    plaintexts = encode_plaintexts(reports, mechanism_version)
    n = len(plaintexts)
    width = ENC_BYTES + plaintexts.shape[1] + TAG_BYTES
    if n == 0:
        return np.zeros((0, width), np.uint8)
    suite = _suite()
    public, context = key._pyca(), info(collection)
    sealed = b"".join([suite.encrypt(row.data, public, info=context) for row in plaintexts])
    out = np.frombuffer(sealed, np.uint8)
    if out.size != n * width:  # the library's layout (enc || ct) is the contract's: checked, not assumed
        raise AssertionError(f"HPKE output of {out.size} bytes for {n} reports of {width} bytes")
    return out.reshape(n, width)


def split_sealed(data: bytes, width: int, field: str = "reports") -> np.ndarray:
    """``n x width`` bytes as an ``(n, width)`` uint8 view; ValidationError unless a non-zero multiple."""
    if not data or len(data) % width:
        raise ValidationError(field, f"a non-zero multiple of {width} bytes (sealed reports of this collection)",
                              f"got {len(data)} bytes")
    return np.frombuffer(data, np.uint8).reshape(len(data) // width, width)

