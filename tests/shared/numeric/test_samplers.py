"""The numeric samplers: exact laws at their privacy boundary, the sampler against its law, unbiasedness,
the grid's variance against the papers' closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanism import integer_weights
from ldpsynth.shared.mechanisms.coins import seeded_coins
from ldpsynth.shared.numeric import (
    Duchi,
    HybridMechanism,
    PiecewiseMechanism,
    SquareWave,
    satisfies_epsilon_dp,
    worst_case_ratio,
)
from ldpsynth.shared.numeric import closed_form as cf
from ldpsynth.shared.numeric.grid import GridLaw, round_to_grid
from ldpsynth.shared.numeric.samplers import SlidingWindow

SAMPLERS = (Duchi, PiecewiseMechanism, HybridMechanism, SquareWave)
NAMES = {Duchi: "duchi", PiecewiseMechanism: "pm", HybridMechanism: "hm"}


@pytest.mark.parametrize("cls", SAMPLERS)
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_the_exact_law_is_epsilon_dp_at_its_boundary(cls: type, epsilon: float) -> None:
    m = cls(epsilon)
    law = m.law()
    assert (law.weights.sum(axis=1) == law.denominator).all()
    assert m.epsilon <= epsilon
    assert satisfies_epsilon_dp(law, m.epsilon)                        # the ε it claims
    assert not satisfies_epsilon_dp(law, math.nextafter(m.epsilon, 0))  # and not a float less
    assert float(worst_case_ratio(law)) == pytest.approx(math.exp(epsilon), rel=1e-12)


@pytest.mark.parametrize("cls", SAMPLERS)
def test_a_sampler_built_for_a_larger_epsilon_is_caught(cls: type) -> None:
    assert not satisfies_epsilon_dp(cls(1.5).law(), 1.0)


def test_a_report_impossible_from_one_input_is_unbounded() -> None:
    law = GridLaw(np.array([[1, 0], [0, 1]]), 1)
    assert worst_case_ratio(law) is None and not satisfies_epsilon_dp(law, 10.0)


@pytest.mark.parametrize("cls", SAMPLERS)
def test_the_selection_spends_exactly_each_reports_weight(cls: type) -> None:
    """Every U in [0, W) on a small integer space: the counts per report are the law's weights."""
    m = cls(1.0, 3, space_bits=12)
    parts = [m.pm, m.duchi] if isinstance(m, HybridMechanism) else [m]
    for part in parts:
        law = part.law()
        u = np.arange(law.denominator, dtype=np.int64)
        for i in range(law.weights.shape[0]):
            counts = np.bincount(part._select(np.full(u.size, i), u), minlength=law.weights.shape[1])
            assert counts.tolist() == law.weights[i].tolist()


@pytest.mark.parametrize("cls", [Duchi, PiecewiseMechanism, HybridMechanism])
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0])
def test_estimates_are_unbiased_on_every_grid_point_with_the_stated_variance(cls: type, epsilon: float) -> None:
    m = cls(epsilon, 6)
    p = m.law().probabilities()
    y = m.estimates(np.arange(m.reports))
    x = np.linspace(-1, 1, 65)
    np.testing.assert_allclose(p @ y, x, atol=1e-9)
    v = m.variance_coefficients()
    np.testing.assert_allclose(p @ (y * y) - x * x, v.a * x * x + v.c, rtol=1e-9)


@pytest.mark.parametrize("cls", [Duchi, PiecewiseMechanism, HybridMechanism])
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0])
def test_the_default_grid_moves_the_variance_by_under_a_third_of_a_percent(cls: type, epsilon: float) -> None:
    v = cls(epsilon).variance_coefficients()
    exact = cf.variance(NAMES[cls], epsilon, [0.0, 1.0])
    np.testing.assert_allclose([v.c, v.a + v.c], exact, rtol=3e-3)


def test_rounding_to_the_grid_is_unbiased_and_hits_the_ends() -> None:
    coins = seeded_coins(np.random.default_rng(5))
    x = np.full(400_000, 0.3 + 1e-3)
    i = round_to_grid(x, 9, coins)                       # grid step 0.25: 0.25 or 0.5
    assert set(np.unique(i).tolist()) == {5, 6}
    # α = 0.001, two-sided: the share of "up" is Binomial(n, p), p = (0.301 - 0.25)/0.25
    p = (0.301 - 0.25) / 0.25
    z = ((i == 6).mean() - p) / math.sqrt(p * (1 - p) / x.size)
    assert abs(z) < stats.norm.isf(0.0005)
    assert round_to_grid(np.array([-1.0, 1.0]), 9, coins).tolist() == [0, 8]


def _pooled(expected: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge neighbouring reports until every bin expects >= 5."""
    edges, acc = [], 0.0
    for j, e in enumerate(expected):
        acc += e
        if acc >= 5:
            edges.append(j + 1)
            acc = 0.0
    edges[-1] = expected.size
    cuts = np.array([0] + edges)
    return np.add.reduceat(expected, cuts[:-1]), np.add.reduceat(observed, cuts[:-1])


@pytest.mark.parametrize("cls", SAMPLERS)
@pytest.mark.parametrize("x", [0.25, -0.7 + 1e-4])       # a grid point, and a value between two
def test_the_seeded_sampler_matches_the_exact_law(cls: type, x: float) -> None:
    """χ² goodness of fit at α = 0.001 (fixed seed, >= 5 expected per pooled bin, 100,000 draws)."""
    m = cls(1.0, 4)
    n = 100_000
    reports = m.perturb(np.full(n, x), np.random.default_rng(20261206))
    p = m.law().probabilities()
    if isinstance(m, SquareWave):
        law = p[min(int((x + 1) * m.buckets / 2), m.buckets - 1)]
    else:
        t = (x + 1) * m.steps / 2
        lo = min(int(t), m.steps - 1)
        law = (lo + 1 - t) * p[lo] + (t - lo) * p[lo + 1]
    expected, observed = _pooled(n * law, np.bincount(reports, minlength=law.size).astype(float))
    assert stats.chisquare(observed, expected).pvalue > 0.001


@pytest.mark.parametrize("cls", SAMPLERS)
def test_the_secure_sampler_matches_the_exact_law(cls: type) -> None:
    """The OS CSPRNG path (cannot be seeded): χ² at α = 1e-6, so a false alarm is one run in a million."""
    m = cls(2.0, 3)
    n = 50_000
    reports = m.perturb_secure(np.full(n, 0.5))
    i = 6                             # x = 0.5: grid point 6 of 9 (Duchi, PM, HM), bucket 6 of 8 (SW)
    law = m.law().probabilities()[i]
    expected, observed = _pooled(n * law, np.bincount(reports, minlength=law.size).astype(float))
    assert stats.chisquare(observed, expected).pvalue > 1e-6


def test_hm_is_duchi_below_the_crossover_and_mixes_above() -> None:
    star = cf.hybrid_crossover()
    assert star == pytest.approx(0.6094, abs=1e-4)
    # eq. 6's root is where PM's variance at x = 0 meets Duchi's worst case (B^2)
    assert cf.variance("pm", star, 0.0) == pytest.approx(cf.variance("duchi", star, 0.0), rel=1e-12)
    low = HybridMechanism(0.6)
    assert low.alpha == 0 and set(np.unique(low.perturb(np.zeros(2000), np.random.default_rng(1)))) <= \
        {low.pm.reports, low.pm.reports + 1}
    assert HybridMechanism(1.0).alpha == pytest.approx(1 - math.exp(-0.5), abs=2**-32)


def test_the_papers_worst_case_table() -> None:
    """design.md §11's table (Wang2019ICDE eqs. 4 and 8, Lemma 1) at ε = 1 and 4."""
    assert [round(cf.worst_case_variance(m, 1.0), 2) for m in cf.MECHANISMS] == [4.68, 5.22, 4.29]
    assert [round(cf.worst_case_variance(m, 4.0), 2) for m in cf.MECHANISMS] == [1.08, 0.24, 0.22]


def test_arguments_are_validated() -> None:
    with pytest.raises(ValidationError, match="epsilon"):
        PiecewiseMechanism(float("nan"))
    with pytest.raises(ValidationError, match="grid_bits"):
        Duchi(1.0, 0)
    with pytest.raises(ValidationError, match="window"):
        SlidingWindow(1.0, 4, 0)
    with pytest.raises(ValidationError, match="epsilon"):
        integer_weights(1e-6, 1000, 1000, space_bits=12)
