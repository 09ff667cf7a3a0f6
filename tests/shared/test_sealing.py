"""The sealed-report envelope (ldpsynth.shared.sealing, docs/contract.md §16): layout, key ids, round
trips, and what does not open: tampered bytes, another key, another collection, garbage. Cross-checked
against a second HPKE implementation (pyhpke) and RFC 9180's own vector for this suite."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyhpke import AEADId, CipherSuite, KDFId, KEMId, KEMKeyPair

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.protocol import CollectionInfo, Limits, sealing_from_proto, sealing_to_proto
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.sealing import (
    ENC_BYTES,
    INFO_PREFIX,
    SUITE_ID,
    TAG_BYTES,
    OpeningKey,
    SealingKey,
    decode_plaintexts,
    encode_plaintexts,
    info,
    key_id,
    plaintext_bytes,
    seal_reports,
    sealed_report_bytes,
    split_sealed,
)

RATINGS = Schema.from_json({
    "name": "ratings", "epsilon": 1.0,
    "attributes": [{"name": "movie", "type": "integer", "min": 0, "max": 99, "public": True},
                   {"name": "rating", "type": "integer", "min": 1, "max": 5}]})
GRAPH = Schema.from_json({
    "name": "graph", "epsilon": 1.0,
    "attributes": [{"name": "i", "type": "integer", "min": 0, "max": 2047, "public": True},
                   {"name": "j", "type": "integer", "min": 0, "max": 2047, "public": True},
                   {"name": "edge", "type": "binary"}]})
PRIVATE_ONLY = Schema.from_json({"name": "only", "epsilon": 2.0,
                                 "attributes": [{"name": "x", "type": "integer", "min": 0, "max": 999}]})
VERSION = "E/1"


def reports_for(schema: Schema, n: int, rng: np.random.Generator) -> Reports:
    public = np.column_stack([rng.integers(0, a.size, n) for a in schema.public_attributes]) \
        if schema.public_attributes else np.zeros((n, 0), np.int64)
    return Reports(new_report_ids(n), rng.integers(0, schema.private_domain_size, n), public)


def open_and_decode(key: OpeningKey, sealed: np.ndarray, schema: Schema, collection: str | None = None):
    plaintexts, opened = key.open_all(sealed, collection or schema.name, plaintext_bytes(schema, VERSION))
    return opened, decode_plaintexts(plaintexts, schema, VERSION)


@pytest.fixture(scope="module")
def key() -> OpeningKey:
    return OpeningKey.generate()


@pytest.mark.parametrize("schema", [RATINGS, GRAPH, PRIVATE_ONLY], ids=lambda s: s.name)
def test_round_trip_every_report_opens_to_itself(schema: Schema, key: OpeningKey) -> None:
    rng = np.random.default_rng(1)
    reports = reports_for(schema, 300, rng)
    sealed = seal_reports(key.public, schema.name, VERSION, reports)
    m = len(schema.public_attributes)
    assert sealed.shape == (300, sealed_report_bytes(schema, VERSION))
    assert sealed_report_bytes(schema, VERSION) == ENC_BYTES + 1 + 3 + 16 + 8 * (1 + m) + TAG_BYTES
    opened, decoded = open_and_decode(key, sealed, schema)
    assert opened.all() and decoded.valid.all()
    np.testing.assert_array_equal(decoded.reports.report_ids, reports.report_ids)
    np.testing.assert_array_equal(decoded.reports.private_codes, reports.private_codes)
    np.testing.assert_array_equal(decoded.reports.public_codes, reports.public_codes)


def test_the_plaintext_layout_byte_by_byte() -> None:
    ids = np.arange(16, dtype=np.uint8).reshape(1, 16)
    plain = encode_plaintexts(Reports(ids, np.array([3]), np.array([[1, 2**40 + 5]])), "E/1")
    assert plain.tobytes().hex() == ("03" + b"E/1".hex() + bytes(range(16)).hex() + "0300000000000000"
                                     + "0100000000000000" + "0500000000010000")


def test_sealing_twice_shares_no_byte_pattern_and_every_report_of_a_collection_has_one_length(key) -> None:
    reports = reports_for(RATINGS, 1, np.random.default_rng(2))
    a, b = (seal_reports(key.public, "ratings", VERSION, reports) for _ in range(2))
    assert a.shape == b.shape and a[0, :ENC_BYTES].tobytes() != b[0, :ENC_BYTES].tobytes()
    assert a[0, ENC_BYTES:].tobytes() != b[0, ENC_BYTES:].tobytes()
    extremes = Reports(new_report_ids(2), np.array([0, 4]), np.array([[0], [99]]))
    assert seal_reports(key.public, "ratings", VERSION, extremes).shape[1] == a.shape[1]


def test_key_id_and_info_are_as_documented(key: OpeningKey) -> None:
    assert SUITE_ID == b"HPKE\x00\x20\x00\x01\x00\x01"
    assert key.key_id == hashlib.sha256(SUITE_ID + key.public.public_key).digest()[:16] == key.public.key_id
    assert info("ratings") == b"ldpsynth.v1/sealed-report\x00ratings" == INFO_PREFIX + b"ratings"
    assert "private" not in repr(key) and key.private_bytes().hex() not in repr(key)
    with pytest.raises(ValidationError, match="public_key"):
        key_id(b"\x00" * 31)
    with pytest.raises(ValidationError, match="private_key"):
        OpeningKey(b"\x00" * 33)


def test_tampered_reports_do_not_open_and_the_others_still_do(key: OpeningKey) -> None:
    reports = reports_for(RATINGS, 64, np.random.default_rng(3))
    sealed = seal_reports(key.public, "ratings", VERSION, reports).copy()
    width = sealed.shape[1]
    for i in range(0, 64, 2):  # flip one bit at a different place in every other report
        sealed[i, (i * 7) % width] ^= 1 << (i % 8)
    opened, decoded = open_and_decode(key, sealed, RATINGS)
    assert opened.tolist() == [i % 2 == 1 for i in range(64)]
    np.testing.assert_array_equal(decoded.reports.report_ids, reports.report_ids[1::2])


def test_another_key_another_collection_another_protocol_and_garbage_do_not_open(key: OpeningKey) -> None:
    reports = reports_for(RATINGS, 8, np.random.default_rng(4))
    other = OpeningKey.generate()
    width = sealed_report_bytes(RATINGS, VERSION)
    cases = {
        "another key": seal_reports(other.public, "ratings", VERSION, reports),
        "another collection": seal_reports(key.public, "ratings2", VERSION, reports),
        "random bytes": np.frombuffer(os.urandom(8 * width), np.uint8).reshape(8, width),
        "zeros": np.zeros((8, width), np.uint8),
        "a low-order point as enc": np.concatenate([np.zeros((8, ENC_BYTES), np.uint8),
                                                    seal_reports(key.public, "ratings", VERSION,
                                                                 reports)[:, ENC_BYTES:]], axis=1),
    }
    for name, sealed in cases.items():
        opened, decoded = open_and_decode(key, sealed, RATINGS)
        assert not opened.any(), name
        assert len(decoded.reports) == 0
    # Sealed under another protocol version's info: the same bytes otherwise.
    from cryptography.hazmat.primitives import hpke
    suite = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_128_GCM)
    plain = encode_plaintexts(reports, VERSION)[0].tobytes()
    v2 = suite.encrypt(plain, key.public._pyca(), info=b"ldpsynth.v2/sealed-report\x00ratings")
    opened, _ = open_and_decode(key, np.frombuffer(v2, np.uint8).reshape(1, -1), RATINGS)
    assert not opened.any()
    assert open_and_decode(key, np.frombuffer(suite.encrypt(plain, key.public._pyca(), info=info("ratings")),
                                                np.uint8).reshape(1, -1), RATINGS)[0].all()


def test_reports_that_open_to_something_invalid_are_marked_invalid_not_returned(key: OpeningKey) -> None:
    ids = new_report_ids(5)
    reports = Reports(ids, np.array([0, 5, 4, 2**63 + 1, 1]), np.array([[0], [0], [100], [0], [99]]))
    plain = encode_plaintexts(reports, VERSION)
    plain[4, 1:4] = np.frombuffer(b"E/2", np.uint8)  # another mechanism version, same length
    decoded = decode_plaintexts(plain, RATINGS, VERSION)
    assert decoded.valid.tolist() == [True, False, False, False, False] and decoded.invalid == 4
    np.testing.assert_array_equal(decoded.reports.report_ids, ids[:1])
    assert decoded.reports.private_codes.dtype == np.int64


def test_a_sealed_batch_must_be_a_non_zero_multiple_of_the_report_size() -> None:
    assert split_sealed(b"\x00" * 168, 84).shape == (2, 84)
    for data in (b"", b"\x00" * 83, b"\x00" * 85):
        with pytest.raises(ValidationError, match="multiple of 84"):
            split_sealed(data, 84)


def test_the_collection_publishes_its_key_and_a_device_checks_it(key: OpeningKey) -> None:
    card = MechanismCard.for_schema(RATINGS)
    info_ = CollectionInfo(card, Limits(), key.public)
    message = info_.to_proto()
    assert message.sealing.public_key == key.public.public_key and message.sealing.key_id == key.key_id
    assert (message.sealing.kem_id, message.sealing.kdf_id, message.sealing.aead_id) == (0x20, 1, 1)
    assert message.sealing.sealed_report_bytes == 84
    assert CollectionInfo.from_proto(message) == info_
    assert CollectionInfo.from_proto(CollectionInfo(card, Limits()).to_proto()).sealing is None
    for field, value in (("key_id", b"\x00" * 16), ("sealed_report_bytes", 85), ("aead_id", 3),
                         ("public_key", b"\x01" * 31)):
        bad = sealing_to_proto(key.public, card)
        setattr(bad, field, value)
        with pytest.raises(ValidationError, match="sealing"):
            sealing_from_proto(bad, card)
        # A device sending in clear still reads the collection; one that seals refuses it, saying why.
        message.sealing.CopyFrom(bad)
        read = CollectionInfo.from_proto(message)
        assert read.sealing is None and "sealing" in read.sealing_refused
        with pytest.raises(ValidationError, match="sealing"):
            read.sealing_key()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.binary(min_size=16, max_size=16), st.integers(0, 4), st.integers(0, 99)),
                min_size=1, max_size=20), st.text(min_size=1, max_size=20))
def test_round_trip_any_reports_any_collection_name(rows, name) -> None:
    key = _KEY
    reports = Reports(np.frombuffer(b"".join(r[0] for r in rows), np.uint8).reshape(-1, 16).copy(),
                      np.array([r[1] for r in rows]), np.array([[r[2]] for r in rows]))
    sealed = seal_reports(key.public, name, VERSION, reports)
    opened, decoded = open_and_decode(key, sealed, RATINGS, collection=name)
    assert opened.all()
    np.testing.assert_array_equal(decoded.reports.report_ids, reports.report_ids)
    np.testing.assert_array_equal(decoded.reports.private_codes, reports.private_codes)


_KEY = OpeningKey.generate()


# ----- a second implementation: pyhpke, checked against RFC 9180 A.1.1 --------------------------------


def _pyhpke_suite() -> CipherSuite:
    return CipherSuite.new(KEMId.DHKEM_X25519_HKDF_SHA256, KDFId.HKDF_SHA256, AEADId.AES128_GCM)


def test_pyhpke_reproduces_rfc_9180_a_1_1_for_this_suite() -> None:
    """RFC 9180 Appendix A.1.1: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM, base mode, the
    first encryption (sequence 0, aad "Count-0"). The conformance vectors' seals come from pyhpke."""
    suite = _pyhpke_suite()
    ephemeral = suite.kem.derive_key_pair(bytes.fromhex(
        "7268600d403fce431561aef583ee1613527cff655c1343f29812e66706df3234"))
    recipient = KEMKeyPair(
        suite.kem.deserialize_private_key(bytes.fromhex(
            "4612c550263fc8ad58375df3f557aac531d26850903e55a9f23f21d8534e8ac8")),
        suite.kem.deserialize_public_key(bytes.fromhex(
            "3948cfe0ad1ddb695d780e59077195da6c56506b027329794ab02bca80815c4d")))
    enc, sender = suite.create_sender_context(recipient.public_key, bytes.fromhex(
        "4f6465206f6e2061204772656369616e2055726e"), eks=ephemeral)
    assert enc.hex() == "37fda3567bdbd628e88668c3c8d7e97d1d1253b6d4ea6d44c150f741f1bf4431"
    ct = sender.seal(b"Beauty is truth, truth beauty", aad=b"Count-0")
    assert ct.hex() == ("f938558b5d72f1a23810b4be2ab4f84331acc02fc97babc53a52ae8218a355a9"
                        "6d8770ac83d07bea87e13c512a")


def test_each_implementation_opens_what_the_other_sealed(key: OpeningKey) -> None:
    suite = _pyhpke_suite()
    reports = reports_for(RATINGS, 20, np.random.default_rng(5))
    plaintexts = encode_plaintexts(reports, VERSION)
    # pyhpke seals (single shot, empty aad): ldpsynth opens.
    pk = suite.kem.deserialize_public_key(key.public.public_key)
    sealed = []
    for row in plaintexts:
        enc, sender = suite.create_sender_context(pk, info("ratings"))
        sealed.append(enc + sender.seal(row.tobytes(), aad=b""))
    opened, decoded = open_and_decode(key, np.frombuffer(b"".join(sealed), np.uint8).reshape(20, -1), RATINGS)
    assert opened.all()
    np.testing.assert_array_equal(decoded.reports.report_ids, reports.report_ids)
    # ldpsynth seals: pyhpke opens.
    sk = suite.kem.deserialize_private_key(key.private_bytes())
    for row, plain in zip(seal_reports(key.public, "ratings", VERSION, reports), plaintexts):
        recipient = suite.create_recipient_context(row[:ENC_BYTES].tobytes(), sk, info("ratings"))
        assert recipient.open(row[ENC_BYTES:].tobytes(), aad=b"") == plain.tobytes()


def test_a_sealing_key_is_its_32_bytes() -> None:
    with pytest.raises(ValidationError):
        SealingKey(b"\x00" * 33)
