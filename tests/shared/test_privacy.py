"""The privacy boundary of mechanism E, pinned exactly (WYZ Lemma 1 / eq. 16).

No randomness except hypothesis' example generation: every check here is exact arithmetic on the
integer weights (A = keep_weight, L = lie_weight, N = A + (k-1) L) with ``Fraction``/``Decimal``.
"""

from __future__ import annotations

import doctest
import math
from decimal import ROUND_FLOOR, Context, Decimal, localcontext
from fractions import Fraction
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ldpsynth.shared.privacy as privacy_module
from ldpsynth.shared.errors import LdpsynthError, ValidationError
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.privacy import (
    PrivacyGuaranteeError,
    assert_epsilon_dp,
    delivered_epsilon,
    max_privacy_loss,
    satisfies_epsilon_dp,
)

EPSILONS = [1e-6, 1e-5, 1e-3, 0.01, 0.1, 0.5, 1.0, math.log(3), math.log(9), 2.0, 5.0, 10.0, 20.0, 30.0, 38.0,
            39.9, 40.0, 41.0, 42.0, 42.9, 43.0, 45.0, 50.0, 60.0]
DOMAINS = [2, 3, 5, 64, 1000, 2**16, 2**20]
SPACE = 2**62


def ln_ratio(a: int, b: int, digits: int = 100) -> Decimal:
    """ln(a/b) to ``digits`` digits: an independent high-precision reference (every step in one context)."""
    ctx = Context(prec=digits)
    return ctx.subtract(ctx.ln(Decimal(a)), ctx.ln(Decimal(b)))


def smallest_float_at_least(value: Decimal) -> float:
    """The least double >= ``value``: ``float`` rounds to nearest, so it is that double or the next one up
    (compared as exact rationals)."""
    nearest = float(value)
    return nearest if Fraction(nearest) >= Fraction(value) else math.nextafter(nearest, math.inf)


def weights(k: int, a: int, l: int) -> SimpleNamespace:
    """A bare randomized response given by its weights (the checker reads nothing else)."""
    return SimpleNamespace(domain_size=k, keep_weight=a, lie_weight=l, total_weight=a + (k - 1) * l)


def check_boundary(eps: float, k: int) -> None:
    """The guarantee of E(eps, k) at its boundary; shared by the grid and the hypothesis test."""
    m = MechanismE(eps, k)
    a, l, n = m.keep_weight, m.lie_weight, m.total_weight
    loss = ln_ratio(a, l)
    # The checker computes the exact loss ...
    assert abs(max_privacy_loss(m) - loss) <= loss * Decimal("1e-58")
    # ... the delivered ε is the smallest float >= it, and never more than asked ...
    assert Decimal(m.epsilon) >= loss > Decimal(math.nextafter(m.epsilon, 0.0))
    assert m.epsilon <= eps
    # ... and the exact check passes at the delivered ε, fails at the largest float below the loss.
    assert satisfies_epsilon_dp(m, m.epsilon)
    assert satisfies_epsilon_dp(m, eps)
    assert not satisfies_epsilon_dp(m, math.nextafter(m.epsilon, 0.0))
    # Keep probability A/N never above the ideal 1/g(ε) = 1/(1 + (k-1)e^-ε) at the ε asked for
    # (equivalently A/L <= e^ε; the true gap is >= 2^-50 relative, far above the 1e-100 rounding).
    with localcontext() as ctx:
        ctx.prec = 100
        ideal_keep = 1 / (1 + (k - 1) * (-Decimal(eps)).exp())
        assert Decimal(a) / Decimal(n) <= ideal_keep
        assert Fraction(a, l) <= Fraction((Decimal(eps)).exp())  # exp rounded to 100 digits
    # Utility: A/L is as close to e^ε as the 2^62-point space allows.
    assert n <= SPACE
    if eps <= 40.0:
        deficit = Decimal(eps) - loss
        assert deficit <= Decimal(2.0**-49 + 2 * (math.exp(eps) + k) / (SPACE * math.exp(eps)))
    elif eps > float(ln_ratio(SPACE - (k - 1), 1)):
        assert (a, l) == (SPACE - (k - 1), 1)


@pytest.mark.parametrize("k", DOMAINS)
@pytest.mark.parametrize("eps", EPSILONS)
def test_privacy_boundary_grid(eps, k):
    """ε in [1e-6, 60] (including 40 <= ε < 43, where the weights are partly space-capped), k in [2, 2^20]."""
    check_boundary(eps, k)


@settings(max_examples=300, deadline=None)
@given(eps=st.floats(min_value=1e-6, max_value=60.0), k=st.integers(min_value=2, max_value=2**20))
def test_privacy_boundary_property(eps, k):
    check_boundary(eps, k)


@pytest.mark.parametrize("k", [2, 5, 2**20])
@pytest.mark.parametrize("eps", [1e-6, 1e-3, 0.5, 1.0, 5.0, 20.0, 38.0, 40.0, 42.0, 45.0, 60.0])
def test_mechanism_for_a_larger_epsilon_fails_the_check(eps, k):
    """E(1.1 ε) is not ε-DP, unless the 2^62 space caps it below ε (ln(2^62 - k + 1) ≈ 42.975 < 43)."""
    bigger = MechanismE(1.1 * eps, k)
    cap = float(ln_ratio(SPACE - (k - 1), 1))
    if eps < cap:
        assert not satisfies_epsilon_dp(bigger, eps)
        with pytest.raises(PrivacyGuaranteeError, match="exceeds epsilon"):
            assert_epsilon_dp(bigger, eps)
    else:
        assert bigger.epsilon <= cap < eps and satisfies_epsilon_dp(bigger, eps)


@pytest.mark.parametrize("k", [2, 3, 5, 8])
@pytest.mark.parametrize("eps", [0.01, 1.0, math.log(9), 7.5, 60.0])
def test_max_privacy_loss_is_the_brute_force_maximum(eps, k):
    """max over all input pairs (x, x') and outputs y of P(y|x)/P(y|x') from the exact pmf is A/L."""
    m = MechanismE(eps, k)
    pmf = [[Fraction(m.keep_weight if x == y else m.lie_weight, m.total_weight) for y in range(k)] for x in range(k)]
    assert all(sum(row) == 1 for row in pmf)
    worst = max(pmf[x][y] / pmf[x2][y] for x in range(k) for x2 in range(k) for y in range(k))
    assert worst == Fraction(m.keep_weight, m.lie_weight)
    assert abs(max_privacy_loss(m) - ln_ratio(worst.numerator, worst.denominator)) <= Decimal("1e-58")


def test_boundary_at_ln9():
    """Binary randomized response with keep probability 9/10 has loss exactly ln 9 (OpenDP's example):
    it passes at the smallest float >= ln 9 and fails at the largest float below."""
    rr = weights(2, 9, 1)
    at = smallest_float_at_least(ln_ratio(9, 1))
    assert satisfies_epsilon_dp(rr, at)
    assert not satisfies_epsilon_dp(rr, math.nextafter(at, 0.0))
    assert satisfies_epsilon_dp(rr, math.log(9)) == (Decimal(math.log(9)) >= ln_ratio(9, 1))


@pytest.mark.parametrize("eps", [1e-6, 0.7, math.log(9), 33.0])
def test_check_is_exact_far_below_float_resolution(eps):
    """A/L within 2^-300 of e^ε: a float or 60-digit comparison cannot tell A from A + 1; the check must.

    A = floor(2^300 e^ε), so A/L < e^ε < (A+1)/L: the first is ε-DP, the second is not.
    """
    l = 2**300
    with localcontext() as ctx:
        ctx.prec = 300
        a = int((Decimal(l) * Decimal(eps).exp()).to_integral_value(rounding=ROUND_FLOOR))
    assert satisfies_epsilon_dp(weights(2, a, l), eps)
    assert not satisfies_epsilon_dp(weights(2, a + 1, l), eps)
    assert float(max_privacy_loss(weights(2, a + 1, l))) == pytest.approx(eps, rel=1e-15)


def test_checker_ignores_the_advertised_epsilon():
    """Only the weights count: a mechanism of ε = 2 claiming ε = 1 fails the ε = 1 check."""
    real = MechanismE(2.0, 5)
    liar = SimpleNamespace(domain_size=5, keep_weight=real.keep_weight, lie_weight=real.lie_weight,
                           total_weight=real.total_weight, epsilon=1.0)
    assert not satisfies_epsilon_dp(liar, 1.0) and satisfies_epsilon_dp(liar, 2.0)


def test_degenerate_weights():
    """A = L: loss 0 (passes any ε); a zero weight: infinite loss (fails every ε); A < L counts too."""
    assert max_privacy_loss(weights(4, 3, 3)) == 0 and satisfies_epsilon_dp(weights(4, 3, 3), 1e-300)
    for w in (weights(4, 5, 0), weights(4, 0, 5)):
        assert max_privacy_loss(w) == Decimal("Infinity")
        assert not satisfies_epsilon_dp(w, 1e300)
    inverted = weights(3, 1, 9)  # the truth is *less* likely: loss ln 9 all the same
    assert abs(max_privacy_loss(inverted) - ln_ratio(9, 1)) < Decimal("1e-58")
    assert not satisfies_epsilon_dp(inverted, 2.0) and satisfies_epsilon_dp(inverted, 2.2)


@pytest.mark.parametrize("bad, field", [
    (SimpleNamespace(domain_size=5, keep_weight=3, lie_weight=1, total_weight=8), "mechanism.total_weight"),
    (weights(1, 3, 1), "mechanism.domain_size"),
    (weights(3, -1, 2), "mechanism.keep_weight"),
    (weights(3, 0, 0), "mechanism.keep_weight"),
    (SimpleNamespace(domain_size=3, keep_weight=3.0, lie_weight=1, total_weight=5), "mechanism.keep_weight"),
    (SimpleNamespace(domain_size=3, keep_weight=True, lie_weight=1, total_weight=3), "mechanism.keep_weight"),
    (SimpleNamespace(domain_size=3, keep_weight=3, lie_weight=1), "mechanism.total_weight"),
    (object(), "mechanism.domain_size"),
])
def test_malformed_mechanisms_are_rejected(bad, field):
    for call in (lambda: max_privacy_loss(bad), lambda: satisfies_epsilon_dp(bad, 1.0)):
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.field == field and info.value.legal in str(info.value)


@pytest.mark.parametrize("eps", [float("nan"), float("inf"), 0.0, -1.0, "1", True, None])
def test_bad_epsilon_in_the_check(eps):
    with pytest.raises(ValidationError) as info:
        satisfies_epsilon_dp(MechanismE(1.0, 5), eps)
    assert info.value.field == "epsilon" and "a finite number > 0" in str(info.value)


def test_assert_epsilon_dp():
    m = MechanismE(1.0, 5)
    assert assert_epsilon_dp(m, m.epsilon) == max_privacy_loss(m)
    with pytest.raises(PrivacyGuaranteeError) as info:
        assert_epsilon_dp(m, 0.99)
    assert isinstance(info.value, LdpsynthError)
    message = str(info.value)
    assert "0.99" in message and str(m.keep_weight) in message and "0.99999999999999" in message


def test_max_privacy_loss_digits():
    m = MechanismE(1.0, 5)
    assert len(max_privacy_loss(m, digits=30).as_tuple().digits) == 30
    assert len(max_privacy_loss(m).as_tuple().digits) == 60
    with pytest.raises(ValidationError):
        max_privacy_loss(m, digits=3)


def test_module_doctests():
    assert doctest.testmod(privacy_module, raise_on_error=False).failed == 0


@pytest.mark.parametrize(("big", "small"), [(9, 1), (2, 1), ((1 << 64) - 5, 5), ((1 << 62) - 3, (1 << 62) - 4),
                                            (10**30 + 1, 10**30), (7_389_056_098_930_650, 10**15)])
def test_delivered_epsilon_is_the_least_float_at_or_above_the_exact_loss(big: int, small: int) -> None:
    """The one definition of the ε a ratio delivers, against an independent 100-digit reference; the next
    float down is refused by the exact check (the claim is tight, never below the loss)."""
    got = delivered_epsilon(big, small)
    assert got == smallest_float_at_least(ln_ratio(big, small))
    assert satisfies_epsilon_dp(weights(2, big, small), got)
    assert not satisfies_epsilon_dp(weights(2, big, small), math.nextafter(got, 0.0))


def test_every_mechanism_states_the_delivered_epsilon_of_its_own_weights() -> None:
    from ldpsynth.shared.mechanism import MechanismE

    m = MechanismE(1.0, 5)
    assert m.epsilon == delivered_epsilon(m.keep_weight, m.lie_weight) <= 1.0
