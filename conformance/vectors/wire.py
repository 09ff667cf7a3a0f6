"""wire.json: the protobuf messages of a device as hex, and the whole device path from rows to a batch."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.protocol import reports_to_proto
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wire import collection_pb2 as pb
from vectors.common import FORMAT, WORKED_EXAMPLE, dec
from vectors.errors import GOOD_ROWS, ROWS_SCHEMA
from vectors.samplers import ByteStream, draw_stream


def _batch(collection: str, version: str, sequence: int, ids: list[bytes], private: list[int],
           public: list[list[int]]) -> dict[str, Any]:
    n = len(ids)
    columns = np.asarray(public, np.int64).reshape(n, -1) if public and public[0] else np.zeros((n, 0), np.int64)
    reports = Reports(np.frombuffer(b"".join(ids), np.uint8).reshape(n, 16), np.asarray(private, np.int64), columns)
    msg = reports_to_proto(reports, collection, version, sequence)
    return {"collection": collection, "mechanism_version": version, "sequence": dec(sequence),
            "report_ids": [i.hex() for i in ids], "private_codes": dec(private),
            "public_codes": [dec([row[j] for row in public]) for j in range(len(public[0]) if public else 0)],
            "hex": msg.SerializeToString().hex()}


def wire_vectors() -> dict[str, Any]:
    ids = [bytes(range(16)), bytes(range(16, 32)), bytes([0xff] * 16), bytes(16)]
    batches = [
        {"id": "worked-example-contract-12", **_batch("demo", "E/1", 7, ids[:1], [3], [[1]])},
        {"id": "sequence-zero-omitted", **_batch("demo", "E/1", 0, ids[:1], [3], [[1]])},
        {"id": "no-public-attribute", **_batch("b", "E/1", 1, ids[:2], [0, 1], [])},
        {"id": "two-public-columns", **_batch("mix", "E/1", 2, ids[:3], [0, 335, 100],
                                               [[1, 4], [0, 0], [1, 2]])},
        {"id": "largest-codes-and-sequence", **_batch("wide", "E/1", 2**64 - 1, ids[2:4], [2**28 - 1, 0],
                                                      [[2**62 - 1], [0]])},
        {"id": "unicode-collection-name", **_batch("données-é", "E/1", 300, ids[:1], [5], [])},
    ]
    for i, seed in enumerate((11, 12)):
        rng = random.Random(seed)
        n = 40 + 25 * i
        many_ids = [rng.randbytes(16) for _ in range(n)]
        batches.append({"id": f"seeded-{seed}-{n}-reports", **_batch(
            "ratings", "E/1", rng.randrange(2**32), many_ids, [rng.randrange(5) for _ in range(n)],
            [[rng.randrange(1682), rng.randrange(3)] for _ in range(n)])})
    requests = [{"collection": c, "hex": pb.GetCollectionRequest(collection=c).SerializeToString().hex()}
                for c in ("demo", "données-é", "n" * 128)]
    acks = [{"sequence": dec(s), "accepted": a, "duplicates": d,
             "hex": pb.BatchAck(sequence=s, accepted=a, duplicates=d).SerializeToString().hex()}
            for s, a, d in ((7, 1, 0), (0, 0, 3), (2**64 - 1, 65536, 0), (5, 40, 25))]
    card = MechanismCard.for_schema(Schema.from_json(WORKED_EXAMPLE))
    limits = pb.Limits(max_rows_per_client=10, max_batch_reports=65536, max_message_bytes=64 * 1024 * 1024)
    coll = pb.Collection(name="demo", schema_json=card.schema.dumps(), card_json=card.dumps(),
                         mechanism_version="E/1", limits=limits)
    collections = [{"name": coll.name, "schema_json": coll.schema_json, "card_json": coll.card_json,
                    "mechanism_version": coll.mechanism_version,
                    "limits": {"max_rows_per_client": "10", "max_batch_reports": 65536,
                               "max_message_bytes": 64 * 1024 * 1024},
                    "hex": coll.SerializeToString().hex()}]
    return {"format": FORMAT, "file": "wire", "report_batches": batches, "get_collection_requests": requests,
            "batch_acks": acks, "collections": collections, "device": device_vectors()}


def device_vectors() -> list[dict[str, Any]]:
    """Rows → codes → E (a given byte stream) → a batch with given ids: the whole device path."""
    out = []
    for case_id, schema_obj, columns, seed in (
            ("worked-example-rows", WORKED_EXAMPLE, {"region": ["south", "north", "south"], "age": [19, 18, 20],
                                                     "smoker": [1, 0, 0], "score": [0.6, 0.1, 0.99]}, 21),
            ("rows-schema", ROWS_SCHEMA, GOOD_ROWS, 22)):
        schema = Schema.from_json(schema_obj)
        card = MechanismCard.for_schema(schema)
        encoded = encode_columns(schema, columns)
        rng = random.Random(seed)
        m = card.mechanism
        stream = draw_stream(m, len(encoded), rng)
        perturbed = m._perturb_exact(encoded.private_codes, ByteStream(stream))
        ids = [rng.randbytes(16) for _ in range(len(encoded))]
        batch = _batch(schema.name, card.version, 0, ids, perturbed.tolist(), encoded.public_codes.tolist())
        out.append({"id": case_id, "card_json": card.dumps(), "columns": columns, "random_hex": stream.hex(),
                    "private_codes": dec(encoded.private_codes.tolist()), "perturbed": dec(perturbed.tolist()),
                    "batch": batch})
    return out
