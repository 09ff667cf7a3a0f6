"""Companion estimators and sufficient statistics.

Statistical tests draw from ``numpy.random.default_rng(seed)`` with the seed written in each test
and never retry. Their failure probabilities under a correct implementation:

* unbiasedness: |mean - truth| <= 4 standard errors of the mean (normal tail, alpha ~ 6e-5 per check);
* squared error below eq. 20: the bound is a worst case far above the actual error (alpha ~ 0);
* 95 % interval coverage in [0.93, 0.97] over >= 2,000 trials (binomial sd 0.0049: 4 sd, alpha ~ 6e-5).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from statistics import NormalDist

import numpy as np
import pytest

from ldpsynth.shared import estimators as E
from ldpsynth.shared import queries as Q
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators import formulas as estimator_math
from ldpsynth.shared.estimators import pairs as estimator_pairs
from ldpsynth.shared.estimators import statistics as S
from ldpsynth.shared.estimators import table_kernel
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.schema import Schema


@pytest.fixture(autouse=True, params=["numba kernel", "numpy passes"])
def table_path(request, monkeypatch):
    """Every test runs on both implementations of the table-block sums (the numba kernel when
    numba is installed, and the numpy passes used without it)."""
    if request.param == "numba kernel" and table_kernel.KERNEL is None:
        pytest.skip("numba is not installed")
    if request.param == "numpy passes":
        monkeypatch.setattr(table_kernel, "KERNEL", None)
    return request.param


def ratings_schema(movies: int = 4, epsilon: float = 1.0, liked: bool = True, extra: int = 0) -> Schema:
    attrs = [{"name": "movie", "type": "integer", "min": 1, "max": movies, "public": True},
             {"name": "rating", "type": "integer", "min": 1, "max": 5}]
    if liked:
        attrs.append({"name": "liked", "type": "binary"})
    if extra:
        attrs.append({"name": "extra", "type": "integer", "min": 1, "max": extra})
    return Schema.from_json({"name": "ratings", "epsilon": epsilon, "attributes": attrs})


def graph_schema(vertices: int, epsilon: float = 1.0, tie_kinds: int = 0) -> Schema:
    """Vertex-pair rows with a private edge bit (and, if ``tie_kinds``, a private categorical tie kind)."""
    attrs = [{"name": "src", "type": "integer", "min": 0, "max": vertices - 1, "public": True},
             {"name": "dst", "type": "integer", "min": 0, "max": vertices - 1, "public": True},
             {"name": "edge", "type": "binary"}]
    if tie_kinds:
        attrs.append({"name": "tie", "type": "categorical", "values": [f"t{j}" for j in range(tie_kinds)]})
    return Schema.from_json({"name": "graph", "epsilon": epsilon, "attributes": attrs})


def pair_keys(vertices: int) -> np.ndarray:
    """The public key ``src * vertices + dst`` of every ordered pair of distinct vertices."""
    src, dst = np.nonzero(~np.eye(vertices, dtype=bool))
    return src * vertices + dst


def mechanism(schema: Schema) -> MechanismE:
    return MechanismCard.for_schema(schema).mechanism


# ----- an independent, per-row reference implementation --------------------------------------
def row_functions(query: Q.Query, schema: Schema, keys: np.ndarray) -> np.ndarray:
    """``phi[i, v]`` of every row, built from the query's meaning (not from the compiled blocks)."""
    k = schema.private_domain_size
    values = schema.decode_private(np.arange(k))
    public = schema.decode_public(keys)
    n = len(keys)
    if isinstance(query, Q.LinearQuery):
        return np.tile(np.asarray(query.weights), (n, 1))
    if isinstance(query, Q.PredicateQuery):
        ops = {"==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
               "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
               "in": lambda a, b: np.isin(a, list(b)), "between": lambda a, b: (a >= b[0]) & (a <= b[1])}
        phi = np.ones(k)
        for c in query.where:
            phi = phi * ops[c.op](values[c.attribute], c.value)
        if query.value is not None:
            phi = phi * values[query.value]
        return np.tile(phi.astype(float), (n, 1))
    if isinstance(query, Q.GroupedQuery):
        tables = {v: np.asarray(w) for v, w in query.tables}
        default = np.zeros(k) if query.default is None else np.asarray(query.default)
        return np.array([tables.get(g, default) for g in public[query.attribute].tolist()])
    if isinstance(query, Q.CutQuery):
        inside = np.isin(public["src"], query.S) & np.isin(public["dst"], query.T)
        return inside[:, None] * (values["edge"] == 1)[None, :].astype(float)
    assert isinstance(query, Q.DenseQuery)
    return np.asarray(query.table, dtype=float)


def naive_answer(phi: np.ndarray, y: np.ndarray, mech: MechanismE, normalization: str, level: float = 0.95) -> dict:
    """Eq. 17 and its variance row by row, sigma^2 from the output pmf of eq. 16 (no algebra shared)."""
    p, q = mech.keep_probability, mech.lie_probability
    r = p - q
    n, k = phi.shape
    a, b = phi.min(axis=1), phi.max(axis=1)
    c = b - a
    z = {"range": c.sum(), "sum": 1.0, "mean": float(n)}[normalization]
    total = phi[np.arange(n), y].sum()
    est = (total - q * phi.sum()) / (r * z)
    pmf = np.array([mech.output_probabilities(v) for v in range(k)])      # pmf[x, y]
    sigma2 = (phi**2) @ pmf.T - (phi @ pmf.T) ** 2                         # sigma_i^2(v)
    hhat = (np.eye(k)[y] - q) / r
    var = (hhat * sigma2).sum() / (r * z) ** 2
    live = c > 0
    nv = int(live.sum())
    if nv:
        z20 = {"range": nv * c[live].min(), "sum": 1.0, "mean": float(n)}[normalization]
        bound = math.sqrt(nv) * (b[live].max() - a[live].min()) / (r * z20)
    else:
        bound = 0.0
    half = NormalDist().inv_cdf(0.5 + level / 2) * math.sqrt(var)
    return {"estimate": est, "std_error": math.sqrt(var), "var": var, "ci_low": est - half, "ci_high": est + half,
            "bound": bound, "low": a.sum() / z, "high": b.sum() / z}


def true_answer(phi: np.ndarray, x: np.ndarray, normalization: str) -> float:
    c = phi.max(axis=1) - phi.min(axis=1)
    z = {"range": c.sum(), "sum": 1.0, "mean": float(len(x))}[normalization]
    return phi[np.arange(len(x)), x].sum() / z


def true_variance(phi: np.ndarray, x: np.ndarray, mech: MechanismE, normalization: str) -> float:
    p, q = mech.keep_probability, mech.lie_probability
    pmf = np.array([mech.output_probabilities(v) for v in range(phi.shape[1])])
    sigma2 = (phi**2) @ pmf.T - (phi @ pmf.T) ** 2
    c = phi.max(axis=1) - phi.min(axis=1)
    z = {"range": c.sum(), "sum": 1.0, "mean": float(len(x))}[normalization]
    return sigma2[np.arange(len(x)), x].sum() / ((p - q) * z) ** 2


def answers_for(queries, schema, keys, y, mech, **kw) -> E.Answers:
    batch = Q.compile_queries(queries, schema)
    return E.estimate(batch, SufficientStatistics.from_schema(schema, keys, y), mech, codes=y, **kw)


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
