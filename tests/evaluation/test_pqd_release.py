"""An ldpsynth E release as the synthetic side of DP-PQD: its answers are the companion estimates (eq. 17)."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from ldpsynth.evaluation.pqd.query import parse_sql
from ldpsynth.evaluation.pqd.release import load_release, release_table
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators import estimate
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.queries import compile_queries, condition, predicate
from ldpsynth.shared.schema import CategoricalAttribute, IntegerAttribute, Schema

SCHEMA = Schema("ratings", 2.0, (CategoricalAttribute("sex", True, ("F", "M")),
                                 IntegerAttribute("rating", False, 1, 5)))


def _release(seed: int = 3, n: int = 3000):
    rng = np.random.default_rng(seed)
    columns = {"sex": rng.choice(np.array(["F", "M"], dtype=object), n), "rating": rng.integers(1, 6, n)}
    card = MechanismCard.for_schema(SCHEMA)
    keys = SCHEMA.encode_public(columns)
    codes = card.mechanism.perturb(SCHEMA.encode_private(columns), rng)
    return card, keys, codes, columns


def test_release_answers_are_the_companion_estimates():
    card, keys, codes, _ = _release()
    stats = SufficientStatistics.from_schema(SCHEMA, keys, codes)
    table = release_table(stats, card)
    batch = compile_queries([predicate(condition("rating", ">=", 4)), predicate(value="rating"),
                             predicate(condition("rating", "between", [2, 3]), value="rating")], SCHEMA)
    expected = [r["estimate"] for r in estimate(batch, stats, card.mechanism).records()]
    got = [parse_sql(sql).answer(table) for sql in (
        "SELECT COUNT(*) FROM t WHERE rating >= 4", "SELECT SUM(rating) FROM t",
        "SELECT SUM(rating) FROM t WHERE rating BETWEEN 2 AND 3")]
    assert got == pytest.approx(expected, rel=1e-12)
    # public attributes select exactly; the estimate of the number of rows of a group is exact
    assert parse_sql("SELECT COUNT(*) FROM t WHERE sex = 'F'").answer(table) == pytest.approx(np.sum(keys == 0))


def test_release_median_is_close_to_the_truth_and_export_round_trips(tmp_path):
    card, keys, codes, columns = _release(n=20000)
    truth = parse_sql("SELECT MEDIAN(rating) FROM t WHERE sex = 'M'")
    path = tmp_path / "release.csv"
    decoded = {**SCHEMA.decode_public(keys), **SCHEMA.decode_private(codes)}
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sex", "rating"])
        writer.writerows(zip(decoded["sex"], decoded["rating"]))
    card.save(tmp_path / "card.json")
    table = load_release(path, tmp_path / "card.json")
    stats_table = release_table(SufficientStatistics.from_schema(SCHEMA, keys, codes), card)
    assert np.allclose(table.weights, stats_table.weights)
    # uniform ratings 1..5: the median is 3, and so is the debiased one with 20,000 rows at eps = 2
    from ldpsynth.evaluation.pqd.table import Table

    raw = Table({"sex": columns["sex"], "rating": columns["rating"].astype(float)})
    assert truth.answer(raw) == 3.0
    assert truth.answer(table) == 3.0
