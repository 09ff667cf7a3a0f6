"""Companion estimators (ldpsynth.shared.estimators) against an independent per-row reference: the matrix path,
the cut queries (eq. 34, 35), the bound (eq. 20) and minimax lower bound (eq. 29), and the proper estimate (eq. 21)
against brute force."""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist

import numpy as np
import pytest

from ldpsynth.shared import estimators as E
from ldpsynth.shared import queries as Q
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators import formulas as estimator_math
from ldpsynth.shared.estimators import pairs as estimator_pairs
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.schema import Schema

from ._helpers import (
    answers_for,
    graph_schema,
    mechanism,
    naive_answer,
    pair_keys,
    ratings_schema,
    row_functions,
    true_answer,
)


# ----- the matrix path equals the per-row reference -------------------------------------------
def mixed_queries(k: int, rng: np.random.Generator, n: int) -> list[Q.Query]:
    ints = np.arange(k) % 4
    return [
        Q.linear(rng.random(k)), Q.linear(rng.random(k) - 0.5, normalization="sum"),
        Q.linear(ints.astype(float), normalization="mean"),
        Q.predicate(Q.condition("rating", ">=", 4)),
        Q.predicate(Q.condition("rating", "between", [2, 3]), value="rating", normalization="mean"),
        Q.grouped("movie", {1: rng.random(k), 2: rng.random(k) * 3, 4: rng.random(k)}, default=rng.random(k)),
        Q.grouped("movie", {1: ints, 3: np.full(k, 2.0)}, normalization="sum"),         # a constant group
        Q.grouped("movie", {2: ints * 2, 4: ints}, default=ints, normalization="mean"),  # movie 4 has no rows
        Q.grouped("movie", {3: np.zeros(k)}, default=np.arange(k) % 2),
        Q.dense(rng.random((n, k))), Q.dense(rng.integers(0, 3, (n, k)), normalization="sum"),
    ]


@pytest.mark.parametrize("liked", [True, False])       # |D| = 10 (value-major path) and |D| = 5
@pytest.mark.parametrize("wide", [False, True])        # wide: |D| = 40 > 16 (row-major path)
@pytest.mark.parametrize("answer_chunk", [E.ANSWER_CHUNK, 2])  # 2: blocks answered in slices of 2 queries
def test_batch_evaluation_equals_the_naive_per_row_reference(liked, wide, answer_chunk, monkeypatch):
    """Seed 11: 150 rows over movies 1-3 (movie 4 listed by a query but absent)."""
    monkeypatch.setattr(estimator_math, "ANSWER_CHUNK", answer_chunk)   # read where answers_from_sums is
    schema = ratings_schema(4, liked=liked, extra=(4 if liked else 8) if wide else 0)
    mech, k = mechanism(schema), schema.private_domain_size
    assert (k > 16) == wide
    rng = np.random.default_rng(11)
    n = 150
    keys = rng.integers(0, 3, n)
    y = mech.perturb(rng.integers(0, k, n), rng)
    queries = mixed_queries(k, rng, n)
    answers = answers_for(queries, schema, keys, y, mech, level=0.9)
    for j, query in enumerate(queries):
        ref = naive_answer(row_functions(query, schema, keys), y, mech, query.normalization, level=0.9)
        got = answers.record(j)
        for name in ("estimate", "std_error", "ci_low", "ci_high", "bound"):
            assert got[name] == pytest.approx(ref[name], rel=1e-9, abs=1e-9), (j, name)
        assert ref["low"] - 1e-9 <= got["proper_estimate"] <= ref["high"] + 1e-9
        assert got["bound_proper"] == pytest.approx(2 * ref["bound"])                  # eq. 22
        assert got["n"] == n and got["epsilon"] == mech.epsilon and got["level"] == 0.9
        assert ref["var"] >= 0.0


@pytest.mark.parametrize("tie_kinds", [0, 3])   # |D| = 2 (eq. 34 as printed) and |D| = 6
def test_cut_queries_equal_the_naive_reference_on_dense_and_sparse_paths(monkeypatch, tie_kinds):
    """Seed 12: 12 vertices, every ordered pair (i != j) is a row, uniform private values."""
    schema = graph_schema(12, tie_kinds=tie_kinds)
    mech = mechanism(schema)
    rng = np.random.default_rng(12)
    keys = pair_keys(12)
    y = mech.perturb(rng.integers(0, schema.private_domain_size, len(keys)), rng)
    queries = [Q.cut([0, 1, 2, 3, 4], [5, 6, 7, 8, 9, 10], edge="edge"),
               Q.cut([11], [0, 3], edge="edge", normalization="mean"),
               Q.cut([2, 7], [1, 4, 5], edge="edge", normalization="eq10")]
    dense = answers_for(queries, schema, keys, y, mech)
    monkeypatch.setattr(estimator_pairs, "DENSE_PAIRS", 0)   # read where the pair sums are
    sparse = answers_for(queries, schema, keys, y, mech)
    for j, query in enumerate(queries):
        ref = naive_answer(row_functions(query, schema, keys), y, mech, query.normalization)
        for got in (dense.record(j), sparse.record(j)):
            for name in ("estimate", "std_error", "ci_low", "ci_high", "bound"):
                assert got[name] == pytest.approx(ref[name], rel=1e-9, abs=1e-9), (j, name)
            assert got["proper_kind"] == "exact"


def test_cut_estimate_is_eq34_and_bound_is_eq35():
    schema = graph_schema(6, epsilon=0.7)
    mech = mechanism(schema)
    rng = np.random.default_rng(13)
    src, dst = np.nonzero(np.ones((6, 6), bool))
    y = mech.perturb(rng.integers(0, 2, 36), rng)
    s_set, t_set = [0, 1], [2, 3, 5]
    got = answers_for([Q.cut(s_set, t_set)], schema, src * 6 + dst, y, mech).record(0)
    inside = np.isin(src, s_set) & np.isin(dst, t_set)
    e = math.exp(-mech.epsilon)
    eq34 = (1 + e) / (1 - e) * y[inside].sum() - e / (1 - e) * len(s_set) * len(t_set)
    assert got["estimate"] == pytest.approx(eq34, rel=1e-12)
    assert got["bound"] == pytest.approx((1 + e) / (1 - e) * math.sqrt(len(s_set) * len(t_set)), rel=1e-12)


def test_bound_is_eq20_for_eq10_queries():
    schema = ratings_schema(3, epsilon=0.5)
    mech, k = mechanism(schema), schema.private_domain_size
    rng = np.random.default_rng(14)
    keys = rng.integers(0, 3, 500)
    y = mech.perturb(rng.integers(0, k, 500), rng)
    tables = {1: rng.random(k), 2: rng.random(k) + 1, 3: 3 * rng.random(k)}
    got = answers_for([Q.grouped("movie", tables)], schema, keys, y, mech).record(0)
    a = min(t.min() for t in tables.values())
    b = max(t.max() for t in tables.values())
    c = min(np.ptp(t) for t in tables.values())
    g, e = 1 + (k - 1) * math.exp(-mech.epsilon), math.exp(-mech.epsilon)
    eq20 = (b - a) ** 2 * g**2 / (c**2 * (1 - e) ** 2 * 500)
    assert got["bound"] ** 2 == pytest.approx(eq20, rel=1e-12)
    assert got["bound_proper"] ** 2 == pytest.approx(4 * eq20, rel=1e-12)             # eq. 22
    assert E.minimax_lower_bound(500, mech.epsilon, k) < eq20


def test_minimax_lower_bound_is_eq29_for_powers_of_two():
    for l, eps, n in [(1, 1.0, 100), (3, 0.5, 10_000), (6, 2.0, 7)]:
        eq29 = (1 - NormalDist().cdf(1)) ** 2 / (2 ** (l + 4) * (1 + math.exp(eps) / (2**l - 1)) ** 3) / n
        assert E.minimax_lower_bound(n, eps, 2**l) == pytest.approx(eq29, rel=1e-12)
    with pytest.raises(ValidationError):
        E.minimax_lower_bound(0, 1.0, 4)


# ----- proper estimate (eq. 21) against brute force --------------------------------------------
def test_proper_estimate_is_the_nearest_feasible_value():
    """Seeds 0..59: 4 rows (2 per group) over |D| = 4, q_phi(D^4) enumerated exhaustively."""
    schema = Schema.from_json({"name": "tiny", "epsilon": 1.0, "attributes": [
        {"name": "grp", "type": "integer", "min": 0, "max": 1, "public": True},
        {"name": "v", "type": "integer", "min": 0, "max": 3}]})
    mech = mechanism(schema)
    keys = np.array([0, 0, 1, 1])
    queries = [
        (Q.linear([0, 1, 2, 3], normalization="sum"), "exact"),
        (Q.linear([0, 1, 2, 3]), "exact"),
        (Q.linear([5, 7, 9, 5], normalization="mean"), "exact"),
        (Q.linear([0, 1, 3, 3], normalization="sum"), "clipped"),      # {0, 1, 3}: not a progression
        (Q.linear([0.0, 0.5, 1.0, 0.2]), "clipped"),
        (Q.grouped("grp", {0: [0, 2, 4, 6], 1: [1, 3, 1, 1]}, normalization="sum"), "exact"),  # common step 2
        (Q.grouped("grp", {0: [0, 1, 2, 3], 1: [0, 2, 0, 0]}, normalization="sum"), "clipped"),
        (Q.grouped("grp", {0: [4, 4, 4, 4], 1: [1, 0, 0, 1]}), "exact"),   # a constant group
        (Q.predicate(Q.condition("v", "in", [1, 3]), normalization="mean"), "exact"),
        (Q.dense([[0, 1, 2, 3], [0, 0, 0, 0], [0, 2, 2, 2], [1, 1, 1, 3]], normalization="sum"), "clipped"),
        (Q.dense([[0, 1, 2, 3], [0, 0, 0, 0], [0, 1, 1, 1], [3, 2, 2, 2]], normalization="sum"), "exact"),
    ]
    feasible = []
    for query, _ in queries:
        phi = row_functions(query, schema, keys)
        feasible.append(np.unique([true_answer(phi, np.array(x), query.normalization)
                                   for x in itertools.product(range(4), repeat=4)]))
    batch = Q.compile_queries([q for q, _ in queries], schema)
    for seed in range(60):
        rng = np.random.default_rng(seed)
        y = mech.perturb(rng.integers(0, 4, 4), rng)
        answers = E.estimate(batch, SufficientStatistics.from_schema(schema, keys, y), mech, codes=y)
        for j, (_, kind) in enumerate(queries):
            got = answers.record(j)
            values = feasible[j]
            assert got["proper_kind"] == kind, j
            if kind == "exact":
                assert np.isclose(values, got["proper_estimate"], rtol=1e-12, atol=1e-12).any(), (seed, j)
                nearest = np.abs(values - got["estimate"]).min()
                assert abs(got["proper_estimate"] - got["estimate"]) <= nearest + 1e-9, (seed, j)
            else:
                assert got["proper_estimate"] == pytest.approx(np.clip(got["estimate"], values[0], values[-1]))
