"""`ldpsynth simulate`'s predicted half-widths (the plan for the population's rows) beside the achieved ones."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from ldpsynth.cli.simulate import answer_rows, answers_table
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.simulation.answers import answer, predicted, workload
from ldpsynth.simulation.datasets import synthetic_ratings


def test_achieved_half_widths_average_to_the_predicted_ones():
    """The achieved half-width is z times the plug-in standard error, whose square is unbiased for the
    predicted variance: over 400 seeded releases the mean squared achieved half-width is within 4.4
    standard errors of the predicted one (α = 1e-5 per query, 8 queries)."""
    population = synthetic_ratings(devices=200, movies=12, ratings_per_device=5, epsilon=1.0, seed=4)
    work = workload(population)
    prediction = predicted(work, population)
    mechanism = MechanismCard.for_schema(population.schema).mechanism
    keys, codes = population.true_codes()
    rng = np.random.default_rng(8)
    squares = np.array([(answer(work, population, SufficientStatistics.from_schema(
        population.schema, keys, mechanism.perturb(codes, rng)), mechanism).std_error * prediction.z) ** 2
        for _ in range(400)])
    expected = (prediction.z * prediction.e.se_prior) ** 2
    spread = squares.std(axis=0, ddof=1) / math.sqrt(len(squares))
    assert (np.abs(squares.mean(axis=0) - expected) < 4.42 * spread).all()


def test_the_answers_table_shows_predicted_and_achieved_half_widths():
    population = synthetic_ratings(devices=100, movies=10, ratings_per_device=3, epsilon=2.0, seed=5)
    work = workload(population)
    mechanism = MechanismCard.for_schema(population.schema).mechanism
    keys, codes = population.true_codes()
    released = mechanism.perturb(codes, np.random.default_rng(1))
    stats = SufficientStatistics.from_schema(population.schema, keys, released)
    report = SimpleNamespace(answers=answer(work, population, stats, mechanism), workload=work)
    prediction = predicted(work, population)
    rows = answer_rows(report, prediction)
    assert [r["predicted_halfwidth"] for r in rows] == list(prediction.z * prediction.e.se_prior)
    for r in rows:
        assert r["achieved_halfwidth"] == (r["ci_high"] - r["ci_low"]) / 2
    table = answers_table(rows, 0.95)
    assert table.splitlines()[0] == "| query | truth | estimate | 95% CI | covered | ± predicted | ± achieved |"
    assert len(table.splitlines()) == 2 + len(rows)
