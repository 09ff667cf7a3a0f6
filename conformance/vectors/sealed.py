"""sealed.json: HPKE-sealed reports (docs/contract.md §16), what must not open, sealed batches and their parts, and
the sealed reports of shuffled oracle and numeric collections (OLH, OUE, HR, HM, SW)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

import numpy as np

from ldpsynth.client import submit
from ldpsynth.shared import sealing
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.protocol import CollectionInfo, Limits
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import shuffler_pb2 as spb
from vectors.cards import SHUFFLED_MECHANISMS, shuffled_mechanism_schema
from vectors.common import FORMAT, WORKED_EXAMPLE, dec


def _hpke_suite() -> Any:
    """pyhpke, a second HPKE implementation with RFC 9180's DeriveKeyPair: the seals below are
    reproducible from their ephemeral ``ikm_e`` (tests/shared/test_sealing.py checks pyhpke against
    RFC 9180 A.1.1 and against the cryptography package the SDK seals with)."""
    from pyhpke import AEADId, CipherSuite, KDFId, KEMId
    return CipherSuite.new(KEMId.DHKEM_X25519_HKDF_SHA256, KDFId.HKDF_SHA256, AEADId.AES128_GCM)


def _derive(ikm: bytes) -> tuple[bytes, bytes]:
    """(private key, public key) of RFC 9180 DeriveKeyPair(ikm) for X25519."""
    pair = _hpke_suite().kem.derive_key_pair(ikm)
    return pair.private_key.to_private_bytes(), pair.public_key.to_public_bytes()


def _seal_with(ikm_e: bytes, public_key: bytes, info: bytes, plaintext: bytes) -> tuple[bytes, bytes]:
    """(enc, ct) of a base-mode single-shot seal with the ephemeral key DeriveKeyPair(ikm_e), empty aad."""
    suite = _hpke_suite()
    enc, sender = suite.create_sender_context(suite.kem.deserialize_public_key(public_key), info,
                                              eks=suite.kem.derive_key_pair(ikm_e))
    return enc, sender.seal(plaintext, aad=b"")


def _sealed_case(case_id: str, rng: random.Random, key: tuple[bytes, bytes], collection: str, version: str,
                 report_id: bytes, private: int, public: list[int]) -> dict[str, Any]:
    reports = Reports(np.frombuffer(report_id, np.uint8).reshape(1, 16), np.asarray([private], np.uint64),
                      np.asarray([public], np.uint64).reshape(1, len(public)))
    plaintext = sealing.encode_plaintexts(reports, version)[0].tobytes()
    ikm_e = rng.randbytes(32)
    context = sealing.info(collection)
    enc, ct = _seal_with(ikm_e, key[1], context, plaintext)
    return {"id": case_id, "collection": collection, "mechanism_version": version, "report_id": report_id.hex(),
            "private_code": dec(private), "public_codes": dec(public), "plaintext": plaintext.hex(),
            "info": context.hex(), "ikm_e": ikm_e.hex(), "enc": enc.hex(), "ct": ct.hex(), "sealed": (enc + ct).hex()}


def sealed_vectors() -> dict[str, Any]:
    rng = random.Random(31)
    ikm = bytes(range(32))
    key = _derive(ikm)
    other = _derive(bytes(range(32, 64)))
    demo = Schema.from_json(WORKED_EXAMPLE)
    card = MechanismCard.for_schema(demo)
    ids = [bytes(range(16)), bytes([0xff] * 16), bytes(16)]
    cases = [
        _sealed_case("worked-example-contract-16", rng, key, "demo", "E/1", ids[0], 3, [1]),
        _sealed_case("no-public-attribute", rng, key, "b", "E/1", ids[1], 1, []),
        _sealed_case("two-public-columns", rng, key, "mix", "E/1", ids[2], 335, [1, 4]),
        _sealed_case("largest-codes", rng, key, "wide", "E/1", ids[1], 2**28 - 1, [2**62 - 1]),
        _sealed_case("unicode-collection-name", rng, key, "données-é", "E/1", ids[0], 5, []),
    ]
    for i in range(3):
        cases.append(_sealed_case(f"seeded-{i}", rng, key, "ratings", "E/1", rng.randbytes(16), rng.randrange(5),
                                  [rng.randrange(1682)]))
    base = cases[0]
    sealed = bytes.fromhex(base["sealed"])
    flip = lambda data, at: data[:at] + bytes([data[at] ^ 1]) + data[at + 1:]  # noqa: E731
    must_not_open = [
        {"id": "tag-flipped", "why": "the last byte of the tag changed", "sealed": flip(sealed, len(sealed) - 1).hex()},
        {"id": "ciphertext-flipped", "why": "one byte of the ciphertext changed", "sealed": flip(sealed, 40).hex()},
        {"id": "enc-flipped", "why": "one byte of enc changed", "sealed": flip(sealed, 3).hex()},
        {"id": "another-collection", "why": "sealed for collection \"demo2\" (another info)",
         "sealed": _sealed_case("x", rng, key, "demo2", "E/1", ids[0], 3, [1])["sealed"]},
        {"id": "another-protocol-version", "why": "sealed with info \"ldpsynth.v2/sealed-report\\0demo\"",
         "sealed": b"".join(_seal_with(rng.randbytes(32), key[1], b"ldpsynth.v2/sealed-report\x00demo",
                                       bytes.fromhex(base["plaintext"]))).hex()},
        {"id": "another-key", "why": "sealed to another public key",
         "sealed": b"".join(_seal_with(rng.randbytes(32), other[1], sealing.info("demo"),
                                       bytes.fromhex(base["plaintext"]))).hex()},
        {"id": "non-empty-aad", "why": "sealed with aad \"demo\" (the contract's aad is empty)",
         "sealed": _aad_seal(rng.randbytes(32), key[1], sealing.info("demo"), bytes.fromhex(base["plaintext"]))},
        {"id": "zeros", "why": "84 zero bytes", "sealed": bytes(len(sealed)).hex()},
    ]
    plain = bytes.fromhex(base["plaintext"])
    invalid = []
    for case_id, why, bad in (
            ("another-mechanism-version", 'the version "E/2"', plain[:3] + b"2" + plain[4:]),
            ("private-code-is-domain-size", "private code 24 = |D| of demo", plain[:20] + (24).to_bytes(8, "little")
             + plain[28:]),
            ("public-code-out-of-range", "region code 2 (region has 2 values)", plain[:28] + (2).to_bytes(8, "little")),
            ("private-code-above-2^63", "private code 2^63 + 3", plain[:20] + (2**63 + 3).to_bytes(8, "little")
             + plain[28:])):
        enc, ct = _seal_with(rng.randbytes(32), key[1], sealing.info("demo"), bad)
        invalid.append({"id": case_id, "why": why, "plaintext": bad.hex(), "sealed": (enc + ct).hex()})
    by_id = {c["id"]: c for c in cases}
    demo_keys = demo.fold_public_codes(np.asarray([[1]], np.int64)).tolist()
    sealed_batches = [_sealed_batch(key[1], case_id, by_id, sequence, pool_key) for case_id, sequence, pool_key in (
        ("worked-example-contract-16", 7, demo_keys[0]),  # region 1: the public key 1
        ("no-public-attribute", 0, 0),  # no public attribute: the key 0, the field left out
        ("largest-codes", 2**64 - 1, 2**62 - 1))]  # one public attribute: its code is the key
    collection = CollectionInfo(card, Limits(max_rows_per_client=10), sealing.SealingKey(key[1])).to_proto()
    shuffled_acks = [{"sequence": dec(q), "accepted": a, "duplicates": d, "undecryptable": u, "invalid": i,
                      "hex": pb.ShuffledAck(sequence=q, accepted=a, duplicates=d, undecryptable=u,
                                            invalid=i).SerializeToString().hex()}
                     for q, a, d, u, i in ((7, 1, 0, 0, 0), (0, 5, 2, 9, 4), (2**64 - 1, 65536, 0, 0, 0))]
    sealed_acks = [{"sequence": dec(q), "accepted": a, "hex": spb.SealedAck(sequence=q, accepted=a)
                    .SerializeToString().hex()} for q, a in ((7, 1), (0, 4096))]
    return {"format": FORMAT, "file": "sealed",
            "suite": {"name": sealing.SUITE_NAME, "kem_id": sealing.KEM_ID, "kdf_id": sealing.KDF_ID,
                      "aead_id": sealing.AEAD_ID, "suite_id": sealing.SUITE_ID.hex(),
                      "info_prefix": sealing.INFO_PREFIX.hex()},
            "key": {"ikm": ikm.hex(), "private_key": key[0].hex(), "public_key": key[1].hex(),
                    "key_id": sealing.key_id(key[1]).hex()},
            "other_key": {"ikm": bytes(range(32, 64)).hex(), "public_key": other[1].hex()},
            "cases": cases, "must_not_open": must_not_open, "invalid": invalid,
            "sealed_batches": sealed_batches, "batch_parts": _batch_parts(),
            "collection": {"name": "demo", "card_json": card.dumps(),
                           "sealing": {"suite": sealing.SUITE_NAME, "kem_id": sealing.KEM_ID,
                                       "kdf_id": sealing.KDF_ID, "aead_id": sealing.AEAD_ID,
                                       "public_key": key[1].hex(), "key_id": sealing.key_id(key[1]).hex(),
                                       "sealed_report_bytes": sealing.sealed_report_bytes(demo, "E/1")},
                           "hex": collection.SerializeToString().hex()},
            "shuffled_acks": shuffled_acks, "sealed_acks": sealed_acks, "mechanism_cases": _mechanism_cases(key)}


def _mechanism_cases(key: tuple[bytes, bytes]) -> list[dict[str, Any]]:
    """Sealed reports of shuffled collections of other mechanisms than E (docs/contract.md §16): a number in 8
    bytes (OLH, HR, HM, SW), OUE's bit set in ceil(|D|/8) bytes; each report drawn in its layout's range (the
    least and largest too), ``report`` the number, or the bit set's little-endian integer (bit v: value v)."""
    rng = random.Random(47)
    out = []
    for mechanism, block in SHUFFLED_MECHANISMS:
        schema = Schema.from_json(shuffled_mechanism_schema(mechanism, block))
        card = MechanismCard.for_schema(schema)
        layout = sealing.report_layout(schema)
        version = card.version
        for which in ("least", "largest", "seeded"):
            if layout.bitmap:
                bits = {"least": 0, "largest": (1 << (8 * layout.width)) - 1,
                        "seeded": rng.getrandbits(8 * layout.width)}[which]
                bits &= (1 << schema.private_domain_size) - 1  # OUE's bits past |D| are zero
                private = np.frombuffer(bits.to_bytes(layout.width, "little"), np.uint8).reshape(1, layout.width)
                report = bits
            else:
                report = {"least": layout.low, "largest": layout.bound - 1,
                          "seeded": rng.randrange(layout.low, layout.bound)}[which]
                private = np.asarray([report], np.int64)
            report_id = rng.randbytes(16)
            public = rng.randrange(2)
            reports = Reports(np.frombuffer(report_id, np.uint8).reshape(1, 16), layout.check(private),
                              np.asarray([[public]], np.int64))
            plaintext = sealing.encode_plaintexts(reports, version)[0].tobytes()
            decoded = sealing.decode_plaintexts(np.frombuffer(plaintext, np.uint8).reshape(1, -1), schema, version)
            assert decoded.invalid == 0, (mechanism, which)
            ikm_e = rng.randbytes(32)
            enc, ct = _seal_with(ikm_e, key[1], sealing.info(schema.name), plaintext)
            out.append({"id": f"{mechanism}-{which}", "mechanism": mechanism, "card_json": card.dumps(),
                        "mechanism_version": version, "report_id": report_id.hex(), "report": dec(report),
                        "public_codes": dec([public]), "plaintext": plaintext.hex(),
                        "plaintext_bytes": sealing.plaintext_bytes(schema, version),
                        "sealed_report_bytes": sealing.sealed_report_bytes(schema, version),
                        "ikm_e": ikm_e.hex(), "sealed": (enc + ct).hex()})
    return out


def _sealed_batch(public_key: bytes, case_id: str, by_id: Mapping[str, dict[str, Any]], sequence: int,
                  pool_key: int) -> dict[str, Any]:
    """The SealedBatch of one sealed case, with its public key ``pool_key`` in clear."""
    case = by_id[case_id]
    batch = pb.SealedBatch(collection=case["collection"], key_id=sealing.key_id(public_key), sequence=sequence,
                           reports=bytes.fromhex(case["sealed"]), pool_key=pool_key)
    return {"id": case_id, "collection": case["collection"], "key_id": batch.key_id.hex(), "sequence": dec(sequence),
            "pool_key": dec(pool_key), "reports": [case_id], "hex": batch.SerializeToString().hex()}


def _batch_parts() -> list[dict[str, Any]]:
    """How a device cuts its sealed reports into batches of one public key each (``sealed_parts``): the reports'
    public keys and the capacity -> per batch, in order, its ``pool_key`` and the indices of its reports."""
    rng = random.Random(38)
    inputs = [("one-key", [0, 0, 0, 0, 0], 2), ("keys-in-order-of-first-appearance", [3, 1, 3, 0, 1, 3], 10),
              ("capacity-cuts-each-key", [5, 2, 5, 5, 2, 5, 5, 2], 2), ("capacity-1", [1, 0, 1], 1),
              ("large-keys", [2**62 - 1, 0, 2**62 - 1, 2**40], 3),
              ("seeded", [rng.randrange(4) for _ in range(40)], 3)]
    out = []
    for case_id, keys, capacity in inputs:
        rows = np.arange(len(keys), dtype=np.int64).reshape(-1, 1)
        parts = submit.sealed_parts(rows, np.asarray(keys, np.int64), capacity)
        out.append({"id": case_id, "public_keys": dec(keys), "capacity": capacity,
                    "batches": [{"pool_key": dec(k), "reports": part[:, 0].tolist()} for k, part in parts]})
    return out


def _aad_seal(ikm_e: bytes, public_key: bytes, info: bytes, plaintext: bytes) -> str:
    suite = _hpke_suite()
    enc, sender = suite.create_sender_context(suite.kem.deserialize_public_key(public_key), info,
                                              eks=suite.kem.derive_key_pair(ikm_e))
    return (enc + sender.seal(plaintext, aad=b"demo")).hex()
