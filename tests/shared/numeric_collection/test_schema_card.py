"""A numeric attribute in the schema and on the card: JSON round trips, the JSON Schemas, every validation error,
and the card's numbers recomputed on load (a changed one refused)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import SchemaError, ValidationError
from ldpsynth.shared.numeric import HybridMechanism, SquareWave
from ldpsynth.shared.schema import NumericAttribute, Schema

ROOT = Path(__file__).resolve().parents[3]
_SCHEMAS = {name: json.loads((ROOT / "docs" / "schemas" / f"{name}.schema.json").read_text(encoding="utf-8"))
            for name in ("collection", "mechanism-card")}
_REGISTRY = Registry().with_resources([(s["$id"], Resource.from_contents(s)) for s in _SCHEMAS.values()])
VALIDATORS = {name: jsonschema.Draft202012Validator(s, registry=_REGISTRY) for name, s in _SCHEMAS.items()}


def collection(**change: Any) -> dict[str, Any]:
    """The issue's example: hours on [0, 99] by HM, grouped by a public region."""
    doc: dict[str, Any] = {"name": "c", "epsilon": 1.0, "attributes": [
        {"name": "hours", "type": "numeric", "range": [0, 99], "mechanism": "HM"},
        {"name": "region", "type": "categorical", "values": ["north", "south"], "public": True}]}
    doc.update(change)
    return doc


def valid(kind: str, doc: Any) -> bool:
    return VALIDATORS[kind].is_valid(doc)


@pytest.mark.parametrize("mechanism", ["HM", "SW"])
def test_schema_round_trip_and_json_schema(mechanism: str) -> None:
    doc = collection(attributes=[{"name": "hours", "type": "numeric", "range": [0, 99], "mechanism": mechanism}])
    schema = Schema.from_json(doc)
    attr = schema.attribute("hours")
    assert isinstance(attr, NumericAttribute) and (attr.lo, attr.hi, attr.mechanism) == (0.0, 99.0, mechanism)
    assert schema.mechanism == mechanism and schema.numeric is attr
    assert Schema.from_json(schema.dumps()) == schema
    assert valid("collection", doc) and valid("collection", schema.to_json())


def test_mechanism_defaults_to_hm_and_top_level_may_repeat_it() -> None:
    doc = collection(attributes=[{"name": "hours", "type": "numeric", "range": [1.5, 2.5]}])
    assert Schema.from_json(doc).mechanism == "HM"
    assert Schema.from_json(collection(mechanism="HM")).mechanism == "HM"
    assert valid("collection", doc)


def test_report_domain_is_the_output_set() -> None:
    schema = Schema.from_json(collection())
    assert schema.private_domain_size == HybridMechanism(1.0).reports
    sw = Schema.from_json(collection(epsilon=2.0, attributes=[
        {"name": "hours", "type": "numeric", "range": [0, 99], "mechanism": "SW"}]))
    assert sw.private_domain_size == SquareWave(2.0).reports


def _refused(doc: dict[str, Any], field: str, legal: str) -> None:
    with pytest.raises(SchemaError) as info:
        Schema.from_json(doc)
    assert info.value.field == field and legal in info.value.legal


@pytest.mark.parametrize("attributes, field, legal", [
    # two private attributes beside the numeric one
    ([{"name": "hours", "type": "numeric", "range": [0, 99]}, {"name": "b", "type": "binary"}],
     "attributes", "exactly one private attribute"),
    ([{"name": "hours", "type": "numeric", "range": [0, 99]}, {"name": "h2", "type": "numeric", "range": [0, 1]}],
     "attributes", "exactly one private attribute"),
    ([{"name": "hours", "type": "numeric", "range": [99, 0]}], "attributes[hours].range.hi", "> 99"),
    ([{"name": "hours", "type": "numeric", "range": [0, float("inf")]}], "attributes[hours].range.hi", "finite"),
    ([{"name": "hours", "type": "numeric", "range": [0]}], "attributes[hours].range", "[lo, hi]"),
    ([{"name": "hours", "type": "numeric", "range": ["0", "9"]}], "attributes[hours].range", "[lo, hi]"),
    ([{"name": "hours", "type": "numeric", "range": [0, 9], "mechanism": "E"}], "attributes[hours].mechanism", "HM"),
    ([{"name": "hours", "type": "numeric", "range": [0, 9], "public": True}], "attributes[hours].public", "false"),
    ([{"name": "hours", "type": "numeric"}], "attributes[hours]", "range"),
    ([{"name": "hours", "type": "numeric", "range": [0, 9], "bits": 4}], "attributes[hours]", "mechanism"),
])
def test_attribute_errors_name_the_field_and_both_readers_refuse(attributes: list[dict[str, Any]], field: str,
                                                                  legal: str) -> None:
    doc = collection(attributes=attributes)
    _refused(doc, field, legal)
    if not field.endswith((".hi", "attributes")):  # lo < hi and "one private attribute": not in the JSON Schema
        assert not valid("collection", doc)


def test_top_level_mechanism_must_be_the_attributes() -> None:
    _refused(collection(mechanism="SW"), "mechanism", "'HM'")
    _refused(collection(mechanism="OUE"), "mechanism", "'HM'")
    _refused({"name": "c", "epsilon": 1.0, "attributes": [{"name": "b", "type": "binary"}], "mechanism": "HM"},
             "mechanism", "numeric attribute")


@pytest.mark.parametrize("mechanism", ["HM", "SW"])
def test_a_shuffled_numeric_collection_and_its_card_name_the_clone_bound(mechanism: str) -> None:
    doc = collection(attributes=[{"name": "hours", "type": "numeric", "range": [0, 99], "mechanism": mechanism}],
                     shuffle={"delta": 1e-6, "min_batch": 100})
    schema = Schema.from_json(doc)
    assert valid("collection", doc) and schema.mechanism == mechanism and schema.shuffle is not None
    card = json.loads(MechanismCard.for_schema(schema).dumps())
    assert valid("mechanism-card", card) and "bound='fmt21-numerical'" in card["shuffle"]["central"]["epsilon"]
    assert MechanismCard.from_json(card).schema == schema
    card["shuffle"]["central"]["epsilon"] = MechanismCard.for_schema(Schema.from_json(
        {"name": "c", "epsilon": 1.0, "attributes": [{"name": "b", "type": "binary"}],
         "shuffle": {"delta": 1e-6, "min_batch": 100}})).to_json()["shuffle"]["central"]["epsilon"]  # E's words
    with pytest.raises(ValidationError) as info:
        MechanismCard.from_json(card)
    assert info.value.field == "card.shuffle.central"
    del card["shuffle"]
    with pytest.raises(ValidationError) as info:
        MechanismCard.from_json(card)
    assert info.value.field == "card.shuffle"


def test_epsilon_below_the_samplers_resolution_names_epsilon() -> None:
    with pytest.raises(SchemaError) as info:
        Schema.from_json(collection(epsilon=1e-300))
    assert info.value.field == "epsilon"


# ----- the card -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mechanism, epsilon", [("HM", 1.0), ("HM", 0.5), ("SW", 2.0)])
def test_card_round_trip_states_the_samplers_numbers(mechanism: str, epsilon: float) -> None:
    schema = Schema.from_json(collection(epsilon=epsilon, attributes=[
        {"name": "hours", "type": "numeric", "range": [0, 99], "mechanism": mechanism}]))
    card = MechanismCard.for_schema(schema)
    doc = json.loads(card.dumps())
    assert valid("mechanism-card", doc)
    sampler = HybridMechanism(epsilon) if mechanism == "HM" else SquareWave(epsilon)
    assert doc["mechanism"] == mechanism and doc["version"] == f"{mechanism}/1"
    assert doc["numeric"] == {"attribute": "hours", "range": [0.0, 99.0], "mechanism": mechanism}
    assert doc["epsilon"] == sampler.epsilon <= epsilon == doc["epsilon_requested"]
    assert doc["domain_size"] == sampler.reports
    if isinstance(sampler, HybridMechanism):
        block = doc["sampler"]
        assert block["input_points"] == sampler.steps + 1
        assert block["pm"]["denominator"] == str(sampler.pm.denominator)
        assert block["duchi"]["denominator"] == str(sampler.duchi.denominator)
        assert block["alpha"] == f"{sampler.alpha_weight}/{1 << 32}"
    else:
        assert doc["sampler"]["buckets"] == sampler.buckets
        assert doc["sampler"]["denominator"] == str(sampler.denominator)
    loaded = MechanismCard.from_json(card.dumps())
    assert loaded.schema == schema and loaded.mechanism.epsilon == sampler.epsilon and loaded.is_numeric


@pytest.mark.parametrize("path, value", [
    (("epsilon",), 1.0),
    (("domain_size",), 1000),
    (("sampler", "pm", "keep_weight"), "12345"),
    (("sampler", "duchi", "denominator"), "999"),
    (("sampler", "alpha"), "1/2"),
    (("numeric", "range"), [0.0, 100.0]),
    (("numeric", "attribute"), "minutes"),
])
def test_card_with_a_changed_number_is_refused(path: tuple[str, ...], value: Any) -> None:
    doc = MechanismCard.for_schema(Schema.from_json(collection())).to_json()
    bad = copy.deepcopy(doc)
    target = bad
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValidationError) as info:
        MechanismCard.from_json(json.dumps(bad))
    assert info.value.field == f"card.{path[0]}"


def test_card_naming_another_mechanism_is_refused() -> None:
    doc = MechanismCard.for_schema(Schema.from_json(collection())).to_json()
    with pytest.raises(ValidationError) as info:
        MechanismCard.from_json({**doc, "mechanism": "SW"})
    assert info.value.field == "card.mechanism"
    with pytest.raises(ValidationError) as info:
        MechanismCard.from_json({**doc, "version": "E/1"})
    assert info.value.field == "card.version"
