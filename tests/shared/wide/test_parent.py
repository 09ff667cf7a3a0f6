"""The parent of a wide collection from its views' statistics (``parent.py``) and its export (``release.py``).

The views' measurements from the server's statistics equal the measurements of the reports themselves (E's
counts and an oracle's tallies, public keys summed), a public-key group below the minimum batch is withheld (and a
view with nothing kept left out of N); the bootstrap restarts from its seed, so an answer does not depend on the
queries asked before; intervals at another level; the export round trip answers as the database; without the
[wide] extra analytic answers still come and model ones raise ImportError.
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.estimators.tallies import KeyedTallies
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.queries.model import MarginalQuery
from ldpsynth.shared.queries.wire import PAGE_ENVELOPE_BYTES, AnswerTable, answer_pages
from ldpsynth.shared.release import Release
from ldpsynth.shared.wide import model as wide_model
from ldpsynth.shared.wide.collection import WideCard, WideSchema
from ldpsynth.shared.wide.measure import measure
from ldpsynth.shared.wide.parent import WideFit, measure_parent, parent_database, private_domain, wide_answers
from ldpsynth.shared.wide.release import WideRelease, estimate_wide_release

PUBLIC = WideCard.for_schema(WideSchema.from_json({
    "name": "grid", "epsilon": 1.0, "min_batch": 40,
    "attributes": [{"name": "a", "type": "categorical", "values": ["p", "q", "r", "s"]},
                   {"name": "b", "type": "integer", "min": 0, "max": 3},
                   {"name": "c", "type": "binary"},
                   {"name": "region", "type": "categorical", "values": ["n", "s", "e"], "public": True}],
    "views": {"kind": "list", "views": [["a", "b"], ["c"], ["b", "c"]], "salt": "11" * 16}}))
SMALL = WideCard.for_schema(WideSchema.from_json({
    "name": "small", "epsilon": 2.0,
    "attributes": [{"name": "a", "type": "categorical", "values": ["x", "y", "z"]},
                   {"name": "b", "type": "binary"},
                   {"name": "c", "type": "integer", "min": 1, "max": 2}],
    "views": {"kind": "list", "views": [["a", "b"], ["b", "c"]], "salt": "22" * 16}}))
FIT = WideFit(iterations=200, replicates=6, seed=5)


def _rows(card: WideCard, n: int, rng: np.random.Generator) -> np.ndarray:
    """n rows of codes over the card's private attributes, each attribute copying the previous one w.p. 0.7."""
    domain, _ = private_domain(card)
    x = np.empty((n, domain.width), np.int64)
    x[:, 0] = rng.integers(0, domain.sizes[0], n)
    for j in range(1, domain.width):
        x[:, j] = np.where(rng.random(n) < 0.7, x[:, j - 1] % domain.sizes[j], rng.integers(0, domain.sizes[j], n))
    return x


def _reports(card: WideCard, rows: np.ndarray, keys: np.ndarray, rng: np.random.Generator
             ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per view: (public keys, perturbed reports) of the rows assigned to it (round robin)."""
    domain, _ = private_domain(card)
    out = []
    for i, sub in enumerate(card.cards):
        mine = np.arange(len(rows)) % len(card.cards) == i
        view = domain.view([domain.names.index(a.name) for a in sub.schema.private_attributes])
        out.append((keys[mine], sub.mechanism.perturb(view.cells(rows[mine]), rng)))
    return out


def _statistics(card: WideCard, reports: list[tuple[np.ndarray, np.ndarray]]) -> list:
    out = []
    for sub, (keys, sent) in zip(card.cards, reports):
        size = sub.schema.public_domain_size
        if isinstance(sub.mechanism, MechanismE):
            out.append(SufficientStatistics.from_schema(sub.schema, keys if size > 1 else None, sent))
        else:
            out.append(KeyedTallies.from_rows(sub.mechanism, keys if size > 1 else None, sent, public_domain_size=size))
    return out


def test_measurements_equal_the_reports_and_groups_below_the_minimum_batch_are_withheld() -> None:
    rng = np.random.default_rng(1)
    rows = _rows(PUBLIC, 900, rng)
    keys = np.where(np.arange(900) // 3 % 10 == 0, 2, rng.integers(0, 2, 900))  # region "e": 30 per view
    reports = _reports(PUBLIC, rows, keys, rng)
    assert {type(s.mechanism).__name__ for s in PUBLIC.cards} > {"MechanismE"}     # an oracle view and E views
    measured = measure_parent(PUBLIC, _statistics(PUBLIC, reports))
    domain, _ = private_domain(PUBLIC)
    for m, sub, (k, sent), rule in zip(measured.measurements, PUBLIC.cards, reports, measured.withheld):
        view = domain.view([domain.names.index(a.name) for a in sub.schema.private_attributes])
        expected = measure(view, sub.mechanism, sent[k != 2])            # the kept groups' reports, keys summed
        assert m.view == view and m.n == expected.n and np.array_equal(m.support, expected.support)
        assert (rule.groups, rule.reports) == (1, int((k == 2).sum()))
    assert measured.population == int((keys != 2).sum())

    few = [(k[:30], sent[:30]) for k, sent in reports[:1]] + reports[1:]  # view a+b: every group below 40
    partial = measure_parent(PUBLIC, _statistics(PUBLIC, few))
    assert [m.view.attributes for m in partial.measurements] == [(2,), (1, 2)]
    assert partial.population == sum(m.n for m in partial.measurements)
    with pytest.raises(ValidationError) as info:
        measure_parent(PUBLIC, _statistics(PUBLIC, reports)[:2])
    assert info.value.field == "statistics"


def _small(seed: int, n: int = 3000) -> tuple[list, np.ndarray]:
    rng = np.random.default_rng(seed)
    rows = _rows(SMALL, n, rng)
    return _statistics(SMALL, _reports(SMALL, rows, np.zeros(n, np.int64), rng)), rows


def test_analytic_answers_and_levels_without_the_model(monkeypatch) -> None:
    stats, _ = _small(2)
    database = parent_database(SMALL, measure_parent(SMALL, stats), FIT)

    def missing() -> None:
        raise ImportError("No module named 'mbi'")

    monkeypatch.setattr(wide_model, "_mbi", missing)              # the [wide] extra absent
    inside = [MarginalQuery(attributes=("a", "b"))]
    at95, at90 = wide_answers(database, inside, 0.95, 2.0), wide_answers(database, inside, 0.9, 2.0)
    assert set(at95.methods) == {"analytic"} and at95.n == 3000 and np.array_equal(at95.estimate, at90.estimate)
    assert np.allclose(at90.ci_high - at90.estimate, 1.6448536269514722 * at90.std_error)
    assert np.allclose(at95.ci_high - at95.estimate, 1.959963984540054 * at95.std_error)
    assert [r["method"] for r in at95.records()] == ["analytic"] * 6 and at95.label(0) == "marginal#0[a=x,b=0]"
    with pytest.raises(ImportError):
        wide_answers(database, [MarginalQuery(attributes=("a", "c"))], 0.95, 2.0)


def test_answers_do_not_depend_on_earlier_queries_and_the_export_answers_as_the_database(tmp_path) -> None:
    pytest.importorskip("mbi")
    stats, _ = _small(3)
    measured = measure_parent(SMALL, stats)
    ac, abc = [MarginalQuery(attributes=("a", "c"))], [MarginalQuery(attributes=("a", "b", "c"))]
    first = parent_database(SMALL, measured, FIT)
    before = wide_answers(first, ac, 0.95, 2.0)
    after = wide_answers(first, abc + ac, 0.95, 2.0)                # another margin bootstrapped in between
    fresh = wide_answers(parent_database(SMALL, measured, FIT), ac, 0.95, 2.0)
    assert set(before.methods) == {"model"} and np.array_equal(before.std_error, fresh.std_error)
    assert np.array_equal(after.std_error[-6:], before.std_error) and np.all(before.std_error > 0)
    # t quantiles with the Welch-Satterthwaite degrees of freedom: at least B - 1 = 5 (scipy: 2.5705818366147395)
    ratio = (before.ci_high - before.estimate) / before.std_error
    assert np.all((ratio > 1.959963984540054) & (ratio <= 2.5705818366147395 + 1e-12)), ratio
    assert np.array_equal(after.estimate[-6:], before.estimate) and np.array_equal(after.ci_high[-6:], before.ci_high)

    # the export: views' releases (E here) with the wide card; read back, the same answers
    releases = []
    rng = np.random.default_rng(3)
    for sub, (_, sent) in zip(SMALL.cards, _reports(SMALL, _rows(SMALL, 3000, rng), np.zeros(3000, np.int64), rng)):
        releases.append(Release(sub, sub.schema.private_digits(sent)))
    wide = WideRelease(SMALL, tuple(releases))
    assert np.array_equal(wide.measurements().measurements[0].support, measured.measurements[0].support)
    written, note = wide.write(tmp_path / "out", rows=250, fit=FIT)
    assert note is None and (tmp_path / "out" / "views" / "a+b" / "card.json") in written
    with open(tmp_path / "out" / "synthetic.csv", newline="", encoding="utf-8") as handle:
        sampled = list(csv.reader(handle))
    assert sampled[0] == ["a", "b", "c"] and len(sampled) == 251 and {r[0] for r in sampled[1:]} <= {"x", "y", "z"}
    offline = estimate_wide_release(tmp_path / "out", [{"kind": "marginal", "attributes": ["a", "c"]}], fit=FIT)
    assert np.array_equal(offline.estimate, before.estimate) and np.array_equal(offline.std_error, before.std_error)
    with pytest.raises(ValidationError) as info:
        WideRelease(SMALL, tuple(reversed(releases)))
    assert info.value.field == "releases[0].card"


def test_methods_travel_in_the_answer_pages() -> None:
    stats, _ = _small(2)
    database = parent_database(SMALL, measure_parent(SMALL, stats), FIT)
    answers = wide_answers(database, [MarginalQuery(attributes=("a", "b")), MarginalQuery(attributes=("b", "c"))],
                           0.95, 2.0)
    mixed = replace(answers, methods=tuple(("analytic", "model")[j % 3 == 0] for j in range(len(answers))))
    pages = list(answer_pages(mixed, max_bytes=PAGE_ENVELOPE_BYTES + 3 * 120))     # a few answers per page
    assert len(pages) > 2 and all(len(p.methods) == len(p.proper_exact) for p in pages)
    table = AnswerTable.from_pages(pages)
    assert table.methods == mixed.methods and json.dumps(table.records()) == json.dumps(mixed.records())  # NaN bounds
    assert [r["method"] for r in table.records()] == list(mixed.methods)
    del pages[1].methods[:]                                         # one page without its methods: refused
    with pytest.raises(ValidationError) as info:
        AnswerTable.from_pages(pages)
    assert info.value.field == "answers.methods"
