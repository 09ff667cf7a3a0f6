"""The one function from ε to exact integer weights (``mechanism.integer_weights``): mechanism E's
weights are its published formula bit for bit, and every law it gives is within its space and ε."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanism import SPACE_BITS, integer_weights, rational_weights
from ldpsynth.shared.privacy import delivered_epsilon, log_ratio_exceeds

EPSILONS = (1e-9, 0.01, 0.1, 0.5, 0.6931471805599453, 1.0, 1.5, 2.0, 3.3, 4.0, 8.0, 20.0, 40.0, 43.5, 44.9, 45.0, 1e6)
DOMAINS = (2, 3, 5, 16, 1000, 2**20, 2**30, 2**40)


def e_published(epsilon: float, k: int) -> tuple[int, int]:
    """Mechanism E's formula as its conformance vectors and the TypeScript SDK state it."""
    space, margin = 1 << 62, 2.0**-50
    growth = math.exp(min(epsilon, 45.0))
    lie = max(1, int(space // (growth + k)))
    keep = min(int(lie * (growth * (1.0 - margin))), space - (k - 1) * lie)
    while keep > lie and log_ratio_exceeds(keep, lie, epsilon):
        keep -= 1
    return keep, lie


@pytest.mark.parametrize("k", DOMAINS)
def test_mechanism_e_is_high_1_low_k_minus_1_with_a_one_unit_reserve(k: int) -> None:
    for eps in (*EPSILONS, *(math.nextafter(e, 0.0) for e in EPSILONS), 0.1 * 3, 2.0 / 3.0):
        if eps < 1e-6 and k > 2**30:
            continue  # below E's resolution at this k (tested below)
        assert rational_weights(eps, k) == integer_weights(eps, 1, k - 1, reserve=1) == e_published(eps, k)


@pytest.mark.parametrize(("high", "low"), [(1, 1), (1024, 1024), (3, 1021), (64, 255), (7, 0), (1, 2**40)])
def test_every_law_fits_its_space_and_never_exceeds_its_epsilon(high: int, low: int) -> None:
    for eps in EPSILONS:
        if eps < 4.0 * (2.0**-50 + (high + low) / 2.0**62):
            continue  # below the resolution (tested below)
        a, l = integer_weights(eps, high, low)
        assert a > l >= 1
        assert high * a + low * l <= 1 << SPACE_BITS
        assert not log_ratio_exceeds(a, l, eps)                 # A/L <= e^ε exactly
        assert delivered_epsilon(a, l) <= eps
        if 0.01 <= eps <= 20.0:  # L as large as the space allows, A/L close to e^ε (a tiny ε: the space caps A)
            assert l >= (1 << SPACE_BITS) / (high * math.exp(eps) + low) * (1.0 - 2.0**-50) - 1
            assert eps - delivered_epsilon(a, l) <= 2.0**-49 + 2.0 / l


def test_a_reserve_lowers_l_only() -> None:
    a0, l0 = integer_weights(1.0, 5, 11)
    a1, l1 = integer_weights(1.0, 5, 11, reserve=1)
    assert l1 < l0 and Fraction(a1, l1) <= Fraction(a0 + 1, l0)


def test_a_small_space_states_an_epsilon_it_resolves() -> None:
    with pytest.raises(ValidationError) as info:
        integer_weights(1e-6, 1000, 1000, space_bits=16)
    assert info.value.field == "epsilon" and "1000 weights A and 1000 weights L" in info.value.legal
    stated = float(re.search(r">= ([0-9.e+-]+)", info.value.legal).group(1))
    a, l = integer_weights(stated, 1000, 1000, space_bits=16)
    assert 1000 * (a + l) <= 1 << 16 and not log_ratio_exceeds(a, l, stated)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"high": 0}, "high"), ({"low": -1}, "low"), ({"reserve": -1}, "reserve"), ({"space_bits": 63}, "space_bits"),
    ({"space_bits": 7}, "space_bits"), ({"epsilon": float("nan")}, "epsilon"), ({"epsilon": 0.0}, "epsilon")])
def test_bad_arguments_are_named(kwargs: dict[str, float], field: str) -> None:
    args = {"epsilon": 1.0, "high": 1, "low": 1} | kwargs
    with pytest.raises(ValidationError) as info:
        integer_weights(args.pop("epsilon"), args.pop("high"), args.pop("low"), **args)  # type: ignore[arg-type]
    assert info.value.field == field
