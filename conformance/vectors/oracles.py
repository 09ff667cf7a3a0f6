"""oracles.json: OUE, OLH and HR on a device: cards, reports of given byte streams, wire fields."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.mechanisms.coins import Coins
from ldpsynth.shared.mechanisms.olh import OLH
from ldpsynth.shared.protocol import private_to_wire
from ldpsynth.shared.schema import Schema
from vectors.common import FORMAT, attribute, dec, schema_doc
from vectors.samplers import ByteStream

#: (id, mechanism, ε, |D| of the private attribute, rows, stream seed)
CASES = (
    ("OUE-eps1-k10", "OUE", 1.0, 10, 40, 11),
    ("OUE-eps0.5-k37", "OUE", 0.5, 37, 40, 12),
    ("OUE-eps6-k9", "OUE", 6.0, 9, 30, 13),
    ("OLH-eps1-k100", "OLH", 1.0, 100, 200, 21),
    ("OLH-eps4-k1000", "OLH", 4.0, 1000, 200, 22),
    ("OLH-eps2-k2^20", "OLH", 2.0, 1 << 20, 100, 23),
    ("OLH-eps0.3-k2", "OLH", 0.3, 2, 50, 24),
    ("HR-eps1-k100", "HR", 1.0, 100, 300, 31),
    ("HR-eps0.2-k2", "HR", 0.2, 2, 50, 32),
    ("HR-eps3-k5000", "HR", 3.0, 5000, 200, 33),
)


def _schema(mechanism: str, epsilon: float, k: int) -> dict[str, Any]:
    doc = schema_doc(f"oracle-{mechanism.lower()}", attribute("value", "integer", min=0, max=k - 1),
                     attribute("region", "categorical", True, values=["north", "south"]), epsilon=epsilon)
    return {**doc, "mechanism": mechanism}


def _case(case_id: str, mechanism: str, epsilon: float, k: int, rows: int, seed: int) -> dict[str, Any]:
    schema = _schema(mechanism, epsilon, k)
    card = MechanismCard.for_schema(Schema.from_json(schema))
    oracle = card.mechanism
    rng = random.Random(seed)
    codes = [rng.randrange(k) for _ in range(rows - 2)] + [0, k - 1]
    pool = rng.randbytes(8 * (rows * (k if mechanism == "OUE" else 4) + 64))
    source = ByteStream(pool)
    reports = oracle._sample_chunks(np.asarray(codes, np.int64),
                                    Coins(lambda n: np.frombuffer(source(8 * n), dtype=np.uint64)))
    stream = pool[:source.read]
    out: dict[str, Any] = {"id": case_id, "schema": schema, "card": card.to_json(), "codes": dec(codes),
                           "random_hex": stream.hex(), "words_read": source.read // 8}
    if mechanism == "OUE":
        width = oracle.report_bytes
        out["reports"] = [str(int.from_bytes(bytes(row), "little")) for row in reports]
        assert all(len(bytes(row)) == width for row in reports)
    else:
        out["reports"] = dec(reports.tolist())
    out["wire"] = {field: data.hex() for field, data in private_to_wire(oracle, reports).items()}
    if isinstance(oracle, OLH):
        seeds = np.asarray([rng.randrange(1 << (2 * oracle.field_bits)) for _ in range(8)], np.uint64)
        values = np.asarray([rng.randrange(k) for _ in range(8)], np.int64)
        out["hashes"] = [{"seed": str(int(s)), "code": str(int(v)), "bucket": str(int(h))}
                         for s, v, h in zip(seeds, values, oracle.hash_values(seeds, values), strict=True)]
    return out


def oracle_vectors() -> dict[str, Any]:
    return {"format": FORMAT, "file": "oracles", "cases": [_case(*c) for c in CASES]}
