"""The guarantees of a wide parent's answers (``guarantees.py``): per party the worst (ε, δ) over the views read.

The combined statement is at the boundary: equal to the largest per-view central ε and δ (each computed by the
accountant at that view's own |D|), never below any view's against any party; statements under different shuffle
specs are refused; a view too small to amplify makes the whole statement local. Unshuffled: the local guarantee,
stated when groups were withheld, as for any collection.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.guarantees import ANSWERS, PARTIES, central_at, of_card
from ldpsynth.shared.queries.model import MarginalQuery
from ldpsynth.shared.wide.collection import WideCard, WideSchema
from ldpsynth.shared.wide.guarantees import combine, parent_guarantees, views_read
from ldpsynth.shared.wide.parent import measure_parent, parent_database, wide_answers

from .test_parent import FIT, PUBLIC, SMALL, _reports, _rows, _statistics

pytest.importorskip("scipy")        # the accountant

SHUFFLED = WideCard.for_schema(WideSchema.from_json({
    "name": "poll", "epsilon": 1.0,
    "attributes": [{"name": "a", "type": "categorical", "values": ["p", "q", "r", "s", "t", "u"]},
                   {"name": "b", "type": "binary"},
                   {"name": "region", "type": "categorical", "values": ["n", "s"], "public": True}],
    "shuffle": {"delta": 1e-8, "min_batch": 400, "shuffler": "independent"},
    "views": {"kind": "list", "views": [["a", "b"], ["b"]], "salt": "33" * 16}}))


def _parts(card: WideCard, counts: list[list[int]]) -> list:
    return [(sub.schema.name, of_card(sub, ANSWERS, [f"region={r}" for r in "ns"[:len(c)]], np.array(c)))
            for sub, c in zip(card.cards, counts)]


def test_the_combined_guarantee_is_the_worst_view_per_party() -> None:
    parts = _parts(SHUFFLED, [[500, 600], [450, 700]])
    combined = combine(parts)
    spec = SHUFFLED.schema.shuffle
    assert spec is not None
    floor = spec.min_batch - spec.injected
    # each view's central ε at its own |D| (12 cells and 2 cells): they differ, the combination is the larger
    per_view = [central_at(sub.mechanism.epsilon, sub.mechanism.domain_size, floor, spec.delta, 1)
                for sub in SHUFFLED.cards]
    assert per_view[0] != pytest.approx(per_view[1], rel=1e-3)
    assert combined.central == (max(per_view), spec.delta) and combined.evaluated_at == floor
    for party in PARTIES:
        worst = max((g.against(party).epsilon, g.against(party).delta) for _, g in parts)
        got = combined.against(party)
        assert (got.epsilon, got.delta) == worst
        assert all(got.epsilon >= g.against(party).epsilon and got.delta >= g.against(party).delta for _, g in parts)
    assert combined.analysts.central and combined.analysts.epsilon < SHUFFLED.cards[0].mechanism.epsilon
    assert combined.labels == ("poll/a+b: region=n", "poll/a+b: region=s", "poll/b: region=n", "poll/b: region=s")
    assert combined.counts is not None and combined.counts.tolist() == [500, 600, 450, 700]


def test_a_view_without_amplification_or_another_spec_is_caught() -> None:
    parts = _parts(SHUFFLED, [[500], [450]])
    local = replace(parts[1][1], central=(parts[1][1].local_epsilon, 0.0), evaluated_at=0)   # too few to amplify
    weak = combine([parts[0], (parts[1][0], local)])
    assert not weak.analysts.central and weak.analysts.epsilon == max(s.mechanism.epsilon for s in SHUFFLED.cards)
    other = replace(parts[1][1], shuffle=replace(parts[1][1].shuffle, delta=1e-3))         # a deliberate mismatch
    with pytest.raises(ValidationError) as info:
        combine([parts[0], (parts[1][0], other)])
    assert info.value.field == "guarantees"
    with pytest.raises(ValidationError):
        combine([])


def test_unshuffled_parents_state_the_local_guarantee_when_groups_are_withheld() -> None:
    rng = np.random.default_rng(4)
    keys = np.where(np.arange(900) // 3 % 10 == 0, 2, rng.integers(0, 2, 900))     # region "e" below min_batch
    stats = _statistics(PUBLIC, _reports(PUBLIC, _rows(PUBLIC, 900, rng), keys, rng))
    stated = parent_guarantees(PUBLIC, stats, range(3))
    assert stated is not None and stated.shuffle is None and stated.central is None
    assert stated.withheld_groups == 3 and stated.withheld_reports == int((keys == 2).sum())
    assert stated.counts is not None and int(stated.counts.sum()) == int((keys != 2).sum())
    assert stated.analysts.epsilon == max(s.mechanism.epsilon for s in PUBLIC.cards) and not stated.analysts.central
    assert parent_guarantees(PUBLIC, stats, [1]).withheld_groups == 1              # only the view read
    small = _statistics(SMALL, _reports(SMALL, _rows(SMALL, 600, rng), np.zeros(600, np.int64), rng))
    assert parent_guarantees(SMALL, small, range(2)) is None                        # nothing to state


def test_the_views_read_are_the_analytic_answers_views_or_all() -> None:
    rng = np.random.default_rng(5)
    stats = _statistics(SMALL, _reports(SMALL, _rows(SMALL, 3000, rng), np.zeros(3000, np.int64), rng))
    database = parent_database(SMALL, measure_parent(SMALL, stats), FIT)
    inside = wide_answers(database, [MarginalQuery(attributes=("b", "a"))], 0.95, 2.0)
    assert views_read(SMALL, inside) == [0]
    margin = wide_answers(database, [MarginalQuery(attributes=("b",))], 0.95, 2.0)  # b: in both views
    assert views_read(SMALL, margin) == [0, 1]
    assert views_read(SMALL, replace(inside, modelled=True)) == [0, 1]
