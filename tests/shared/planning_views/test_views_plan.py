"""The views mode of a plan: the closed form against a simulation of the views, the worst case, the goal."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2

from ldpsynth.shared import queries as Q
from ldpsynth.shared.attributes import CategoricalAttribute
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.planning.planner import plan
from ldpsynth.shared.planning.row_distribution import SampleRows, UniformRows
from ldpsynth.shared.planning.views import plan_views, private_domain, workload_views
from ldpsynth.shared.queries.compiler import compile_queries
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wide import analytic_marginal, pairs, simulate

Z95 = 1.959963984540054
ADULT_SIZES = {"age": 9, "workclass": 8, "education": 16, "marital": 7, "occupation": 14, "race": 5, "sex": 2,
               "income": 2}


def schema_of(sizes: dict[str, int], epsilon: float = 1.0, public: str | None = None) -> Schema:
    attrs = [CategoricalAttribute(name, name == public, values=tuple(f"v{i}" for i in range(k)))
             for name, k in sizes.items()]
    return Schema("wide", epsilon, tuple(attrs))


SMALL = schema_of({"a": 3, "b": 2, "c": 4, "d": 2})


def test_closed_form_matches_a_simulation_of_the_views():
    rng = np.random.default_rng(7)
    domain = private_domain(SMALL)
    n_devices, reps = 6000, 300
    probs = rng.dirichlet(np.full(domain.size, 2.0))
    codes = rng.choice(domain.size, n_devices, p=probs)
    rows = np.stack(np.unravel_index(codes, domain.sizes), axis=1)
    prior = SampleRows(SMALL, np.zeros(n_devices, np.int64), codes)
    batch = compile_queries([Q.marginal("a", "c", normalization="mean"), Q.marginal("a", normalization="mean")],
                            SMALL)
    vp = plan_views(SMALL, batch, n_devices, 1.0, prior=prior)
    views = pairs(domain)
    per_view = n_devices // len(views)
    pair_cells, one_way = [], []
    for _ in range(reps):
        assignment = rng.permutation(np.repeat(np.arange(len(views)), per_view))  # exactly n/m per view
        measured = simulate(domain, views, rows, assignment, 1.0, rng)
        pair_cells.append(analytic_marginal(measured, (0, 2), n_devices).shares)
        one_way.append(analytic_marginal(measured, (0,), n_devices).shares)
    empirical = np.concatenate([np.var(pair_cells, axis=0, ddof=1), np.var(one_way, axis=0, ddof=1)])
    assert vp.se_prior is not None
    predicted = vp.se_prior**2
    # alpha = 0.001 per cell (15 cells): (R - 1) s^2 / sigma^2 ~ chi2(R - 1) when the closed form is right
    stat = (reps - 1) * empirical / predicted
    assert np.all(stat > chi2.ppf(0.0005, reps - 1)) and np.all(stat < chi2.ppf(0.9995, reps - 1)), stat / (reps - 1)
    assert np.all(vp.se_worst >= vp.se_prior)
    assert vp.holding[0] == (("a", "c"),) and len(vp.holding[3 * 4]) == 3


def test_queries_outside_the_views_and_public_ones_have_no_closed_form():
    schema = schema_of({"g": 3, "a": 3, "b": 2, "c": 2}, public="g")
    batch = compile_queries([Q.marginal("a", "b", "c", normalization="mean"), Q.marginal("b", normalization="sum"),
                             Q.grouped("g", {"v1": [1] + [0] * 11}, normalization="sum")], schema)
    vp = plan_views(schema, batch, 3000, 1.0, prior=UniformRows(schema))
    assert np.isnan(vp.se_worst[:12]).all() and np.isnan(vp.se_worst[-1]) and vp.holding[-1] == ()
    assert np.isfinite(vp.se_worst[12:14]).all() and vp.holding[12] == (("a", "b"), ("b", "c"))


@pytest.mark.parametrize("attributes, problem", [(["a"], "got a"), (["a", "zz"], "zz"), (["a", "a"], "got a, a")])
def test_bad_attributes_name_the_field(attributes, problem):
    batch = compile_queries([Q.marginal("a", normalization="mean")], SMALL)
    with pytest.raises(ValidationError) as err:
        plan_views(SMALL, batch, 1000, 1.0, attributes=attributes)
    assert err.value.field == "attributes" and problem in str(err.value)


def adult_sex_income(devices: int) -> tuple[float, float, float]:
    """The worst-case 95 % half-width of a (sex, income) cell share: views mode, E and the best full-domain oracle."""
    schema = schema_of(ADULT_SIZES)
    batch = compile_queries([Q.marginal("sex", "income", normalization="mean")], schema)
    vp = plan_views(schema, batch, devices, 1.0)
    full = plan(schema, batch, devices, epsilon=1.0)
    best_oracle = min(float((Z95 * c.figures.se_worst).max()) for c in full.choices if c.figures is not None)
    return Z95 * float(vp.se_worst.max()), Z95 * float(full.e.se_worst.max()), best_oracle


def test_the_sex_income_cell_on_adult_by_hand():
    # one view of 4 cells (E at eps = 1), 45,000 / 28 devices: per device q(1-q)/(p-q)^2 + t (1-p-q)/(p-q)
    # plus the sampling term s t (1 - t), largest over t in [0, 1] (here at t = 1: every device in the cell)
    views, n = 28, 45_000
    p, q = np.e / (np.e + 3), 1 / (np.e + 3)
    s = (n - n / views) / (n - 1)
    t = np.linspace(0, 1, 100_001)
    by_hand = Z95 * np.sqrt(np.max(q * (1 - q) / (p - q) ** 2 + t * (1 - p - q) / (p - q) + s * t * (1 - t))
                            / (n / views))
    views_hw, e_hw, oracle_hw = adult_sex_income(n)
    assert views_hw == pytest.approx(by_hand, rel=1e-6)
    assert views_hw < oracle_hw / 100 < e_hw / 10_000                        # 0.0813 against 11.5 and 5,257


def test_the_goal_is_reached_at_119000_devices():
    assert adult_sex_income(119_000)[0] <= 0.05 < adult_sex_income(118_000)[0]


@pytest.mark.xfail(strict=True, reason="issue 39's goal: 0.0813 at 45,000 devices with all 28 pair views")
def test_the_goal_sex_income_cell_on_adult_at_45000_devices():
    assert adult_sex_income(45_000)[0] <= 0.05


def test_the_goal_with_the_views_a_workload_needs():
    # a workload about income against every other attribute (the (sex, income) marginal and a predicate
    # "a = v0 and income = v1" per other attribute) needs 7 views, not 28: 6,429 devices each at 45,000, and the
    # (sex, income) cell's worst-case half-width meets issue 39's 0.05
    schema = schema_of(ADULT_SIZES)
    others = [name for name in ADULT_SIZES if name not in ("sex", "income")]
    queries = [Q.marginal("sex", "income", normalization="mean"),
               *(Q.predicate(Q.condition(a, "==", "v0"), Q.condition("income", "==", "v1"), normalization="mean")
                 for a in others)]
    batch = compile_queries(queries, schema)
    views = workload_views(schema, batch)
    assert sorted(views) == sorted([("sex", "income"), *((a, "income") for a in others)])
    vp = plan_views(schema, batch, 45_000, 1.0, views=views)
    sex_income = Z95 * float(vp.se_worst[:4].max())
    n, m = 45_000, 7                                                # by hand, as for the 28 views above
    p, q = np.e / (np.e + 3), 1 / (np.e + 3)
    t = np.linspace(0, 1, 100_001)
    by_hand = Z95 * np.sqrt(np.max(q * (1 - q) / (p - q) ** 2 + t * (1 - p - q) / (p - q)
                                   + (n - n / m) / (n - 1) * t * (1 - t)) / (n / m))
    assert sex_income == pytest.approx(by_hand, rel=1e-6) and sex_income <= 0.05
