"""The planner's closed forms (shared/planning/) against exact enumeration, the worst case against every
data set, the inverse answers round trip, schema changes against the changed schemas, the oracles by simulation."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from statistics import NormalDist

import numpy as np
import pytest

from ldpsynth.shared import queries as Q
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators import estimate
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.estimators.tallies import KeyedTallies
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms.registry import make_mechanism
from ldpsynth.shared.planning.planner import (
    CONSTANT,
    EPSILON_STEP,
    HOPELESS,
    MAX_EPSILON,
    OK,
    UNDEFINED,
    e_coefficients,
    e_coefficients_at,
    plan,
    recommend,
)
from ldpsynth.shared.planning.row_distribution import SampleRows, UniformRows
from ldpsynth.shared.planning.schema_changes import made_coarser, made_public, schema_changes
from ldpsynth.shared.schema import BinaryAttribute, CategoricalAttribute, ContinuousAttribute, IntegerAttribute, Schema

#: Two-sided level of each Monte Carlo check below.
ALPHA = 1e-4
Z_LIMIT = NormalDist().inv_cdf(1 - ALPHA / 2)

TINY = Schema("tiny", 0.7, (IntegerAttribute("g", True, 0, 2), IntegerAttribute("a", False, 0, 1),
                            CategoricalAttribute("b", False, ("x", "y"))))
TINY_KEYS = np.array([0, 1, 1])
TINY_CODES = np.array([1, 3, 0])


def tiny_queries() -> list[Q.Query]:
    rng = np.random.default_rng(3)
    return [Q.grouped("g", {0: rng.random(4), 1: rng.random(4)}, default=rng.random(4), label="grouped eq10"),
            Q.grouped("g", {1: [0, 1, 1, 2]}, normalization="sum", label="grouped sum"),
            Q.linear(rng.normal(size=4), normalization="mean", label="linear mean"),
            Q.predicate(Q.condition("b", "==", "y"), label="predicate"),
            Q.marginal("a", normalization="mean", label="marginal"),
            Q.dense(rng.random((3, 4)), label="dense")]


def exact_release_moments(schema: Schema, keys: np.ndarray, batch: Q.QueryBatch) -> tuple[np.ndarray, np.ndarray]:
    """Every data set x' with these public keys (rows: the data sets) against every release Y (E's exact
    pmf): the exact mean and variance of each query's estimate, shape (|D|^n, Q), by enumeration."""
    k, n = schema.private_domain_size, len(keys)
    mechanism = MechanismE(schema.epsilon, k)
    outputs = np.array(list(itertools.product(range(k), repeat=n)))
    estimates = np.stack([estimate(batch, SufficientStatistics.from_schema(schema, keys, y), mechanism,
                                   codes=y).estimate for y in outputs])
    p, q = mechanism.keep_probability, mechanism.lie_probability
    prob = np.where(outputs[None, :, :] == outputs[:, None, :], p, q).prod(axis=2)   # [data set, release]
    mean = prob @ estimates
    return mean, prob @ estimates**2 - mean**2


def test_prior_variance_is_exact_and_worst_case_is_the_maximum_over_every_data_set():
    batch = Q.compile_queries(tiny_queries(), TINY)
    mean, variance = exact_release_moments(TINY, TINY_KEYS, batch)
    data_sets = np.array(list(itertools.product(range(4), repeat=3)))
    here = int(np.flatnonzero((data_sets == TINY_CODES).all(axis=1))[0])
    p = plan(TINY, batch, 3, prior=SampleRows(TINY, TINY_KEYS, TINY_CODES))
    np.testing.assert_allclose(p.e.se_prior**2, variance[here], rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(p.e.se_worst**2, variance.max(axis=0), rtol=1e-9)   # attained: the maximum
    assert (variance <= p.e.se_worst**2 * (1 + 1e-12)).all()


def test_plug_in_variance_of_the_estimators_is_unbiased_for_the_prediction():
    """The std_error that `ldpsynth estimate` reports, squared and averaged over every release, is the
    predicted variance (the plug-in estimate is linear in the counts)."""
    batch = Q.compile_queries(tiny_queries(), TINY)
    mechanism = MechanismE(TINY.epsilon, 4)
    outputs = np.array(list(itertools.product(range(4), repeat=3)))
    p_keep, q_lie = mechanism.keep_probability, mechanism.lie_probability
    prob = np.where(outputs == TINY_CODES, p_keep, q_lie).prod(axis=1)
    plug_in = np.stack([estimate(batch, SufficientStatistics.from_schema(TINY, TINY_KEYS, y), mechanism,
                                 codes=y).std_error ** 2 for y in outputs])
    predicted = plan(TINY, batch, 3, prior=SampleRows(TINY, TINY_KEYS, TINY_CODES)).e.se_prior
    np.testing.assert_allclose(prob @ plug_in, predicted**2, rtol=1e-9)


REGION = Schema("region", 1.3, (IntegerAttribute("region", True, 1, 3), IntegerAttribute("level", False, 0, 5)))


def region_queries(rng: np.random.Generator) -> list[Q.Query]:
    out: list[Q.Query] = []
    for norm in ("eq10", "sum", "mean"):
        out.append(Q.grouped("region", {1: rng.normal(size=6), 3: rng.random(6)}, default=rng.random(6),
                             normalization=norm))
        out.append(Q.linear(rng.normal(size=6), normalization=norm))
    return out + [Q.marginal("level", normalization="mean"), Q.predicate(Q.condition("level", ">=", 3))]


def rows_of(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Public keys and codes of rows with counts ``table[key, code]``."""
    keys, codes = np.nonzero(table)
    counts = table[keys, codes]
    return np.repeat(keys, counts), np.repeat(codes, counts)


def test_worst_case_is_never_below_a_random_distribution_nor_the_uniform_one():
    rng = np.random.default_rng(11)
    batch = Q.compile_queries(region_queries(rng), REGION)
    for trial in range(200):
        joint = rng.dirichlet(np.full(18, rng.choice([0.1, 1.0, 10.0]))).reshape(3, 6)
        keys, codes = rows_of(rng.multinomial(400, joint.reshape(-1)).reshape(3, 6))
        p = plan(REGION, batch, 400, prior=SampleRows(REGION, keys, codes))
        for fig in (p.e, *(p.oracle(name) for name in ("OUE", "OLH", "HR", "SS"))):
            assert (fig.se_prior <= fig.se_worst * (1 + 1e-12)).all(), trial
    u = plan(REGION, batch, 400, prior=UniformRows(REGION))
    assert (u.e.se_prior <= u.e.se_worst).all() and (u.e.se_prior < u.e.se_worst).any()


def test_a_point_mass_per_group_on_the_largest_deviation_attains_the_worst_case():
    rng = np.random.default_rng(12)
    weights = {1: rng.normal(size=6), 2: rng.normal(size=6), 3: rng.normal(size=6)}
    query = Q.grouped("region", weights, normalization="mean")
    worst = {key: int(np.argmax((w - w.mean()) ** 2)) for key, w in weights.items()}
    table = np.zeros((3, 6), np.int64)
    for key, size in zip((1, 2, 3), (50, 30, 20)):
        table[key - 1, worst[key]] = size
    keys, codes = rows_of(table)
    p = plan(REGION, [query], 100, prior=SampleRows(REGION, keys, codes))
    np.testing.assert_allclose(p.e.se_prior, p.e.se_worst, rtol=1e-12)
    for v in range(6):   # any other point mass is below
        table[:] = 0
        table[:, v] = (50, 30, 20)
        assert plan(REGION, [query], 100, prior=SampleRows(REGION, *rows_of(table))).e.se_prior[0] <= \
            p.e.se_worst[0] * (1 + 1e-12)


def test_the_inverse_answers_round_trip():
    rng = np.random.default_rng(13)
    queries = region_queries(rng)
    target = 0.02
    base = plan(REGION, queries, 5_000, target_halfwidth=target, prior=UniformRows(REGION))
    inv = base.inverse
    assert inv is not None and inv.devices_prior is not None and inv.epsilon_prior is not None
    scaled = base.normalization != Q.SUM
    assert np.isnan(inv.devices_worst[~scaled]).all() and np.isfinite(inv.devices_worst[scaled]).all()
    for j in np.flatnonzero(scaled):
        for devices, kind in ((inv.devices_worst[j], "worst"), (inv.devices_prior[j], "prior")):
            at = plan(REGION, queries, int(devices), prior=UniformRows(REGION))
            below = plan(REGION, queries, int(devices) - 1, prior=UniformRows(REGION))
            se_at = at.e.se_worst if kind == "worst" else at.e.se_prior
            se_below = below.e.se_worst if kind == "worst" else below.e.se_prior
            assert at.z * se_at[j] <= target < below.z * se_below[j], (j, kind)
    for j in range(len(base)):
        for eps, kind in ((inv.epsilon_worst[j], "worst"), (inv.epsilon_prior[j], "prior")):
            assert EPSILON_STEP <= eps <= MAX_EPSILON

            def se(e):
                return getattr(plan(REGION, queries, 5_000, epsilon=e, prior=UniformRows(REGION)).e, f"se_{kind}")[j]

            assert base.z * se(eps) <= target, (j, kind)
            if eps > EPSILON_STEP:
                assert base.z * se(round(eps - EPSILON_STEP, 2)) > target, (j, kind)


def test_unreachable_targets_and_sums():
    queries = [Q.marginal("level", normalization="mean"), Q.predicate(Q.condition("level", "==", 2))]
    p = plan(REGION, queries, 1_000, target_halfwidth=1e-12)
    assert p.inverse is not None and np.isinf(p.inverse.epsilon_worst).all()
    assert np.isnan(p.inverse.devices_worst[-1])   # a count's half-width grows with the devices
    assert p.inverse.devices_worst[0] > 1e20


def test_status_flags_hopeless_constant_and_undefined_queries():
    keys, codes = rows_of(np.array([[5, 5, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]]))
    queries = [Q.marginal("level", normalization="mean"), Q.linear([2.0] * 6, normalization="sum"),
               Q.grouped("region", {2: [0, 1, 2, 3, 4, 5]}), Q.grouped("region", {1: [0, 1, 1, 1, 1, 1]})]
    p = plan(REGION, queries, 16, epsilon=0.1, prior=SampleRows(REGION, keys, codes))
    assert list(p.status[:6]) == [HOPELESS] * 6
    assert p.status[6] == CONSTANT and p.e.se_worst[6] == 0 and p.range[6] == 0
    assert p.status[7] == UNDEFINED          # eq. 10 with no varying row: Z = 0 on region 2
    assert p.status[8] == HOPELESS
    assert plan(REGION, queries[:1], 10**7).status[0] == OK


def test_ideal_coefficients_match_the_exact_mechanism():
    for eps, k in ((0.05, 2), (1.0, 5), (4.0, 8410), (12.0, 3)):
        exact = e_coefficients(MechanismE(eps, k))
        ideal = e_coefficients_at(np.array([eps]), k)
        np.testing.assert_allclose([ideal[0][0], ideal[1][0]], exact, rtol=1e-9)


def test_cut_queries_match_the_binary_randomized_response_variance():
    from ldpsynth.simulation.datasets import graph_schema

    schema = graph_schema(0.8, 6, "g6")
    queries = [Q.cut([0, 1], [2, 3, 4]), Q.cut([5], [0, 1, 2, 3, 4], normalization="mean")]
    p = plan(schema, queries, 36, prior=UniformRows(schema))
    mech = MechanismE(0.8, 2)
    pq, r = mech.keep_probability * mech.lie_probability, mech.keep_probability - mech.lie_probability
    np.testing.assert_allclose(p.e.se_worst, [math.sqrt(6 * pq) / r, math.sqrt(5 * pq) / r / 36], rtol=1e-12)
    np.testing.assert_allclose(p.e.se_prior, p.e.se_worst, rtol=1e-12)


def test_plan_leaves_the_callers_weights_alone():
    weights = np.arange(6, dtype=np.float64)[None, :].copy()
    grouped = np.arange(18, dtype=np.float64).reshape(1, 3, 6).copy()
    for batch, array in ((Q.linear_batch(REGION, weights), weights),
                         (Q.grouped_batch(REGION, "region", grouped), grouped)):
        before = array.copy()
        plan(REGION, batch, 100, prior=UniformRows(REGION), changes=schema_changes(REGION))
        np.testing.assert_array_equal(array, before)


# ----- schema changes ------------------------------------------------------------------------
PAIR = Schema("pair", 1.1, (IntegerAttribute("a", False, 0, 2), BinaryAttribute("b", False)))
PAIR_PUBLIC = Schema("pair", 1.1, (IntegerAttribute("a", True, 0, 2), BinaryAttribute("b", False)))


def test_making_an_attribute_public_equals_planning_the_public_schema():
    rng = np.random.default_rng(14)
    w = rng.normal(size=6)
    a, b = rng.integers(0, 3, 500), rng.integers(0, 2, 500)
    for norm in ("sum", "mean"):
        change = made_public(PAIR, "a")
        before = plan(PAIR, [Q.linear(w, normalization=norm)], 500, changes=[change],
                      prior=SampleRows.from_columns(PAIR, {"a": a, "b": b}))
        after = plan(PAIR_PUBLIC, [Q.grouped("a", {v: w[2 * v:2 * v + 2] for v in range(3)}, normalization=norm)],
                     500, prior=SampleRows.from_columns(PAIR_PUBLIC, {"a": a, "b": b}))
        alt = before.alternatives[0]
        assert alt.change.domain_size == 2
        np.testing.assert_allclose(alt.e.se_prior, after.e.se_prior, rtol=1e-12)
        np.testing.assert_allclose(alt.e.se_worst, after.e.se_worst, rtol=1e-12)
        np.testing.assert_array_equal(alt.bias_worst, 0.0)


FINE = Schema("fine", 2.0, (ContinuousAttribute("x", False, 0.0, 8.0, 3), BinaryAttribute("b", False)))
COARSE = Schema("fine", 2.0, (ContinuousAttribute("x", False, 0.0, 8.0, 2), BinaryAttribute("b", False)))


def test_a_coarser_attribute_equals_planning_the_coarser_schema_and_reports_the_bias():
    rng = np.random.default_rng(15)
    w = rng.normal(size=16)
    coarse_w = w.reshape(4, 2, 2).mean(axis=1).reshape(-1)          # cell average over pairs of buckets
    x, b = rng.uniform(0, 8, 300), rng.integers(0, 2, 300)
    change = made_coarser(FINE, "x")
    assert change.description == "x 2 bits" and change.domain_size == 8
    fine_prior = SampleRows.from_columns(FINE, {"x": x, "b": b})
    p = plan(FINE, [Q.linear(w, normalization="mean")], 300, changes=[change], prior=fine_prior)
    q = plan(COARSE, [Q.linear(coarse_w, normalization="mean")], 300,
             prior=SampleRows.from_columns(COARSE, {"x": x, "b": b}))
    alt = p.alternatives[0]
    np.testing.assert_allclose(alt.e.se_prior, q.e.se_prior, rtol=1e-12)
    np.testing.assert_allclose(alt.e.se_worst, q.e.se_worst, rtol=1e-12)
    fine_codes = FINE.encode_private({"x": x, "b": b})
    coarse_codes = COARSE.encode_private({"x": x, "b": b})
    assert alt.bias_prior is not None
    np.testing.assert_allclose(alt.bias_prior, (coarse_w[coarse_codes] - w[fine_codes]).mean(), rtol=1e-9)
    beta = coarse_w[np.arange(16) // 4 * 2 + np.arange(16) % 2] - w
    np.testing.assert_allclose(alt.bias_worst, max(beta.max(), -beta.min()), rtol=1e-12)


def test_merged_categories_and_the_default_changes():
    schema = Schema("c", 1.0, (CategoricalAttribute("colour", False, ("red", "green", "blue", "grey")),
                               BinaryAttribute("flag", False)))
    change = made_coarser(schema, "colour", [["red", "green"]])
    np.testing.assert_array_equal(change.cells, [0, 0, 1, 2])
    assert change.description == "colour red+green" and change.domain_size == 6
    names = [c.description for c in schema_changes(schema, {"colour": [["blue", "grey"]]})]
    assert names == ["colour public", "colour blue+grey", "flag public"]
    with pytest.raises(ValidationError) as err:
        made_coarser(schema, "flag")
    assert err.value.field == "attribute"
    with pytest.raises(ValidationError) as err:
        made_coarser(schema, "colour", [["red", "purple"]])
    assert err.value.field == "merge.colour[0]"
    with pytest.raises(ValidationError):
        made_coarser(schema, "colour", [["red", "green"], ["green", "blue"]])
    with pytest.raises(ValidationError) as err:
        schema_changes(schema, {"shade": [["a", "b"]]})
    assert err.value.field == "merge.shade"


# ----- frequency oracles ---------------------------------------------------------------------
def variance_z(estimates: np.ndarray, predicted: float) -> float:
    """(S^2 - sigma^2) / se(S^2), se from the sample fourth central moment (delta method)."""
    centred = estimates - estimates.mean()
    s2 = estimates.var(ddof=1)
    return (s2 - predicted**2) / math.sqrt(((centred**4).mean() - s2**2) / len(estimates))


@pytest.mark.parametrize("name", ["OUE", "OLH", "HR", "SS"])
def test_each_oracles_planned_variance_is_its_estimators_by_simulation(name: str):
    """Each oracle's exact sampler (``perturb``, seeded) and the engine's estimator of a weighted sum over two
    groups (``estimate``: weights centred per group), against the plan's standard error under the rows'
    own prior; chi-square-free variance test by the delta method, α = 1e-4 per oracle."""
    rng = np.random.default_rng(16)
    schema = Schema("o", 1.0, (IntegerAttribute("g", True, 0, 1), IntegerAttribute("v", False, 0, 5)), None, name)
    n, releases = 400, 3000
    codes = rng.choice(6, n, p=[0.5, 0.2, 0.1, 0.1, 0.05, 0.05])
    keys = (np.arange(n) % 3 == 0).astype(np.int64)
    tables = rng.normal(size=(2, 6))
    query = Q.grouped("g", {0: tables[0], 1: tables[1]}, normalization="sum")
    p = plan(schema, [query], n, prior=SampleRows(schema, keys, codes))
    oracle = make_mechanism(name, 1.0, 6)
    batch = Q.compile_queries([query], schema)
    estimates = np.array([estimate(batch, KeyedTallies.from_rows(oracle, keys, oracle.perturb(codes, rng),
                                                                 public_domain_size=2), oracle).estimate[0]
                          for _ in range(releases)])
    truth = tables[keys, codes].sum()
    assert abs(estimates.mean() - truth) < Z_LIMIT * p.oracle(name).se_prior[0] / math.sqrt(releases)
    assert abs(variance_z(estimates, p.oracle(name).se_prior[0])) < Z_LIMIT, name


def test_large_domains_favour_the_oracles_as_wang_et_al_say():
    """|D| = 8,410 (movie x rating private), ε = 1, 100,000 rows, a single count under the uniform prior:
    E's variance is about 770 times OLH's (4e^ε/(e^ε-1)^2 vs (|D|-2+e^ε)/(e^ε-1)^2, WBLJ17 Table 1)."""
    schema = Schema("ml", 1.0, (IntegerAttribute("movie", False, 1, 1682), IntegerAttribute("rating", False, 1, 5)))
    count = Q.predicate(Q.condition("movie", "==", 50), Q.condition("rating", "==", 5))
    p = plan(schema, [count], 100_000, prior=UniformRows(schema))
    e = math.exp(1.0)
    assert p.e.se_prior[0] == pytest.approx(math.sqrt(1e5 * (8410 - 2 + e) / (e - 1) ** 2), rel=1e-3)
    assert p.oracle("OUE").se_prior[0] == pytest.approx(math.sqrt(1e5 * 4 * e / (e - 1) ** 2), rel=1e-3)
    assert 760 < (p.e.se_prior[0] / p.oracle("OLH").se_prior[0]) ** 2 < 780   # g = 4, a power of two near e + 1
    assert p.recommended == "OLH" and p.choice("OLH").report_bytes == 10 < p.choice("OUE").report_bytes == 1052


def test_the_recommendation_weighs_error_then_report_size_then_decoding():
    """A small domain: E (k = 4 < 3e^ε + 2; SS with d = 1 is E itself, and E is the default); at k = 5, ε = 1 HR's
    worst case is 6 % below E's; a large domain: the oracles' errors are close, and of those the smallest report
    wins; beyond an oracle's largest domain it is unavailable, with why."""
    small = Schema("s", 2.0, (IntegerAttribute("r", False, 1, 4),))
    p = plan(small, [Q.marginal("r")], 1000)
    assert p.recommended == "E" and p.recommendation.startswith("E: standard errors 1 x E's")
    assert p.choice("SS").error_ratio == pytest.approx(1.0) and "(E, SS) the default" in p.recommendation
    five = Schema("s", 1.0, (IntegerAttribute("r", False, 1, 5),))
    assert plan(five, [Q.marginal("r")], 1000).recommended == "HR"
    assert [c.mechanism for c in p.choices] == ["E", "OUE", "OLH", "HR", "SS"]
    assert all(c.error_ratio > 1.1 for c in p.choices[1:4])
    wide = Schema("w", 4.0, (IntegerAttribute("r", False, 0, 1023),))
    q = plan(wide, [Q.marginal("r"), Q.predicate(Q.condition("r", "<", 100))], 10_000)
    best = min(c.error_ratio for c in q.choices)
    picked = q.choice(q.recommended)
    assert picked.error_ratio <= best * 1.05
    assert all(c.report_bytes >= picked.report_bytes for c in q.choices if c.error_ratio <= best * 1.05)
    gone = replace(q.choice(q.recommended), available=False, figures=None, why="|D| = 33,554,432 > 16,777,216")
    assert recommend([gone if c.mechanism == q.recommended else c for c in q.choices])[0] != q.recommended
    with pytest.raises(ValidationError, match="mechanism.*16,777,216"):
        replace(q, choices=(gone,)).oracle(gone.mechanism)


# ----- errors --------------------------------------------------------------------------------
def test_bad_input_names_the_field():
    cases = [
        (lambda: plan(REGION, [Q.marginal("level")], 0), "devices"),
        (lambda: plan(REGION, [Q.marginal("level")], 5, rows_per_device=0), "rows_per_device"),
        (lambda: plan(REGION, [Q.marginal("level")], 5, level=1.5), "level"),
        (lambda: plan(REGION, [Q.marginal("level")], 5, target_halfwidth=-1.0), "target_halfwidth"),
        (lambda: plan(REGION, [Q.dense(np.ones((3, 6)))], 4), "devices"),
        (lambda: plan(REGION, [Q.marginal("level")], 5, prior=UniformRows(TINY)), "prior"),
        (lambda: plan(REGION, [Q.marginal("level")], 5, epsilon=float("nan")), "epsilon"),
    ]
    for call, field in cases:
        with pytest.raises(ValidationError) as err:
            call()
        assert err.value.field == field

