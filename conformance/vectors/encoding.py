"""encoding.json: values -> codes -> values (docs/contract.md §2-§4), the float and int64 edges included."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.schema import Schema
from vectors.common import FORMAT, WORKED_EXAMPLE, attribute, dec, float_bits, schema_doc


def _continuous_edge_values(lo: float, hi: float, bits: int) -> list[float]:
    """Values where the naive floor(2^bits (v - lo)/(hi - lo)) misses the edge rule, and the edges."""
    size = 1 << bits
    width = (hi - lo) / size
    found: list[float] = []
    for c in range(size):
        edge = lo + c * width
        for v in (edge, math.nextafter(edge, -math.inf), math.nextafter(edge, math.inf)):
            if not lo <= v <= hi:
                continue
            naive = min(math.floor((v - lo) / (hi - lo) * size), size - 1)
            rule = max(k for k in range(size) if lo + k * width <= v)
            if naive != rule and v not in found:
                found.append(v)
    return found


def encoding_schemas() -> list[tuple[str, dict[str, Any], dict[str, list[Any]], list[int]]]:
    """(id, schema, columns of raw values, extra private codes to decode)."""
    tricky = _continuous_edge_values(0.1, 0.7, 5)
    negative = _continuous_edge_values(-3.3, 7.1, 6)
    assert tricky and negative, "expected float edge cases"
    return [
        ("worked-example", WORKED_EXAMPLE,
         {"region": ["south", "north", "north", "south"], "age": [19, 18, "20", 20.0],
          "smoker": [1, 0, "yes", " FALSE "], "score": [0.6, 0.0, 1.0, "0.25"]}, [0, 14, 23]),
        ("binary-spellings", schema_doc("b", attribute("flag", "binary")),
         {"flag": ["1", "true", "True", "TRUE", "yes", "0", "false", "False", "FALSE", "no", "  yes  "]}, [0, 1]),
        ("binary-numbers", schema_doc("b2", attribute("flag", "binary")), {"flag": [0, 1, 1.0, 0.0]}, []),
        ("binary-booleans", schema_doc("b3", attribute("flag", "binary")), {"flag": [True, False]}, []),
        ("integer-forms", schema_doc("i", attribute("n", "integer", min=-5, max=5)),
         {"n": ["-5", " 5 ", "+3", "4.0", "1e0", "-0", "2"]}, [0, 10]),
        ("integer-float-values", schema_doc("i2", attribute("n", "integer", min=-5, max=5)),
         {"n": [-5.0, 5.0, 0.0]}, []),
        ("integer-beyond-2^53-private", schema_doc("big", attribute("n", "integer", min=2**62, max=2**62 + 9)),
         {"n": [str(2**62), str(2**62 + 9), str(2**62 + 5)]}, [0, 9]),
        ("integer-int64-extremes-public", schema_doc(
            "ext", attribute("lo", "integer", min=-(2**63), max=-(2**63) + 9),
            attribute("hi", "integer", True, min=2**62, max=2**63 - 1), attribute("x", "binary")),
         {"lo": [str(-(2**63)), str(-(2**63) + 9), -(2**63) + 3],
          "hi": [str(2**63 - 1), 2**62 + 2**53 + 1, str(2**62)], "x": [0, 1, 1]}, [0, 19]),
        ("public-integer-low-extreme", schema_doc(
            "extlo", attribute("lo", "integer", True, min=-(2**63), max=-(2**63) + 2**62 - 1),
            attribute("x", "binary")),
         {"lo": [str(-(2**63)), str(-(2**63) + 2**62 - 1), -(2**63) + 2**53 + 1], "x": [1, 0, 1]}, []),
        ("public-domain-2^62", schema_doc(
            "wide", attribute("a", "integer", True, min=0, max=2**31 - 1),
            attribute("b", "integer", True, min=1, max=2**31),
            attribute("p", "integer", min=1, max=5)),
         {"a": [2**31 - 1, 0, 12345], "b": [2**31, 1, 2**30], "p": [5, 1, 3]}, [0, 4]),
        ("private-domain-2^28", schema_doc("maxd", attribute("x", "integer", min=0, max=2**28 - 1)),
         {"x": [0, 2**28 - 1, 123456789]}, [0, 2**28 - 1]),
        ("several-private-interleaved", schema_doc(
            "mix", attribute("a", "integer", min=1, max=7), attribute("pub1", "binary", True),
            attribute("b", "categorical", values=["x", "y", "z"]), attribute("pub2", "integer", True, min=-2, max=2),
            attribute("c", "binary"), attribute("d", "continuous", lo=-1.0, hi=1.0, bits=3)),
         {"a": [7, 1, 4], "pub1": [1, 0, 1], "b": ["z", "x", "y"], "pub2": [2, -2, 0], "c": [1, 0, 1],
          "d": [1.0, -1.0, 0.1]}, [0, 7 * 3 * 2 * 8 - 1, 100]),
        ("categorical-many-values", schema_doc("cat", attribute(
            "v", "categorical", values=[f"v{i:03d}" for i in range(300)] + ["", "ü", "Case", "case"])),
         {"v": ["v000", "v299", "", "ü", "Case", "case"]}, [0, 303, 150]),
        ("continuous-float-edges", schema_doc("cont", attribute("x", "continuous", lo=0.1, hi=0.7, bits=5)),
         {"x": [0.1, 0.7, *tricky]}, [0, 31]),
        ("continuous-negative-edges", schema_doc("cneg", attribute("x", "continuous", lo=-3.3, hi=7.1, bits=6)),
         {"x": [-3.3, 7.1, 0.0, *negative]}, [0, 63]),
        ("continuous-24-bits", schema_doc("c24", attribute("x", "continuous", lo=-3.5, hi=1e6, bits=24)),
         {"x": [-3.5, 1e6, 0.0, 123456.789, "999999.9999"]}, [0, 2**24 - 1]),
        ("continuous-default-bits-int-bounds", schema_doc("cint", attribute("x", "continuous", lo=-10, hi=10)),
         {"x": [-10, 10, 0, "3.75", 9.999999]}, [0, 15]),
    ]


def _decoded(schema: Schema, code: int) -> dict[str, str]:
    out: dict[str, str] = {}
    digits = schema.private_digits([code])
    for attr in schema.private_attributes:
        value = attr.decode(digits[attr.name])[0]
        kind = attr.to_json()["type"]
        out[attr.name] = float_bits(float(value)) if kind == "continuous" else str(value)
    return out


def _radices(sizes: list[int]) -> list[int]:
    weights = [1] * len(sizes)
    for j in range(len(sizes) - 2, -1, -1):
        weights[j] = weights[j + 1] * sizes[j + 1]
    return weights


def encoding_vectors() -> dict[str, Any]:
    cases = []
    for case_id, obj, columns, decode_codes in encoding_schemas():
        schema = Schema.from_json(json.dumps(obj))
        encoded = encode_columns(schema, columns)
        private_sizes = [a.size for a in schema.private_attributes]
        public_sizes = [a.size for a in schema.public_attributes]
        keys = Reports(np.zeros((len(encoded), 16), np.uint8), encoded.private_codes,
                       encoded.public_codes).public_keys(schema)
        n = len(encoded)
        rows = []
        for i in range(n):
            code = int(encoded.private_codes[i])
            digits = schema.private_digits([code])
            rows.append({
                "values": {name: column[i] for name, column in columns.items()},
                "public_codes": dec(encoded.public_codes[i].tolist()),
                "public_key": dec(keys[i]) if public_sizes else "0",
                "private_digits": [dec(digits[a.name][0]) for a in schema.private_attributes],
                "private_code": dec(code),
                "decoded": _decoded(schema, code),
            })
        decodes = [{"private_code": dec(c),
                    "private_digits": [dec(schema.private_digits([c])[a.name][0]) for a in schema.private_attributes],
                    "decoded": _decoded(schema, c)} for c in decode_codes]
        cases.append({
            "id": case_id, "schema": obj,
            "attribute_sizes": {a.name: dec(a.size) for a in schema.attributes},
            "private_attributes": [a.name for a in schema.private_attributes],
            "public_attributes": [a.name for a in schema.public_attributes],
            "private_domain_size": dec(schema.private_domain_size),
            "public_domain_size": dec(schema.public_domain_size),
            "private_place_values": dec(_radices(private_sizes)),
            "public_place_values": dec(_radices(public_sizes)),
            "rows": rows, "decodes": decodes,
        })
    return {"format": FORMAT, "file": "encoding", "cases": cases}
