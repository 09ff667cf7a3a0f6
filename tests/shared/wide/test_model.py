"""The Private-PGM model of all attributes: it recovers a known distribution from noisy views, and samples it."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mbi")

from ldpsynth.shared.wide import WideDomain, pairs, simulate
from ldpsynth.shared.wide.model import fit, total_variation

DOMAIN = WideDomain(("a", "b", "c"), (3, 2, 4))


def _rows(rng: np.random.Generator, n: int) -> np.ndarray:
    """A chain a -> b -> c with strong dependence."""
    a = rng.choice(3, n, p=[0.5, 0.3, 0.2])
    b = (rng.random(n) < np.array([0.2, 0.6, 0.9])[a]).astype(np.int64)
    c = np.where(b == 1, rng.choice(4, n, p=[0.1, 0.2, 0.3, 0.4]), rng.choice(4, n, p=[0.7, 0.1, 0.1, 0.1]))
    return np.stack([a, b, c], axis=1)


def _measured(seed: int, n: int, epsilon: float) -> tuple[np.ndarray, list]:
    """n chain rows and their three pair views measured at ``epsilon``, each row assigned a view at random
    (one seeded generator for the rows, the assignment and the reports, in that order)."""
    rng = np.random.default_rng(seed)
    rows = _rows(rng, n)
    views = pairs(DOMAIN)
    return rows, simulate(DOMAIN, views, rows, rng.integers(0, len(views), len(rows)), epsilon, rng)


@pytest.fixture(scope="module")
def fitted():
    rows, measured = _measured(11, 60_000, 4.0)
    return rows, fit(DOMAIN, measured, len(rows), iterations=300)


def test_the_model_recovers_the_marginals(fitted) -> None:
    rows, model = fitted
    for attrs in ((0, 1), (1, 2), (0, 2), (2,), (0, 1, 2), (2, 0)):
        truth = DOMAIN.view(attrs).histogram(rows) / len(rows)
        assert model.marginal(attrs).sum() == pytest.approx(1.0)
        assert total_variation(model.marginal(attrs), truth) < 0.03


def test_samples_follow_the_model(fitted) -> None:
    # alpha = 0.001: chi-square of 20,000 sampled rows against the model's joint (24 cells, each >= 5 expected).
    from scipy.stats import chisquare

    _, model = fitted
    sample = model.sample(20_000, np.random.default_rng(5))
    assert sample.shape == (20_000, 3)
    expected = model.marginal((0, 1, 2)) * 20_000
    assert expected.min() >= 5
    observed = DOMAIN.view((0, 1, 2)).histogram(sample)
    assert chisquare(observed, expected).pvalue > 0.001


def test_bootstrap_errors_are_of_the_size_of_the_views_errors() -> None:
    # The model pools the views, so its bootstrap standard error of a pair's cells is positive and at most
    # that of the view alone (up to the bootstrap's own noise with 8 replicates: a factor 1.6).
    from ldpsynth.shared.wide.answers import analytic_marginal
    from ldpsynth.shared.wide.model import Problem, bootstrap_errors

    rng = np.random.default_rng(12)
    rows = _rows(rng, 20_000)
    views = pairs(DOMAIN)
    measured = simulate(DOMAIN, views, rows, rng.integers(0, len(views), len(rows)), 2.0, rng)
    problem = Problem.of(DOMAIN, measured, len(rows))
    model = problem.fit([m.shares() for m in measured], 200)
    errors = bootstrap_errors(problem, model, [(0, 1), (2,)], 8, rng, 200)
    single = analytic_marginal([m for m in measured if m.view.attributes == (0, 1)], (0, 1), len(rows))
    assert errors[0].shape == (6,) and errors[1].shape == (4,)
    assert np.all(errors[0] > 0)
    assert np.all(errors[0] < 1.6 * single.standard_errors)
    # warm-started refits (from the model, the replicates' centre) with 30 iterations: errors of the same size
    # (two bootstraps of 8 replicates: their ratio per cell within a factor 2.5)
    warm = bootstrap_errors(problem, model, [(0, 1)], 8, rng, 30, warm=True)[0]
    assert np.all(warm > errors[0] / 2.5) and np.all(warm < errors[0] * 2.5)


def test_bootstrap_intervals_cover() -> None:
    # 95% intervals (Student t with B - 1 = 9 degrees of freedom) of the model's marginals (0, 1), (1, 2) and
    # the 3-way (0, 1, 2), which no view measures, over 30 simulated collections at eps = 1: 1,260 intervals.
    # alpha = 0.001: coverage within 0.95 -+ 3.29 sigma, sigma binomial with a design effect of 4 (the cells of
    # one collection share its noise). Measured: 0.93 (the bootstrap's own noise and the fit's bias).
    from scipy.stats import t as student

    from ldpsynth.shared.wide.model import Problem, bootstrap_errors

    rng = np.random.default_rng(21)
    rows = _rows(rng, 20_000)
    views = pairs(DOMAIN)
    queries = [(0, 1), (1, 2), (0, 1, 2)]
    truth = [DOMAIN.view(q).histogram(rows) / len(rows) for q in queries]
    z = student.ppf(0.975, 9)
    hits, total = 0, 0
    for _ in range(30):
        measured = simulate(DOMAIN, views, rows, rng.integers(0, len(views), len(rows)), 1.0, rng)
        problem = Problem.of(DOMAIN, measured, len(rows))
        model = problem.fit([m.shares() for m in measured], 200)
        for q, f, e in zip(queries, truth, bootstrap_errors(problem, model, queries, 10, rng, 200)):
            hits += int(np.sum(np.abs(model.marginal(q) - f) <= z * e))
            total += f.size
    assert abs(hits / total - 0.95) < 3.29 * np.sqrt(0.95 * 0.05 * 4 / total)


def test_a_warm_start_resumes_from_the_fitted_model() -> None:
    # Refitting the same shares from the fitted model: one more block of iterations stays at the model (the
    # optimum), while one block from zero potentials is far from it (limit: the stopping rule does not run on).
    from ldpsynth.shared.wide.model import Problem

    rows, measured = _measured(13, 20_000, 2.0)
    problem = Problem.of(DOMAIN, measured, len(rows))
    shares = [m.shares() for m in measured]
    model = problem.fit(shares, 300)
    warm = problem.fit(shares, 10, warm_start=model, limit=10)    # one block of mbi's 50 steps, no more
    cold = problem.fit(shares, 10, limit=10)
    joint = (0, 1, 2)
    assert total_variation(warm.marginal(joint), model.marginal(joint)) < 0.005
    assert total_variation(cold.marginal(joint), model.marginal(joint)) > 0.02


def test_margins_fit_a_views_sub_marginals_without_its_clique() -> None:
    # The pair (0, 2) fitted only through its 1-way margins: the model has no (0, 2) clique, and its 1-way
    # marginals still match the truth (they come from all three views).
    from ldpsynth.shared.wide.model import Problem

    rows, measured = _measured(14, 30_000, 4.0)
    left_out = next(i for i, m in enumerate(measured) if m.view.attributes == (0, 2))
    problem = Problem.of(DOMAIN, measured, len(rows), [(left_out, (0,)), (left_out, (2,))])
    model = problem.fit([m.shares() for m in measured], 300)
    assert {tuple(c) for c in model.mrf.potentials.tables} == {("a0", "a1"), ("a1", "a2"), ("a0",), ("a2",)} \
        or {tuple(c) for c in model.mrf.potentials.tables} == {("a0", "a1"), ("a1", "a2")}
    for attrs in ((0,), (2,), (0, 1), (1, 2)):
        truth = DOMAIN.view(attrs).histogram(rows) / len(rows)
        assert total_variation(model.marginal(attrs), truth) < 0.03


def test_marginals_above_the_dense_limit_come_from_mbi_and_agree(monkeypatch):
    # the same fitted model, its marginals from the dense joint and from mbi's projections (the path of a row
    # domain above MAX_DENSE_DOMAIN): equal to float precision
    from ldpsynth.shared.wide import model as model_module

    rng = np.random.default_rng(3)
    domain = WideDomain(("a", "b", "c"), (3, 2, 4))
    rows = np.stack([rng.integers(0, k, 3000) for k in domain.sizes], axis=1)
    views = list(pairs(domain))
    measured = simulate(domain, views, rows, rng.integers(0, len(views), len(rows)), 2.0, rng)
    fitted = model_module.fit(domain, measured, len(rows), iterations=50)
    dense = [fitted.marginal(v) for v in ((0, 2), (2, 0), (1,), (0, 1, 2))]
    monkeypatch.setattr(model_module, "MAX_DENSE_DOMAIN", 4)
    projected = [fitted.marginal(v) for v in ((0, 2), (2, 0), (1,), (0, 1, 2))]
    for d, p in zip(dense, projected, strict=True):
        np.testing.assert_allclose(p, d, atol=1e-6)


def test_a_fit_runs_on_until_it_fits_the_views_within_their_noise() -> None:
    # ε = 16 on the chain: 50 mirror-descent steps leave the model further from the views than their noise
    # (2L/m ≈ 2.9); the rule runs on until 2L/m ≤ 1, and that model is nearer the truth.
    from ldpsynth.shared.wide.model import Problem

    rows, measured = _measured(11, 60_000, 16.0)
    problem = Problem.of(DOMAIN, measured, len(rows))
    shares = [m.shares() for m in measured]
    capped = problem.fit(shares, 50, limit=50)
    ruled = problem.fit(shares, 50)
    assert capped.steps == 50 and capped.discrepancy > 2.0
    assert 50 < ruled.steps <= 500 and ruled.discrepancy <= 1.0
    # the statistic is the views' weighted residual: sum over the views of ((model count - measured count) / sigma)^2
    # over the number of cells
    residual = sum(float(np.sum(((ruled.marginal(m.view.attributes) - s) * len(rows) / sigma) ** 2))
                   for m, s, sigma in zip(measured, shares, problem.sigmas))
    assert ruled.discrepancy == pytest.approx(residual / sum(m.view.size for m in measured), rel=1e-6)
    truth = np.bincount(np.ravel_multi_index(rows.T, DOMAIN.sizes), minlength=DOMAIN.size) / len(rows)
    assert total_variation(ruled.marginal((0, 1, 2)), truth) < 0.6 * total_variation(capped.marginal((0, 1, 2)), truth)
