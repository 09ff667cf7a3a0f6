"""Companion estimators and sufficient statistics: threaded batches, the statistics' dense and compact forms,
refused inputs, and queries constant on every row (known, not estimated)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from ldpsynth.shared import estimators as E
from ldpsynth.shared import queries as Q
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators import statistics as S
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.mechanism import MechanismE

from ._helpers import answers_for, mechanism, ratings_schema


# ----- batches, threads, statistics ------------------------------------------------------------
def test_threaded_batch_equals_sequential_and_the_grouped_query_form():
    """Seed 3: 8,192 heterogeneous queries over 128 movies x 5 values (large enough to use threads)."""
    schema = ratings_schema(128, liked=False)
    mech = mechanism(schema)
    rng = np.random.default_rng(3)
    keys, y = rng.integers(0, 128, 20_000), rng.integers(0, 5, 20_000)
    stats = SufficientStatistics.from_schema(schema, keys, y)
    w = rng.random((8192, 128, 5))
    w[:100] = rng.integers(0, 3, (100, 128, 5))        # some lattice candidates
    assert w.size >= E.PARALLEL_WEIGHTS
    batch = Q.grouped_batch(schema, "movie", w)
    one, two = E.estimate(batch, stats, mech, workers=1), E.estimate(batch, stats, mech, workers=2)
    for name in ("estimate", "proper_estimate", "exact", "std_error", "bound"):
        np.testing.assert_array_equal(getattr(one, name), getattr(two, name))
    picks = [0, 7, 99, 100, 5000, 8191]
    objects = [Q.grouped("movie", {m + 1: w[j, m] for m in range(128)}) for j in picks]
    ref = E.estimate(Q.compile_queries(objects, schema), stats, mech)
    np.testing.assert_array_equal(one.exact[picks], ref.exact)
    for name in ("estimate", "proper_estimate", "std_error", "bound"):
        np.testing.assert_allclose(getattr(one, name)[picks], getattr(ref, name), rtol=1e-12)


def test_statistics_dense_and_compact_forms_agree(monkeypatch):
    rng = np.random.default_rng(8)
    keys, y = rng.integers(0, 50, 3000) * 7, rng.integers(0, 6, 3000)
    dense = SufficientStatistics.from_rows(keys, y, domain_size=6, public_domain_size=400)
    monkeypatch.setattr(S, "DENSE_CELLS", 0)
    compact = SufficientStatistics.from_rows(keys, y, domain_size=6, public_domain_size=400)
    np.testing.assert_array_equal(dense.present_keys, compact.present_keys)
    np.testing.assert_array_equal(dense.table, compact.table)
    np.testing.assert_array_equal(dense.present_keys, np.unique(keys))
    assert dense.n == 3000 and dense.table.sum(axis=1).min() > 0
    ref = np.zeros((400, 6), np.int64)
    np.add.at(ref, (keys, y), 1)
    np.testing.assert_array_equal(dense.table, ref[dense.present_keys])
    a = SufficientStatistics.from_rows(keys[:1000], y[:1000], domain_size=6, public_domain_size=400)
    b = SufficientStatistics.from_rows(keys[1000:], y[1000:], domain_size=6, public_domain_size=400)
    merged = SufficientStatistics.merge([a, b])
    np.testing.assert_array_equal(merged.present_keys, dense.present_keys)
    np.testing.assert_array_equal(merged.table, dense.table)
    none = SufficientStatistics.from_rows(None, y, domain_size=6)
    np.testing.assert_array_equal(none.table, np.bincount(y, minlength=6)[None, :])


@pytest.mark.parametrize("keys, codes, field", [
    (np.array([0, 1]), np.array([0, 6]), "codes"), (np.array([0, 400]), np.array([0, 1]), "public_keys"),
    (np.array([0]), np.array([0, 1]), "public_keys"), (None, np.array([0, 1]), "public_keys"),
    (np.array([0, 1]), np.array([0.5, 1.0]), "codes")])
def test_statistics_reject_bad_rows(keys, codes, field):
    with pytest.raises(ValidationError) as err:
        SufficientStatistics.from_rows(keys, codes, domain_size=6, public_domain_size=400)
    assert err.value.field == field


def test_estimate_rejects_inconsistent_inputs():
    schema = ratings_schema(2)
    mech = mechanism(schema)
    rng = np.random.default_rng(9)
    keys, y = rng.integers(0, 2, 50), rng.integers(0, 10, 50)
    stats = SufficientStatistics.from_schema(schema, keys, y)
    batch = Q.compile_queries([Q.linear(np.ones(10) * np.arange(10))], schema)
    cases = [
        (lambda: E.estimate(batch, stats, MechanismE(1.0, 5)), "mechanism"),
        (lambda: E.estimate(batch, SufficientStatistics.from_rows(None, y, domain_size=10), mech), "statistics"),
        (lambda: E.estimate(batch, SufficientStatistics.from_schema(schema, keys[:0], y[:0]), mech), "synthetic"),
        (lambda: E.estimate(batch, stats, mech, codes=y[:10]), "codes"),
        (lambda: E.estimate(Q.compile_queries([Q.linear(np.ones(10)), Q.predicate()], schema), stats, mech),
         "queries[0].normalization"),
        (lambda: E.estimate(Q.compile_queries([Q.dense(np.ones((50, 10)))], schema), stats, mech), "codes"),
        (lambda: E.estimate(Q.compile_queries([Q.linear(np.arange(10)), Q.dense(np.eye(49, 10))], schema),
                            stats, mech, codes=y), "queries[1].table"),
        (lambda: E.estimate(batch, stats, mech, workers=0), "workers"),
    ]
    for call, field in cases:
        with pytest.raises(ValidationError) as err:
            call()
        assert err.value.field == field, (field, str(err.value))


@pytest.mark.parametrize("builder", ["linear", "grouped"])
def test_non_finite_weights_of_unchecked_batches_are_caught_by_the_estimator(builder):
    schema = ratings_schema(4)
    k = schema.private_domain_size
    rng = np.random.default_rng(12)
    stats = SufficientStatistics.from_schema(schema, rng.integers(0, 4, 500), rng.integers(0, k, 500))
    mech = MechanismCard.for_schema(schema).mechanism
    for bad in (np.nan, np.inf, -np.inf):
        if builder == "linear":
            w = rng.random((50, k))
            w[37, 3] = bad
            batch = Q.linear_batch(schema, w, check_finite=False)
        else:
            w = rng.random((50, 4, k))
            w[37, 2, 3] = bad
            batch = Q.grouped_batch(schema, "movie", w, check_finite=False)
        with pytest.raises(ValidationError) as err:
            E.estimate(batch, stats, mech)
        assert err.value.field == "queries[37].weights" and err.value.problem == "not finite"
    huge = np.full((3, k), 1e308)
    with pytest.raises(ValidationError) as err:
        E.estimate(Q.linear_batch(schema, huge, normalization="sum"), stats, mech)
    assert err.value.problem == "overflow"


# ----- queries constant on every row: known, not estimated ------------------------------------
def test_a_query_with_one_value_on_every_row_returns_exactly_that_value():
    """Issue 16: a constant query had std_error 0 but the estimate eq. 17 gives after debiasing, an ulp or
    more off the exact answer (17 of 20 releases), so its zero-width interval missed it. Its value is
    known whatever the data: c for "mean", c n rounded once for "sum". Seeds 0-19, 20 releases."""
    schema = ratings_schema()
    k = schema.private_domain_size
    mech = mechanism(schema)
    for seed in range(20):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(500, 3000))
        keys = schema.encode_public({"movie": rng.integers(1, 5, n)})
        y = rng.integers(0, k, n)
        queries, exact = [], []
        for c in (3.0, 0.1, 1 / 3, 2.5, -7.25, 1e-300):
            for normalization in ("mean", "sum"):
                queries.append(Q.linear(np.full(k, c), normalization=normalization))
                exact.append(c if normalization == "mean" else float(Fraction(c) * n))
        queries += [Q.predicate(normalization="mean"), Q.predicate(),
                    Q.grouped("movie", {m: np.full(k, 0.7) for m in (1, 2, 3, 4)}, default=np.full(k, 0.7),
                              normalization="mean"),
                    Q.dense(np.full((n, k), 0.3), normalization="sum")]
        exact += [1.0, float(n), 0.7, float(Fraction(0.3) * n)]
        answers = answers_for(queries, schema, keys, y, mech)
        assert answers.estimate.tolist() == exact, seed
        assert answers.proper_estimate.tolist() == exact and answers.exact.all()
        assert (answers.std_error == 0).all() and answers.ci_low.tolist() == exact == answers.ci_high.tolist()
        assert (answers.bound == 0).all()


def test_a_query_constant_on_every_row_with_several_values_has_no_error_term():
    """Constant per row but not one value (a constant table per movie): no noise, zero standard error,
    the value sum_i a_i / Z in floating point (within a few ulps of the exact value; not to the ulp)."""
    schema = ratings_schema()
    k = schema.private_domain_size
    rng = np.random.default_rng(7)
    movies = rng.integers(1, 5, 2000)
    keys, y = schema.encode_public({"movie": movies}), rng.integers(0, k, 2000)
    tables = {m: np.full(k, 0.1 * m) for m in (1, 2, 3, 4)}
    answers = answers_for([Q.grouped("movie", tables, normalization="mean")], schema, keys, y, mechanism(schema))
    exact = float(sum(Fraction(0.1 * m) * int((movies == m).sum()) for m in (1, 2, 3, 4)) / 2000)
    assert answers.std_error[0] == 0 and answers.ci_low[0] == answers.estimate[0] == answers.ci_high[0]
    assert answers.estimate[0] == pytest.approx(exact, rel=1e-15) and answers.exact[0]


def test_sums_over_row_subsets_merge_the_extremes_of_constant_and_varying_rows():
    """``a_min``/``b_max`` are eq. 20's a, b over the varying rows; where every row is constant, the least and
    greatest constant. Merging shard sums keeps that: constant rows never widen eq. 20's a, b."""
    schema = ratings_schema(liked=False)
    mech = mechanism(schema)
    rng = np.random.default_rng(11)
    varying, constant = rng.random((1, 30, 5)), np.full((1, 30, 5), 9.0)
    constant[0, 10:] = -4.0
    codes = rng.integers(0, 5, 60)
    whole = E.row_block_sums(np.concatenate([constant, varying], axis=1), codes, mech)
    merged = E.row_block_sums(constant, codes[:30], mech).merge(E.row_block_sums(varying, codes[30:], mech))
    for name in ("a_min", "b_max", "c_min", "varying"):
        assert getattr(merged, name) == pytest.approx(getattr(whole, name)), name
    assert (merged.a_min[0], merged.b_max[0]) == (varying.min(axis=2).min(), varying.max(axis=2).max())
    both = E.row_block_sums(constant[:, :10], codes[:10], mech).merge(
        E.row_block_sums(constant[:, 10:], codes[10:30], mech))
    assert (both.varying[0], both.a_min[0], both.b_max[0]) == (0.0, -4.0, 9.0)
