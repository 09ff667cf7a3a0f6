"""The frequency oracles behind a shuffler in a categorical plan (ldpsynth/shared/planning/shuffled.py): each at the
ε0 FMT21's clone bound gives for the target, its central ε the accountant's on its card terms (a plan that used
the blanket bound for the oracles is caught), its errors plan's at that ε0, and the recommendation over E and
the oracles behind the shuffler. No randomness."""

from __future__ import annotations

import functools

import numpy as np

from ldpsynth.shared import amplification
from ldpsynth.shared import guarantees as G
from ldpsynth.shared import queries as Q
from ldpsynth.shared.planning import shuffled
from ldpsynth.shared.planning.planner import Plan, plan
from ldpsynth.shared.planning.shuffled import plan_shuffle, shuffle_spec
from ldpsynth.shared.schema import Schema

SCHEMA = {"name": "r", "epsilon": 1.0, "shuffle": {"delta": 1e-9, "min_batch": 20_000},
          "attributes": [{"name": "genre", "type": "categorical", "values": ["a", "b"], "public": True},
                         {"name": "rating", "type": "integer", "min": 1, "max": 5},
                         {"name": "age", "type": "integer", "min": 1, "max": 8}]}
QUERIES = '[{"kind": "marginal", "attributes": ["rating"], "normalization": "mean"}]'


def planned(schema: Schema, devices: int = 200_000, **kwargs) -> Plan:
    queries = Q.queries_from_json(QUERIES)
    return plan_shuffle(plan(schema, queries, devices), schema, Q.compile_queries(queries, schema), **kwargs)


#: The accountant's inverse, once per arguments (each call costs seconds).
local_epsilon_for = functools.lru_cache(amplification.local_epsilon_for)


def agrees_with_accountant(p: Plan, schema: Schema) -> bool:
    """Whether every oracle behind the shuffler has the accountant's central ε on its card terms (its name, the ε0
    it delivers, |D|, the spec) and the ε0 its own bound gives for the target."""
    s = p.shuffle
    assert s is not None
    spec = shuffle_spec(schema, 1)
    for b in s.behind:
        card = G.compute(G.RELEASE, b.choice.epsilon, p.domain_size, spec, ["genre=a"], np.array([100_000]),
                         mechanism=b.choice.mechanism)
        wanted = local_epsilon_for(s.target, p.domain_size, spec.honest_per_pool, spec.delta,
                                                 bound=card.bound)
        if not (card.bound == b.bound and card.central is not None and card.central[0] == b.central
                and G.certified(card, b.choice.mechanism) and abs(b.choice.epsilon - wanted) <= 1e-9 * wanted):
            return False
    return True


def test_the_oracles_behind_the_shuffler_are_the_accountants():
    s = Schema.from_json(SCHEMA)
    p = planned(s, target_central_epsilon=0.5)
    sp = p.shuffle
    floor, k = 20_000 - 1, p.domain_size
    assert [b.choice.mechanism for b in sp.behind] == ["OUE", "OLH", "HR", "SS"]
    assert {b.bound for b in sp.behind} == {"fmt21-numerical"} and agrees_with_accountant(p, s)
    clone0 = local_epsilon_for(0.5, k, floor, 1e-9, bound="fmt21-numerical")
    assert sp.epsilon0 == local_epsilon_for(0.5, k, floor, 1e-9) != clone0    # E: the blanket bound
    at_clone0 = plan(s, Q.queries_from_json(QUERIES), 200_000, epsilon=clone0)
    for b in sp.behind:
        assert b.central <= 0.5
        np.testing.assert_allclose(b.choice.figures.se_worst, at_clone0.oracle(b.choice.mechanism).se_worst)
        plain = next(c for c in sp.oracles if c.mechanism == b.choice.mechanism)          # without a shuffler
        assert (b.choice.figures.se_worst < plain.figures.se_worst).all()
    ratios = {"E": 1.0, **{b.choice.mechanism: b.choice.error_ratio for b in sp.behind}}  # against E behind it
    assert ratios[sp.recommended] <= min(ratios.values()) * 1.05
    assert sp.recommendation.startswith(f"{sp.recommended}:") and "by FMT21's clones" in sp.recommendation


def test_a_plan_that_used_the_blanket_bound_for_the_oracles_is_caught(monkeypatch):
    s = Schema.from_json(SCHEMA)
    monkeypatch.setattr(shuffled, "shuffle_bound", lambda name: "blanket")
    assert not agrees_with_accountant(planned(s, target_central_epsilon=0.5), s)


def test_a_large_domain_keeps_e_and_small_pools_prefer_nothing_else():
    wide = Schema.from_json({"name": "w", "epsilon": 1.0, "shuffle": {"delta": 1e-9, "min_batch": 20_000},
                             "attributes": [{"name": "movie", "type": "integer", "min": 1, "max": 1682},
                                            {"name": "rating", "type": "integer", "min": 1, "max": 5}]})
    p = planned(wide, 100_000)
    assert agrees_with_accountant(p, wide) and p.shuffle.recommended == "E"       # k-RR's blanket amplifies most
    assert min(b.choice.error_ratio for b in p.shuffle.behind if b.choice.available) > 1.05


def test_the_guarantee_at_the_planned_epsilon_is_the_collections_mechanisms():
    for mechanism, bound in (("E", "blanket"), ("OUE", "fmt21-numerical")):
        s = Schema.from_json({**SCHEMA, "mechanism": mechanism})
        g = planned(s, 50_000, min_batch=2_000).shuffle.at_planned
        assert g.bound == bound and G.certified(g, mechanism)
        assert g.analysts.epsilon == G.central_at(g.local_epsilon, 40, 1_999, 1e-9, 1, bound=bound) < 1.0
