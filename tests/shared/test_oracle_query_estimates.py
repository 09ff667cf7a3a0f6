"""The query engine on a frequency oracle's collection: every query kind unbiased, with the closed-form
variance, and a standard error whose square is unbiased for it (docs/internals.md,
``ldpsynth.shared.estimators.engine``).

For each oracle, R seeded repetitions of the same true rows go through ``perturb`` (the exact sampler
on a seeded Generator), the per-key tallies and :func:`~ldpsynth.shared.estimators.engine.estimate`
(the real query path: the same function the query service and ``ldpsynth estimate`` call). Per answer:

* mean: z = (mean of the R estimates - truth) / sqrt(V / R), V the exact variance of the estimator
  (:meth:`PureProtocol.linear_variance` of the per-group centred weights, summed over the groups);
* variance: (R - 1) s^2 / V against chi^2(R - 1), two-sided;
* standard error: the mean of the R squared standard errors against V (z with their sample spread, or
  to 1e-9 relative where the plug-in does not vary).

Family-wise alpha = 0.01 over every test of this file (Bonferroni: each of the N tests at 0.01 / N;
the rejection region of the chi-square by the Wilson-Hilferty normal approximation).
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from ldpsynth.shared.estimators.engine import estimate
from ldpsynth.shared.estimators.tallies import KeyedTallies
from ldpsynth.shared.queries.compiler import compile_queries
from ldpsynth.shared.queries.json_form import queries_from_json
from ldpsynth.shared.reports import mechanism_of
from ldpsynth.shared.schema import Schema

ORACLES = ("OUE", "OLH", "HR", "SS")
REPETITIONS = 300
ROWS = 1500
#: Answers per oracle (linear, predicate, 3 marginal cells, grouped, dense, cut) x 3 tests each.
TESTS = len(ORACLES) * 8 * 3
ALPHA = 0.01
Z_CRIT = NormalDist().inv_cdf(1 - ALPHA / TESTS / 2)


def schema_for(mechanism: str) -> Schema:
    """Vertices i, j (public), an edge bit and a 3-value attribute (private): |D| = 6, 8 x 8 public keys."""
    return Schema.from_json({"name": "g", "epsilon": 1.5, "mechanism": mechanism, "attributes": [
        {"name": "i", "type": "integer", "min": 0, "max": 7, "public": True},
        {"name": "j", "type": "integer", "min": 0, "max": 7, "public": True},
        {"name": "edge", "type": "binary"},
        {"name": "kind", "type": "categorical", "values": ["a", "b", "c"]}]})


def true_rows(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Public (i, j) and private codes with a skewed law (codes of D: edge * 3 + kind)."""
    i, j = rng.integers(0, 8, ROWS), rng.integers(0, 8, ROWS)
    edge = (rng.random(ROWS) < 0.2 + 0.6 * (i < 3)).astype(np.int64)
    kind = rng.choice(3, ROWS, p=[0.6, 0.3, 0.1])
    return i, j, edge * 3 + kind


def queries(dense: np.ndarray) -> list[dict]:
    return [
        {"kind": "linear", "weights": [0.5, -1.0, 2.0, 1.0, 3.0, 0.0], "normalization": "sum"},
        {"kind": "predicate", "where": [{"attribute": "kind", "op": "in", "value": ["a", "c"]}]},
        {"kind": "marginal", "attributes": ["kind"]},
        {"kind": "grouped", "attribute": "i", "tables": [{"value": 0, "weights": [1, 0, 0, 1, 0, 0]},
                                                         {"value": 5, "weights": [0, 2, 0, 0, 2, 0]}],
         "default": [0, 0, 1, 0, 0, 1], "normalization": "sum"},
        {"kind": "dense", "table": dense.tolist(), "normalization": "sum"},
        {"kind": "cut", "S": [0, 1, 2], "T": [4, 5, 6, 7], "source": "i", "target": "j", "edge": "edge"},
    ]


def row_weights(i: np.ndarray, j: np.ndarray, dense: np.ndarray) -> list[np.ndarray]:
    """Every answer's weight list of every row, ``(ROWS, 6)`` each, in the order of the compiled answers."""
    k = 6
    ones = np.ones((ROWS, 1))
    kinds = np.arange(k) % 3
    out = [ones * np.array([0.5, -1.0, 2.0, 1.0, 3.0, 0.0]), ones * np.isin(kinds, [0, 2])]
    out += [ones * (kinds == c) for c in range(3)]
    grouped = np.where((i == 0)[:, None], [1, 0, 0, 1, 0, 0], np.where((i == 5)[:, None], [0, 2, 0, 0, 2, 0],
                                                                        [0, 0, 1, 0, 0, 1]))
    out += [grouped.astype(np.float64), dense]
    inside = (np.isin(i, [0, 1, 2]) & np.isin(j, [4, 5, 6, 7]))[:, None]
    out.append(inside * (np.arange(k) >= 3))
    return out


def exact_variance(protocol, weights: np.ndarray, keys: np.ndarray, codes: np.ndarray) -> float:
    """The estimator's variance: per group of rows with identical weights (here: per public key), the pure
    protocol's variance of the group's centred weights at the group's true histogram."""
    total = 0.0
    for key in np.unique(keys):
        rows = keys == key
        w = weights[rows]
        assert (w == w[0]).all()
        histogram = np.bincount(codes[rows], minlength=len(w[0]))
        total += float(protocol.linear_variance(w[0] - w[0].mean(), histogram)[0])
    return total


def z_statistics(name: str, sampled_epsilon: float | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three z statistics of every answer (module docstring); ``sampled_epsilon``: the devices perturb
    at another ε than the card's (a broken device or estimator, to show the tests' power)."""
    rng = np.random.default_rng(20270101)
    schema = schema_for(name)
    oracle = mechanism_of(schema)
    sampler = oracle if sampled_epsilon is None else type(oracle)(sampled_epsilon, oracle.domain_size)
    i, j, codes = true_rows(rng)
    dense = rng.normal(0.0, 1.0, (ROWS, 6))
    batch = compile_queries(queries_from_json(queries(dense)), schema)
    keys = i * 8 + j
    weights = row_weights(i, j, dense)
    truth = np.array([float((w[np.arange(ROWS), codes]).sum()) for w in weights])
    # the dense query's rows are groups of their own: key = the row's index
    variances = np.array([exact_variance(oracle.protocol, w, np.arange(ROWS) if a == 6 else keys, codes)
                          for a, w in enumerate(weights)])
    estimates, squares = [], []
    seeds = np.random.default_rng(7)
    for _ in range(REPETITIONS):
        reports = sampler.perturb(codes, seeds)
        stats = KeyedTallies.from_rows(oracle, keys, reports, public_domain_size=64)
        answers = estimate(batch, stats, oracle, codes=reports)
        estimates.append(answers.estimate)
        squares.append(answers.std_error**2)
    est, sq = np.array(estimates), np.array(squares)
    assert est.shape == (REPETITIONS, len(truth))
    z_mean = (est.mean(axis=0) - truth) / np.sqrt(variances / REPETITIONS)
    df = REPETITIONS - 1
    ratio = est.var(axis=0, ddof=1) / variances      # s^2/V / (R-1): Wilson-Hilferty
    z_var = ((ratio ** (1 / 3)) - (1 - 2 / (9 * df))) / np.sqrt(2 / (9 * df))
    # (a plug-in that does not vary, e.g. SS's for the cut, whose sum of estimates is n exactly: to rounding)
    spread = np.maximum(sq.std(axis=0, ddof=1) / np.sqrt(REPETITIONS), 1e-9 * variances)
    z_se = (sq.mean(axis=0) - variances) / spread
    return z_mean, z_var, z_se


@pytest.mark.parametrize("name", ORACLES)
def test_every_query_kind_is_unbiased_with_the_closed_form_variance(name: str) -> None:
    for z in z_statistics(name):
        assert np.abs(z).max() < Z_CRIT, (z, Z_CRIT)


def test_reports_of_another_epsilon_are_caught() -> None:
    """The tests have power: reports sampled at ε = 1.3 debiased as ε = 1.5 (OUE) fail them."""
    z_mean, _, _ = z_statistics("OUE", sampled_epsilon=1.3)
    assert np.abs(z_mean).max() > Z_CRIT
