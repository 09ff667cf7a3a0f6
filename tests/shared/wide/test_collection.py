"""A wide collection: its JSON, its expansion into view sub-collections, its card, routing and projection."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import math
from typing import Any

import numpy as np
import pytest

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import SchemaError, ValidationError
from ldpsynth.shared.mechanisms.registry import name_of
from ldpsynth.shared.schema import MAX_BATCH_WEIGHTS
from ldpsynth.shared.wide.collection import VIEWS_VERSION, WIDE_CARD_FORMAT, ViewSpec, WideCard, WideSchema
from ldpsynth.shared.wide.measure import best_mechanism
from tests.test_json_schemas import ROOT, VALIDATORS, json_blocks

SALT = "00112233445566778899aabbccddeeff"


def categorical(name: str, k: int, public: bool = False) -> dict[str, Any]:
    return {"name": name, "type": "categorical", "values": [f"{name}{i}" for i in range(k)], "public": public}


DOC: dict[str, Any] = {"name": "adult", "epsilon": 1.0,
                       "attributes": [categorical("age", 3), categorical("sex", 2), categorical("income", 2),
                                      categorical("region", 4, public=True)],
                       "views": {"kind": "pairs", "one_way": False, "salt": SALT}}


def doc(views: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    out = copy.deepcopy(DOC)
    out.update(fields)
    if views is not None:
        out["views"] = views
    return out


def valid_json(obj: Any) -> bool:
    return VALIDATORS["collection"].is_valid(obj)


# ----- the JSON and the expansion ---------------------------------------------------------------------
@pytest.mark.parametrize("obj", [
    DOC,
    doc({"kind": "pairs", "attributes": ["income", "age"], "one_way": True, "salt": SALT}),
    doc({"kind": "list", "views": [["age", "sex"], ["income"]], "salt": SALT}),
    doc(shuffle={"delta": 1e-9, "min_batch": 10}, opens="2026-12-01T00:00:00Z", closes="2027-01-01T00:00:00Z",
        min_batch=5),
], ids=["pairs", "pairs of a subset, one-way", "list", "shuffled, lifecycle"])
def test_json_round_trip_and_the_json_schema(obj: dict[str, Any]) -> None:
    schema = WideSchema.from_json(json.dumps(obj))
    assert WideSchema.from_json(schema.to_json()) == schema
    assert WideSchema.from_json(schema.dumps()) == schema
    assert valid_json(schema.to_json()) and valid_json(obj)
    card = WideCard.for_schema(schema)
    assert WideCard.from_json(card.dumps()) == card


def test_the_documented_example_is_a_valid_wide_collection() -> None:
    (example,) = json_blocks(ROOT / "docs" / "wide.md")
    assert valid_json(example)
    assert [s.name for s in WideSchema.from_json(example).view_schemas()] == [
        "adult/age+sex", "adult/age+income", "adult/sex+income"]


def test_views_and_their_sub_collections() -> None:
    schema = WideSchema.from_json(doc({"kind": "pairs", "attributes": ["income", "age"], "one_way": True,
                                       "salt": SALT}))
    assert schema.view_attributes == (("income",), ("age",), ("income", "age"))
    subs = schema.view_schemas()
    assert [s.name for s in subs] == ["adult/income", "adult/age", "adult/income+age"]
    for view, sub in zip(schema.view_attributes, subs):
        assert [a.name for a in sub.private_attributes] == list(view)
        assert [a.name for a in sub.public_attributes] == ["region"]
        assert (sub.epsilon, sub.min_batch, sub.shuffle, sub.opens) == (1.0, 1, None, None)
    assert WideSchema.from_json(doc({"kind": "list", "views": [["sex", "age"]], "salt": SALT})).view_attributes \
        == (("sex", "age"),)


def test_each_view_has_its_best_mechanism_and_e_when_shuffled() -> None:
    big = doc(attributes=[categorical("a", 30), categorical("b", 2), categorical("c", 3)])
    mechanisms = [s.mechanism for s in WideSchema.from_json(big).view_schemas()]
    assert mechanisms == ["OLH", "OLH", "E"]            # 60, 90 and 6 cells at eps = 1 (E below about 3e + 2)
    assert mechanisms == [name_of(best_mechanism(1.0, k)) for k in (60, 90, 6)]
    shuffled = WideSchema.from_json({**big, "shuffle": {"delta": 1e-9, "min_batch": 10}})
    assert {s.mechanism for s in shuffled.view_schemas()} == {"E"}


def test_the_wide_domain_may_exceed_a_schemas_limit() -> None:
    attrs = [categorical(f"a{j}", 16) for j in range(8)]                          # |D| = 2^32 > 2^28
    schema = WideSchema.from_json(doc(attributes=attrs, views={"kind": "pairs", "salt": SALT}))
    assert math.prod(a.size for a in schema.attributes) > MAX_BATCH_WEIGHTS
    assert len(schema.view_schemas()) == 28


BAD: list[tuple[str, dict[str, Any], bool]] = [  # (the field named, the document, whether the JSON Schema refuses it)
    ("views", doc(views=None) | {"views": "pairs"}, True),
    ("views", {k: v for k, v in DOC.items() if k != "views"}, False),           # an ordinary schema: valid there
    ("views", doc({"kind": "pairs", "salt": SALT, "extra": 1}), True),
    ("views.kind", doc({"kind": "triples", "salt": SALT}), True),
    ("views.salt", doc({"kind": "pairs", "salt": "00" * 15}), True),
    ("views.salt", doc({"kind": "pairs", "salt": "zz" * 16}), True),
    ("views.salt", doc({"kind": "pairs", "salt": "00 11" * 8}), True),
    ("views.salt", doc({"kind": "pairs"}), True),
    ("views.attributes[1]", doc({"kind": "pairs", "attributes": ["age", "height"], "salt": SALT}), False),
    ("views.attributes[1]", doc({"kind": "pairs", "attributes": ["age", "region"], "salt": SALT}), False),
    ("views.attributes", doc({"kind": "pairs", "attributes": ["age", "age"], "salt": SALT}), True),
    ("views.attributes", doc({"kind": "pairs", "attributes": ["age"], "salt": SALT}), True),
    ("views.attributes", doc({"kind": "pairs", "attributes": "age", "salt": SALT}), True),
    ("views.one_way", doc({"kind": "pairs", "one_way": 1, "salt": SALT}), True),
    ("views.views", doc({"kind": "pairs", "views": [["age"]], "salt": SALT}), True),
    ("views.attributes", doc({"kind": "list", "views": [["age"]], "attributes": ["age", "sex"], "salt": SALT}), True),
    ("views.one_way", doc({"kind": "list", "views": [["age"]], "one_way": False, "salt": SALT}), True),
    ("views.views", doc({"kind": "list", "views": [], "salt": SALT}), True),
    ("views.views", doc({"kind": "list", "salt": SALT}), True),
    ("views.views", doc({"kind": "list", "views": ["age"], "salt": SALT}), True),
    ("views.views[1]", doc({"kind": "list", "views": [["age"], []], "salt": SALT}), True),
    ("views.views[0][1]", doc({"kind": "list", "views": [["age", "height"]], "salt": SALT}), False),
    ("views.views[0]", doc({"kind": "list", "views": [["age", "age"]], "salt": SALT}), True),
    ("views.views", doc({"kind": "list", "views": [["age", "sex"], ["sex", "age"]], "salt": SALT}), False),
    ("views[0]", doc(attributes=[{"name": "a", "type": "integer", "min": 0, "max": 2**15 - 1},
                                 {"name": "b", "type": "integer", "min": 0, "max": 2**15 - 1}]), False),
    ("name", doc(name="x" * 120), False),
    ("schema", doc(mechanism="OLH"), True),
    ("epsilon", doc(epsilon=0), True),
    ("attributes", doc(attributes=[categorical("age", 3), categorical("age", 2)]), False),
    ("min_batch", doc(min_batch=0), True),
]


@pytest.mark.parametrize(("field", "obj", "json_refuses"), BAD, ids=[f"{f} {i}" for i, (f, _, _) in enumerate(BAD)])
def test_every_validation_error_names_its_field(field: str, obj: dict[str, Any], json_refuses: bool) -> None:
    with pytest.raises(SchemaError) as info:
        WideSchema.from_json(json.dumps(obj))
    assert info.value.field == field
    assert valid_json(obj) is not json_refuses          # what JSON Schema cannot express is in its $comment


def test_direct_construction_is_checked_too() -> None:
    schema = WideSchema.from_json(DOC)
    with pytest.raises(SchemaError, match="epsilon"):
        WideSchema(schema.name, -1.0, schema.attributes, schema.views)
    with pytest.raises(SchemaError, match="attributes"):
        WideSchema(schema.name, 1.0, schema.attributes * 2, schema.views)
    with pytest.raises(SchemaError, match="views.salt"):
        ViewSpec("pairs", b"short")
    with pytest.raises(SchemaError, match="views.kind"):
        ViewSpec("all", bytes(16))
    with pytest.raises(SchemaError, match="views.views"):
        ViewSpec("pairs", bytes(16), listed=(("age",),))
    with pytest.raises(SchemaError, match="views.one_way"):
        ViewSpec("list", bytes(16), one_way=True, listed=(("age",),))


# ----- the card --------------------------------------------------------------------------------
CARD = WideCard.for_schema(WideSchema.from_json(DOC))


def test_the_card_holds_the_assignment_and_every_views_card() -> None:
    obj = CARD.to_json()
    assert (obj["format"], obj["version"]) == (WIDE_CARD_FORMAT, VIEWS_VERSION)
    assert obj["assignment"]["salt"] == SALT and obj["assignment"]["views"] == 3
    assert [v["collection"] for v in obj["views"]] == ["adult/age+sex", "adult/age+income", "adult/sex+income"]
    for view, sub in zip(obj["views"], CARD.schema.view_schemas()):
        assert MechanismCard.from_json(view["card"]).schema == sub


def _tamper(path: list[str | int], value: Any) -> dict[str, Any]:
    obj = json.loads(CARD.dumps())
    node = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return obj


@pytest.mark.parametrize(("path", "value", "field"), [
    (["assignment", "salt"], "ff" * 16, "card.assignment.salt"),
    (["assignment", "views"], 2, "card.assignment.views"),
    (["views", 1, "collection"], "adult/income+age", "card.views[1].collection"),
    (["views", 0, "card", "keep_weight"], "1", "card.views[0].card.keep_weight"),
    (["views", 2, "card", "epsilon"], 2.0, "card.views[2].card.epsilon"),
    (["views", 2, "card", "mechanism"], "OLH", "card.views[2].card.mechanism"),
    (["version"], "views/2", "card.version"),
    (["format"], "ldpsynth.mechanism-card/1", "card.format"),
    (["views"], [], "card.views"),
])
def test_a_tampered_card_is_refused(path: list[str | int], value: Any, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        WideCard.from_json(json.dumps(_tamper(path, value)))
    assert info.value.field == field


def test_a_card_whose_schema_changed_is_refused_or_recomputed() -> None:
    obj = _tamper(["schema", "views", "salt"], "ff" * 16)      # schema and assignment now disagree
    with pytest.raises(ValidationError, match=r"card\.assignment\.salt"):
        WideCard.from_json(obj)
    with pytest.raises(SchemaError, match="views.kind"):
        WideCard.from_json(_tamper(["schema", "views", "kind"], "triples"))


# ----- routing and projection ----------------------------------------------------------------------
def test_route_is_the_stated_hmac_rule_and_stable() -> None:
    key = b"device-0"
    word = int.from_bytes(hmac.new(bytes.fromhex(SALT), key + b"\x00", hashlib.sha256).digest()[:8], "big")
    assert word < (2**64 // 3) * 3                                   # accepted at r = 0
    assert CARD.route(key) == (word % 3, CARD.names[word % 3])
    assert all(CARD.route(key) == CARD.route(key) for _ in range(3))


def test_route_is_uniform() -> None:
    # alpha = 0.001: chi-square goodness of fit with 2 degrees of freedom, whose survival function is exp(-x/2),
    # so the critical value is -2 ln(0.001) = 13.82; 3 views x 5,000 expected keys each.
    keys = np.random.default_rng(7).bytes(16 * 15_000)
    counts = np.bincount([CARD.route(keys[i:i + 16])[0] for i in range(0, len(keys), 16)], minlength=3)
    expected = 15_000 / 3
    assert ((counts - expected) ** 2 / expected).sum() < -2 * math.log(0.001)


def test_project_keeps_the_views_and_the_public_columns() -> None:
    rows = {"age": ["age0", "age2"], "sex": ["sex1", "sex0"], "income": ["income0", "income1"],
            "region": ["region3", "region0"]}
    index, name = 1, "adult/age+income"
    assert CARD.names[index] == name
    assert CARD.project(rows, index) == {"age": rows["age"], "income": rows["income"], "region": rows["region"]}
    with pytest.raises(ValidationError, match="region.*missing column"):
        CARD.project({k: v for k, v in rows.items() if k != "region"}, index)
    with pytest.raises(ValidationError, match="height.*not an attribute"):
        CARD.project({**rows, "height": [1, 2]}, index)
    with pytest.raises(ValidationError) as info:                    # outside the view, still checked
        CARD.project({**rows, "sex": ["sex1", "sex7"]}, index)
    assert (info.value.field, info.value.position) == ("sex", 1)


def test_a_numeric_attribute_is_refused_in_a_collection_with_views():
    document = {"name": "s", "epsilon": 1.0, "views": {"kind": "pairs", "salt": "00" * 16},
                "attributes": [{"name": "a", "type": "binary"}, {"name": "b", "type": "binary"},
                               {"name": "h", "type": "numeric", "range": [0, 10]}]}
    with pytest.raises(SchemaError, match=r"attributes\[h\]\.type"):
        WideSchema.from_json(document)
