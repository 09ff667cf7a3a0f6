"""A few statistical queries per population, their true answers, and the debiased estimates.

The true answers are computed here directly from the raw rows with plain numpy (not through the
estimators), so a simulation checks the whole path: device → E → wire → shards → sufficient
statistics → companion estimator (WYZ eq. 17, with the normal-approximation confidence
interval of the estimators module) against an independent computation.

Ratings populations (public ``movie``, private ``rating`` 1..5):

* ``share rating=v`` (marginal over ``rating``, mean normalisation): :math:`\\frac1n\\#\\{i: x_i = v\\}`;
* ``mean rating``: linear query with weights (1, …, 5), mean normalisation;
* ``4+ stars, movie m`` for the most-rated movie: grouped query, a count;
* ``heterogeneous (eq. 10)``: a grouped query with a weight list ``U[0,1]^5`` per movie (seeded),
  normalised by :math:`Z = \\sum_i (\\max_v \\varphi_i(v) - \\min_v \\varphi_i(v))` (eq. 10).

Graph populations (public ``i``, ``j``, private ``edge``): the edge density (mean of the edge
bit over all ordered pairs) and three cut queries :math:`q_{S,T}` (eq. 33) with ``S`` a uniform
half of the vertices and ``T`` the rest.

:func:`predicted` is the plan of the workload (:mod:`ldpsynth.shared.planning`) for exactly the
population's rows: the interval half-widths expected before any device reports, beside the ones
the release achieves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ldpsynth.shared.estimators.engine import Statistics, estimate
from ldpsynth.shared.estimators.formulas import Answers
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.planning.planner import Plan, plan
from ldpsynth.shared.planning.row_distribution import SampleRows
from ldpsynth.shared.queries.builders import cut, grouped, linear, marginal
from ldpsynth.shared.queries.compiler import compile_queries
from ldpsynth.shared.queries.model import Query
from ldpsynth.shared.schema import IntegerAttribute
from ldpsynth.simulation.datasets import Population

#: Cut queries drawn for graph populations.
CUT_QUERIES = 3


@dataclass(frozen=True)
class Workload:
    """Queries and the true answer of each compiled query, in batch order."""

    queries: tuple[Query, ...]
    truth: np.ndarray


def ratings_workload(population: Population, seed: int) -> Workload:
    """The ratings queries of the module docstring and their true answers."""
    movie = np.asarray(population.columns["movie"], np.int64)
    rating = np.asarray(population.columns["rating"], np.int64)
    movies = population.schema.attribute("movie")
    assert isinstance(movies, IntegerAttribute)  # the ratings schema's movie id
    values = np.arange(movies.min, movies.max + 1)
    top = int(np.bincount(movie).argmax())
    tables = np.random.default_rng(seed).random((len(values), 5))
    row_tables = tables[movie - movies.min]
    spread = row_tables.max(axis=1) - row_tables.min(axis=1)
    queries = (
        marginal("rating", normalization="mean", label="share"),
        linear([1, 2, 3, 4, 5], normalization="mean", label="mean rating"),
        grouped("movie", {top: [0, 0, 0, 1, 1]}, normalization="sum", label=f"4+ stars, movie {top}"),
        grouped("movie", dict(zip(values.tolist(), tables)), label="heterogeneous (eq. 10)"),
    )
    truth = np.concatenate([
        [np.mean(rating == v) for v in range(1, 6)],
        [rating.mean()],
        [np.sum((movie == top) & (rating >= 4))],
        [row_tables[np.arange(len(rating)), rating - 1].sum() / spread.sum()],
    ])
    return Workload(queries, truth.astype(np.float64))


def graph_workload(population: Population, seed: int) -> Workload:
    """Edge density and :data:`CUT_QUERIES` random half/half cut queries, with their true answers."""
    i, j = (np.asarray(population.columns[name], np.int64) for name in ("i", "j"))
    edge = np.asarray(population.columns["edge"], np.int64)
    vertices = population.schema.attribute("i").size
    rng = np.random.default_rng(seed)
    queries: list[Query] = [linear([0, 1], normalization="mean", label="edge density")]
    truth = [edge.mean()]
    for c in range(CUT_QUERIES):
        inside_s = rng.permutation(vertices) < vertices // 2
        queries.append(cut(np.flatnonzero(inside_s).tolist(), np.flatnonzero(~inside_s).tolist(), label=f"cut #{c}"))
        truth.append(edge[inside_s[i] & ~inside_s[j]].sum())
    return Workload(tuple(queries), np.asarray(truth, np.float64))


def workload(population: Population, seed: int = 11) -> Workload:
    """The demo workload of ``population`` (ratings or graph, told apart by the attributes)."""
    names = {a.name for a in population.schema.attributes}
    if {"movie", "rating"} <= names:
        return ratings_workload(population, seed)
    if {"i", "j", "edge"} <= names:
        return graph_workload(population, seed)
    raise ValueError(f"no demo workload for a population with attributes {sorted(names)}")


def answer(work: Workload, population: Population, stats: Statistics, mechanism: MechanismE,
           level: float = 0.95) -> Answers:
    """The companion estimates of ``work`` from the synthetic database's statistics."""
    return estimate(compile_queries(list(work.queries), population.schema), stats, mechanism, level=level)


def predicted(work: Workload, population: Population, level: float = 0.95) -> Plan:
    """The plan of ``work`` for a release of exactly ``population``'s rows (the prior is the rows)."""
    keys, codes = population.true_codes()
    return plan(population.schema, list(work.queries), len(population), level=level,
                prior=SampleRows(population.schema, keys, codes, name="the population's rows"))
