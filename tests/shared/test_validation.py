"""The one validation module: every check names its parameter and legal range, at the boundary."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import (
    check_bool,
    check_choice,
    check_codes,
    check_epsilon,
    check_int,
    check_probability,
    check_real,
    check_seconds,
    is_finite_real,
    real_range,
)


def raises(call, field: str, legal: str) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        call()
    assert info.value.field == field and info.value.legal == legal, info.value
    assert field in str(info.value) and legal in str(info.value)
    return info.value


@pytest.mark.parametrize("kwargs, legal", [
    ({}, "a finite number"),
    ({"low": 0.0, "low_open": True}, "a finite number > 0"),
    ({"low": 0.0}, "a finite number >= 0"),
    ({"high": 1.5}, "a finite number <= 1.5"),
    ({"low": 0.0, "high": 1.0, "low_open": True, "high_open": True}, "a number in (0, 1)"),
    ({"low": 0.0, "high": 1.0, "low_open": True}, "a number in (0, 1]"),
    ({"low": 0.0, "finite": False}, "a number >= 0"),
    ({"low": 0.0, "unit": "seconds"}, "a finite number of seconds >= 0"),
])
def test_real_range_states_the_bounds_as_checked(kwargs, legal):
    assert real_range(kwargs.get("low"), kwargs.get("high"), **{k: v for k, v in kwargs.items()
                                                                if k not in ("low", "high")}) == legal


def test_check_real_boundaries_open_and_closed():
    assert check_real(0.0, "x", low=0.0) == 0.0
    raises(lambda: check_real(0.0, "x", low=0.0, low_open=True), "x", "a finite number > 0")
    assert check_real(1, "x", low=0.0, high=1.0) == 1.0 and isinstance(check_real(1, "x"), float)
    raises(lambda: check_real(1.0, "x", low=0.0, high=1.0, high_open=True), "x", "a number in [0, 1)")
    assert check_real(math.nextafter(1.0, 0.0), "x", low=0.0, high=1.0, high_open=True) < 1.0
    assert check_real(np.float32(0.5), "x") == 0.5 and check_real(Fraction(1, 4), "x") == 0.25


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), True, "1.0", None, [1.0],
                                   np.array([1.0]), 10**400, complex(1, 0)])
def test_check_real_rejects_non_finite_and_non_numbers(value):
    raises(lambda: check_real(value, "tau", low=0.0, low_open=True), "tau", "a finite number > 0")


def test_check_real_infinity_only_when_asked_and_nan_never():
    assert check_real(math.inf, "epsilon", low=0.0, finite=False) == math.inf
    raises(lambda: check_real(math.nan, "epsilon", low=0.0, finite=False), "epsilon", "a number >= 0")
    raises(lambda: check_real(math.inf, "epsilon", low=0.0, high=5.0, finite=False), "epsilon", "a number in [0, 5]")


def test_legal_override_states_the_same_range_more_fully():
    raises(lambda: check_real(0, "K", low=0.0, low_open=True, legal="a finite number > 0 (the smoothness order)"),
           "K", "a finite number > 0 (the smoothness order)")
    raises(lambda: check_int(2**63, "max", -2**63, 2**63 - 1, legal="an integer in [-2^63, 2^63 - 1]"),
           "max", "an integer in [-2^63, 2^63 - 1]")


def test_presets():
    assert check_epsilon(2) == 2.0
    raises(lambda: check_epsilon(0.0), "epsilon", "a finite number > 0")
    raises(lambda: check_epsilon(-1, "rho"), "rho", "a finite number > 0")
    assert check_probability(0.5, "delta") == 0.5
    for bad in (0.0, 1.0, math.nan):
        raises(lambda: check_probability(bad, "level"), "level", "a number in (0, 1)")
    assert check_seconds(0, "delay", allow_zero=True) == 0.0
    raises(lambda: check_seconds(0, "deadline"), "deadline", "a finite number of seconds > 0")
    raises(lambda: check_seconds(math.inf, "--grace", allow_zero=True), "--grace", "a finite number of seconds >= 0")


def test_check_int():
    assert check_int(np.int64(7), "rounds", 1, 7) == 7 and type(check_int(np.int64(7), "rounds", 1)) is int
    for bad in (0, 8, 7.0, True, "7", None):
        raises(lambda: check_int(bad, "rounds", 1, 7), "rounds", "an integer in [1, 7]")
    raises(lambda: check_int(-1, "n", 0), "n", "an integer >= 0")


def test_check_bool_and_choice():
    assert check_bool(False, "round_to_grid") is False
    for bad in (0, 1, "true", None, np.bool_(True)):
        raises(lambda: check_bool(bad, "round_to_grid"), "round_to_grid", "true or false")
    assert check_choice("paper", "noise", ("safe", "paper")) == "paper"
    assert check_choice(None, "allocation", ("adaptive", None)) is None
    assert check_choice("em", "selection", {"em": 1, "rnm": 2}) == "em"  # a mapping: its keys
    for bad in ("Safe", None, ["safe"], np.array(["safe"]), {"safe": 1}):
        raises(lambda: check_choice(bad, "noise", ("safe", "paper")), "noise", "one of safe, paper")


def test_check_codes_range_dtype_and_position():
    out = check_codes(np.array([0, 4, 2], np.uint8), "codes", 5)
    assert out.dtype == np.int64 and out.tolist() == [0, 4, 2]
    assert check_codes([], "codes", 5).dtype == np.int64  # an empty list is float64 to numpy: no code is bad
    err = raises(lambda: check_codes(np.array([[0, 1], [5, 2]]), "codes", 5), "codes", "integer codes in [0, 4]")
    assert (err.problem, err.position) == ("out of range", 2)  # flat index
    err = raises(lambda: check_codes(np.array([3, -1]), "public_keys", 5), "public_keys", "integer codes in [0, 4]")
    assert err.position == 1
    # A uint64 above 2^63 must not wrap around to a negative int64 (nor into range).
    err = raises(lambda: check_codes(np.array([1, 2**63 + 1], np.uint64), "codes", 2**62), "codes",
                 f"integer codes in [0, {2**62 - 1}]")
    assert err.position == 1
    for bad in (np.array([0.0, 1.0]), np.array([True, False]), np.array([1, 2], dtype=object)):
        assert raises(lambda: check_codes(bad, "codes", 5), "codes",
                      "integer codes in [0, 4]").problem == "not integers"
    raises(lambda: check_codes(np.zeros((2, 2), np.int64), "codes", 5, ndim=1), "codes",
           "a 1-d array of integer codes in [0, 4]")


def test_messages_never_quote_the_array():
    secret = np.array([3, 1, 4, 1, 5, 9, 2, 6])
    with pytest.raises(ValidationError) as info:
        check_codes(secret, "codes", 9)
    assert "3, 1, 4" not in str(info.value) and info.value.position == 5


def test_is_finite_real():
    assert is_finite_real(np.int64(3)) and is_finite_real(0.5)
    assert not any(is_finite_real(v) for v in (True, math.nan, math.inf, "1", None, 10**400))
