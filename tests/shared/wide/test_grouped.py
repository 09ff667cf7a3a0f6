"""Grouped queries on a wide parent (``grouped.py``): per value of a public attribute, the group's views (analytic)
or the group's own model, summed over the groups.

A simulated population of 24,000 devices whose private rows depend on their public region; the grouped answers are
checked against the population's true value within the stated standard error (α = 0.001 per check, two-sided:
normal 3.29 for an analytic answer; for a model one Student-t with B − 1 = 9 degrees of freedom, 4.78, the fewest
its Welch-Satterthwaite degrees of freedom can be; fixed seed). Errors name the query's fields.
"""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.queries.model import GroupedQuery, MarginalQuery
from ldpsynth.shared.wide.collection import WideCard, WideSchema
from ldpsynth.shared.wide.grouped import WideParent
from ldpsynth.shared.wide.parent import WideFit, wide_answers

from .test_parent import _reports, _statistics

CARD = WideCard.for_schema(WideSchema.from_json({
    "name": "towns", "epsilon": 2.0,
    "attributes": [{"name": "a", "type": "categorical", "values": ["x", "y", "z"]},
                   {"name": "b", "type": "binary"},
                   {"name": "c", "type": "binary"},
                   {"name": "region", "type": "categorical", "values": ["n", "s"], "public": True}],
    "views": {"kind": "list", "views": [["a", "b"], ["b", "c"]], "salt": "44" * 16}}))
N = 24000
FIT = WideFit(iterations=1000, replicates=10, seed=7)
Z_001, T9_001 = 3.2905267314919255, 4.780912585933472       # two-sided α = 0.001 quantiles


def _population(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rows (a, b, c) and region codes: a chain a -> b -> c whose links differ by region."""
    region = rng.integers(0, 2, N)
    a = np.where(region == 0, rng.integers(0, 3, N), rng.choice(3, N, p=[0.6, 0.3, 0.1]))
    b = np.where(rng.random(N) < np.where(region == 0, 0.85, 0.6), (a == 0).astype(np.int64), (a != 0).astype(np.int64))
    c = np.where(rng.random(N) < np.where(region == 0, 0.8, 0.3), b, 1 - b)
    return np.stack([a, b, c], axis=1), region


def _cells(where: dict[str, int]) -> list[float]:
    """The indicator over D (a, b, c; the last fastest) of the given attribute values."""
    grid = np.indices((3, 2, 2)).reshape(3, -1)
    mask = np.ones(12, bool)
    for name, value in where.items():
        mask &= grid["abc".index(name)] == value
    return mask.astype(np.float64).tolist()


@pytest.fixture(scope="module")
def towns() -> tuple[WideParent, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(12)
    rows, region = _population(rng)
    return WideParent.of(CARD, _statistics(CARD, _reports(CARD, rows, region, rng)), FIT), rows, region


def _truth(rows: np.ndarray, region: np.ndarray, tables: dict[int, list[float]], default: list[float]) -> float:
    cell = rows[:, 0] * 4 + rows[:, 1] * 2 + rows[:, 2]
    weights = np.array([tables.get(g, default) for g in range(2)])
    return float(weights[region, cell].sum())


def test_grouped_answers_inside_a_view_are_analytic_and_cover_the_truth(towns) -> None:
    parent, rows, region = towns
    tables = {0: _cells({"a": 0, "b": 1}), 1: _cells({"a": 1})}
    query = GroupedQuery(attribute="region", tables=(("n", tables[0]), ("s", tables[1])), normalization="sum")
    answer, = parent.answer([query])
    assert answer.method == "analytic" and answer.views == (("a", "b"),) and answer.label == "grouped#0"
    truth = _truth(rows, region, tables, [0.0] * 12)
    assert abs(answer.estimate - truth) <= Z_001 * answer.standard_error, (answer, truth)
    assert answer.high - answer.estimate == pytest.approx(1.959963984540054 * answer.standard_error)
    # the mean form: Z = N, and a default table for the unlisted value
    default = _cells({"b": 1})
    mean = GroupedQuery(attribute="region", tables=(("n", tables[0]),), default=tuple(default), normalization="mean")
    shared, = parent.answer([mean])
    assert shared.method == "analytic" and shared.views == (("a", "b"), ("b", "c"))
    assert abs(shared.estimate - _truth(rows, region, {0: tables[0]}, default) / N) <= Z_001 * shared.standard_error


def test_grouped_answers_across_views_come_from_each_groups_model(towns) -> None:
    pytest.importorskip("mbi")
    parent, rows, region = towns
    tables = {0: _cells({"a": 0, "c": 1}), 1: _cells({"a": 2, "c": 0})}
    query = GroupedQuery(attribute="region", tables=(("n", tables[0]), ("s", tables[1])), normalization="sum")
    marginal = MarginalQuery(attributes=("a", "b"))
    answers = wide_answers(parent, [marginal, query], 0.95, 2.0)       # mixed with an ordinary query
    assert answers.methods == ("analytic",) * 6 + ("model",) and answers.modelled
    assert answers.origins.tolist() == [0] * 6 + [1]
    truth = _truth(rows, region, tables, [0.0] * 12)
    error = float(answers.std_error[-1])
    assert error > 0 and abs(float(answers.estimate[-1]) - truth) <= T9_001 * error, (answers.estimate[-1], truth)
    first = parent.group(parent.card.cards[0].schema.attribute("region"), 0)
    assert first is not None and parent.group(parent.card.cards[0].schema.attribute("region"), 0) is first   # kept
    assert first.population + parent.group(parent.card.cards[0].schema.attribute("region"), 1).population == N


@pytest.mark.parametrize("query, field", [
    (GroupedQuery(attribute="a", tables=(("x", [1.0] * 12),)), "queries[0].attribute"),
    (GroupedQuery(attribute="region", tables=(("w", [1.0] * 12),)), "queries[0].tables[0].value"),
    (GroupedQuery(attribute="region", tables=(("n", [1.0] * 11),)), "queries[0].tables[0].weights"),
    (GroupedQuery(attribute="region", tables=(("n", [1.0] * 12),), default=(0.0,)), "queries[0].default"),
    (GroupedQuery(attribute="region", tables=(("n", [1.0] * 12),)), "queries[0].normalization"),
])
def test_bad_grouped_queries_name_their_field(towns, query, field) -> None:
    with pytest.raises(ValidationError) as info:
        towns[0].answer([query])
    assert info.value.field == field


def test_a_wide_domain_over_the_weight_limit_is_refused() -> None:
    big = WideCard.for_schema(WideSchema.from_json({
        "name": "big", "epsilon": 2.0,
        "attributes": [*({"name": n, "type": "integer", "min": 0, "max": 29} for n in "abcde"),
                       {"name": "region", "type": "categorical", "values": ["n", "s"], "public": True}],
        "views": {"kind": "list", "views": [["a", "b"]], "salt": "55" * 16}}))          # |D| = 30^5 > 2^24
    rng = np.random.default_rng(3)
    rows = rng.integers(0, 30, (200, 5))
    parent = WideParent.of(big, _statistics(big, _reports(big, rows, rng.integers(0, 2, 200), rng)), FIT)
    with pytest.raises(ValidationError) as info:
        parent.answer([GroupedQuery(attribute="region", tables=(("n", [1.0]),))])
    assert info.value.field == "queries[0].tables" and str(30 ** 5) in info.value.problem
