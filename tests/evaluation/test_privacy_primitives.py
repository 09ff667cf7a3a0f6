"""The privacy primitives every central family uses: one guarantee, one composition module, one budget check.

The DP arithmetic itself (advanced composition, zCDP, GDP) is checked at its boundary in
test_central_mechanisms.py, test_smooth_privacy.py and test_smooth_budget.py; here: the guarantee's
vocabulary, the budget check at its slack, the composition of many steps against its two
closed forms, and the DP-PQD accountant stating its guarantee in the same vocabulary.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ldpsynth.evaluation.comparison.laplace import LaplaceAnswers
from ldpsynth.evaluation.comparison.local_e import LocalE
from ldpsynth.evaluation.comparison.workloads import Histogram, Workload
from ldpsynth.evaluation.pqd.deciders import DECIDERS, run_decider
from ldpsynth.evaluation.pqd.problem import DecisionProblem
from ldpsynth.evaluation.pqd.query import Query
from ldpsynth.evaluation.pqd.table import NumericDomain
from ldpsynth.evaluation.primitives.composition import (
    BUDGET_SLACK,
    advanced_composition,
    composed_epsilon,
    gaussian_guarantee,
    gaussian_mu,
    within_budget,
    zcdp_epsilon,
    zcdp_to_approx_dp,
)
from ldpsynth.evaluation.primitives.guarantee import Neighbours, PrivacyGuarantee
from ldpsynth.evaluation.smooth.noise import basis_noise
from ldpsynth.shared.errors import ValidationError

try:
    from .pqd_fixtures import private_table
except ImportError:  # tests/evaluation is not a package
    from pqd_fixtures import private_table


def test_a_guarantee_states_its_neighbouring_relation_in_words():
    pure = PrivacyGuarantee(1.0, 0.0, Neighbours.REPLACE_ONE_VALUE, "Laplace mechanism")
    assert str(pure) == ("1-DP under replace-one private value (bounded DP: n and the public labels' group sizes n_g "
                         "are public); Laplace mechanism")
    approx = PrivacyGuarantee(0.5, 1e-6, Neighbours.ADD_REMOVE_ONE_ROW, "two steps")
    assert str(approx) == "(0.5, 1e-06)-DP under add/remove one row (unbounded DP: n private); two steps"
    assert f"{Neighbours.LOCAL}" == Neighbours.LOCAL.value and "replace-one value" in Neighbours.LOCAL
    assert pure.is_private and not PrivacyGuarantee(math.inf, 0.0, Neighbours.REPLACE_ONE_ROW, "exact").is_private


def test_every_family_speaks_the_same_guarantee():
    """Comparison, local E, smooth and DP-PQD all return the one PrivacyGuarantee, each with its relation."""
    comparison = LaplaceAnswers(1.0).guarantee
    local = LocalE(1.0).release(Histogram(np.array([[30, 20]])), Workload(np.array([[0.0, 1.0]]), "mean"),
                                np.random.default_rng(0)).guarantee
    smooth = basis_noise(5, 100, 1.0).guarantee
    assert type(comparison) is type(local) is type(smooth) is PrivacyGuarantee
    assert comparison.neighbours is Neighbours.REPLACE_ONE_VALUE
    assert LaplaceAnswers(1.0, public_labels=False).guarantee.neighbours is Neighbours.REPLACE_ONE_ROW
    assert local.neighbours is Neighbours.LOCAL and smooth.neighbours is Neighbours.REPLACE_ONE_ROW


def test_the_budget_check_allows_round_off_and_nothing_more():
    tenths = 0.1 + 0.1 + 0.1
    assert tenths > 0.3 and within_budget(tenths, 0.3) and within_budget(1.0, 1.0)
    assert within_budget(1.0 + 0.5 * BUDGET_SLACK, 1.0)
    assert not within_budget(1.0 + 2.0 * BUDGET_SLACK, 1.0)
    assert not within_budget(math.nan, 1.0)


@pytest.mark.parametrize("per_step, steps, delta", [(0.01, 10_000, 1e-6), (0.5, 3, 1e-6), (0.2, 50, 1e-9)])
def test_composed_epsilon_is_the_smaller_of_basic_and_advanced_composition(per_step, steps, delta):
    advanced = per_step * math.sqrt(2 * steps * math.log(1 / delta)) + steps * per_step * math.expm1(per_step)
    assert advanced_composition(per_step, steps, delta) == pytest.approx(advanced, rel=1e-15)
    assert composed_epsilon(per_step, steps, delta) == pytest.approx(min(steps * per_step, advanced), rel=1e-15)
    assert composed_epsilon(per_step, steps) == pytest.approx(steps * per_step, rel=1e-15)   # δ = 0: basic only


def test_composition_of_a_step_whose_exponential_overflows_is_basic():
    """e^ε0 overflows for ε0 > 709: advanced composition is then infinite and basic composition is the answer."""
    assert composed_epsilon(800.0, 2, 1e-6) == 1600.0
    with pytest.raises(ValidationError, match="per_step"):
        composed_epsilon(0.0, 2, 1e-6)


def test_the_zcdp_reading_of_gdp_is_the_zcdp_conversion():
    mu = gaussian_mu(1.0, 1e-10)
    assert zcdp_epsilon(mu, 1e-10) == zcdp_to_approx_dp(mu * mu / 2.0, 1e-10)
    guarantee = gaussian_guarantee(mu, 1e-10, Neighbours.REPLACE_ONE_ROW, "Gaussian")
    assert guarantee.epsilon == pytest.approx(1.0, rel=1e-9) and guarantee.statement.endswith("-GDP")


@pytest.mark.parametrize("name", ["LM_count", "EM_count", "LM_sum", "R2T_sum", "SVT_sum", "EM_med", "Hist_med"])
def test_a_decider_run_states_its_guarantee_under_add_remove_neighbours(name):
    decider = DECIDERS[name]
    query = Query("count") if "count" in name else Query("median" if "med" in name else "sum", "x")
    problem = DecisionProblem(query, 50.0, 5.0, 0.5, NumericDomain(0, 63, attribute="x"))
    run = run_decider(decider, private_table(), problem, np.random.default_rng(3))
    guarantee = run.accountant.guarantee
    assert guarantee.neighbours is Neighbours.ADD_REMOVE_ONE_ROW and guarantee.delta == 0.0
    assert guarantee.epsilon == run.epsilon_per_run <= problem.epsilon * (1 + BUDGET_SLACK)
    assert f"basic composition of {len(run.accountant.steps)} steps" in guarantee.statement
    assert all(step.label in guarantee.statement for step in run.accountant.steps)
