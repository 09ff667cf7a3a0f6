"""JSON from users within limits (issue 16): nesting depth and number size end as ValidationError naming
the field and the limit, never RecursionError, ValueError or a silent ``inf``; every parser of user JSON
in shared/ goes through it. Deterministic."""

from __future__ import annotations

import json

import pytest

from ldpsynth.shared import jsonio
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import SchemaError, ValidationError
from ldpsynth.shared.jsonio import MAX_INT_DIGITS, MAX_JSON_DEPTH
from ldpsynth.shared.queries import queries_from_json
from ldpsynth.shared.schema import Schema

SCHEMA = {"name": "ratings", "epsilon": 1.0, "attributes": [{"name": "rating", "type": "integer", "min": 1, "max": 5}]}
#: Past Python's own limits: ~1,000 levels (RecursionError) and 4,300 digits (ValueError).
DEEP = "[" * 1000 + "]" * 1000
HUGE_INT = "9" * 5000


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_nesting_up_to_the_limit_is_parsed_and_one_more_level_is_refused_naming_it():
    assert jsonio.loads(nested(MAX_JSON_DEPTH), "queries", "a JSON array") == json.loads(nested(MAX_JSON_DEPTH))
    for depth in (MAX_JSON_DEPTH + 1, 1000, 100_000):
        with pytest.raises(ValidationError) as err:
            jsonio.loads(nested(depth), "queries", "a JSON array")
        assert err.value.field == "queries" and f"at most {MAX_JSON_DEPTH} levels" in err.value.legal
        assert f"nested {depth} deep" in err.value.problem


def test_brackets_inside_strings_and_escapes_do_not_count_as_nesting():
    text = json.dumps([{"label": "[{" * 500 + '\\"' + "]" * 3, "weights": [1, 2]}] * 100)
    assert jsonio.nesting_depth(text) == 3
    assert jsonio.loads(text, "queries", "a JSON array") == json.loads(text)
    assert jsonio.nesting_depth('[{"a": "\\\\"}, [[["x"]]]]') == 4  # an escaped backslash ends the string


def test_integers_up_to_the_digit_limit_are_parsed_and_longer_ones_refused_naming_it():
    longest = "-" + "9" * MAX_INT_DIGITS
    assert jsonio.loads(f"[{longest}]", "weights", "a list") == [int(longest)]
    assert float(int(longest)) == -float("9" * MAX_INT_DIGITS)  # every accepted integer is a finite float64
    for digits in (MAX_INT_DIGITS + 1, 5000):
        with pytest.raises(ValidationError) as err:
            jsonio.loads(f"[{'1' * digits}]", "weights", "a list")
        assert err.value.field == "weights" and f"at most {MAX_INT_DIGITS} digits" in err.value.legal
        assert f"{digits} digits" in err.value.problem


def test_floats_that_overflow_are_refused_and_the_largest_finite_ones_parsed():
    assert jsonio.loads("[1.7976931348623157e308, -1e-400]", "weights", "a list") == [1.7976931348623157e308, -0.0]
    for text in ("[1e400]", "[-1e309]", "[" + "9" * 400 + ".0]"):
        with pytest.raises(ValidationError) as err:
            jsonio.loads(text, "weights", "a list")
        assert "float64 range" in err.value.legal and "overflows" in err.value.problem


def test_invalid_json_and_non_utf8_bytes_name_the_field_and_what_was_expected():
    with pytest.raises(ValidationError) as err:
        jsonio.loads('{"a": [1, 2', "schema", "a JSON object")
    assert err.value.field == "schema" and err.value.legal == "a JSON object" and "invalid JSON" in err.value.problem
    with pytest.raises(ValidationError) as err:
        jsonio.loads(b'["caf\xe9"]', "queries", "a JSON array")
    assert err.value.field == "queries" and "not UTF-8 (byte 5)" in err.value.problem


def test_files_name_the_flag_and_the_file(tmp_path):
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes(b'{"name": "caf\xe9"}')
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    missing = tmp_path / "missing.json"
    for path, problem in ((latin1, "not UTF-8"), (deep, "nested 1000 deep"), (missing, "cannot read")):
        with pytest.raises(ValidationError) as err:
            jsonio.load_file(path, "--queries", "a JSON array")
        assert err.value.field == "--queries" and str(path) in err.value.problem and problem in err.value.problem


@pytest.mark.parametrize("text, limit", [(DEEP, f"nested at most {MAX_JSON_DEPTH}"),
                                         (f'[{{"kind": "linear", "weights": [{HUGE_INT}]}}]', "digits"),
                                         ('[{"kind": "linear", "weights": [1e999, 1, 1, 1, 1]}]', "float64 range")])
def test_every_json_parser_of_shared_refuses_past_the_limits(text, limit):
    """Today these raise RecursionError / ValueError (queries, schema, card) or give inf."""
    with pytest.raises(ValidationError) as err:
        queries_from_json(text)
    assert err.value.field == "queries" and limit in err.value.legal
    doc = '{"name": "x", "epsilon": 1.0, "attributes": ' + text + "}"
    with pytest.raises(SchemaError) as err:
        Schema.from_json(doc)
    assert limit in err.value.legal
    with pytest.raises(ValidationError) as err:
        MechanismCard.from_json(text)
    assert err.value.field == "card" and limit in err.value.legal


def test_schema_and_card_files_that_are_not_utf8_are_refused_naming_the_file(tmp_path):
    path = tmp_path / "schema.json"
    path.write_bytes(json.dumps(SCHEMA).replace("ratings", "r\xe9").encode("latin-1"))
    for load, field in ((Schema.load, "schema"), (MechanismCard.load, "card")):
        with pytest.raises(ValidationError) as err:
            load(path)
        assert err.value.field == field and "not UTF-8" in err.value.problem and str(path) in err.value.problem


def test_what_we_print_is_strict_json_with_null_for_a_number_that_is_not_finite():
    value = {"bound": float("nan"), "high": float("inf"), "low": -float("inf"), "estimate": 1.5, "n": 3,
             "rows": [float("nan"), 2.0, (float("inf"),)], "label": "NaN", "flag": True}
    text = jsonio.dumps(value, sort_keys=True)
    assert "NaN" not in text.replace('"NaN"', "") and "Infinity" not in text
    assert json.loads(text) == {"bound": None, "high": None, "low": None, "estimate": 1.5, "n": 3,
                                "rows": [None, 2.0, [None]], "label": "NaN", "flag": True}
    assert json.loads(jsonio.dumps([0.1, 1e308])) == [0.1, 1e308]        # finite floats round-trip exactly
