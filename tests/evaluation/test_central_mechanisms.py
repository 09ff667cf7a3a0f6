"""Central mechanisms for comparison (issue 5 item 1): Laplace, MWEM (+ sub-databases), DPFW, DPAM.

Privacy is tested at the boundary: each mechanism's data-touching step is checked against the
ε it claims on neighbouring histograms (exact loss where the law is closed-form), and a
deliberate violation (half the noise, a monotone-only RNM scale, a smaller σ) is caught.
Statistical tests state α, use fixed seeds and never retry.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from ldpsynth.evaluation.comparison.dpam import DPAM, gaussian_sigma, privacy_of
from ldpsynth.evaluation.comparison.dpfw import DPFW, DistributionQueries
from ldpsynth.evaluation.comparison.laplace import (
    LaplaceAnswers,
    LaplaceHistogram,
    answers_sensitivity,
    project_to_scaled_simplex,
)
from ldpsynth.evaluation.comparison.mwem import MWEM, SubDatabaseMWEM, coarsest_partition, label_partition
from ldpsynth.evaluation.comparison.workloads import Histogram, Workload
from ldpsynth.evaluation.primitives import composition as acc
from ldpsynth.evaluation.primitives.selection import (
    em_log_probabilities,
    exponential_mechanism,
    rnm_two_candidate_probability,
)
from ldpsynth.shared.errors import ValidationError


def small(seed: int = 0, groups: int = 3, k: int = 4, n: int = 600) -> Histogram:
    rng = np.random.default_rng(seed)
    return Histogram.from_rows(rng.integers(0, groups, n), rng.integers(0, k, n), groups, k)


def neighbours(hist: Histogram, same_label: bool):
    """Every replace-one neighbour: one row moves from a non-empty cell to another cell."""
    g, k = hist.counts.shape
    for (a, b), (c, d) in itertools.product(itertools.product(range(g), range(k)), repeat=2):
        if hist.counts[a, b] and (a, b) != (c, d) and (not same_label or a == c):
            other = hist.counts.copy()
            other[a, b] -= 1
            other[c, d] += 1
            yield Histogram(other)


# ----- Laplace ---------------------------------------------------------------------------------
@pytest.mark.parametrize("normalization", ["eq10", "mean", "sum"])
def test_laplace_answers_sensitivity_is_the_exact_max_over_neighbours(normalization):
    hist = small()
    workload = Workload(np.random.default_rng(1).random((5, 3, 4)), normalization)
    truth = workload.answers(hist.counts, hist.group_sizes)
    brute = max(np.abs(workload.answers(nb.counts, hist.group_sizes) - truth).sum()
                for nb in neighbours(hist, same_label=True))
    assert answers_sensitivity(workload, hist.group_sizes) == pytest.approx(brute, rel=1e-12)
    mech = LaplaceAnswers(0.5)
    # privacy loss of Lap(b) on answer vectors at L1 distance Δ is Δ/b: exactly ε, and 2ε with half the noise
    assert brute / mech.scale(workload, hist) == pytest.approx(0.5)
    assert brute / (mech.scale(workload, hist) / 2) > 0.5 * 1.99


def test_laplace_histogram_is_a_projection_onto_the_public_sizes():
    hist = small(2)
    release = LaplaceHistogram(1.0).release(hist, Workload(np.ones((1, 3, 4)), "mean"), np.random.default_rng(3))
    synthetic = release.distribution * hist.n
    np.testing.assert_allclose(synthetic.sum(axis=1), hist.group_sizes)
    assert (synthetic >= 0).all()
    x = np.random.default_rng(4).normal(size=(50, 6))
    y = project_to_scaled_simplex(x, 3.0)
    np.testing.assert_allclose(y.sum(axis=1), 3.0)
    for row_x, row_y in zip(x, y):                    # KKT: y = max(x - θ, 0) with one θ per row
        support = row_y > 0
        theta = (row_x - row_y)[support]
        assert np.ptp(theta) < 1e-9 and (row_x[~support] <= theta[0] + 1e-9).all()
    assert max(np.abs(nb.counts - hist.counts).sum() for nb in neighbours(hist, False)) == LaplaceHistogram.SENSITIVITY


# ----- selection and accounting ---------------------------------------------------------------
def test_exponential_mechanism_law_and_privacy_boundary():
    """Seed 5, α = 1e-4: 40,000 Gumbel-max draws follow softmax(ε u / 2Δ) (chi-square, >= 5 per bin)."""
    scores = np.array([0.0, 1.0, 2.0, 3.5])
    draws = exponential_mechanism(np.broadcast_to(scores, (40_000, 4)), 1.0, 1.0, np.random.default_rng(5))
    expected = np.exp(em_log_probabilities(scores, 1.0, 1.0)) * 40_000
    assert expected.min() >= 5
    assert stats.chisquare(np.bincount(draws, minlength=4), expected).pvalue > 1e-4
    # scores moving by at most Δ = 1: the log-probability ratio is at most ε; with Δ/2 claimed it is not
    moved = scores + np.array([1.0, -1.0, 1.0, -1.0])
    loss = np.abs(em_log_probabilities(scores, 1.0, 1.0) - em_log_probabilities(moved, 1.0, 1.0)).max()
    assert loss <= 1.0 + 1e-12
    assert np.abs(em_log_probabilities(scores, 1.0, 0.5) - em_log_probabilities(moved, 1.0, 0.5)).max() > 1.0


def test_report_noisy_max_needs_twice_the_monotone_scale():
    """Two candidates whose scores move in opposite directions by Δ = 1: Lap(2/ε) keeps the loss under ε,
    the monotone scale Lap(1/ε) does not (exact selection law)."""
    eps = 1.0
    for scale, ok in ((2.0 / eps, True), (1.0 / eps, False)):
        p = rnm_two_candidate_probability(0.0, 0.0, scale)
        q = rnm_two_candidate_probability(1.0, -1.0, scale)
        loss = max(abs(math.log(q / p)), abs(math.log((1 - q) / (1 - p))))
        assert (loss <= eps + 1e-12) == ok


def test_advanced_composition_inverse_and_conversions():
    e0 = acc.advanced_composition_step(1.0, 1000, 1e-6)
    assert acc.advanced_composition(e0, 1000, 1e-6) == pytest.approx(1.0, rel=1e-9)
    assert acc.advanced_composition_step_closed_form(1.0, 1000, 1e-6) < e0
    rho = acc.approx_dp_to_zcdp(1.0, 1e-6)
    assert acc.zcdp_to_approx_dp(rho, 1e-6) == pytest.approx(1.0, rel=1e-9)
    with pytest.raises(ValidationError, match="delta"):
        acc.advanced_composition(0.1, 10, 0.0)


# ----- MWEM ------------------------------------------------------------------------------------
def test_mwem_accounting_and_parameters():
    mech = MWEM(1.0, rounds=20)
    assert mech.round_epsilon == pytest.approx(1.0 / 40)
    assert mech.guarantee.epsilon == 1.0 and mech.guarantee.delta == 0.0
    for bad in (dict(epsilon=0.0), dict(epsilon=1.0, rounds=0), dict(epsilon=1.0, selection="x"),
                dict(epsilon=1.0, iterate="mean"), dict(epsilon=float("nan"))):
        with pytest.raises(ValidationError):
            MWEM(**bad)


@pytest.mark.parametrize("cls", [MWEM, SubDatabaseMWEM])
@pytest.mark.parametrize("selection", ["em", "rnm"])
def test_mwem_converges_without_noise(cls, selection):
    """ε = 1e7 (noise negligible), 60 rounds: every query is answered to 0.01 of its range."""
    hist = small(6, groups=2, k=5, n=5000)
    workload = Workload(np.random.default_rng(7).random((8, 2, 5)), "mean")
    release = cls(1e7, rounds=60, selection=selection).release(hist, workload, np.random.default_rng(8))
    assert np.abs(release.answers - workload.answers(hist.counts)).max() < 0.01
    np.testing.assert_allclose(release.distribution.sum(), 1.0)


def test_sub_databases_follow_the_coarsest_partition():
    rng = np.random.default_rng(9)
    functions = rng.random((6, 3, 5))
    block = np.array([0, 1, 0, 2, 1, 1])                   # 6 labels, 3 row functions per query
    workload = Workload(functions[:, block, :], "eq10")
    np.testing.assert_array_equal(coarsest_partition(workload), [0, 1, 0, 2, 1, 1])
    hist = Histogram.from_rows(rng.integers(0, 6, 3000), rng.integers(0, 5, 3000), 6, 5)
    release = SubDatabaseMWEM(1.0).release(hist, workload, np.random.default_rng(10))
    assert release.details["parts"] == 3
    # answers are those of the released distribution (spread over labels by the public n_g)
    np.testing.assert_allclose(release.answers, workload.distribution_answers(release.distribution, hist))
    np.testing.assert_allclose((release.distribution * hist.n).sum(axis=1), hist.group_sizes)
    assert coarsest_partition(Workload(np.broadcast_to(functions[:, :1, :], (6, 4, 5)), "eq10")).max() == 0


@pytest.mark.parametrize("h", [1, 4, 128])
def test_sub_database_partitions_are_disjoint_in_rows(h):
    """Fig. 2's workload at heterogeneity h: the coarsest partition has h parts of 128/h labels, the label
    partition 128 parts of one; both map every label to exactly one part, so the parts split the rows."""
    rng = np.random.default_rng(h)
    workload = Workload(rng.random((20, h, 5))[:, rng.permutation(128) % h, :], "eq10")
    hist = Histogram.from_rows(rng.integers(0, 128, 20_000), rng.integers(0, 5, 20_000), 128, 5)
    for partition, parts in (("coarsest", h), ("label", 128)):
        mech = SubDatabaseMWEM(1.0, rounds=2, partition=partition)
        part_of = mech.part_of_label(workload)
        assert part_of.shape == (128,) and part_of.dtype.kind == "i"
        np.testing.assert_array_equal(np.bincount(part_of), np.full(parts, 128 // parts))
        for p in range(parts):     # every query has one row function on each part: linear there
            members = np.flatnonzero(part_of == p)
            assert (workload.weights[:, members, :] == workload.weights[:, members[:1], :]).all()
        per_part = np.zeros((parts, 5), np.int64)
        np.add.at(per_part, part_of, hist.counts)
        assert per_part.sum() == hist.n                       # each row counted in exactly one sub-database
        release = mech.release(hist, workload, np.random.default_rng(0))
        assert release.details["parts"] == release.details["live_parts"] == parts
    np.testing.assert_array_equal(label_partition(workload), np.arange(128))


def test_sub_database_budget_and_guarantee_per_variant():
    """Parallel: the full ε per sub-database; sequential: ε/P over the P non-empty ones (basic composition)."""
    rng = np.random.default_rng(21)
    workload = Workload(rng.random((6, 4, 5)), "eq10")
    counts = np.zeros((4, 5), np.int64)
    counts[[0, 1, 3]] = rng.integers(20, 60, (3, 5))                # label 2 has no rows: 3 non-empty parts
    hist = Histogram(counts)
    for split, part_eps in (("parallel", 2.0), ("sequential", 2.0 / 3)):
        mech = SubDatabaseMWEM(2.0, rounds=5, partition="label", split=split)
        assert mech.part_epsilon(3) == pytest.approx(part_eps)
        release = mech.release(hist, workload, np.random.default_rng(22))
        assert (release.details["parts"], release.details["live_parts"]) == (4, 3)
        assert release.details["part_epsilon"] == pytest.approx(part_eps)
        assert release.details["round_epsilon"] == pytest.approx(part_eps / 10)
        guarantee = release.guarantee
        assert ((guarantee.epsilon, guarantee.delta) == (2.0, 0.0)
                and "replace-one private value" in guarantee.neighbours)
        assert (("parallel composition over sub-databases disjoint in rows" in guarantee.statement)
                == (split == "parallel"))
        assert ("basic composition over the P = 3 non-empty" in guarantee.statement) == (split == "sequential")
        assert (f"eps_t = {'eps/(2T)' if split == 'parallel' else 'eps/(2TP)'} = {part_eps / 10:g}"
                in guarantee.statement)
        assert "one sub-database per label" in guarantee.statement
    assert (SubDatabaseMWEM(1.0).part_epsilon(7) == 1.0
            and SubDatabaseMWEM(1.0, split="sequential").part_epsilon(8) == 0.125)
    for bad in (dict(partition="movie"), dict(split="serial"), dict(rounds=0)):
        with pytest.raises(ValidationError):
            SubDatabaseMWEM(1.0, **bad)
    with pytest.raises(ValidationError):
        SubDatabaseMWEM(1.0, split="sequential").part_epsilon(0)


class _UnitNoise:
    """A stand-in generator: every Gumbel draw is 0 and every Laplace draw equals its scale."""

    def gumbel(self, size=None) -> np.ndarray:
        return np.zeros(size)

    def laplace(self, loc: float = 0.0, scale: float = 1.0, size=None) -> np.ndarray:
        return np.full(size, loc + scale)


def _measurement_noise(mech: SubDatabaseMWEM, hist: Histogram, workload: Workload) -> np.ndarray:
    """m_p − q(B_p) of every part, read back from one release's distribution (one query, T = 1, one replay).

    Part p's table is then A_0 ∘ exp(q c_p)/Z with c_p = (m_p − q(A_0))/(2 n_p) and q in [0, 1] (0 and 1
    attained), so c_p = log A(x_max) − log A(x_min) and m_p = q(A_0) + 2 n_p c_p.
    """
    q = (workload.weights[0] - workload.group_min[0][:, None]) / workload.group_range[0][:, None]   # (G, k)
    sizes = hist.group_sizes.astype(np.float64)
    dist = mech.release(hist, workload, _UnitNoise()).distribution
    log_table = np.log(dist / dist.sum(axis=1, keepdims=True))
    rows = np.arange(len(q))
    c = log_table[rows, q.argmax(axis=1)] - log_table[rows, q.argmin(axis=1)]
    return sizes * q.mean(axis=1) + 2.0 * sizes * c - (q * hist.counts).sum(axis=1)


def _measurements_meet_the_budget(mech: SubDatabaseMWEM, hist: Histogram, workload: Workload) -> bool:
    """Every part's measurement noise has scale 1/ε_t, ε_t from first principles: ε/(2T) when the parts split
    the rows and run in parallel, ε/(2TP) under basic composition over P parts."""
    parts = hist.groups
    eps_t = mech.epsilon / (2 * mech.rounds) / (parts if mech.split == "sequential" else 1)
    return bool(np.allclose(_measurement_noise(mech, hist, workload), 1.0 / eps_t, rtol=1e-9))


@pytest.mark.parametrize("split", ["parallel", "sequential"])
def test_sub_database_measurements_have_the_scale_their_budget_claims(split, monkeypatch):
    """Privacy boundary of the ε split, exact: with Laplace draws equal to their scale, the measurement noise read
    back from the release of each of 4 sub-databases is 1/ε_t (2 parallel, 8 sequential at ε = 1, T = 1). A
    deliberate violation — every sub-database at the full ε under the sequential split — is caught."""
    rng = np.random.default_rng(30)
    workload = Workload(rng.random((1, 4, 5)), "eq10")
    hist = Histogram(rng.integers(60, 100, (4, 5)))
    mech = SubDatabaseMWEM(1.0, rounds=1, replays=1, partition="label", split=split)
    np.testing.assert_allclose(_measurement_noise(mech, hist, workload), 2.0 if split == "parallel" else 8.0)
    assert _measurements_meet_the_budget(mech, hist, workload)
    if split == "sequential":
        monkeypatch.setattr(SubDatabaseMWEM, "part_epsilon", lambda self, parts: self.epsilon)
        assert not _measurements_meet_the_budget(mech, hist, workload)


def test_mwem_selection_is_private_at_its_round_epsilon():
    """Exact: the EM selection law of one round moves by at most ε_t between replace-one neighbours."""
    hist = small(11, groups=2, k=3, n=60)
    workload = Workload(np.random.default_rng(12).random((4, 2, 3)), "sum")
    a = np.full(hist.counts.shape, hist.n / hist.counts.size)
    scale = workload.cell_range

    def score(h):
        return np.abs(workload.raw_answers(a) - workload.raw_answers(h.counts)) / scale

    eps_t = MWEM(1.0, rounds=5).round_epsilon
    base = em_log_probabilities(score(hist), eps_t, 1.0)
    worst = max(np.abs(em_log_probabilities(score(nb), eps_t, 1.0) - base).max() for nb in neighbours(hist, False))
    assert worst <= eps_t + 1e-12


# ----- DPFW ------------------------------------------------------------------------------------
def test_dpfw_accounting_matches_its_composition():
    hist = small(13, groups=2, k=4, n=2000)
    workload = Workload(np.random.default_rng(14).random((6, 2, 4)), "mean")
    queries = DistributionQueries.of(workload, hist)
    for accounting in ("advanced", "zcdp", "basic"):
        mech = DPFW(1.0, accounting=accounting, iterations=500)
        e0 = mech.step_epsilon(500)
        if accounting == "advanced":
            assert acc.advanced_composition(e0, 500, mech.delta) == pytest.approx(1.0, rel=1e-9)
        elif accounting == "zcdp":
            assert acc.zcdp_to_approx_dp(500 * e0**2 / 8, mech.delta) == pytest.approx(1.0, rel=1e-9)
        else:
            assert e0 * 500 == pytest.approx(1.0) and mech.guarantee.delta == 0.0
        assert mech.noise_scale(queries, 500) == pytest.approx(2 * queries.ranges.max() / hist.n / e0)
    # the gradient coordinates move by at most Δ = max range / n between neighbours
    base = queries.matrix @ hist.distribution().ravel()
    moved = max(np.abs(queries.matrix @ nb.distribution().ravel() - base).max() for nb in neighbours(hist, True))
    assert moved <= DPFW.sensitivity(queries) + 1e-12


@pytest.mark.parametrize("mode", ["paper", "practical"])
def test_dpfw_is_a_distribution_and_converges_without_noise(mode):
    hist = small(15, groups=2, k=4, n=4000)
    workload = Workload(np.random.default_rng(16).random((5, 2, 4)), "mean")
    truth = workload.answers(hist.counts)
    errors = {}
    for t in (100, 4000):
        release = DPFW(1e9, mode=mode, mu=0.002, iterations=t).release(hist, workload, np.random.default_rng(17))
        assert (release.distribution > 0).all() and release.distribution.sum() == pytest.approx(1.0)
        errors[t] = np.abs(release.answers - truth).max()
    # Without noise F(p) <= μ ln d + 4 sqrt(2/(μT)) (derived here: the Frank–Wolfe descent lemma with
    # η = √(2μ/T), plus the μ ln d of DPSCO's primal-gap proof, App. B.3); and more iterations help
    assert errors[4000] <= 0.002 * math.log(8) + 4 * math.sqrt(2 / (0.002 * 4000))
    assert errors[4000] < errors[100]
    with pytest.raises(ValidationError, match="step"):
        DPFW(1.0, mode="practical", step=0.1)


# ----- DPAM ------------------------------------------------------------------------------------
def test_dpam_sigma_meets_epsilon_and_a_smaller_sigma_does_not():
    for t, n, eps in ((1000, 20_000, 1.0), (50, 500, 0.3), (20_000, 10**6, 2.0)):
        sigma = gaussian_sigma(t, n, eps, 1e-6)
        assert privacy_of(sigma, t, n, 1e-6) == pytest.approx(eps, rel=1e-9)
        assert privacy_of(sigma / 1.05, t, n, 1e-6) > eps


def test_dpam_oracle_sensitivity_is_sqrt2_over_n():
    hist = small(18)
    p = hist.distribution().ravel()
    worst = max(np.linalg.norm(nb.distribution().ravel() - p) for nb in neighbours(hist, False))
    assert worst == pytest.approx(math.sqrt(2) / hist.n)


def test_dpam_converges_without_noise_and_reports_its_parameters():
    hist = small(19, groups=2, k=4, n=5000)
    workload = Workload(np.random.default_rng(20).random((6, 2, 4)), "mean")
    release = DPAM(1e6, iterations=3000).release(hist, workload, np.random.default_rng(21))
    assert np.abs(release.answers - workload.answers(hist.counts)).max() < 0.01
    assert release.guarantee.delta == 1e-6 and release.details["iterations"] == 3000
    for bad in (dict(epsilon=-1), dict(epsilon=1.0, delta=0.0), dict(epsilon=1.0, iterations=0)):
        with pytest.raises(ValidationError):
            DPAM(**bad)


def test_laplace_noise_follows_its_law_and_parameters_are_checked():
    """Seed 23, α = 1e-4: 4,000 releases' noise on one answer, divided by the scale, is Laplace(0, 1) (KS)."""
    hist = small(22)
    workload = Workload(np.random.default_rng(23).random((3, 3, 4)), "mean")
    mech = LaplaceAnswers(0.7)
    rng = np.random.default_rng(23)
    truth = workload.answers(hist.counts, hist.group_sizes)
    noise = np.array([mech.release(hist, workload, rng).answers[1] - truth[1] for _ in range(4000)])
    assert stats.kstest(noise / mech.scale(workload, hist), "laplace").pvalue > 1e-4
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValidationError, match="epsilon"):
            LaplaceAnswers(bad)
        with pytest.raises(ValidationError, match="epsilon"):
            LaplaceHistogram(bad)
    with pytest.raises(ValidationError, match="shape"):
        LaplaceHistogram(1.0).release(hist, Workload(np.ones((1, 2, 4)), "mean"), rng)
