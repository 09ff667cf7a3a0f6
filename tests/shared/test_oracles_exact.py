"""The oracles' exact laws on small domains: privacy boundary, pure-protocol constants, closed-form variance.

No randomness: :mod:`ldpsynth.shared.mechanisms.exact` enumerates every outcome of each oracle's own
sampler, and everything here is compared exactly (``Fraction``) with the definitions written out
independently in ``oracle_reference.py``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanisms import OLH, OUE, HadamardResponse, SubsetSelection, exact
from ldpsynth.shared.mechanisms import oue as oue_module
from ldpsynth.shared.mechanisms.coins import Shape

from .oracle_reference import design_ratio, support, textbook_probability

CLASSES = [OUE, OLH, HadamardResponse, SubsetSelection]
#: (class, k, epsilon): every oracle on small domains, at small, moderate and large epsilon.
CASES = [(cls, k, eps) for cls in CLASSES for k, eps in [(2, 1.0), (3, 0.3), (5, 1.0), (8, 2.0), (7, 5.0)]] + [
    (OUE, 10, 1.0), (OLH, 16, 1.0), (OLH, 6, 3.0), (HadamardResponse, 16, 0.5), (SubsetSelection, 16, 1.0),
    (SubsetSelection, 12, 2.5)]


def case_id(case: tuple) -> str:
    cls, k, eps = case
    return f"{cls.name}-k{k}-eps{eps}"


def laws(oracle) -> list[exact.OutputDistribution]:
    return [exact.output_distribution(oracle, x) for x in range(oracle.domain_size)]


def report_of(oracle, key: bytes) -> np.ndarray:
    if isinstance(oracle, (OUE, SubsetSelection)):
        return np.frombuffer(key, np.uint8)
    return np.frombuffer(key, np.uint64 if isinstance(oracle, OLH) else np.int64)[0]


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_enumerated_law_is_the_textbook_law_and_the_boundary_is_tight(case):
    """The sampler's exact law equals the definition's, report by report; its worst ratio is the
    designed one; the exact check passes at the delivered epsilon and fails at the next float below."""
    cls, k, eps = case
    oracle = cls(eps, k)
    distributions = laws(oracle)
    for x, law in enumerate(distributions):
        assert sum(law.weights.values()) == law.denominator
        for key in law.weights:
            assert law.probability(key) == textbook_probability(oracle, x, report_of(oracle, key)), (x, key)
    ratio = exact.worst_case_ratio(oracle)
    assert ratio == design_ratio(oracle)
    assert oracle.epsilon <= eps
    assert exact.satisfies_epsilon_dp(oracle, oracle.epsilon)
    assert not exact.satisfies_epsilon_dp(oracle, math.nextafter(oracle.epsilon, 0.0))
    assert math.log(ratio) == pytest.approx(oracle.epsilon, rel=1e-14)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_pure_protocol_constants_are_those_of_the_enumerated_law(case):
    """p*, q*, pi_1, pi_2 computed from the exact law and the reference supports equal the declared ones,
    for every input and every (pair of) other value(s): the oracle is pure and pair-exchangeable."""
    cls, k, eps = case
    oracle = cls(eps, k)
    proto = oracle.protocol
    for x, law in enumerate(laws(oracle)):
        total = np.zeros(k, dtype=object)
        pairs = np.zeros((k, k), dtype=object)
        for key, weight in law.weights.items():
            s = support(oracle, report_of(oracle, key)).astype(np.int64).astype(object)
            total += weight * s
            pairs += weight * np.outer(s, s)
        prob = [Fraction(v, law.denominator) for v in total]
        joint = [[Fraction(v, law.denominator) for v in row] for row in pairs]
        others = [v for v in range(k) if v != x]
        assert prob[x] == proto.p
        assert all(prob[v] == proto.q for v in others)
        assert all(joint[x][v] == proto.pair_true for v in others)
        assert all(joint[u][v] == proto.pair_other for u in others for v in others if u != v)


@pytest.mark.parametrize("case", [c for c in CASES if c[1] >= 3], ids=case_id)
def test_closed_form_variance_is_the_exact_variance(case):
    """For integer weight vectors w, the exact Var(sum_v w(v) c_hat(v)) of one report holding x, from the
    enumerated law (Var T / (p*-q*)^2), equals PureProtocol.linear_variance with histogram e_x (rel 1e-12)."""
    cls, k, eps = case
    oracle = cls(eps, k)
    rng = np.random.default_rng(k)
    weights = np.vstack([np.eye(k)[0], np.ones(k), np.arange(k), rng.integers(-5, 6, (3, k))]).astype(np.int64)
    signal2 = oracle.protocol.signal**2
    for x, law in enumerate(laws(oracle)):
        first = np.zeros(len(weights), dtype=object)
        second = np.zeros(len(weights), dtype=object)
        for key, weight in law.weights.items():
            t = weights @ support(oracle, report_of(oracle, key)).astype(np.int64)
            first += weight * t.astype(object)
            second += weight * (t * t).astype(object)
        exact_var = [(Fraction(b, law.denominator) - Fraction(a, law.denominator) ** 2) / signal2
                     for a, b in zip(first, second)]
        closed = oracle.protocol.linear_variance(weights, np.eye(k, dtype=np.int64)[x])
        np.testing.assert_allclose(closed, [float(v) for v in exact_var], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_point_coefficients_are_the_one_hot_linear_variance(case):
    """Var c_hat(v) = a n + b c(v) (PureProtocol.point_coefficients) equals linear_variance with the one-hot
    weights e_v, for every v of a random histogram (rel 1e-12); linear_variance is checked exactly above."""
    cls, k, eps = case
    proto = cls(eps, k).protocol
    histogram = np.random.default_rng(k).integers(0, 50, k)
    a, b = proto.point_coefficients()
    np.testing.assert_allclose(a * histogram.sum() + b * histogram,
                               proto.linear_variance(np.eye(k), histogram), rtol=1e-12)


# ----- broken samplers are caught ----------------------------------------------------------------------


def test_a_true_bit_slightly_above_one_half_is_caught(monkeypatch):
    """OUE whose true bit is 1 with probability (2^63 + 2^24)/2^64, 2^-39 more than 1/2: far below what any
    sampling test could see, above the float rounding of the delivered epsilon (2^-52 relative): caught."""
    oracle = OUE(1.0, 4)
    assert exact.satisfies_epsilon_dp(oracle, oracle.epsilon)
    monkeypatch.setattr(oue_module, "TRUE_BIT", ((1 << 63) + (1 << 24), 1 << 64))
    assert exact.worst_case_ratio(oracle) > design_ratio(oracle)
    assert not exact.satisfies_epsilon_dp(oracle, oracle.epsilon)


class SkewedCoins:
    """Coins whose uniform draws never take their largest value (below(b) draws below b - 1)."""

    def __init__(self, coins):
        self.coins = coins

    def below(self, bound: int, shape: Shape) -> np.ndarray:
        return self.coins.below(max(bound - 1, 1), shape)

    def bernoulli(self, numerator: int, denominator: int, shape: Shape) -> np.ndarray:
        return self.coins.bernoulli(numerator, denominator, shape)


class SkewedSubsets(SubsetSelection):
    """Subset selection whose Floyd draws are skewed: the subsets of the other values are not uniform."""

    def _sample(self, codes, coins):
        return super()._sample(codes, SkewedCoins(coins))


def test_a_subset_that_is_not_uniform_is_caught():
    """The skewed subsets change the law (not the textbook one) and push the worst ratio above A/L."""
    good, bad = SubsetSelection(1.0, 8), SkewedSubsets(1.0, 8)
    assert good.subset_size == bad.subset_size == 2
    law = exact.output_distribution(bad, 0)
    assert any(law.probability(key) != textbook_probability(bad, 0, report_of(bad, key)) for key in law.weights)
    ratio = exact.worst_case_ratio(bad)
    assert ratio is None or ratio > design_ratio(bad)
    assert not exact.satisfies_epsilon_dp(bad, bad.epsilon)
    assert exact.satisfies_epsilon_dp(good, good.epsilon)


@pytest.mark.parametrize("cls", [OLH, HadamardResponse])
def test_a_keep_probability_slightly_too_high_is_caught(cls):
    """OLH's randomized response keeping with weight A (1 + 2^-40) (the total adjusted), HR's coin
    big + 2^24 over 2^64: off by about 2^-40 relative, caught."""
    oracle = cls(2.0, 6)
    assert exact.satisfies_epsilon_dp(oracle, oracle.epsilon)
    if isinstance(oracle, OLH):
        extra = oracle.keep_weight >> 40
        oracle.keep_weight += extra
        oracle.total_weight += extra
    else:
        oracle.big += 1 << 24
        oracle.small -= 1 << 24
    assert not exact.satisfies_epsilon_dp(oracle, oracle.epsilon)


def test_enumeration_refuses_large_domains_and_outcome_spaces():
    with pytest.raises(ValidationError, match="oracle.domain_size"):
        exact.output_distribution(OUE(1.0, 17), 0)
    with pytest.raises(ValidationError, match="outcome combinations"):
        exact.output_distribution(SubsetSelection(0.2, 16), 0)
    with pytest.raises(ValidationError, match="code"):
        exact.output_distribution(OUE(1.0, 4), 4)
