"""Rebuild the language-neutral conformance vectors in conformance/ from the Python reference.

    python conformance/generate.py           # write conformance/*.json
    python conformance/generate.py --check   # exit 1 if rebuilding would change any file

Every expected value is computed by the reference (ldpsynth.shared and ldpsynth.client); only the
inputs are chosen here. Deterministic: the byte streams come from seeded ``random.Random``
generators, never from the OS. conformance/README.md says what each file holds.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import struct
import sys
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal, localcontext
from pathlib import Path
from typing import Any

import numpy as np

from ldpsynth.client import submit
from ldpsynth.client.rows import encode_columns
from ldpsynth.shared import sealing
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.protocol import CollectionInfo, Limits, reports_to_proto
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.schema import Schema, ShuffleSpec
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import shuffler_pb2 as spb

HERE = Path(__file__).resolve().parent
FORMAT = "ldpsynth.conformance/1"


# ----- notation -------------------------------------------------------------------------------------


def float_bits(x: float) -> str:
    """The IEEE-754 binary64 bit pattern of ``x`` as 16 hex digits (most significant first)."""
    return struct.pack(">d", x).hex()


def exact_float(x: float) -> dict[str, Any]:
    """A float three ways: the JSON number (shortest round trip), its bits, its hex literal."""
    return {"value": x, "bits": float_bits(x), "hex": x.hex()}


def dec(values: Any) -> Any:
    """Integers (or lists of them) as decimal strings: exact in every JSON reader."""
    if isinstance(values, (list, tuple, np.ndarray)):
        return [dec(v) for v in values]
    return str(int(values))


# ----- schemas and rows -----------------------------------------------------------------------------


def _attr(name: str, kind: str, public: bool = False, **fields: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, **fields, **({"public": True} if public else {})}


def _schema(name: str, *attributes: dict[str, Any], epsilon: float = 1.0) -> dict[str, Any]:
    return {"name": name, "epsilon": epsilon, "attributes": list(attributes)}


WORKED_EXAMPLE = _schema("demo",
                         _attr("region", "categorical", True, values=["north", "south"]),
                         _attr("age", "integer", min=18, max=20),
                         _attr("smoker", "binary"),
                         _attr("score", "continuous", lo=0.0, hi=1.0, bits=2))


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
        ("binary-spellings", _schema("b", _attr("flag", "binary")),
         {"flag": ["1", "true", "True", "TRUE", "yes", "0", "false", "False", "FALSE", "no", "  yes  "]}, [0, 1]),
        ("binary-numbers", _schema("b2", _attr("flag", "binary")), {"flag": [0, 1, 1.0, 0.0]}, []),
        ("binary-booleans", _schema("b3", _attr("flag", "binary")), {"flag": [True, False]}, []),
        ("integer-forms", _schema("i", _attr("n", "integer", min=-5, max=5)),
         {"n": ["-5", " 5 ", "+3", "4.0", "1e0", "-0", "2"]}, [0, 10]),
        ("integer-float-values", _schema("i2", _attr("n", "integer", min=-5, max=5)), {"n": [-5.0, 5.0, 0.0]}, []),
        ("integer-beyond-2^53-private", _schema("big", _attr("n", "integer", min=2**62, max=2**62 + 9)),
         {"n": [str(2**62), str(2**62 + 9), str(2**62 + 5)]}, [0, 9]),
        ("integer-int64-extremes-public", _schema(
            "ext", _attr("lo", "integer", min=-(2**63), max=-(2**63) + 9),
            _attr("hi", "integer", True, min=2**62, max=2**63 - 1), _attr("x", "binary")),
         {"lo": [str(-(2**63)), str(-(2**63) + 9), -(2**63) + 3],
          "hi": [str(2**63 - 1), 2**62 + 2**53 + 1, str(2**62)], "x": [0, 1, 1]}, [0, 19]),
        ("public-integer-low-extreme", _schema(
            "extlo", _attr("lo", "integer", True, min=-(2**63), max=-(2**63) + 2**62 - 1), _attr("x", "binary")),
         {"lo": [str(-(2**63)), str(-(2**63) + 2**62 - 1), -(2**63) + 2**53 + 1], "x": [1, 0, 1]}, []),
        ("public-domain-2^62", _schema(
            "wide", _attr("a", "integer", True, min=0, max=2**31 - 1), _attr("b", "integer", True, min=1, max=2**31),
            _attr("p", "integer", min=1, max=5)),
         {"a": [2**31 - 1, 0, 12345], "b": [2**31, 1, 2**30], "p": [5, 1, 3]}, [0, 4]),
        ("private-domain-2^28", _schema("maxd", _attr("x", "integer", min=0, max=2**28 - 1)),
         {"x": [0, 2**28 - 1, 123456789]}, [0, 2**28 - 1]),
        ("several-private-interleaved", _schema(
            "mix", _attr("a", "integer", min=1, max=7), _attr("pub1", "binary", True),
            _attr("b", "categorical", values=["x", "y", "z"]), _attr("pub2", "integer", True, min=-2, max=2),
            _attr("c", "binary"), _attr("d", "continuous", lo=-1.0, hi=1.0, bits=3)),
         {"a": [7, 1, 4], "pub1": [1, 0, 1], "b": ["z", "x", "y"], "pub2": [2, -2, 0], "c": [1, 0, 1],
          "d": [1.0, -1.0, 0.1]}, [0, 7 * 3 * 2 * 8 - 1, 100]),
        ("categorical-many-values", _schema("cat", _attr("v", "categorical", values=[f"v{i:03d}" for i in range(300)]
                                                          + ["", "ü", "Case", "case"])),
         {"v": ["v000", "v299", "", "ü", "Case", "case"]}, [0, 303, 150]),
        ("continuous-float-edges", _schema("cont", _attr("x", "continuous", lo=0.1, hi=0.7, bits=5)),
         {"x": [0.1, 0.7, *tricky]}, [0, 31]),
        ("continuous-negative-edges", _schema("cneg", _attr("x", "continuous", lo=-3.3, hi=7.1, bits=6)),
         {"x": [-3.3, 7.1, 0.0, *negative]}, [0, 63]),
        ("continuous-24-bits", _schema("c24", _attr("x", "continuous", lo=-3.5, hi=1e6, bits=24)),
         {"x": [-3.5, 1e6, 0.0, 123456.789, "999999.9999"]}, [0, 2**24 - 1]),
        ("continuous-default-bits-int-bounds", _schema("cint", _attr("x", "continuous", lo=-10, hi=10)),
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


# ----- errors ---------------------------------------------------------------------------------------


def _field_of(action: Callable[..., object], *args: Any) -> tuple[str, int | None]:
    """The field and position of the ValidationError that ``action(*args)`` raises."""
    try:
        action(*args)
    except ValidationError as exc:
        return exc.field, exc.position
    raise AssertionError("expected a ValidationError")


def _bad_schema_texts() -> Iterator[tuple[str, str]]:
    ok_attr = _attr("x", "integer", min=1, max=5)

    def with_attr(**changes: Any) -> str:
        attr = {**ok_attr, **changes}
        return json.dumps(_schema("s", attr))

    def with_top(**changes: Any) -> str:
        return json.dumps({**_schema("s", ok_attr), **changes})

    yield "not-json", '{"name": "s", '
    yield "not-an-object", "[1, 2]"
    yield "nested-65-deep", '{"name": "s", "epsilon": 1, "attributes": ' + "[" * 64 + "]" * 64 + "}"
    yield "integer-of-309-digits", '{"name": "s", "epsilon": ' + "9" * 309 + ', "attributes": []}'
    yield "number-overflowing-float64", '{"name": "s", "epsilon": 1e400, "attributes": []}'
    yield "unknown-top-level-field", with_top(extra=1)
    yield "attributes-missing", json.dumps({"name": "s", "epsilon": 1.0})
    yield "attributes-empty", with_top(attributes=[])
    yield "attributes-not-a-list", with_top(attributes={"x": 1})
    yield "epsilon-missing", json.dumps({"name": "s", "attributes": [ok_attr]})
    for label, eps in (("zero", "0"), ("negative", "-1"), ("string", '"1"'), ("boolean", "true"), ("nan", "NaN"),
                       ("infinity", "Infinity")):
        yield f"epsilon-{label}", '{"name": "s", "epsilon": ' + eps + ', "attributes": [' + json.dumps(ok_attr) + "]}"
    yield "name-missing", json.dumps({"epsilon": 1.0, "attributes": [ok_attr]})
    yield "name-empty", with_top(name="")
    yield "name-129-characters", with_top(name="n" * 129)
    yield "name-not-a-string", with_top(name=7)
    yield "attribute-not-an-object", with_top(attributes=[5])
    yield "attribute-name-missing", json.dumps(_schema("s", {"type": "binary"}))
    yield "attribute-name-not-identifier", with_attr(name="1a")
    yield "attribute-name-with-dash", with_attr(name="a-b")
    yield "attribute-name-empty", with_attr(name="")
    yield "public-not-boolean", with_attr(public=1)
    yield "public-string", with_attr(public="true")
    yield "type-unknown", with_attr(type="float")
    yield "type-missing", json.dumps(_schema("s", {"name": "x", "min": 1, "max": 5}))
    yield "unknown-attribute-field", with_attr(unit="kg")
    yield "field-of-another-type", with_attr(bits=4)
    yield "integer-max-missing", json.dumps(_schema("s", {"name": "x", "type": "integer", "min": 1}))
    yield "integer-min-float", with_attr(min=1.0)
    yield "integer-max-string", with_attr(max="5")
    yield "integer-min-boolean", with_attr(min=True)
    yield "integer-min-equals-max", with_attr(min=5, max=5)
    yield "integer-min-above-max", with_attr(min=6, max=5)
    yield "integer-min-below-int64", with_attr(min=-(2**63) - 1, max=0)
    yield "integer-max-above-int64", with_attr(min=2**62, max=2**63)
    yield "integer-2^62+1-values", json.dumps(_schema("s", _attr("x", "integer", True, min=0, max=2**62),
                                                       _attr("y", "binary")))
    yield "categorical-values-missing", json.dumps(_schema("s", {"name": "x", "type": "categorical"}))
    yield "categorical-values-not-list", json.dumps(_schema("s", _attr("x", "categorical", values="ab")))
    yield "categorical-value-not-string", json.dumps(_schema("s", _attr("x", "categorical", values=["a", 1])))
    yield "categorical-one-value", json.dumps(_schema("s", _attr("x", "categorical", values=["a"])))
    yield "categorical-duplicates", json.dumps(_schema("s", _attr("x", "categorical", values=["a", "b", "a"])))
    yield "binary-extra-field", json.dumps(_schema("s", _attr("x", "binary", values=["a", "b"])))
    cont = _attr("x", "continuous", lo=0.0, hi=1.0)
    yield "continuous-lo-string", json.dumps(_schema("s", {**cont, "lo": "0"}))
    yield "continuous-hi-nan", json.dumps(_schema("s", cont)).replace('"hi": 1.0', '"hi": NaN')
    yield "continuous-lo-boolean", json.dumps(_schema("s", {**cont, "lo": False}))
    yield "continuous-lo-equals-hi", json.dumps(_schema("s", {**cont, "hi": 0.0}))
    yield "continuous-infinite-width", json.dumps(_schema("s", {**cont, "lo": -1.7e308, "hi": 1.7e308}))
    yield "continuous-bits-zero", json.dumps(_schema("s", {**cont, "bits": 0}))
    yield "continuous-bits-25", json.dumps(_schema("s", {**cont, "bits": 25}))
    yield "continuous-bits-float", json.dumps(_schema("s", {**cont, "bits": 4.0}))
    yield "continuous-buckets-below-resolution", json.dumps(_schema("s", {**cont, "lo": 1e15, "hi": 1e15 + 2,
                                                                            "bits": 24}))
    yield "duplicate-attribute-names", json.dumps(_schema("s", ok_attr, ok_attr))
    yield "every-attribute-public", json.dumps(_schema("s", {**ok_attr, "public": True}))
    yield "private-domain-over-2^28", json.dumps(_schema("s", _attr("x", "integer", min=0, max=2**14),
                                                         _attr("y", "integer", min=0, max=2**14 - 1)))
    yield "public-domain-over-2^62", json.dumps(_schema("s", _attr("a", "integer", True, min=0, max=2**31),
                                                        _attr("b", "integer", True, min=0, max=2**31 - 1),
                                                        _attr("y", "binary")))
    shuffle = {"delta": 1e-9, "min_batch": 20}
    yield "shuffle-not-an-object", with_top(shuffle=[1])
    yield "shuffle-unknown-field", with_top(shuffle={**shuffle, "threshold": 20})
    yield "shuffle-delta-missing", with_top(shuffle={"min_batch": 20})
    yield "shuffle-delta-one", with_top(shuffle={**shuffle, "delta": 1})
    yield "shuffle-min-batch-float", with_top(shuffle={**shuffle, "min_batch": 20.0})
    yield "shuffle-rows-per-device-null", with_top(shuffle={**shuffle, "rows_per_device": None})
    yield "shuffle-shuffler-unknown", with_top(shuffle={**shuffle, "shuffler": "nobody"})
    yield "shuffle-assume-injected-at-min-batch", with_top(shuffle={**shuffle, "assume_injected": 20})
    yield "shuffle-assume-injected-negative", with_top(shuffle={**shuffle, "assume_injected": -1})
    yield "shuffle-assume-injected-float", with_top(shuffle={**shuffle, "assume_injected": 1.0})
    yield "shuffle-assume-injected-boolean", with_top(shuffle={**shuffle, "assume_injected": True})
    yield "shuffle-assume-injected-with-min-batch-1", with_top(shuffle={**shuffle, "min_batch": 1,
                                                                        "assume_injected": 1})


ROWS_SCHEMA = _schema("rows",
                      _attr("movie", "integer", True, min=1, max=1682),
                      _attr("region", "categorical", True, values=["eu", "asia", "us"]),
                      _attr("rating", "integer", min=1, max=5),
                      _attr("watched", "binary"),
                      _attr("score", "continuous", lo=-1.0, hi=1.0, bits=3),
                      _attr("genre", "categorical", values=["drama", "comedy", "horror"]))
GOOD_ROWS: dict[str, list[Any]] = {"movie": [3, 7, 7], "region": ["eu", "asia", "us"], "rating": [1, 5, 3],
                                   "watched": [0, 1, 1], "score": [0.5, -1.0, 1.0],
                                   "genre": ["drama", "horror", "comedy"]}


def _bad_rows() -> Iterator[tuple[str, dict[str, Any], list[str]]]:
    """(id, columns, strings that must not appear in the message)."""
    def one(attribute: str, position: int, value: Any) -> dict[str, Any]:
        column = list(GOOD_ROWS[attribute])
        column[position] = value
        return {**GOOD_ROWS, attribute: column}

    yield "rating-above-max", one("rating", 2, 987654), ["987654"]
    yield "rating-below-min", one("rating", 0, -987654), ["987654"]
    yield "rating-fraction", one("rating", 1, 2.5), ["2.5"]
    yield "rating-fraction-string", one("rating", 1, "2.5"), ["2.5"]
    yield "rating-text", one("rating", 0, "secret-text"), ["secret-text"]
    yield "rating-huge-string", one("rating", 2, "98765432109876543210987"), ["98765432109876543210987"]
    yield "rating-null", one("rating", 1, None), []
    yield "movie-above-max", one("movie", 1, 987654), []
    yield "watched-two", one("watched", 2, 2), []
    yield "watched-text", one("watched", 0, "maybe-secret"), ["maybe-secret"]
    yield "watched-half", one("watched", 1, 0.5), []
    yield "score-above-hi", one("score", 1, 987654.5), ["987654"]
    yield "score-below-lo", one("score", 0, -1.5), []
    yield "score-nan-string", one("score", 2, "nan"), []
    yield "score-infinity-string", one("score", 2, "inf"), []
    yield "score-text", one("score", 1, "secret-score"), ["secret-score"]
    yield "genre-unknown", one("genre", 1, "secret-genre"), ["secret-genre"]
    yield "genre-wrong-case", one("genre", 2, "Comedy"), ["Comedy"]
    yield "region-unknown", one("region", 0, "mars"), ["mars"]
    yield "unknown-column", {**GOOD_ROWS, "salary": [1, 2, 3]}, []
    yield "missing-column", {k: v for k, v in GOOD_ROWS.items() if k != "watched"}, []
    yield "column-too-short", {**GOOD_ROWS, "score": [0.5, 0.5]}, []
    yield "column-not-a-list", {**GOOD_ROWS, "genre": "drama"}, []


def error_vectors() -> dict[str, Any]:
    schema_errors = []
    for case_id, text in _bad_schema_texts():
        field, position = _field_of(Schema.from_json, text)
        schema_errors.append({"id": case_id, "schema_json": text, "field": field})
    rows_schema = Schema.from_json(ROWS_SCHEMA)
    row_errors = []
    for case_id, columns, secrets in _bad_rows():
        field, position = _field_of(encode_columns, rows_schema, columns)
        row_errors.append({"id": case_id, "columns": columns, "field": field, "position": position,
                           "must_not_contain": secrets})
    return {"format": FORMAT, "file": "errors", "schema_errors": schema_errors,
            "rows_schema": ROWS_SCHEMA, "row_errors": row_errors}


# ----- cards ----------------------------------------------------------------------------------------


def card_schema(epsilon: float, domain_size: int) -> dict[str, Any]:
    return _schema("card", _attr("x", "integer", min=0, max=domain_size - 1), epsilon=epsilon)


CARD_PAIRS: list[tuple[float, int]] = [
    (1.0, 24), (1.0, 2), (0.5, 2), (3.0, 2), (0.1, 5), (1.0, 5), (2.0, 1000), (0.5, 2**20), (4.0, 64),
    (math.log(3), 3), (0.01, 2), (1e-6, 2), (1e-12, 2), (1e-9, 1000), (0.001, 2**28), (8.0, 2**28),
    (5.66, 10), (13.08, 100), (22.08, 7),  # the platform's exp is not correctly rounded at these ε
    (20.0, 2), (30.0, 3), (40.0, 2), (42.5, 2), (43.0, 2), (43.0, 2**28), (44.0, 2), (45.0, 2), (46.0, 2),
    (100.0, 2), (700.0, 5), (1e300, 2), (1.7976931348623157e308, 2**28), (2.220446049250313e-16 * 64, 2),
    (1e-15, 2), (1e-10, 2**28),  # barely above the sampler's resolution (A - L = 256, and 1)
]
#: (ε, |D|) pairs the exact sampler cannot resolve: the card is refused, naming ``epsilon``.
REFUSED_PAIRS: list[tuple[float, int]] = [(1e-16, 2), (5e-324, 2), (1e-11, 2**28), (2.220446049250313e-16, 2)]


def correctly_rounded_exp(x: float) -> float:
    with localcontext() as ctx:
        ctx.prec = 120
        return float(Decimal(x).exp())


def _card_case(epsilon: float, domain_size: int) -> dict[str, Any]:
    card = MechanismCard.for_schema(Schema.from_json(card_schema(epsilon, domain_size)))
    m = card.mechanism
    growth = math.exp(min(epsilon, 45.0))
    limit = m._accept_below
    return {
        "id": f"eps={epsilon!r},D={domain_size}",
        "epsilon_requested": exact_float(epsilon),
        "domain_size": dec(domain_size),
        "exp_used": {**exact_float(growth), "correctly_rounded": growth == correctly_rounded_exp(min(epsilon, 45.0))},
        "keep_weight": str(m.keep_weight), "lie_weight": str(m.lie_weight), "total_weight": str(m.total_weight),
        "epsilon": exact_float(m.epsilon),
        "keep_probability": exact_float(m.keep_probability),
        "lie_probability": exact_float(m.lie_probability),
        "accept_below": str(limit), "rejection_probability": ((1 << 64) - limit) / 2**64,
        "card_json": card.dumps(),
    }


def _tampered_cards() -> Iterator[tuple[str, str]]:
    base = MechanismCard.for_schema(Schema.from_json(card_schema(1.0, 24))).to_json()
    stronger = MechanismCard.for_schema(Schema.from_json(card_schema(1.5, 24))).to_json()

    def changed(**fields: Any) -> str:
        return json.dumps({**base, **fields}, indent=2, sort_keys=True)

    yield "not-an-object", "[]"
    yield "format-wrong", changed(format="ldpsynth.mechanism-card/2")
    yield "format-missing", json.dumps({k: v for k, v in base.items() if k != "format"})
    yield "version-wrong", changed(version="E/2")
    yield "mechanism-wrong", changed(mechanism="RR")
    yield "schema-missing", json.dumps({k: v for k, v in base.items() if k != "schema"})
    yield "schema-invalid", changed(schema={**base["schema"], "epsilon": -1})
    yield "domain-size-wrong", changed(domain_size=25)
    yield "domain-size-string", changed(domain_size="24")
    yield "keep-weight-plus-one", changed(keep_weight=str(int(base["keep_weight"]) + 1))
    yield "keep-weight-minus-one", changed(keep_weight=str(int(base["keep_weight"]) - 1))
    yield "keep-weight-number", changed(keep_weight=int(base["keep_weight"]))
    yield "keep-weight-leading-zero", changed(keep_weight="0" + base["keep_weight"])
    yield "weights-of-a-larger-epsilon", changed(keep_weight=stronger["keep_weight"], lie_weight=stronger["lie_weight"],
                                                 total_weight=stronger["total_weight"])
    yield "lie-weight-wrong", changed(lie_weight=str(int(base["lie_weight"]) - 1))
    yield "total-weight-wrong", changed(total_weight=str(int(base["total_weight"]) + 1))
    yield "epsilon-is-requested", changed(epsilon=1.0)
    yield "epsilon-one-ulp-down", changed(epsilon=math.nextafter(base["epsilon"], 0.0))
    yield "epsilon-requested-differs-from-schema", changed(epsilon_requested=2.0)
    yield "keep-probability-one-ulp-up", changed(keep_probability=math.nextafter(base["keep_probability"], 1.0))
    yield "lie-probability-wrong", changed(lie_probability=0.5)
    yield "epsilon-too-small-for-domain", json.dumps(
        {**base, "schema": card_schema(1e-17, 24), "epsilon_requested": 1e-17})


def _accepted_variants() -> Iterator[tuple[str, str]]:
    base = MechanismCard.for_schema(Schema.from_json(card_schema(1.0, 24))).to_json()
    yield "unknown-top-level-field", json.dumps({**base, "comment": "ignored"})
    yield "compact-json", json.dumps(base, separators=(",", ":"))
    yield "domain-size-as-float-literal", json.dumps(base).replace('"domain_size": 24', '"domain_size": 24.0')
    yield "epsilon-requested-as-integer-literal", json.dumps(base).replace('"epsilon_requested": 1.0',
                                                                           '"epsilon_requested": 1')


def shuffled_schema(**shuffle: Any) -> dict[str, Any]:
    """A shuffled collection (docs/contract.md §2): one public and one private attribute, ``shuffle`` its block."""
    return {**_schema("ratings", _attr("movie", "integer", True, min=1, max=1682),
                      _attr("rating", "integer", min=1, max=5), epsilon=4.0), "shuffle": shuffle}


#: (id, the schema's shuffle block) of the cards of shuffled collections: with and without assume_injected.
SHUFFLED_BLOCKS: list[tuple[str, dict[str, Any]]] = [
    ("contract-example", {"delta": 1e-9, "min_batch": 10000, "rows_per_device": 1, "shuffler": "independent"}),
    ("defaults-only", {"delta": 1e-6, "min_batch": 20}),
    ("assume-injected-0", {"delta": 1e-9, "min_batch": 500, "shuffler": "independent", "assume_injected": 0}),
    ("assume-injected-min-batch-minus-1", {"delta": 1e-9, "min_batch": 500, "assume_injected": 499}),
    ("assume-injected-above-rows-per-device", {"delta": 1e-9, "min_batch": 1000, "rows_per_device": 3,
                                               "shuffler": "independent", "assume_injected": 50}),
    ("rows-per-device-above-min-batch", {"delta": 1e-9, "min_batch": 2, "rows_per_device": 3}),
    ("min-batch-1", {"delta": 0.5, "min_batch": 1, "rows_per_device": 1000000}),
]


def _shuffled_card_case(case_id: str, block: dict[str, Any]) -> dict[str, Any]:
    card = MechanismCard.for_schema(Schema.from_json(shuffled_schema(**block)))
    spec = card.schema.shuffle
    assert spec is not None
    return {"id": case_id, "shuffle": block, "assume_injected": spec.injected,
            "honest_reports_per_pool": spec.honest_per_pool, "independent": spec.independent,
            "card_json": card.dumps()}


def _tampered_shuffled_cards() -> Iterator[tuple[str, str]]:
    spec = {"delta": 1e-9, "min_batch": 500, "shuffler": "independent"}
    base = MechanismCard.for_schema(Schema.from_json(shuffled_schema(**spec))).to_json()
    block = base["shuffle"]

    def changed(**fields: Any) -> str:
        return json.dumps({**base, "shuffle": {**block, **fields}}, indent=2, sort_keys=True)

    def central(**fields: Any) -> str:
        return changed(central={**block["central"], **fields})

    plain = MechanismCard.for_schema(Schema.from_json(card_schema(1.0, 24))).to_json()
    yield "shuffle-block-on-a-collection-not-shuffled", json.dumps({**plain, "shuffle": block})
    yield "shuffle-block-missing", json.dumps({k: v for k, v in base.items() if k != "shuffle"})
    yield "shuffle-block-not-an-object", json.dumps({**base, "shuffle": [block]})
    yield "shuffle-min-batch-differs-from-schema", changed(min_batch=501)
    yield "shuffle-shuffler-differs-from-schema", changed(shuffler="aggregator-operator")
    yield "shuffle-assume-injected-not-in-schema", changed(assume_injected=1)
    yield "shuffle-unknown-field", changed(threshold=500)
    yield "shuffle-local-epsilon-is-requested", changed(local={**block["local"], "epsilon": 4.0})
    yield "shuffle-central-assume-injected-wrong", central(assume_injected=0)
    yield "shuffle-central-honest-reports-wrong", central(honest_reports_per_pool=500)
    yield "shuffle-central-operator-claims-central", central(
        against={**block["central"]["against"], "shuffler": block["central"]["against"]["operator"]})
    yield "shuffle-central-of-the-previous-card-format", changed(central={
        "delta": spec["delta"], "against": ShuffleSpec.from_json(spec).against,
        "epsilon": "per release and per answer, from the counts of reports of each public-key group "
                   "(ldpsynth.shared.amplification, blanket bound; docs/shuffle-accountant.md)"})
    with_injected = MechanismCard.for_schema(Schema.from_json(shuffled_schema(**spec, assume_injected=7))).to_json()
    yield "shuffle-assume-injected-missing-from-the-block", json.dumps(
        {**with_injected, "shuffle": {k: v for k, v in with_injected["shuffle"].items() if k != "assume_injected"}})


def _accepted_shuffled_variants() -> Iterator[tuple[str, str]]:
    base = MechanismCard.for_schema(Schema.from_json(shuffled_schema(delta=1e-9, min_batch=500))).to_json()
    block = base["shuffle"]
    yield "shuffle-min-batch-as-float-literal", json.dumps({**base, "shuffle": {**block, "min_batch": "@"}}).replace(
        '"@"', "500.0")
    yield "shuffle-local-delta-as-integer-literal", json.dumps({**base, "shuffle": {**block, "local": {
        **block["local"], "delta": 0}}})
    yield "shuffle-compact-json", json.dumps(base, separators=(",", ":"))


def card_vectors() -> dict[str, Any]:
    cases = [_card_case(eps, k) for eps, k in CARD_PAIRS]
    refused = []
    for eps, k in REFUSED_PAIRS:
        field, _ = _field_of(MechanismE, eps, k)
        refused.append({"epsilon_requested": exact_float(eps), "domain_size": dec(k), "field": field,
                        "schema": card_schema(eps, k)})
    bad = []
    for case_id, text in _tampered_cards():
        field, _ = _field_of(MechanismCard.from_json, text)
        bad.append({"id": case_id, "card_json": text, "field": field})
    for case_id, text in _tampered_shuffled_cards():
        field, _ = _field_of(MechanismCard.from_json, text)
        bad.append({"id": case_id, "card_json": text, "field": field})
    accepted = []
    for case_id, text in _accepted_variants():
        MechanismCard.from_json(text)
        accepted.append({"id": case_id, "card_json": text})
    shuffled = [_shuffled_card_case(case_id, block) for case_id, block in SHUFFLED_BLOCKS]
    shuffled_variants = []
    for case_id, text in _accepted_shuffled_variants():
        MechanismCard.from_json(text)
        shuffled_variants.append({"id": case_id, "card_json": text})
    return {"format": FORMAT, "file": "cards", "cases": cases, "refused": refused, "bad_cards": bad,
            "accepted_variants": accepted, "shuffled": shuffled, "shuffled_variants": shuffled_variants}


# ----- the sampler ----------------------------------------------------------------------------------


class ByteStream:
    """Hands out a fixed byte string in order, as ``os.urandom`` would hand out fresh bytes."""

    def __init__(self, data: bytes):
        self.data = data
        self.read = 0
        self.calls: list[int] = []

    def __call__(self, n: int) -> bytes:
        if self.read + n > len(self.data):
            raise AssertionError(f"the stream holds {len(self.data)} bytes; {self.read + n} asked for")
        chunk = self.data[self.read:self.read + n]
        self.read += n
        self.calls.append(n)
        return chunk


def _word(u: int) -> bytes:
    return u.to_bytes(8, "little")


def _sampler_case(case_id: str, mechanism: MechanismE, codes: list[int], stream: bytes) -> dict[str, Any]:
    source = ByteStream(stream)
    outputs = mechanism._perturb_exact(np.asarray(codes, dtype=np.int64), source)
    assert source.read == len(stream), f"{case_id}: {len(stream) - source.read} bytes of the stream unread"
    words = [int.from_bytes(stream[i:i + 8], "little") for i in range(0, len(stream), 8)]
    return {"id": case_id, "domain_size": dec(mechanism.domain_size), "keep_weight": str(mechanism.keep_weight),
            "lie_weight": str(mechanism.lie_weight), "total_weight": str(mechanism.total_weight),
            "accept_below": str(mechanism._accept_below), "codes": dec(codes), "random_hex": stream.hex(),
            "words_read": len(words), "rounds": [n // 8 for n in source.calls],
            "rejections": sum(u >= mechanism._accept_below for u in words), "outputs": dec(outputs.tolist())}


def _high_rejection_mechanism() -> MechanismE:
    """A small |D| whose N makes about a fifth of the 64-bit words rejected (near the most, 1/4)."""
    m = MechanismE(0.7, 3)
    assert (1 << 64) - m._accept_below > (1 << 64) * 0.199
    return m


def sampler_vectors() -> dict[str, Any]:
    cases = []
    worked = MechanismE(1.0, 24)
    a, l_, n = worked.keep_weight, worked.lie_weight, worked.total_weight
    limit = worked._accept_below
    table = [2**64 - 1, 2**62, 10**18, 12345678901234567890, a + 14 * l_ + 5]
    cases.append(_sampler_case("worked-example-contract-12", worked, [14, 14, 14, 14],
                               b"".join(_word(u) for u in table)))
    # Every boundary of R = u mod N for x = 14, and words around the rejection threshold.
    boundary = [0, a - 1, a, a + l_ - 1, a + 14 * l_ - 1, a + 14 * l_, n - 1, n, limit - 1]
    rejected = [limit, 2**64 - 1, limit + 1]
    stream = b"".join(_word(u) for u in boundary + rejected) + b"".join(_word(u) for u in [a, a + l_, 5])
    cases.append(_sampler_case("boundaries-and-rejections-in-rounds", worked, [14] * 9 + [0, 23, 5], stream))
    # Rounds: rows 0, 2, 3 rejected in round 1, row 2 again in round 2.
    stream = b"".join(_word(u) for u in [limit, 7, 2**64 - 2, limit + 99, 3 * n + 1]) + \
        b"".join(_word(u) for u in [a, 2**64 - 3, n + a]) + _word(2 * n + a + 3 * l_)
    cases.append(_sampler_case("rejections-over-three-rounds", worked, [0, 1, 2, 23, 11], stream))
    hi = _high_rejection_mechanism()
    for seed, rows in ((1, 64), (2, 500)):
        rng = random.Random(seed)
        codes = [rng.randrange(hi.domain_size) for _ in range(rows)]
        cases.append(_stream_case(f"high-rejection-seeded-{seed}", hi, codes, rng))
    for eps, k, seed, rows in ((1.0, 24, 3, 200), (0.5, 2, 4, 200), (45.0, 2, 5, 50), (0.001, 2**28, 6, 100),
                               (8.0, 2**20, 7, 100)):
        m = MechanismE(eps, k)
        rng = random.Random(seed)
        codes = [rng.randrange(k) for _ in range(rows)]
        cases.append(_stream_case(f"eps={eps!r},D={k},seeded-{seed}", m, codes, rng))
    return {"format": FORMAT, "file": "sampler", "cases": cases}


def _stream_case(case_id: str, m: MechanismE, codes: list[int], rng: random.Random) -> dict[str, Any]:
    """A case whose stream is drawn round by round from ``rng`` until every row is accepted."""
    stream = b""
    todo = len(codes)
    while todo:
        chunk = rng.randbytes(8 * todo)
        stream += chunk
        todo = sum(int.from_bytes(chunk[i:i + 8], "little") >= m._accept_below for i in range(0, len(chunk), 8))
    return _sampler_case(case_id, m, codes, stream)


# ----- the wire -------------------------------------------------------------------------------------


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
        stream = b""
        todo = len(encoded)
        while todo:
            chunk = rng.randbytes(8 * todo)
            stream += chunk
            todo = sum(int.from_bytes(chunk[i:i + 8], "little") >= m._accept_below for i in range(0, len(chunk), 8))
        perturbed = m._perturb_exact(encoded.private_codes, ByteStream(stream))
        ids = [rng.randbytes(16) for _ in range(len(encoded))]
        batch = _batch(schema.name, card.version, 0, ids, perturbed.tolist(), encoded.public_codes.tolist())
        out.append({"id": case_id, "card_json": card.dumps(), "columns": columns, "random_hex": stream.hex(),
                    "private_codes": dec(encoded.private_codes.tolist()), "perturbed": dec(perturbed.tolist()),
                    "batch": batch})
    return out


# ----- sealed reports (docs/contract.md §16) ---------------------------------------------------------


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
            "shuffled_acks": shuffled_acks, "sealed_acks": sealed_acks}


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


# ----- files ----------------------------------------------------------------------------------------


def build() -> dict[str, str]:
    """{file name: text} of every vector file."""
    files = {"encoding.json": encoding_vectors(), "errors.json": error_vectors(), "cards.json": card_vectors(),
             "sampler.json": sampler_vectors(), "wire.json": wire_vectors(), "sealed.json": sealed_vectors()}
    return {name: json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n" for name, doc in files.items()}


def stale(built: Mapping[str, str]) -> list[str]:
    return [name for name, text in built.items()
            if not (HERE / name).exists() or (HERE / name).read_text(encoding="utf-8") != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    built = build()
    if args.check:
        names = stale(built)
        if names:
            print(f"conformance vectors are stale: {', '.join(names)}; run python conformance/generate.py",
                  file=sys.stderr)
            return 1
        print(f"conformance vectors are up to date ({len(built)} files)")
        return 0
    for name, text in built.items():
        (HERE / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(built)} files to conformance/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
