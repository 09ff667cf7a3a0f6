"""The mechanism card: lossless JSON round trip, files, and rejection of tampered cards.

Deterministic except for hypothesis' example generation.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpsynth.shared.card import CARD_FORMAT, MechanismCard
from ldpsynth.shared.errors import SchemaError, ValidationError
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.privacy import satisfies_epsilon_dp
from ldpsynth.shared.schema import (
    BinaryAttribute,
    CategoricalAttribute,
    ContinuousAttribute,
    IntegerAttribute,
    Schema,
)
from ldpsynth.simulation.datasets import ratings_schema

from .documents import DROP, replace_fields

RATINGS = ratings_schema(1.0, movies=1682)
SURVEY = Schema("survey", 0.25, (
    CategoricalAttribute("region", True, ("north", "south")),
    BinaryAttribute("smoker"),
    IntegerAttribute("age", False, 18, 99),
    ContinuousAttribute("income", False, 0.0, 250_000.0, 6),
))


@pytest.mark.parametrize("schema", [RATINGS, SURVEY], ids=["ratings", "survey"])
def test_card_describes_mechanism_e_of_the_schema(schema):
    card = MechanismCard.for_schema(schema)
    m = card.mechanism
    assert m == MechanismE(schema.epsilon, schema.private_domain_size) and card.version == "E/1"
    doc = card.to_json()
    assert doc["format"] == CARD_FORMAT and doc["mechanism"] == "E" and doc["version"] == "E/1"
    assert doc["domain_size"] == schema.private_domain_size
    assert doc["epsilon_requested"] == schema.epsilon and doc["epsilon"] == m.epsilon <= schema.epsilon
    a, l, n = int(doc["keep_weight"]), int(doc["lie_weight"]), int(doc["total_weight"])
    assert n == a + (schema.private_domain_size - 1) * l
    assert doc["keep_probability"] == float(Fraction(a, n)) and doc["lie_probability"] == float(Fraction(l, n))
    assert satisfies_epsilon_dp(m, doc["epsilon"]) and not satisfies_epsilon_dp(m, math.nextafter(doc["epsilon"], 0))


@pytest.mark.parametrize("schema", [RATINGS, SURVEY], ids=["ratings", "survey"])
def test_round_trip_dict_string_and_file(schema, tmp_path):
    card = MechanismCard.for_schema(schema)
    for restored in (MechanismCard.from_json(card.to_json()), MechanismCard.from_json(card.dumps())):
        assert restored == card
        assert restored.schema == card.schema and restored.mechanism == card.mechanism
        assert restored.mechanism.epsilon == card.mechanism.epsilon
        assert restored.to_json() == card.to_json()
    path = tmp_path / "card.json"
    card.save(path)
    loaded = MechanismCard.load(path)
    assert loaded == card and loaded.schema == schema and loaded.to_json() == card.to_json()


@settings(max_examples=60, deadline=None)
@given(eps=st.floats(1e-6, 60.0), low=st.integers(-1000, 1000), size=st.integers(2, 10**6),
       public=st.booleans())
def test_round_trip_property(eps, low, size, public):
    attrs = [IntegerAttribute("value", False, low, low + size - 1)]
    if public:
        attrs.append(CategoricalAttribute("group", True, ("a", "b", "c")))
    card = MechanismCard.for_schema(Schema("prop", eps, tuple(attrs)))
    restored = MechanismCard.from_json(json.loads(card.dumps()))
    assert restored == card and restored.to_json() == card.to_json()


def _tampered(**changes) -> dict:
    return replace_fields(MechanismCard.for_schema(RATINGS).to_json(), changes)


_GOOD = MechanismCard.for_schema(RATINGS).to_json()
_OTHER = MechanismCard.for_schema(Schema("ratings", 2.0, RATINGS.attributes)).to_json()

TAMPERED = [
    pytest.param(_tampered(keep_weight=str(int(_GOOD["keep_weight"]) + 1)), "card.keep_weight", id="keep-weight+1"),
    pytest.param(_tampered(keep_weight=int(_GOOD["keep_weight"])), "card.keep_weight", id="keep-weight-as-int"),
    pytest.param(_tampered(lie_weight=str(int(_GOOD["lie_weight"]) - 1)), "card.lie_weight", id="lie-weight-1"),
    pytest.param(_tampered(total_weight="1"), "card.total_weight", id="total-weight"),
    pytest.param(_tampered(epsilon=2.0), "card.epsilon", id="delivered-epsilon"),
    pytest.param(_tampered(epsilon=math.nextafter(_GOOD["epsilon"], 0)), "card.epsilon", id="delivered-epsilon-ulp"),
    pytest.param(_tampered(epsilon_requested=2.0), "card.epsilon_requested", id="requested-epsilon"),
    pytest.param(_tampered(keep_probability=0.5), "card.keep_probability", id="keep-probability"),
    pytest.param(_tampered(lie_probability=0.1), "card.lie_probability", id="lie-probability"),
    pytest.param(_tampered(domain_size=6), "card.domain_size", id="domain-size"),
    pytest.param(_tampered(schema=dict(_GOOD["schema"], epsilon=2.0)), "card.keep_weight", id="schema-epsilon"),
    pytest.param(_tampered(**{k: _OTHER[k] for k in ("keep_weight", "lie_weight", "total_weight", "epsilon",
                                                     "keep_probability", "lie_probability")}),
                 "card.keep_weight", id="weights-of-another-epsilon"),
    pytest.param(_tampered(version="E/2"), "card.version", id="wrong-version"),
    pytest.param(_tampered(version=DROP), "card.version", id="missing-version"),
    pytest.param(_tampered(format="ldpsynth.mechanism-card/2"), "card.format", id="wrong-format"),
    pytest.param(_tampered(format=DROP), "card.format", id="missing-format"),
    pytest.param(_tampered(mechanism="Laplace"), "card.mechanism", id="wrong-mechanism"),
    pytest.param(_tampered(keep_weight=DROP), "card.keep_weight", id="missing-keep-weight"),
    pytest.param(_tampered(epsilon_requested=DROP), "card.epsilon_requested", id="missing-requested-epsilon"),
    pytest.param('{"format": ', "card", id="invalid-json"),
    pytest.param("[]", "card.format", id="not-an-object"),
]


@pytest.mark.parametrize("doc, field", TAMPERED)
def test_tampered_card_is_rejected(doc, field):
    with pytest.raises(ValidationError) as info:
        MechanismCard.from_json(doc if isinstance(doc, str) else json.dumps(doc))
    assert info.value.field == field
    assert field in str(info.value) and info.value.legal and info.value.legal in str(info.value)


def test_tampered_schema_is_rejected_as_schema_error():
    with pytest.raises(SchemaError) as info:
        MechanismCard.from_json(_tampered(schema=dict(_GOOD["schema"], attributes=[])))
    assert info.value.field == "attributes"


def test_untampered_reference_card_loads():
    """The fixtures above are built from this card: it must load (so each rejection is due to its change)."""
    assert MechanismCard.from_json(json.dumps(_GOOD)) == MechanismCard.for_schema(RATINGS)
    assert MechanismCard.from_json(json.dumps(_OTHER)).mechanism.epsilon_requested == 2.0
