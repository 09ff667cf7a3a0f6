"""The wide synthetic database answers the query kinds over attribute names and values: analytically inside a
measured view, from the model elsewhere, with 95 % intervals that cover; unsupported queries are refused."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from ldpsynth.shared.attributes import BinaryAttribute, CategoricalAttribute, IntegerAttribute
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.queries.model import (
    Condition,
    CutQuery,
    DenseQuery,
    GroupedQuery,
    LinearQuery,
    MarginalQuery,
    PredicateQuery,
)
from ldpsynth.shared.wide import WideDomain, analytic_marginal, simulate
from ldpsynth.shared.wide.database import ANALYTIC, MODEL, WideDatabase
from ldpsynth.shared.wide.onestep import Correction
from ldpsynth.shared.wide.selection import tree_views

needs_mbi = pytest.mark.skipif(importlib.util.find_spec("mbi") is None,
                               reason="the [wide] extra (mbi) is not installed")

ATTRS = (CategoricalAttribute("a", False, ("x", "y", "z")), BinaryAttribute("b", False),
         IntegerAttribute("c", False, 1, 4), CategoricalAttribute("d", False, ("u", "v")))
DOMAIN = WideDomain(tuple(a.name for a in ATTRS), tuple(a.size for a in ATTRS))
#: The 1-way views and the chain's pairs: (a, c), (b, d), (a, d) ... lie in no view.
VIEWS = tree_views(DOMAIN, [(0, 1), (1, 2), (2, 3)])


def _rows(rng: np.random.Generator, n: int) -> np.ndarray:
    """A chain a -> b -> c -> d (codes), so the tree views' model has the population's structure."""
    a = rng.choice(3, n, p=[0.5, 0.3, 0.2])
    b = (rng.random(n) < np.array([0.2, 0.6, 0.9])[a]).astype(np.int64)
    c = np.where(b == 1, rng.choice(4, n, p=[0.1, 0.2, 0.3, 0.4]), rng.choice(4, n, p=[0.6, 0.2, 0.1, 0.1]))
    d = (rng.random(n) < np.array([0.2, 0.4, 0.6, 0.8])[c]).astype(np.int64)
    return np.stack([a, b, c, d], axis=1)


def _database(seed: int, n: int, epsilon: float = 1.0, **options: int) -> tuple[np.ndarray, WideDatabase]:
    rng = np.random.default_rng(seed)
    rows = _rows(rng, n)
    measured = simulate(DOMAIN, VIEWS, rows, rng.integers(0, len(VIEWS), n), epsilon, rng)
    return rows, WideDatabase.fit(DOMAIN, measured, n, attributes=ATTRS, seed=seed, **options)


def _of(answers, query: int) -> tuple[np.ndarray, np.ndarray]:
    """Estimates and standard errors of one query's answers."""
    mine = [a for a in answers if a.query == query]
    return np.array([a.estimate for a in mine]), np.array([a.standard_error for a in mine])


def test_marginals_inside_a_view_are_analytic_marginals_in_the_querys_order() -> None:
    rows, db = _database(1, 5000)
    answers = db.answer([MarginalQuery(("c", "b"), label="cb"), MarginalQuery(("c",), normalization="mean"),
                         MarginalQuery(("b", "c"), normalization="range")])
    pair = analytic_marginal(db.measurements, (2, 1), 5000)
    single = analytic_marginal(db.measurements, (2,), 5000)
    estimate, error = _of(answers, 0)
    assert np.allclose(estimate, 5000 * pair.shares) and np.allclose(error, 5000 * pair.standard_errors)
    estimate, error = _of(answers, 1)
    assert np.allclose(estimate, single.shares) and np.allclose(error, single.standard_errors)
    # range: Z = N (each cell's indicator ranges over [0, 1]), so shares; cells in the order (b, c)
    estimate, _ = _of(answers, 2)
    assert np.allclose(estimate, pair.shares.reshape(4, 2).T.ravel())
    assert [a.label for a in answers[:3]] == ["cb[c=1,b=0]", "cb[c=1,b=1]", "cb[c=2,b=0]"]
    assert {a.method for a in answers} == {ANALYTIC}
    assert answers[0].views == (("b", "c"),) and answers[8].views == (("c",), ("b", "c"), ("c", "d"))
    first = answers[0]
    assert first.low == pytest.approx(first.estimate - 1.96 * first.standard_error, rel=1e-4)


def test_predicates_linear_and_dense_queries_equal_sums_of_marginal_cells() -> None:
    rows, db = _database(2, 5000)
    pair = analytic_marginal(db.measurements, (0, 1), 5000)   # (a, b): inside the one view (a, b)
    cube = pair.shares.reshape(3, 2)
    where = (Condition("a", "in", ["x", "z"]), Condition("b", "==", 1))
    full = np.zeros(DOMAIN.sizes)
    full[[0, 2], 1] = 1.0                                     # the same predicate as weights over D
    table = np.tile(full.ravel() / 5000, (5000, 1))           # a dense query: N equal row functions
    answers = db.answer([PredicateQuery(where), PredicateQuery(where, normalization="mean"),
                         LinearQuery(full.ravel(), normalization="sum"), DenseQuery(table, normalization="sum"),
                         PredicateQuery((Condition("b", "==", 1),), value="c", normalization="mean"),
                         PredicateQuery(())])
    assert answers[0].estimate == pytest.approx(5000 * (cube[0, 1] + cube[2, 1]))
    assert answers[1].estimate == pytest.approx(cube[0, 1] + cube[2, 1])
    assert answers[2].estimate == pytest.approx(answers[0].estimate)
    assert answers[2].standard_error == pytest.approx(answers[0].standard_error)
    assert answers[3].estimate == pytest.approx(answers[1].estimate)
    # row functions that differ: the estimand is their sum's linear query (rows are exchangeable)
    mixed = db.answer([DenseQuery(np.repeat([full.ravel(), 3 * full.ravel()], 2500, axis=0), normalization="sum"),
                       LinearQuery(2 * full.ravel(), normalization="sum")])
    assert mixed[0].estimate == pytest.approx(mixed[1].estimate)
    assert mixed[0].standard_error == pytest.approx(mixed[1].standard_error)
    assert {a.method for a in answers} == {ANALYTIC}
    assert answers[0].views == (("a", "b"),)
    # the mean of c times [b = 1]: the cells of the one view (b, c) times c's values 1..4
    bc = analytic_marginal(db.measurements, (1, 2), 5000).shares.reshape(2, 4)
    assert answers[4].estimate == pytest.approx(bc[1] @ np.arange(1, 5)) and answers[4].views == (("b", "c"),)
    # no condition: every row, exactly N
    assert (answers[5].estimate, answers[5].standard_error) == (5000.0, 0.0)


@needs_mbi
def test_queries_outside_the_views_come_from_the_model_bootstrapped_once(monkeypatch) -> None:
    from scipy.stats import t as student

    from ldpsynth.shared.wide import database

    calls = []
    original = database.bootstrap_marginals
    monkeypatch.setattr(database, "bootstrap_marginals", lambda *args: calls.append(args[2]) or original(*args))
    rows, db = _database(3, 20_000, replicates=5, iterations=200)
    where = (Condition("a", "==", "x"), Condition("d", "==", "v"))
    full = np.zeros(DOMAIN.sizes)
    full[0, :, :, 1] = 1.0                                    # the predicate a = x, d = v as weights over D
    many = [MarginalQuery(("a", "d"), label=f"m{j}") for j in range(100)]
    answers = db.answer([MarginalQuery(("a", "d")), PredicateQuery(where), PredicateQuery(where, value="c"),
                         MarginalQuery(("c",)), LinearQuery(full.ravel(), normalization="sum"), *many])
    # one bootstrap for the union of the margins, (a, d) and (a, c, d), however many queries
    assert calls == [[(0, 2, 3), (0, 3)]]
    assert answers[12].estimate == pytest.approx(answers[6].estimate)
    assert answers[12].standard_error == pytest.approx(answers[6].standard_error)
    assert [a.estimate for a in answers[13:19]] == [a.estimate for a in answers[:6]]
    answers = answers[:12]
    marginal = db.model.marginal((0, 3))
    estimate, error = _of(answers, 0)
    # the proper estimate is the model's own answer; the estimate its one-step correction by the views of a and d
    assert np.allclose([a.proper_estimate for a in answers[:6]], 20_000 * marginal)
    step = Correction.of(DOMAIN, db.measurements, (0, 3), marginal, db._bootstrap[(0, 3)], 20_000).answer(np.arange(6))
    assert np.allclose(estimate, 20_000 * step.estimate) and np.allclose(error, 20_000 * step.standard_error)
    assert not np.allclose(estimate, 20_000 * marginal)
    assert set(answers[0].views) == {("a",), ("d",), ("a", "b"), ("c", "d")}   # every view holding a or d
    assert answers[6].proper_estimate == pytest.approx(20_000 * marginal[1])    # cell (a=x, d=v)
    assert answers[6].estimate == pytest.approx(estimate[1])
    values = np.arange(1, 5)                                                     # c's values
    assert answers[7].proper_estimate == pytest.approx(
        20_000 * db.model.marginal((0, 2, 3)).reshape(3, 4, 2)[0, :, 1] @ values)
    assert [a.method for a in answers] == [MODEL] * 8 + [ANALYTIC] * 4
    assert np.all(error > 0) and answers[6].standard_error > 0
    # none again for later queries over the same margins: the replicates are kept
    again = db.answer([MarginalQuery(("d", "a"))])
    assert len(calls) == 1
    assert np.allclose([a.proper_estimate for a in again], 20_000 * marginal.reshape(3, 2).T.ravel())
    assert np.allclose([a.estimate for a in again], estimate.reshape(3, 2).T.ravel())
    # the Student-t interval with the Welch-Satterthwaite degrees of freedom of the two variances
    first = answers[0]
    assert first.df == pytest.approx(4 * (step.analytic[0] + step.bootstrap[0]) ** 2 / step.bootstrap[0] ** 2)
    assert first.high == pytest.approx(first.estimate + student.ppf(0.975, first.df) * first.standard_error)
    # synthetic rows: labels of the attributes, drawn from the model
    sample = db.sample_rows(3000, np.random.default_rng(4))
    assert set(sample) == {"a", "b", "c", "d"} and set(sample["a"]) <= {"x", "y", "z"}
    assert set(sample["c"]) <= {1, 2, 3, 4}
    # alpha = 0.001: the sampled share of a = x against the model's (3,000 draws, |z| < 3.29)
    p = db.model.marginal((0,))[0]
    assert abs(np.mean(sample["a"] == "x") - p) < 3.29 * np.sqrt(p * (1 - p) / 3000)


def _covered(answers, truth: np.ndarray) -> np.ndarray:
    return np.array([a.low <= t <= a.high for a, t in zip(answers, truth)])


def test_analytic_intervals_cover() -> None:
    # 95% intervals of the marginal (a, b) (one view), of c's 1-way marginal (3 views combined), of a predicate
    # count in (a, b) and of a sum of c (3 views) over 400 simulated collections of 4,000 devices at eps = 1:
    # 5,200 intervals. alpha = 0.001: coverage within 0.95 -+ 3.29 sigma, sigma binomial with a design effect of
    # 4 (the intervals of one collection share its noise): about 0.93 to 0.97.
    rng = np.random.default_rng(5)
    n = 4000
    rows = _rows(rng, n)
    where = (Condition("a", "!=", "y"), Condition("b", "==", 0))
    queries = [MarginalQuery(("a", "b")), MarginalQuery(("c",)), PredicateQuery(where),
               PredicateQuery((Condition("c", "between", [2, 3]),), value="c")]
    truth = np.concatenate([DOMAIN.view((0, 1)).histogram(rows), DOMAIN.view((2,)).histogram(rows),
                            [np.sum((rows[:, 0] != 1) & (rows[:, 1] == 0))],
                            [np.sum((rows[:, 2] + 1) * np.isin(rows[:, 2], [1, 2]))]])
    hits = np.zeros(truth.size)
    runs = 400
    for _ in range(runs):
        measured = simulate(DOMAIN, VIEWS, rows, rng.integers(0, len(VIEWS), n), 1.0, rng)
        answers = WideDatabase.fit(DOMAIN, measured, n, attributes=ATTRS).answer(queries)
        assert {a.method for a in answers} == {ANALYTIC}
        hits += _covered(answers, truth)
    total = runs * truth.size
    assert abs(hits.sum() / total - 0.95) < 3.29 * np.sqrt(0.95 * 0.05 * 4 / total), hits / runs


@needs_mbi
@pytest.mark.slow
def test_model_intervals_cover() -> None:
    # 95% one-step intervals (the views of the attributes, B = 10 bootstrap refits for the rest, Student-t with
    # the Welch-Satterthwaite degrees of freedom) of the marginals (a, c), (b, d), (a, d), of the 4-way joint and
    # of a predicate over (a, d), none inside a view, over 60 simulated collections of 20,000 devices at eps = 1:
    # 4,260 intervals. alpha = 0.001: coverage within 0.95 -+ 3.29 sigma, sigma binomial with a design effect of
    # 4 (the intervals of one collection share its noise): about 0.93 to 0.97 (measured: 0.939). 40-100 s here,
    # by load (a JAX compile and 11 fits per collection).
    rng = np.random.default_rng(6)
    n = 20_000
    rows = _rows(rng, n)
    queries = [MarginalQuery(("a", "c")), MarginalQuery(("b", "d")), MarginalQuery(("a", "d")),
               MarginalQuery(("a", "b", "c", "d")),
               PredicateQuery((Condition("a", "==", "z"), Condition("d", "==", "u")))]
    truth = np.concatenate([DOMAIN.view(v).histogram(rows) for v in ((0, 2), (1, 3), (0, 3), (0, 1, 2, 3))]
                           + [[np.sum((rows[:, 0] == 2) & (rows[:, 3] == 0))]])
    hits = np.zeros(truth.size)
    runs = 60
    for run in range(runs):
        measured = simulate(DOMAIN, VIEWS, rows, rng.integers(0, len(VIEWS), n), 1.0, rng)
        db = WideDatabase.fit(DOMAIN, measured, n, attributes=ATTRS, iterations=1000, replicates=10, seed=run)
        answers = db.answer(queries)
        assert {a.method for a in answers} == {MODEL}
        hits += _covered(answers, truth)
    total = runs * truth.size
    assert abs(hits.sum() / total - 0.95) < 3.29 * np.sqrt(0.95 * 0.05 * 4 / total), hits / runs


@pytest.mark.parametrize(("query", "field"), [
    (GroupedQuery("a", [("x", [1.0, 2.0])]), "queries[0].attribute"),
    (CutQuery([1], [2]), "queries[0].source"),
    (MarginalQuery(("a", "e")), "queries[0].attributes[1]"),
    (PredicateQuery((Condition("e", "==", 1),)), "queries[0].where[0].attribute"),
    (PredicateQuery((Condition("a", "<", 1),)), "queries[0].where[0].op"),
    (PredicateQuery((Condition("a", "==", "w"),)), "queries[0].where[0].value"),
    (PredicateQuery((Condition("b", "==", 1),), value="a"), "queries[0].value"),
    (PredicateQuery((), normalization="range"), "queries[0].normalization"),
    (LinearQuery([1.0, 2.0]), "queries[0].weights"),
    (DenseQuery([[1.0] * 48] * 3), "queries[0].table"),
])
def test_unsupported_queries_are_refused_naming_the_field(query, field) -> None:
    _, db = _database(7, 1000)
    with pytest.raises(ValidationError) as caught:
        db.answer([query])
    assert caught.value.field == field


def test_public_attributes_and_foreign_views_are_refused() -> None:
    rng = np.random.default_rng(8)
    rows = _rows(rng, 1000)
    measured = simulate(DOMAIN, VIEWS, rows, rng.integers(0, len(VIEWS), 1000), 1.0, rng)
    public = (*ATTRS[:3], CategoricalAttribute("d", True, ("u", "v")))
    with pytest.raises(ValidationError, match="public attributes are not part of the wide model") as caught:
        WideDatabase.fit(DOMAIN, measured, 1000, attributes=public)
    assert caught.value.field == "attributes"
    other = WideDomain(("a", "b", "c", "d"), (3, 2, 5, 2))
    with pytest.raises(ValidationError) as caught:
        WideDatabase.fit(other, measured, 1000)
    assert caught.value.field == "measurements[2]"
    with pytest.raises(ValidationError) as caught:
        WideDatabase.fit(DOMAIN, measured, 999)
    assert caught.value.field == "population"
    # without attributes, the values are the codes
    answers = WideDatabase.fit(DOMAIN, measured, 1000).answer([MarginalQuery(("d",))])
    assert [a.label for a in answers] == ["marginal#0[d=0]", "marginal#0[d=1]"]
