"""Predicted against empirical standard errors: ``ldpsynth plan`` checked by simulated releases.

For a data set x, a schema and its queries, the plan whose prior is x itself predicts the exact
standard error of every query over releases of exactly these rows (``shared/planning/``, WYZ
eq. 17). Here R releases of x are drawn with ``MechanismE.perturb`` (seeded), answered with
``shared.estimators.estimate`` (the code ``ldpsynth estimate`` and the aggregator run), and the
empirical variance S² of each query's estimates is compared with the predicted σ²:

.. math::  z = \\frac{S^2 - \\sigma^2}{\\sqrt{(m_4 - S^4)/R}}

(delta method, :math:`m_4` the sample fourth central moment: no normality assumed). The prediction
agrees within the Monte Carlo error when :math:`|z| < z_{1-\\alpha/2}`; ``tests/shared/test_plan_agreement.py``
asserts it at :data:`ALPHA` per query.

Configurations (every query kind, |D| from 2 to 128, ε from 0.5 to 4): the seeded synthetic ratings
population of ``make demo`` (ε = 0.5 and 4), synthetic data over a 32-value domain, a dense query,
cut queries on a random graph; MovieLens-100k (movie public, |D| = 5, ε = 1 and 4; the 20 most
rated movies private with the rating, |D| = 100, ε = 2); Adult (age (3 bits) x education private, sex
public, |D| = 128, ε = 2; marital status private, race public, |D| = 7, ε = 0.5). The real data sets
are read from ``$LDPSYNTH_DATA`` or ``../shared/data``; configurations whose data is absent are
skipped (and say so).

Writes ``agreement.md`` and ``agreement.csv`` to ``--out`` (default ``experiments/results/plan_agreement``).

    python experiments/plan_agreement.py [--releases 2000] [--seed 1] [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np

from ldpsynth.evaluation.pqd.table import read_table
from ldpsynth.evaluation.records import write_records
from ldpsynth.shared import queries as Q
from ldpsynth.shared.estimators import estimate
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.planning.planner import plan
from ldpsynth.shared.planning.row_distribution import SampleRows
from ldpsynth.shared.queries import RowBlock
from ldpsynth.shared.schema import BinaryAttribute, CategoricalAttribute, ContinuousAttribute, IntegerAttribute, Schema
from ldpsynth.simulation import answers, datasets

RESULTS = Path(__file__).resolve().parent / "results" / "plan_agreement"
#: Two-sided level of the per-query agreement test.
ALPHA = 1e-4


@dataclass(frozen=True)
class Config:
    """A data set (encoded rows) of a schema and the queries to check on it."""

    name: str
    schema: Schema
    keys: np.ndarray
    codes: np.ndarray
    queries: tuple[Q.Query, ...]


def _encoded(name: str, schema: Schema, columns: dict[str, Any], queries: Sequence[Q.Query]) -> Config:
    return Config(name, schema, schema.encode_public(columns), schema.encode_private(columns), tuple(queries))


def synthetic_ratings(epsilon: float) -> Config:
    """The ``make demo`` population (2,000 devices x 10 ratings of 50 movies) and its demo workload."""
    population = datasets.synthetic_ratings(epsilon=epsilon)
    work = answers.workload(population)
    return _encoded(f"synthetic ratings, eps {epsilon:g}", population.schema, population.columns, work.queries)


def synthetic_wide() -> Config:
    """20,000 skewed rows: public region (4), private category (16) x flag (2), ε = 3."""
    rng = np.random.default_rng(5)
    categories = tuple(f"c{j}" for j in range(16))
    schema = Schema("wide", 3.0, (IntegerAttribute("region", True, 1, 4), CategoricalAttribute("category", False,
                                                                                                  categories),
                                  BinaryAttribute("flag", False)))
    n = 20_000
    region = rng.choice(4, n, p=[0.4, 0.3, 0.2, 0.1])
    by_region = rng.dirichlet(np.full(16, 0.5), size=4)
    category = (rng.random(n)[:, None] > np.cumsum(by_region[region], axis=1)).sum(axis=1)
    flag = (rng.random(n) < np.linspace(0.05, 0.9, 16)[category]).astype(np.int64)
    columns = {"region": region + 1, "category": np.asarray(categories, dtype=object)[category], "flag": flag}
    queries = [Q.marginal("flag", normalization="mean", label="share flag"),
               Q.predicate(Q.condition("category", "in", ["c0", "c1", "c2"]), Q.condition("flag", "==", 1),
                           label="c0-c2 and flag"),
               Q.linear(rng.random(32), label="random linear (eq. 10)"),
               Q.grouped("region", {r: rng.random(32) for r in (1, 2, 3)}, default=rng.random(32),
                         label="by region (eq. 10)")]
    return _encoded("synthetic, 32 values, eps 3", schema, columns, queries)


def synthetic_dense() -> Config:
    """300 rows over 4 values, one weight list per row (dense queries), ε = 1."""
    rng = np.random.default_rng(6)
    schema = Schema("dense", 1.0, (IntegerAttribute("level", False, 0, 3),))
    columns = {"level": rng.choice(4, 300, p=[0.1, 0.2, 0.3, 0.4])}
    queries = [Q.dense(rng.random((300, 4)), label="dense (eq. 10)"),
               Q.dense(rng.integers(0, 3, (300, 4)).astype(float), normalization="sum", label="dense sum")]
    return _encoded("synthetic dense, 300 rows, eps 1", schema, columns, queries)


def synthetic_graph() -> Config:
    """All 40 x 40 vertex pairs of a random graph (edge density 0.15), ε = 1: edge density and cuts."""
    rng = np.random.default_rng(7)
    vertices = 40
    upper = np.triu(rng.random((vertices, vertices)) < 0.15, 1)
    adjacency = (upper | upper.T).astype(np.int64)
    i, j = np.divmod(np.arange(vertices * vertices), vertices)
    schema = datasets.graph_schema(1.0, vertices, "graph")
    halves = [rng.permutation(vertices) < vertices // 2 for _ in range(3)]
    queries = [Q.linear([0, 1], normalization="mean", label="edge density")] + \
        [Q.cut(np.flatnonzero(s).tolist(), np.flatnonzero(~s).tolist(), label=f"cut #{c}")
         for c, s in enumerate(halves)]
    return _encoded("synthetic graph, 40 vertices, eps 1", schema, {"i": i, "j": j, "edge": adjacency.reshape(-1)},
                    queries)


def movielens(epsilon: float) -> Config:
    """MovieLens-100k, movie public (1,682), rating private (|D| = 5), the demo workload."""
    population = datasets.movielens_100k(epsilon)
    work = answers.workload(population)
    return _encoded(f"MovieLens, movie public, eps {epsilon:g}", population.schema, population.columns, work.queries)


def movielens_private() -> Config:
    """The 20 most-rated movies' ratings, movie and rating both private (|D| = 100), ε = 2."""
    population = datasets.movielens_100k(2.0, top_movies=20)
    schema = Schema("movielens-private", 2.0, (IntegerAttribute("movie", False, 1, 20),
                                               IntegerAttribute("rating", False, 1, 5)))
    rng = np.random.default_rng(8)
    queries = [Q.predicate(Q.condition("movie", "==", 1), Q.condition("rating", ">=", 4), label="movie 1, 4+ stars"),
               Q.predicate(Q.condition("rating", "==", 5), normalization="mean", label="share 5 stars"),
               Q.linear(rng.random(100), label="random linear (eq. 10)")]
    return _encoded("MovieLens top 20, movie x rating private, eps 2", schema, population.columns, queries)


def _adult() -> dict[str, np.ndarray]:
    return dict(read_table(datasets.dataset_path("adult/adult.csv.gz"), "adult").columns)


def adult_age_education() -> Config:
    """Adult: sex public, age (3 bits on [17, 91]) x education-num (1..16) private (|D| = 128), ε = 2."""
    columns = _adult()
    age = ContinuousAttribute("age", False, 17.0, 91.0, 3)
    schema = Schema("adult", 2.0, (CategoricalAttribute("sex", True, ("Female", "Male")), age,
                                   IntegerAttribute("education_num", False, 1, 16)))
    raw = {"sex": columns["sex"], "age": columns["age"], "education_num": columns["education-num"].astype(np.int64)}
    ages = np.repeat(age.decode(np.arange(age.size)) + age.width / 2, 16)
    rng = np.random.default_rng(9)
    queries = [Q.predicate(Q.condition("age", ">=", 40), Q.condition("education_num", ">=", 13),
                           normalization="mean", label="40+ and 13+ years of education"),
               Q.linear(ages, normalization="mean", label="mean age (bucket centres)"),
               Q.grouped("sex", {"Female": rng.random(128), "Male": rng.random(128)}, label="by sex (eq. 10)")]
    return _encoded("Adult, age x education private, eps 2", schema, raw, queries)


def adult_marital() -> Config:
    """Adult: race public, marital status private (|D| = 7), ε = 0.5."""
    columns = _adult()
    statuses = tuple(sorted(set(columns["marital-status"].tolist())))
    races = tuple(sorted(set(columns["race"].tolist())))
    schema = Schema("adult-marital", 0.5, (CategoricalAttribute("race", True, races),
                                           CategoricalAttribute("marital", False, statuses)))
    raw = {"race": columns["race"], "marital": columns["marital-status"]}
    married = np.array([s.startswith("Married") for s in statuses], float)
    queries = [Q.marginal("marital", normalization="mean", label="share"),
               Q.grouped("race", {races[-1]: married}, normalization="sum", label=f"married, {races[-1]}")]
    return _encoded("Adult, marital status private, eps 0.5", schema, raw, queries)


#: Every configuration, in output order.
CONFIGS: tuple[Callable[[], Config], ...] = (
    lambda: synthetic_ratings(0.5), lambda: synthetic_ratings(4.0), synthetic_wide, synthetic_dense, synthetic_graph,
    lambda: movielens(1.0), lambda: movielens(4.0), movielens_private, adult_age_education, adult_marital)


def agreement(config: Config, releases: int, seed: int) -> list[dict[str, Any]]:
    """One record per compiled query: predicted SE (plan, prior = the rows), empirical SD over ``releases``
    seeded releases, their ratio and the z statistic of the module docstring."""
    schema, n = config.schema, len(config.codes)
    batch = Q.compile_queries(list(config.queries), schema)
    predicted = plan(schema, batch, n, prior=SampleRows(schema, config.keys, config.codes)).e.se_prior
    assert predicted is not None
    mechanism = MechanismE(schema.epsilon, schema.private_domain_size)
    dense = any(isinstance(b, RowBlock) for b in batch.blocks)
    rng = np.random.default_rng(seed)
    estimates = np.empty((releases, batch.size))
    for t in range(releases):
        released = mechanism.perturb(config.codes, rng)
        stats = SufficientStatistics.from_schema(schema, config.keys, released)
        estimates[t] = estimate(batch, stats, mechanism, codes=released if dense else None, workers=1).estimate
    centred = estimates - estimates.mean(axis=0)
    variance = estimates.var(axis=0, ddof=1)
    fourth = (centred**4).mean(axis=0)
    records = []
    for j in range(batch.size):
        spread = np.sqrt(max(fourth[j] - variance[j] ** 2, 0.0) / releases)
        z = (variance[j] - predicted[j] ** 2) / spread if spread > 0 else 0.0
        records.append({"config": config.name, "domain_size": schema.private_domain_size, "epsilon": schema.epsilon,
                        "rows": n, "query": batch.label(j), "releases": releases,
                        "predicted_se": float(predicted[j]), "empirical_sd": float(np.sqrt(variance[j])),
                        "ratio": float(np.sqrt(variance[j]) / predicted[j]) if predicted[j] > 0 else float("nan"),
                        "z": float(z)})
    return records


def markdown(records: list[dict[str, Any]]) -> str:
    limit = NormalDist().inv_cdf(1 - ALPHA / 2)
    head = ("| configuration | \\|D\\| | ε | rows | query | predicted SE | empirical SD | ratio | z |\n"
            "|---|---:|---:|---:|---|---:|---:|---:|---:|\n")
    body = "".join(f"| {r['config']} | {r['domain_size']} | {r['epsilon']:g} | {r['rows']} | {r['query']} | "
                   f"{r['predicted_se']:.5g} | {r['empirical_sd']:.5g} | {r['ratio']:.4f} | {r['z']:+.2f} |\n"
                   for r in records)
    ratios = np.array([r["ratio"] for r in records if np.isfinite(r["ratio"])])
    worst = max(abs(r["z"]) for r in records)
    return (head + body + f"\n{len(records)} queries, {records[0]['releases']} releases each: empirical SD / "
            f"predicted SE in [{ratios.min():.4f}, {ratios.max():.4f}], max |z| = {worst:.2f} "
            f"(agreement at α = {ALPHA:g} per query: |z| < {limit:.2f}).\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--releases", type=int, default=2000, help="simulated releases per configuration")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    records: list[dict[str, Any]] = []
    for make in CONFIGS:
        try:
            config = make()
        except datasets.DatasetNotFound as exc:
            print(f"skipped: {exc}", file=sys.stderr)
            continue
        started = time.time()
        records += agreement(config, args.releases, args.seed)
        print(f"{config.name}: {time.time() - started:.1f} s", file=sys.stderr, flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    write_records(args.out / "agreement.csv", records)
    (args.out / "agreement.md").write_text(markdown(records), encoding="utf-8")
    sys.stdout.write(markdown(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
