"""Closed-form error probabilities of the DP-PQD deciders, and simulated error against them.

Every simulated error is compared with the exact one (closed form or quadrature) with a
two-sided binomial test at α = 1e-6 per comparison (|emp - exact| <= 4.89 sd of the mean of
20,000 Bernoulli outcomes); fixed seeds, no retries.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpsynth.evaluation.pqd.count import (
    EM_EPSILON_SLACK,
    em_count_accept_probability,
    em_count_error,
    lm_count_error,
    naive_em_count_error,
)
from ldpsynth.evaluation.pqd.deciders import DECIDERS, evaluate
from ldpsynth.evaluation.pqd.problem import DecisionProblem
from ldpsynth.evaluation.pqd.query import Query, SqlCondition
from ldpsynth.evaluation.pqd.sum import lm_sum_tau_min_bound, r2t_sum_tau_min_bound
from ldpsynth.evaluation.pqd.table import NumericDomain
from ldpsynth.shared.errors import ValidationError

try:
    from .pqd_fixtures import private_table
except ImportError:  # tests/evaluation is not a package
    from pqd_fixtures import private_table

COUNT = Query("count")
Z_ALPHA = 4.89  # two-sided normal quantile for alpha = 1e-6


@pytest.mark.parametrize("q", [80.0, 95.0, 100.0, 103.0, 110.0, 130.0])
def test_lm_count_error_is_proposition_4_2(q):
    eps, qs, tau = 0.2, 100.0, 8.0
    problem = DecisionProblem(COUNT, qs, tau, eps)
    l, r = qs - tau, qs + tau
    if q <= l:
        expected = 0.5 * math.exp(-(l - q) * eps) - 0.5 * math.exp(-(r - q) * eps)  # case (1)
    elif q >= r:
        expected = 0.5 * math.exp(-(q - r) * eps) - 0.5 * math.exp(-(q - l) * eps)  # case (2)
    else:
        expected = 0.5 * math.exp(-(q - l) * eps) + 0.5 * math.exp(-(r - q) * eps)  # case (3)
    assert lm_count_error(q, problem) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_em_count_error_at_the_synthetic_answer_and_naive_baseline():
    for eps, tau in ((0.1, 8.0), (0.25, 30.0), (1.0, 0.5)):
        problem = DecisionProblem(COUNT, 749.0, tau, eps)
        sampled = eps - EM_EPSILON_SLACK  # the exponent EM_count samples with (pqd/count.py)
        assert em_count_error(749.0, problem) == pytest.approx(1 / (1 + math.exp(sampled * tau)), rel=1e-12)
        # LM_count's error there is e^{-eps tau} (§4.2.1), larger than EM_count's
        assert lm_count_error(749.0, problem) == pytest.approx(math.exp(-eps * tau), rel=1e-12)
        assert em_count_error(749.0, problem) < lm_count_error(749.0, problem)
        for q in (700.0, 749.0, 760.0):
            assert naive_em_count_error(q, problem) == pytest.approx(1 / (1 + math.exp(eps / 2)), rel=1e-12)


def test_em_count_score_is_piecewise_linear_and_far_answers_are_decided():
    problem = DecisionProblem(COUNT, 100.0, 10.0, 0.3)
    # u'(1) - u'(0) goes -1 at l - tau = 80, +1 at q(D_s) = 100, -1 at r + tau = 120
    for q, diff in ((80.0, -1.0), (90.0, 0.0), (100.0, 1.0), (110.0, 0.0), (120.0, -1.0), (500.0, -1.0)):
        expected = 1.0 / (1.0 + math.exp(-(0.3 - EM_EPSILON_SLACK) * 10.0 * diff))
        assert em_count_accept_probability(q, problem) == pytest.approx(expected, rel=1e-12)


def test_em_count_legacy_overflow_reproduces_the_artifact():
    """q12-like: eps * tau = 15,000; both weights overflow inside the ramp (a coin), one outside (certain)."""
    problem = DecisionProblem(COUNT, 470483.0, 0.032 * 470483.0, 1.0)
    inside = 471994.0
    assert em_count_accept_probability(inside, problem, legacy_overflow=True) == 0.5
    assert em_count_accept_probability(inside, problem) == pytest.approx(1.0)
    far = 10 * 470483.0
    assert em_count_accept_probability(far, problem, legacy_overflow=True) == 0.0
    # no overflow: the artifact's arithmetic agrees with the sampled sigmoid but for its slack in ε
    small = DecisionProblem(COUNT, 100.0, 10.0, 0.3)
    for q in (85.0, 100.0, 117.0):
        assert em_count_accept_probability(q, small, legacy_overflow=True) == pytest.approx(
            em_count_accept_probability(q, small), rel=10 * 10.0 * EM_EPSILON_SLACK)


SELECT_A = (SqlCondition("g", "==", "a"),)
DOMAIN = NumericDomain(0, 63, attribute="x")
SIMULATED = [
    ("LM_count", Query("count", where=SELECT_A), (0.0, 4.0, -9.0), 6.0),
    ("EM_count", Query("count", where=SELECT_A), (0.0, 4.0, -9.0), 6.0),
    ("EM_count_naive", Query("count", where=SELECT_A), (0.0, 9.0), 6.0),
    ("LM_sum", Query("sum", "x", SELECT_A), (0.0, 150.0, -400.0), 200.0),
    ("R2T_sum", Query("sum", "x", SELECT_A), (0.0, -300.0, -900.0), 400.0),
    ("SVT_sum", Query("sum", "x", SELECT_A), (0.0, 150.0, -400.0), 200.0),
    ("SVT_sum_paper", Query("sum", "x", SELECT_A), (0.0, 150.0, -400.0), 200.0),
    ("EM_med", Query("median", "x", SELECT_A), (0.0, 2.0, -3.0), 1.5),
    ("EM_med", Query("quantile", "x", SELECT_A, 0.25), (0.0, 2.0), 1.5),
    ("Hist_med", Query("median", "x", SELECT_A), (0.0, 2.0, -3.0), 1.5),
    ("Hist_med", Query("quantile", "x", SELECT_A, 0.75), (0.0, 3.0), 1.5),
]


@pytest.mark.parametrize("name, query, offsets, tau", SIMULATED)
def test_simulated_error_matches_exact_error(name, query, offsets, tau):
    table = private_table()
    truth = query.answer(table)
    rng = np.random.default_rng(2024)
    trials = 20_000
    for offset in offsets:
        problem = DecisionProblem(query, truth + offset, tau, 0.5, None if query.aggregate == "count" else DOMAIN)
        result = evaluate(DECIDERS[name], table, problem, rng, trials)
        p = result.exact_error
        sd = math.sqrt(max(p * (1 - p), 1e-12) / trials)
        assert abs(result.empirical_error - p) <= Z_ALPHA * sd + 1e-12, (name, offset, result)


def test_tau_min_bounds_reproduce_examples_5_3_and_5_6():
    """DP-PQD Ex. 5.3 (LM_sum, Prop. 5.2) and Ex. 5.6 (R2T_sum, Prop. 5.5): GS_q = 2M, DS_q,D = 9K, eps = 0.1,
    delta = 0.05."""
    assert lm_sum_tau_min_bound(2e6, 0.1, 0.05) == pytest.approx(4.605e7, rel=1e-3)
    assert r2t_sum_tau_min_bound(2e6, 9e3, 0.1, 0.05) == pytest.approx(4.549e7, rel=1e-3)
    # the two bounds meet at DS_q,D / GS_q = ln(1/(2 delta)) / (4 log2(GS_q) ln(log2(GS_q)/delta)) (queries.md)
    gs, delta = 99999.0, 0.05
    ratio = math.log(1 / (2 * delta)) / (4 * math.log2(gs) * math.log(math.log2(gs) / delta))
    assert r2t_sum_tau_min_bound(gs, ratio * gs, 0.25, delta) == pytest.approx(lm_sum_tau_min_bound(gs, 0.25, delta))


@pytest.mark.parametrize("args, field", [((1.0, 0.1, 0.05), "global_sensitivity"), ((99.0, 0.0, 0.05), "epsilon"),
                                         ((99.0, 0.1, 1.0), "delta")])
def test_tau_min_bounds_reject_bad_inputs(args, field):
    with pytest.raises(ValidationError, match=field):
        lm_sum_tau_min_bound(*args)
    with pytest.raises(ValidationError, match=field):
        r2t_sum_tau_min_bound(args[0], 1.0 if args[0] > 1 else 0.5, *args[1:])
    with pytest.raises(ValidationError, match="downward_sensitivity"):
        r2t_sum_tau_min_bound(99.0, 100.0, 0.1, 0.05)
