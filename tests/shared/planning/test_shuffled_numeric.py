"""A numeric collection planned behind a shuffler (ldpsynth/shared/planning/shuffled_numeric.py): every central ε is
the accountant's on the card terms, HM, PM and Duchi get FMT21's clone bound and E over levels the blanket bound
(a plan that used the blanket bound for HM is caught), the errors are plan_mean's at the two ε. No randomness."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from ldpsynth.shared import amplification
from ldpsynth.shared import guarantees as G
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.numeric.scale import NumericRange
from ldpsynth.shared.planning import shuffled_numeric
from ldpsynth.shared.planning.numeric import plan_mean
from ldpsynth.shared.planning.shuffled_numeric import ShuffledMean, ShuffledNumericPlan, plan_mean_shuffled
from ldpsynth.shared.schema import Schema

HOURS = {"name": "hours", "epsilon": 1.0, "attributes": [{"name": "hours", "type": "numeric", "range": [0, 100],
                                                          "mechanism": "HM"}]}
RANGE = NumericRange(0, 100, "hours")
CLONES, BLANKET = "fmt21-numerical", "blanket"


#: The accountant's inverse, once per arguments (each call costs seconds).
local_epsilon_for = functools.lru_cache(amplification.local_epsilon_for)


def agrees_with_accountant(p: ShuffledNumericPlan, r: ShuffledMean) -> bool:
    """Whether row ``r``'s figures are the accountant's on its card terms (mechanism, ε0, report domain, spec)."""
    floor = p.spec.honest_per_pool
    card = G.compute(G.RELEASE, r.epsilon0, r.domain_size, p.spec, ["all rows"], np.array([100_000]),
                     mechanism=r.card_mechanism)
    return (card.bound == r.bound and card.central is not None and card.central[0] == r.central_at_epsilon0
            and G.certified(card, r.card_mechanism) and G.certified(r.at_planned, r.card_mechanism)
            and r.epsilon0 == local_epsilon_for(p.target, r.domain_size, floor, p.spec.delta,
                                                              bound=card.bound))


def test_every_row_is_the_accountants_with_its_bound():
    s = Schema.from_json(HOURS)
    p = plan_mean_shuffled(s, 100_000, min_batch=20_000, target_central_epsilon=0.5, shuffler="independent")
    floor = 20_000 - 1                                   # one device's quota assumed injected
    assert [r.mechanism for r in p.rows] == ["HM", "PM", "Duchi", "E/16"]
    assert [r.bound for r in p.rows] == [CLONES, CLONES, CLONES, BLANKET]
    assert p.row("E/16").domain_size == 16 and p.spec.honest_per_pool == floor
    plain = plan_mean(0.5, 100_000, RANGE)
    for j, r in enumerate(p.rows):
        assert agrees_with_accountant(p, r)
        assert r.central_at_epsilon0 <= 0.5 < amplification.central_epsilon(r.epsilon0 * 1.001, r.domain_size, floor,
                                                                            1e-9, bound=r.bound)
        at_planned = G.central_at(1.0, r.domain_size, floor, 1e-9, 1, bound=r.bound)
        assert r.at_planned.analysts.epsilon == at_planned == r.at_planned.operator.epsilon  # independent shuffler
        assert r.shuffled == plan_mean(r.epsilon0, 100_000, RANGE).choices[j] and r.plain == plain.choices[j]
        assert r.shuffled.std_error < r.plain.std_error                                  # ε0 > 0.5: less noise
    hm = p.row("HM")
    assert hm.epsilon0 == p.row("PM").epsilon0 == p.row("Duchi").epsilon0              # one clone bound
    assert hm.central_at_epsilon0 != G.central_at(hm.epsilon0, hm.domain_size, floor, 1e-9, 1, bound=BLANKET)
    shuffled = [r.shuffled for r in p.rows]
    least = min(c.worst_case_std_error for c in shuffled)                                   # no prior: worst case
    assert p.row(p.recommended).shuffled.worst_case_std_error <= least * 1.05
    assert p.recommendation.startswith(f"{p.recommended} behind the shuffler at ε0 =")


def test_a_plan_that_used_the_blanket_bound_for_hm_is_caught(monkeypatch):
    s = Schema.from_json(HOURS)
    monkeypatch.setattr(shuffled_numeric, "shuffle_bound", lambda name: BLANKET)
    p = plan_mean_shuffled(s, 100_000, min_batch=20_000, target_central_epsilon=0.5)
    assert not agrees_with_accountant(p, p.row("HM"))
    assert agrees_with_accountant(p, p.row("E/16"))            # E's bound is the blanket one anyway


def test_the_schemas_block_a_prior_and_the_operator():
    s = Schema.from_json({**HOURS, "shuffle": {"delta": 1e-8, "min_batch": 5_000, "assume_injected": 1_000}})
    prior = np.array([10.0, 40.0, 40.0, 45.0, 60.0, 38.5])
    p = plan_mean_shuffled(s, 50_000, prior=prior, levels=np.unique(prior))
    assert p.spec.delta == 1e-8 and p.spec.honest_per_pool == 4_000 and p.target == 1.0 and p.with_prior
    e = p.row("E/5")
    assert e.epsilon0 == local_epsilon_for(1.0, 5, 4_000, 1e-8) and e.shuffled.bias == 0.0
    for r in p.rows:
        assert agrees_with_accountant(p, r)
        assert r.at_planned.operator.epsilon == 1.0 and not r.at_planned.operator.central   # it runs the shuffler
    least = min(r.shuffled.rmse for r in p.rows)                                            # a prior: the RMSE
    assert p.row(p.recommended).shuffled.rmse <= least * 1.05


@pytest.mark.parametrize("kwargs, field", [({"min_batch": 0}, "shuffle.min_batch"), ({"delta": 1.5}, "shuffle.delta"),
                                           ({"target_central_epsilon": -1.0}, "target_central_epsilon"),
                                           ({"min_batch": 10, "assume_injected": 10}, "shuffle.assume_injected")])
def test_bad_arguments_are_refused_naming_them(kwargs, field):
    with pytest.raises(ValidationError) as info:
        plan_mean_shuffled(Schema.from_json(HOURS), 1_000, **kwargs)
    assert info.value.field.endswith(field)
