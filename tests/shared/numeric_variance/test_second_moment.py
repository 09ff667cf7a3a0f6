"""E[y² | x] = A x² + c: the grid-exact coefficients and Wang2019ICDE's closed forms against the second moment
computed from the samplers' integer weights (the exact law on the grid), for several x and ε."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.numeric.closed_form import hybrid_crossover
from ldpsynth.shared.numeric.samplers import Duchi, HybridMechanism, PiecewiseMechanism
from ldpsynth.shared.numeric.variance import closed_form_second_moment, second_moment

ROWS = np.array([0, 100, 333, 512, 700, 901, 1024])         # grid points x_i = -1 + 2i/1024, both ends included


def law_second_moment(sampler: Duchi | PiecewiseMechanism | HybridMechanism, rows: np.ndarray) -> np.ndarray:
    """:math:`\\sum_y P[y \\mid i] y^2` from the law's integer weights, for the input grid points ``rows``."""
    law = sampler.law()
    y = sampler.estimates(np.arange(sampler.reports))
    weights = law.weights[rows]
    return np.array([float(sum(int(w) * v for w, v in zip(row.tolist(), (y * y).tolist()))) / law.denominator
                     for row in weights]) if weights.dtype == object else (weights @ (y * y)) / law.denominator


@pytest.mark.parametrize("epsilon", [0.7, 1.0, 2.0, 4.0])
@pytest.mark.parametrize(("cls", "name"), [(PiecewiseMechanism, "pm"), (HybridMechanism, "hm"), (Duchi, "duchi")])
def test_the_second_moment_is_quadratic_in_x_with_the_closed_forms_coefficients(cls: type, name: str,
                                                                                 epsilon: float) -> None:
    sampler = cls(epsilon)
    x = -1.0 + 2.0 * ROWS / 1024
    exact = law_second_moment(sampler, ROWS)
    grid = second_moment(sampler)
    np.testing.assert_allclose(exact, grid.a * x * x + grid.c, rtol=1e-9)          # float rounding only
    closed = closed_form_second_moment(name, sampler.epsilon)
    # the window rounded to whole cells moves PM's moments by O(1/M): within 0.5 % at M = 2^10
    np.testing.assert_allclose(exact, closed.a * x * x + closed.c, rtol=5e-3)
    assert grid.a == pytest.approx(closed.a, rel=5e-3, abs=1e-12)


def test_the_closed_forms_are_the_papers() -> None:
    s = np.exp(0.5)                                                               # ε = 1
    pm = closed_form_second_moment("pm", 1.0)
    assert pm.a == pytest.approx(1.0 + 1.0 / (s - 1.0)) and pm.c == pytest.approx((s + 3) / (3 * (s - 1) ** 2))
    b2 = ((np.e + 1) / (np.e - 1)) ** 2
    assert closed_form_second_moment("duchi", 0.5) == closed_form_second_moment("hm", 0.5)  # HM is Duchi below ε*
    assert closed_form_second_moment("duchi", 1.0).c == pytest.approx(b2)
    alpha = 1.0 - np.exp(-0.5)
    hm = closed_form_second_moment("hm", 1.0)
    assert hm.a == pytest.approx(alpha * pm.a) and hm.c == pytest.approx(alpha * pm.c + (1 - alpha) * b2)
    assert second_moment(HybridMechanism(hybrid_crossover() - 1e-3)).a == 0.0
    assert second_moment(HybridMechanism(hybrid_crossover() + 1e-3)).a > 0.0
