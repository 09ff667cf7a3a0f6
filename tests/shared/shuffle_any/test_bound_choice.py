"""Which bound a shuffled collection's central guarantee is stated with (docs/shuffle-accountant.md §9): k-RR's
blanket for mechanism E, numbers unchanged; FMT21's clones for every other ε0-LDP mechanism, equal to the
accountant's ``bound="fmt21-numerical"``; and a stated guarantee the bound does not certify is caught."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from ldpsynth.shared import amplification as A
from ldpsynth.shared import guarantees as G
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanisms.registry import shuffle_bound
from ldpsynth.shared.queries.wire import guarantees_from_proto, guarantees_to_proto
from ldpsynth.shared.schema import Schema, ShuffleSpec

DELTA = 1e-9
#: The pool floor: 2,001 reports less the one a device's quota lets an adversary inject.
SHUFFLE = {"delta": DELTA, "min_batch": 2_001, "shuffler": "independent"}
FLOOR = 2_000
CLONES = "fmt21-numerical"


def categorical(mechanism: str, size: int = 64, shuffle: dict[str, object] = SHUFFLE) -> Schema:
    return Schema.from_json({"name": "c", "epsilon": 2.0, "mechanism": mechanism, "shuffle": shuffle,
                             "attributes": [{"name": "item", "type": "integer", "min": 0, "max": size - 1}]})


def numeric(mechanism: str, shuffle: dict[str, object] = SHUFFLE) -> Schema:
    return Schema.from_json({"name": "n", "epsilon": 2.0, "shuffle": shuffle, "attributes": [
        {"name": "hours", "type": "numeric", "range": [0, 99], "mechanism": mechanism}]})


def stated(schema: Schema, reports: int = 5_000) -> tuple[MechanismCard, G.Guarantees]:
    card = MechanismCard.for_schema(schema)
    return card, G.of_card(card, G.ANSWERS, ["all rows"], np.array([reports]))


def test_one_function_decides_the_bound_of_every_mechanism() -> None:
    assert shuffle_bound("E") == "blanket"
    assert {shuffle_bound(m) for m in ("OUE", "OLH", "HR", "SS", "HM", "SW")} == {CLONES}
    with pytest.raises(ValidationError, match="mechanism"):
        shuffle_bound("RAPPOR")


def test_e_keeps_the_blanket_bound_and_its_numbers() -> None:
    # docs/shuffle-accountant.md §4's table: n = 10^4, ε0 = 4, |D| = 8,410, δ = 1e-9 gives 0.0475978
    g = G.compute(G.ANSWERS, 4.0, 8_410, ShuffleSpec(DELTA, 10_000, assume_injected=0), ["all rows"],
                  np.array([10_000]))
    assert g.bound == "blanket" and g.evaluated_at == 10_000
    assert g.central == (A.central_epsilon(4.0, 8_410, 10_000, DELTA), DELTA)
    assert g.central[0] == pytest.approx(0.0475978, rel=1e-5)
    assert g.to_json()["central"]["bound"] == "blanket"
    card, from_card = stated(categorical("E", 8_410))
    assert from_card.bound == "blanket"
    assert from_card.central == (A.central_epsilon(card.mechanism.epsilon, 8_410, FLOOR, DELTA), DELTA)
    rule = card.to_json()["shuffle"]["central"]["epsilon"]
    assert "blanket bound" in rule and "bound=" not in rule      # E's card: the words of every earlier card


@pytest.mark.parametrize("schema", [numeric("HM"), numeric("SW"), categorical("OLH"), categorical("OUE"),
                                    categorical("HR"), categorical("SS")], ids=lambda s: s.mechanism)
def test_every_other_mechanism_is_stated_with_the_clone_bound(schema: Schema) -> None:
    card, g = stated(schema)
    m = card.mechanism
    assert g.bound == CLONES and g.evaluated_at == FLOOR
    assert g.central == (A.central_epsilon(m.epsilon, m.domain_size, FLOOR, DELTA, bound=CLONES), DELTA)
    assert g.central[0] < m.epsilon and g.analysts.central and g.operator.epsilon == g.central[0]
    assert g.to_json()["central"]["bound"] == CLONES
    assert G.Guarantees.from_json(g.to_json(), schema.shuffle).bound == CLONES
    back = guarantees_from_proto(guarantees_to_proto(g))
    assert (back.bound, back.central) == (CLONES, g.central)
    assert f"bound={CLONES!r}" in card.to_json()["shuffle"]["central"]["epsilon"]


def test_the_clone_bound_ignores_the_domain_the_blanket_bound_does_not() -> None:
    small, large = stated(categorical("OUE", 8))[1], stated(categorical("OUE", 4_096))[1]
    assert small.central == large.central
    e_small, e_large = stated(categorical("E", 8))[1], stated(categorical("E", 4_096))[1]
    assert e_large.central is not None and e_small.central is not None
    assert e_large.central[0] < e_small.central[0]


def test_several_rows_per_device_compose_the_clone_bound() -> None:
    shuffle = {"delta": DELTA, "min_batch": 4_002, "rows_per_device": 2}    # 4,000 honest: 2,000 per round
    card, g = stated(numeric("HM", shuffle))
    m = card.mechanism
    assert g.rows_per_device == 2 and g.evaluated_at == FLOOR and g.bound == CLONES
    assert g.central == (A.composed_epsilon(m.epsilon, m.domain_size, FLOOR, DELTA, 2, bound=CLONES), DELTA)
    assert G.certified(g, "HM")


def test_a_stated_guarantee_the_bound_does_not_certify_is_caught() -> None:
    card, g = stated(numeric("HM"))
    assert g.central is not None and G.certified(g, "HM")
    epsilon, delta = g.central
    assert not G.certified(replace(g, central=(epsilon * (1 - 1e-3), delta)), "HM")     # below the clone bound
    blanket = A.central_epsilon(card.mechanism.epsilon, card.mechanism.domain_size, FLOOR, DELTA)
    assert blanket < epsilon / 2                   # k-RR's blanket bound would overstate HM's guarantee...
    assert not G.certified(replace(g, central=(blanket, delta)), "HM")
    assert not G.certified(replace(g, central=(blanket, delta), bound="blanket"), "HM")   # ...whatever it claims
    assert not G.certified(replace(g, central=(epsilon, delta / 10)), "HM")   # a δ below the spec's
    assert not G.certified(g, "E")                 # a clone-bound statement for E names the wrong bound
    assert G.certified(replace(g, central=(card.mechanism.epsilon, 0.0)), "HM")   # the local guarantee holds
    _, e = stated(categorical("E", 8_410))
    assert e.central is not None and G.certified(e, "E")
    assert not G.certified(replace(e, central=(e.central[0] * (1 - 1e-3), DELTA)), "E")


def test_certifies_checks_its_arguments() -> None:
    assert A.certifies(2.0, 2, FLOOR, 2.0, DELTA, bound=CLONES)         # ε0 itself: the local guarantee
    with pytest.raises(ValidationError, match="bound"):
        A.certifies(2.0, 2, FLOOR, 1.0, DELTA, bound="variation-ratio")
    with pytest.raises(ValidationError, match="central_epsilon"):
        A.certifies(2.0, 2, FLOOR, -1.0, DELTA)
