"""Companion estimators: unbiasedness, the error bound and interval coverage.

Statistical tests draw from ``numpy.random.default_rng(seed)`` with the seed written in each test
and never retry. Their failure probabilities under a correct implementation:

* unbiasedness: |mean - truth| <= 4 standard errors of the mean (normal tail, alpha ~ 6e-5 per check);
* squared error below eq. 20: the bound is a worst case far above the actual error (alpha ~ 0);
* 95 % interval coverage in [0.93, 0.97] over >= 2,000 trials (binomial sd 0.0049: 4 sd, alpha ~ 6e-5).
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest

from ldpsynth.shared import estimators as E
from ldpsynth.shared import queries as Q
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.mechanism import MechanismE

from ._helpers import (
    answers_for,
    graph_schema,
    mechanism,
    pair_keys,
    ratings_schema,
    row_functions,
    true_answer,
    true_variance,
)


# ----- unbiasedness, error bound, coverage -----------------------------------------------------
def heterogeneous_population(rng: np.random.Generator, n: int, movies: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Uneven group sizes and a value distribution that depends on the group."""
    keys = rng.choice(movies, size=n, p=np.arange(1, movies + 1) / (movies * (movies + 1) / 2))
    tilt = rng.dirichlet(np.ones(k), size=movies)
    x = (rng.random(n)[:, None] > np.cumsum(tilt[keys], axis=1)).sum(axis=1)
    return keys, np.minimum(x, k - 1)


def random_graph(rng: np.random.Generator, vertices: int, density: float) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair of distinct vertices (keys) and its edge bit, 1 with probability ``density``."""
    keys = pair_keys(vertices)
    return keys, (rng.random(len(keys)) < density).astype(np.int64)


def test_unbiased_with_unbiased_variance_for_linear_grouped_and_predicate_queries():
    """Seed 2024, 300 releases of 1,500 rows (8 movies, |D| = 10, eps = 1); 4-sigma checks."""
    schema = ratings_schema(8)
    mech, k = mechanism(schema), schema.private_domain_size
    rng = np.random.default_rng(2024)
    keys, x = heterogeneous_population(rng, 1500, 8, k)
    queries = [Q.linear(rng.random(k)),
               Q.grouped("movie", {m: rng.random(k) * m for m in range(1, 8)}, default=rng.random(k)),
               Q.predicate(Q.condition("rating", ">=", 4), Q.condition("liked", "==", 1)),
               Q.linear(rng.normal(size=k), normalization="mean")]
    batch = Q.compile_queries(queries, schema)
    reps = 300
    est, var = np.empty((reps, len(queries))), np.empty((reps, len(queries)))
    for t in range(reps):
        y = mech.perturb(x, rng)
        a = E.estimate(batch, SufficientStatistics.from_schema(schema, keys, y), mech)
        est[t], var[t] = a.estimate, a.std_error**2
    for j, query in enumerate(queries):
        phi = row_functions(query, schema, keys)
        truth, true_var = true_answer(phi, x, query.normalization), true_variance(phi, x, mech, query.normalization)
        assert abs(est[:, j].mean() - truth) <= 4 * est[:, j].std(ddof=1) / math.sqrt(reps), j
        assert abs(var[:, j].mean() - true_var) <= 4 * var[:, j].std(ddof=1) / math.sqrt(reps), j
        assert est[:, j].var(ddof=1) == pytest.approx(true_var, rel=0.33), j   # 300 draws: sd of ratio ~ 0.08


def test_unbiased_cut_queries():
    """Seed 7, 400 releases of a 30-vertex graph (870 ordered pairs, density 0.2, eps = 1); 4-sigma checks."""
    schema = graph_schema(30)
    mech = mechanism(schema)
    rng = np.random.default_rng(7)
    keys, x = random_graph(rng, 30, 0.2)
    queries = [Q.cut(range(10), range(10, 22)), Q.cut([3], range(4, 30)), Q.cut(range(0, 30, 2), range(1, 30, 2))]
    batch = Q.compile_queries(queries, schema)
    reps = 400
    ys = mech.perturb(np.tile(x, (reps, 1)), rng)
    est = np.array([E.estimate(batch, SufficientStatistics.from_schema(schema, keys, y), mech).estimate for y in ys])
    for j, query in enumerate(queries):
        truth = true_answer(row_functions(query, schema, keys), x, "sum")
        assert abs(est[:, j].mean() - truth) <= 4 * est[:, j].std(ddof=1) / math.sqrt(reps), j


@pytest.mark.parametrize("n", [200, 2_000, 20_000])
def test_mean_squared_error_below_eq20(n):
    """Seed 31 + n, 200 releases; the mean squared error over them must not exceed bound**2 (eq. 20)."""
    schema = ratings_schema(6, liked=False)
    mech, k = mechanism(schema), schema.private_domain_size
    rng = np.random.default_rng(31 + n)
    keys, x = heterogeneous_population(rng, n, 6, k)
    queries = [Q.linear(rng.random(k)), Q.grouped("movie", {m: rng.random(k) for m in range(1, 7)}),
               Q.predicate(Q.condition("rating", "<=", 2), normalization="mean"),
               Q.linear(rng.random(k), normalization="sum")]
    batch = Q.compile_queries(queries, schema)
    truths = [true_answer(row_functions(q, schema, keys), x, q.normalization) for q in queries]
    sq = np.zeros(len(queries))
    sq_proper = np.zeros(len(queries))
    reps = 200
    for _ in range(reps):
        y = mech.perturb(x, rng)
        a = E.estimate(batch, SufficientStatistics.from_schema(schema, keys, y), mech)
        sq += (a.estimate - truths) ** 2
        sq_proper += (a.proper_estimate - truths) ** 2
        bound, bound_proper = a.bound, a.bound_proper
    assert np.all(sq / reps <= bound**2)
    assert np.all(sq_proper / reps <= bound_proper**2)                                  # eq. 22


def simulate_counts(mech: MechanismE, keys: np.ndarray, x: np.ndarray, groups: int, trials: int,
                    rng: np.random.Generator) -> np.ndarray:
    """Counts ``(trials, groups, |D|)`` of ``trials`` independent releases, all drawn in one call."""
    k = mech.domain_size
    ys = mech.perturb(np.tile(x, (trials, 1)), rng)
    flat = (np.arange(trials)[:, None] * groups + keys[None, :]) * k + ys
    return np.bincount(flat.ravel(), minlength=trials * groups * k).reshape(trials, groups, k)


def coverage(batch: Q.QueryBatch, counts: np.ndarray, public_domain_size: int, mech: MechanismE,
             truths: np.ndarray, level: float) -> np.ndarray:
    keys = np.arange(counts.shape[1])
    hits = np.zeros(len(truths))
    for c in counts:
        present = c.sum(axis=1) > 0
        stats = SufficientStatistics.from_table(keys[present], c[present], public_domain_size)
        a = E.estimate(batch, stats, mech, level=level)
        hits += (a.ci_low <= truths) & (truths <= a.ci_high)
    return hits / len(counts)


def test_confidence_interval_coverage_95():
    """Seed 95, 2,400 releases of 3,000 rows (8 movies, |D| = 10, eps = 1): coverage within [0.93, 0.97]."""
    schema = ratings_schema(8)
    mech, k = mechanism(schema), schema.private_domain_size
    rng = np.random.default_rng(95)
    keys, x = heterogeneous_population(rng, 3000, 8, k)
    queries = [Q.linear(rng.random(k)), Q.grouped("movie", {m: rng.random(k) * m for m in range(1, 9)}),
               Q.predicate(Q.condition("rating", ">=", 3)), Q.marginal("liked", normalization="mean")]
    batch = Q.compile_queries(queries, schema)
    truths = np.array([true_answer(row_functions(q, schema, keys), x, q.normalization) for q in queries[:3]]
                      + [np.mean(schema.private_digits(x)["liked"] == v) for v in (0, 1)])
    counts = simulate_counts(mech, keys, x, 8, 2400, rng)
    rate = coverage(batch, counts, 8, mech, truths, 0.95)
    assert np.all((0.93 <= rate) & (rate <= 0.97)), rate


def test_confidence_interval_coverage_95_for_cuts():
    """Seed 96, 2,000 releases of a 40-vertex graph (1,560 pairs, density 0.15, eps = 1): coverage in [0.93, 0.97]."""
    schema = graph_schema(40)
    mech = mechanism(schema)
    rng = np.random.default_rng(96)
    keys, x = random_graph(rng, 40, 0.15)
    queries = [Q.cut(range(20), range(20, 40)), Q.cut(range(0, 40, 3), range(1, 40, 3))]
    batch = Q.compile_queries(queries, schema)
    truths = np.array([true_answer(row_functions(q, schema, keys), x, "sum") for q in queries])
    rate = coverage(batch, simulate_counts(mech, keys, x, 1600, 2000, rng), 1600, mech, truths, 0.95)
    assert np.all((0.93 <= rate) & (rate <= 0.97)), rate


def test_interval_level_is_configurable():
    schema = ratings_schema(2)
    mech = mechanism(schema)
    rng = np.random.default_rng(5)
    keys, y = rng.integers(0, 2, 400), rng.integers(0, 10, 400)
    for level in (0.5, 0.8, 0.99):
        a = answers_for([Q.linear(rng.random(10))], schema, keys, y, mech, level=level).record(0)
        assert (a["ci_high"] - a["estimate"]) / a["std_error"] == pytest.approx(NormalDist().inv_cdf(0.5 + level / 2))
        assert a["level"] == level
    for bad in (0.0, 1.0, float("nan")):
        with pytest.raises(ValidationError) as err:
            answers_for([Q.linear(np.ones(10))], schema, keys, y, mech, level=bad)
        assert err.value.field == "level"
