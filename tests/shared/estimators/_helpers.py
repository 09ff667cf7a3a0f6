"""Helpers of the estimator tests: the test schemas, and an independent, per-row reference implementation of
the estimators (eq. 16, 17 and 20) built from each query's meaning, not from the compiled blocks."""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

from ldpsynth.shared import estimators as E
from ldpsynth.shared import queries as Q
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.schema import Schema


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
