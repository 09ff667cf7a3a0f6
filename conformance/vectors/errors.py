"""errors.json: schemas and rows the reference refuses, each with the field (and row) its error names."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.schema import Schema
from vectors.common import FORMAT, attribute, field_of, legal_of, schema_doc


def _bad_schema_texts() -> Iterator[tuple[str, str]]:
    ok_attr = attribute("x", "integer", min=1, max=5)

    def with_attr(**changes: Any) -> str:
        attr = {**ok_attr, **changes}
        return json.dumps(schema_doc("s", attr))

    def with_top(**changes: Any) -> str:
        return json.dumps({**schema_doc("s", ok_attr), **changes})

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
    yield "attribute-name-missing", json.dumps(schema_doc("s", {"type": "binary"}))
    yield "attribute-name-not-identifier", with_attr(name="1a")
    yield "attribute-name-with-dash", with_attr(name="a-b")
    yield "attribute-name-empty", with_attr(name="")
    yield "public-not-boolean", with_attr(public=1)
    yield "public-string", with_attr(public="true")
    yield "type-unknown", with_attr(type="float")
    yield "type-missing", json.dumps(schema_doc("s", {"name": "x", "min": 1, "max": 5}))
    yield "unknown-attribute-field", with_attr(unit="kg")
    yield "field-of-another-type", with_attr(bits=4)
    yield "integer-max-missing", json.dumps(schema_doc("s", {"name": "x", "type": "integer", "min": 1}))
    yield "integer-min-float", with_attr(min=1.0)
    yield "integer-max-string", with_attr(max="5")
    yield "integer-min-boolean", with_attr(min=True)
    yield "integer-min-equals-max", with_attr(min=5, max=5)
    yield "integer-min-above-max", with_attr(min=6, max=5)
    yield "integer-min-below-int64", with_attr(min=-(2**63) - 1, max=0)
    yield "integer-max-above-int64", with_attr(min=2**62, max=2**63)
    yield "integer-2^62+1-values", json.dumps(schema_doc("s", attribute("x", "integer", True, min=0, max=2**62),
                                                           attribute("y", "binary")))
    yield "categorical-values-missing", json.dumps(schema_doc("s", {"name": "x", "type": "categorical"}))
    yield "categorical-values-not-list", json.dumps(schema_doc("s", attribute("x", "categorical", values="ab")))
    yield "categorical-value-not-string", json.dumps(schema_doc("s", attribute("x", "categorical", values=["a", 1])))
    yield "categorical-one-value", json.dumps(schema_doc("s", attribute("x", "categorical", values=["a"])))
    yield "categorical-duplicates", json.dumps(schema_doc("s", attribute("x", "categorical", values=["a", "b", "a"])))
    yield "binary-extra-field", json.dumps(schema_doc("s", attribute("x", "binary", values=["a", "b"])))
    cont = attribute("x", "continuous", lo=0.0, hi=1.0)
    yield "continuous-lo-string", json.dumps(schema_doc("s", {**cont, "lo": "0"}))
    yield "continuous-hi-nan", json.dumps(schema_doc("s", cont)).replace('"hi": 1.0', '"hi": NaN')
    yield "continuous-lo-boolean", json.dumps(schema_doc("s", {**cont, "lo": False}))
    yield "continuous-lo-equals-hi", json.dumps(schema_doc("s", {**cont, "hi": 0.0}))
    yield "continuous-infinite-width", json.dumps(schema_doc("s", {**cont, "lo": -1.7e308, "hi": 1.7e308}))
    yield "continuous-bits-zero", json.dumps(schema_doc("s", {**cont, "bits": 0}))
    yield "continuous-bits-25", json.dumps(schema_doc("s", {**cont, "bits": 25}))
    yield "continuous-bits-float", json.dumps(schema_doc("s", {**cont, "bits": 4.0}))
    yield "continuous-buckets-below-resolution", json.dumps(schema_doc("s", {**cont, "lo": 1e15, "hi": 1e15 + 2,
                                                                               "bits": 24}))
    yield from _bad_steps()
    yield "duplicate-attribute-names", json.dumps(schema_doc("s", ok_attr, ok_attr))
    yield "every-attribute-public", json.dumps(schema_doc("s", {**ok_attr, "public": True}))
    yield "private-domain-over-2^28", json.dumps(schema_doc("s", attribute("x", "integer", min=0, max=2**14),
                                                             attribute("y", "integer", min=0, max=2**14 - 1)))
    yield "public-domain-over-2^62", json.dumps(schema_doc("s", attribute("a", "integer", True, min=0, max=2**31),
                                                            attribute("b", "integer", True, min=0, max=2**31 - 1),
                                                            attribute("y", "binary")))
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


def _bad_steps() -> Iterator[tuple[str, str]]:
    """Numeric attributes whose declared ``step`` is refused: not a number, not > 0, or (hi - lo)/step not an
    integer in [1, 255] (to 1e-9 relative); the range is checked first."""
    rating = attribute("rating", "numeric", range=[1, 5], mechanism="SW")

    def with_step(step: Any, bounds: list[float] | None = None, mechanism: str = "SW") -> str:
        return json.dumps(schema_doc("s", {**rating, "range": bounds or [1, 5], "mechanism": mechanism,
                                           "step": step}))

    for label, step in (("zero", 0), ("negative", -1), ("string", "1"), ("boolean", True), ("null", None),
                        ("list", [1]), ("not-dividing", 0.3), ("above-the-range", 10), ("half-the-range", 8),
                        ("tiny", 1e-300), ("256-intervals", 1 / 64)):
        yield f"numeric-step-{label}", with_step(step)
    yield "numeric-step-nan", with_step(1).replace('"step": 1', '"step": NaN')
    yield "numeric-step-infinity", with_step(1).replace('"step": 1', '"step": Infinity')
    yield "numeric-step-0.1-of-25.6", with_step(0.1, [0, 25.6])
    yield "numeric-step-3-plus-4e-9", with_step(1 / (3 + 4e-9), [0, 1], "HM")
    yield "numeric-step-bad-range-first", with_step(0.3, [5, 1])


ROWS_SCHEMA = schema_doc("rows",
                         attribute("movie", "integer", True, min=1, max=1682),
                         attribute("region", "categorical", True, values=["eu", "asia", "us"]),
                         attribute("rating", "integer", min=1, max=5),
                         attribute("watched", "binary"),
                         attribute("score", "continuous", lo=-1.0, hi=1.0, bits=3),
                         attribute("genre", "categorical", values=["drama", "comedy", "horror"]))
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
        field, position = field_of(Schema.from_json, text)
        case: dict[str, Any] = {"id": case_id, "schema_json": text, "field": field}
        if field.endswith(".step"):
            case["legal"] = legal_of(Schema.from_json, text)
        schema_errors.append(case)
    rows_schema = Schema.from_json(ROWS_SCHEMA)
    row_errors = []
    for case_id, columns, secrets in _bad_rows():
        field, position = field_of(encode_columns, rows_schema, columns)
        row_errors.append({"id": case_id, "columns": columns, "field": field, "position": position,
                           "must_not_contain": secrets})
    return {"format": FORMAT, "file": "errors", "schema_errors": schema_errors,
            "rows_schema": ROWS_SCHEMA, "row_errors": row_errors}
