"""The JSON Schemas of docs/schemas/ against the reference implementation (docs/contract.md).

* Every document the Python code writes validates: collection schemas and mechanism cards of
  schemas with every attribute type (fixed ones and hypothesis-drawn ones), ``GetCollection``'s
  JSON, query batches from the builders (every kind, every condition operator), the JSON examples
  of docs/user-guide.md and docs/contract.md, and docker/collections/*.json.
* The JSON Schemas and the Python readers agree: a set of bad documents is refused by both, a set
  of edge-case good documents is accepted by both. The readers' known leniencies
  (docs/contract.md §13) are ``xfail(strict=True)``: fixing one makes its case pass, and the
  strict xfail then fails until the case moves to the agreeing sets.
* The worked example of docs/contract.md §12 is what the code computes, including the device's
  sampler on the words the table lists.

Deterministic except for hypothesis' example generation.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from referencing import Registry, Resource

from ldpsynth.shared import mechanism as mechanism_module
from ldpsynth.shared import queries as Q
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.heavy_hitters.collection import DiscoverySchema
from ldpsynth.shared.protocol import CollectionInfo, Limits, reports_to_proto
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.schema import (
    Attribute,
    BinaryAttribute,
    CategoricalAttribute,
    ContinuousAttribute,
    IntegerAttribute,
    Schema,
    ShuffleSpec,
)
from ldpsynth.shared.wide.collection import WideSchema
from ldpsynth.shared.wire import collection_pb2 as pb

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_DIR = ROOT / "docs" / "schemas"
CONTRACT = ROOT / "docs" / "contract.md"
COLLECTION, CARD, QUERIES = "collection", "mechanism-card", "query-batch"
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def _load_schemas() -> dict[str, dict[str, Any]]:
    return {name: json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
            for name in (COLLECTION, CARD, QUERIES)}


JSON_SCHEMAS = _load_schemas()
_REGISTRY = Registry().with_resources([(s["$id"], Resource.from_contents(s)) for s in JSON_SCHEMAS.values()])
VALIDATORS = {name: jsonschema.Draft202012Validator(s, registry=_REGISTRY) for name, s in JSON_SCHEMAS.items()}
#: The Python reader of each format, given the document as JSON text (as it arrives on the wire).
def read_collection(text: str) -> object:
    """A collection JSON as the aggregator reads a --collection file: a wide collection (a "views" block), a
    discovery (a "discovery" block) or a schema."""
    obj = json.loads(text)
    if isinstance(obj, dict) and "views" in obj:
        return WideSchema.from_json(obj)
    if isinstance(obj, dict) and "discovery" in obj:
        return DiscoverySchema.from_json(obj)
    return Schema.from_json(text)


READERS: dict[str, Callable[[str], object]] = {
    COLLECTION: read_collection, CARD: MechanismCard.from_json, QUERIES: Q.queries_from_json}


def standard_json(obj: Any) -> Any:
    """``obj`` through RFC 8259 JSON text (no NaN or Infinity), as another language would read it."""
    return json.loads(json.dumps(obj, allow_nan=False))


def assert_valid(kind: str, doc: Any) -> None:
    errors = sorted(VALIDATORS[kind].iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, f"{kind}: " + "; ".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])


def schema_accepts(kind: str, doc: Any) -> bool:
    return VALIDATORS[kind].is_valid(doc)


def python_accepts(kind: str, doc: Any) -> bool:
    try:
        READERS[kind](json.dumps(doc))
    except ValidationError:
        return False
    return True


def json_blocks(path: Path) -> list[Any]:
    """The ```json blocks of a Markdown file, parsed."""
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", path.read_text(encoding="utf-8"), re.S)]


def kind_of(doc: Any) -> str:
    """Which format a documented JSON example is in."""
    if isinstance(doc, list):
        return QUERIES
    return CARD if "format" in doc else COLLECTION


# ----- the schema files ----------------------------------------------------------------------
def test_schema_files_are_draft_2020_12_with_distinct_ids() -> None:
    for schema in JSON_SCHEMAS.values():
        assert schema["$schema"] == DRAFT
        jsonschema.Draft202012Validator.check_schema(schema)
    assert len({s["$id"] for s in JSON_SCHEMAS.values()}) == len(JSON_SCHEMAS)


# ----- what Python writes validates ----------------------------------------------------------
SURVEY = Schema("survey", 0.5, (
    CategoricalAttribute("region", True, ("north", "south", "east")),
    IntegerAttribute("movie", True, 1, 4),
    IntegerAttribute("age", False, 18, 21),
    BinaryAttribute("smoker"),
    CategoricalAttribute("genre", False, ("drama", "comedy")),
    ContinuousAttribute("score", False, 0.0, 1.0, 2),
))
GRAPH = Schema("graph", 2.0, (IntegerAttribute("src", True, 0, 9), IntegerAttribute("dst", True, 0, 9),
                              BinaryAttribute("edge")))
EDGES = Schema("x" * 128, 1e-3, (
    IntegerAttribute("wide", True, -(2**61), 2**61 - 1),           # a span of exactly 2^62 values
    ContinuousAttribute("temperature", False, -40.5, 60.25),         # bits omitted: the default 4
    CategoricalAttribute("word", False, tuple(f"w{i}" for i in range(1000))),
    IntegerAttribute("_delta", False, -3, -1),
))
SHUFFLED = Schema("shuffled", 1.0, (IntegerAttribute("movie", True, 1, 4), IntegerAttribute("rating", False, 1, 5)),
                  ShuffleSpec(1e-9, 10_000, 2, "independent"))
ORACLE_SCHEMAS = [Schema(name.lower(), 2.0, (IntegerAttribute("movie", True, 1, 4),
                                            IntegerAttribute("item", False, 0, 99), BinaryAttribute("liked")),
                         mechanism=name) for name in ("OUE", "OLH", "HR", "SS")]
WINDOWED = Schema("windowed", 1.0, (IntegerAttribute("movie", True, 1, 4), IntegerAttribute("rating", False, 1, 5)),
                  opens=1_796_083_200, closes=1_798_761_600, min_batch=50)
SHUFFLED_ORACLE = Schema("shuffled-oracle", 2.0, (IntegerAttribute("movie", True, 1, 4),
                                                  IntegerAttribute("item", False, 0, 99)),
                          ShuffleSpec(1e-9, 1_000), mechanism="OUE")
SCHEMAS = [SURVEY, GRAPH, EDGES, SHUFFLED, WINDOWED, Schema.load(ROOT / "docker" / "collections" / "ratings.json"),
           *ORACLE_SCHEMAS, SHUFFLED_ORACLE]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: s.name[:8])
def test_schemas_cards_and_get_collection_json_validate(schema: Schema) -> None:
    card = MechanismCard.for_schema(schema)
    assert_valid(COLLECTION, standard_json(schema.to_json()))
    assert_valid(CARD, standard_json(card.to_json()))
    message = CollectionInfo(card, Limits()).to_proto()
    assert_valid(COLLECTION, json.loads(message.schema_json))
    assert_valid(CARD, json.loads(message.card_json))


@st.composite
def schemas(draw: st.DrawFn) -> Schema:
    """Schemas of 1 to 4 attributes of every type, at least one private, |D| small enough for a card."""
    names = draw(st.lists(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,7}", fullmatch=True), min_size=1, max_size=4,
                          unique=True))
    publics = draw(st.lists(st.booleans(), min_size=len(names), max_size=len(names)))
    publics[draw(st.integers(0, len(names) - 1))] = False
    attributes: list[Attribute] = []
    for name, public in zip(names, publics):
        kind = draw(st.sampled_from(["categorical", "binary", "integer", "continuous"]))
        if kind == "categorical":
            values = draw(st.lists(st.text(max_size=6), min_size=2, max_size=6, unique=True))
            attributes.append(CategoricalAttribute(name, public, tuple(values)))
        elif kind == "binary":
            attributes.append(BinaryAttribute(name, public))
        elif kind == "integer":
            low = draw(st.integers(-(2**62), 2**62))
            attributes.append(IntegerAttribute(name, public, low, low + draw(st.integers(1, 30))))
        else:
            low = draw(st.floats(-1e6, 1e6))
            attributes.append(ContinuousAttribute(name, public, low, low + draw(st.floats(1e-2, 1e6)),
                                                  draw(st.integers(1, 5))))
    return Schema(draw(st.text(min_size=1, max_size=128)), draw(st.floats(0.01, 30.0)), tuple(attributes))


@settings(max_examples=60, deadline=None)
@given(schemas())
def test_drawn_schemas_and_their_cards_validate(schema: Schema) -> None:
    assert_valid(COLLECTION, standard_json(schema.to_json()))
    assert_valid(CARD, standard_json(MechanismCard.for_schema(schema).to_json()))


def every_query_kind() -> list[Q.Query]:
    """Queries from every builder, every condition operator, optional fields given and left out."""
    k = SURVEY.private_domain_size
    ops = [Q.condition("age", "==", 19), Q.condition("genre", "!=", "drama"), Q.condition("age", "<", 20),
           Q.condition("score", "<=", 0.5), Q.condition("age", ">", 18), Q.condition("score", ">=", 0.25),
           Q.condition("genre", "in", ["drama", "comedy"]), Q.condition("score", "between", [0.25, 0.75]),
           Q.condition("smoker", "==", True)]
    return [
        Q.linear(np.arange(k)), Q.linear(np.ones(k), normalization="mean", label="all"),
        Q.predicate(), Q.predicate(*ops[:5]), Q.predicate(*ops[5:], value="age", normalization="mean", label="p"),
        Q.marginal("genre"), Q.marginal("score", "smoker", normalization="eq10", label="m"),
        Q.grouped("region", {"north": np.ones(k), "east": np.arange(k)}, default=np.full(k, 2.0)),
        Q.grouped("movie", [(1, np.arange(k) % 3)], normalization="sum", label="g"),
        Q.dense(np.eye(3, k)), Q.dense(np.ones((1, k)), normalization="sum", label="d"),
    ]


def graph_queries() -> list[Q.Query]:
    return [Q.cut([0, 1, 2], [3, 4]),
            Q.cut([5], [6, 7], source="src", target="dst", edge="edge", normalization="mean", label="c")]


def test_every_query_kind_from_the_builders_validates() -> None:
    survey, graph = every_query_kind(), graph_queries()
    Q.compile_queries(survey, SURVEY)   # they are good queries, not just well-formed ones
    Q.compile_queries(graph, GRAPH)
    batch = standard_json(Q.queries_to_json(survey + graph))
    assert_valid(QUERIES, batch)
    assert {q["kind"] for q in batch} == {"linear", "predicate", "marginal", "grouped", "cut", "dense"}
    assert {c["op"] for q in batch for c in q.get("where", [])} == set(Q.OPERATORS)
    assert_valid(QUERIES, json.loads(Q.dumps_queries(survey)))


def test_the_normalizations_are_the_codes_names_and_former_names() -> None:
    enum = JSON_SCHEMAS[QUERIES]["$defs"]["normalization"]["enum"]
    assert enum == [*Q.NORMALIZATIONS, *Q.NORMALIZATION_ALIASES]


def test_docker_collections_validate() -> None:
    files = sorted((ROOT / "docker" / "collections").glob("*.json"))
    assert files
    for path in files:
        doc = json.loads(path.read_text(encoding="utf-8"))
        assert_valid(kind_of(doc), doc)
        assert python_accepts(kind_of(doc), doc)


@pytest.mark.parametrize("path", [ROOT / "docs" / "user-guide.md", CONTRACT], ids=lambda p: p.name)
def test_documented_json_examples_validate(path: Path) -> None:
    blocks = json_blocks(path)
    assert len(blocks) >= 2
    for doc in blocks:
        assert_valid(kind_of(doc), doc)
        assert python_accepts(kind_of(doc), doc)


# ----- the JSON Schemas and the readers agree ------------------------------------------------
RATINGS_DOC: dict[str, Any] = {"name": "ratings", "epsilon": 1.0, "attributes": [
    {"name": "movie", "type": "integer", "min": 1, "max": 5, "public": True},
    {"name": "rating", "type": "integer", "min": 1, "max": 5}]}
CARD_DOC = standard_json(MechanismCard.for_schema(Schema.from_json(RATINGS_DOC)).to_json())


ORACLE_CARD_DOC = standard_json(
    MechanismCard.for_schema(Schema.from_json({**RATINGS_DOC, "mechanism": "OLH"})).to_json())


def oracle_card(**fields: Any) -> Any:
    return {**copy.deepcopy(ORACLE_CARD_DOC), **fields}


def collection(*, drop: tuple[str, ...] = (), attribute: dict[str, Any] | None = None, **fields: Any) -> Any:
    """RATINGS_DOC with top-level fields set or dropped, or its private attribute replaced."""
    doc = copy.deepcopy(RATINGS_DOC)
    doc.update(fields)
    for key in drop:
        del doc[key]
    if attribute is not None:
        doc["attributes"][1] = attribute
    return doc


def card(*, drop: tuple[str, ...] = (), **fields: Any) -> Any:
    doc = copy.deepcopy(CARD_DOC)
    doc.update(fields)
    for key in drop:
        del doc[key]
    return doc


def cond(op: str, value: Any, attribute: Any = "rating") -> list[dict[str, Any]]:
    return [{"kind": "predicate", "where": [{"attribute": attribute, "op": op, "value": value}]}]


W = [0, 0, 0, 1, 1]
BAD: list[tuple[str, str, Any]] = [
    (COLLECTION, "shuffle delta 0", collection(shuffle={"delta": 0, "min_batch": 10})),
    (COLLECTION, "shuffle delta 1", collection(shuffle={"delta": 1, "min_batch": 10})),
    (COLLECTION, "shuffle without min_batch", collection(shuffle={"delta": 1e-9})),
    (COLLECTION, "shuffle min_batch 0", collection(shuffle={"delta": 1e-9, "min_batch": 0})),
    (COLLECTION, "shuffle rows_per_device 0",
     collection(shuffle={"delta": 1e-9, "min_batch": 1, "rows_per_device": 0})),
    (COLLECTION, "shuffle unknown shuffler", collection(shuffle={"delta": 1e-9, "min_batch": 1, "shuffler": "me"})),
    (COLLECTION, "shuffle unknown field", collection(shuffle={"delta": 1e-9, "min_batch": 1, "threshold": 5})),
    (COLLECTION, "min_batch 0", collection(min_batch=0)),
    (COLLECTION, "min_batch above 10^12", collection(min_batch=10**12 + 1)),
    (COLLECTION, "min_batch a string", collection(min_batch="5")),
    (COLLECTION, "opens without a time zone", collection(opens="2026-12-01T00:00:00")),
    (COLLECTION, "opens a date only", collection(opens="2026-12-01")),
    (COLLECTION, "opens with fractional seconds", collection(opens="2026-12-01T00:00:00.5Z")),
    (COLLECTION, "closes a number", collection(closes=1796083200)),
    (COLLECTION, "not an object", ["ratings"]),
    (COLLECTION, "a string", "ratings"),
    (COLLECTION, "no name", collection(drop=("name",))),
    (COLLECTION, "empty name", collection(name="")),
    (COLLECTION, "name of 129 characters", collection(name="x" * 129)),
    (COLLECTION, "unknown field", collection(owner="me")),
    (COLLECTION, "no epsilon", collection(drop=("epsilon",))),
    (COLLECTION, "epsilon 0", collection(epsilon=0)),
    (COLLECTION, "negative epsilon", collection(epsilon=-1.0)),
    (COLLECTION, "epsilon a string", collection(epsilon="1")),
    (COLLECTION, "epsilon a boolean", collection(epsilon=True)),
    (COLLECTION, "no attributes", collection(drop=("attributes",))),
    (COLLECTION, "empty attributes", collection(attributes=[])),
    (COLLECTION, "attributes an object", collection(attributes={"rating": {"type": "binary"}})),
    (COLLECTION, "every attribute public", collection(attribute={"name": "liked", "type": "binary", "public": True})),
    (COLLECTION, "attribute not an object", collection(attribute="rating")),
    (COLLECTION, "attribute without type", collection(attribute={"name": "rating"})),
    (COLLECTION, "attribute without name", collection(attribute={"type": "binary"})),
    (COLLECTION, "unknown type", collection(attribute={"name": "rating", "type": "ordinal"})),
    (COLLECTION, "name starting with a digit", collection(attribute={"name": "1st", "type": "binary"})),
    (COLLECTION, "name with a space", collection(attribute={"name": "a b", "type": "binary"})),
    (COLLECTION, "empty attribute name", collection(attribute={"name": "", "type": "binary"})),
    (COLLECTION, "public null", collection(attribute={"name": "r", "type": "binary", "public": None})),
    (COLLECTION, "public a string", collection(attribute={"name": "r", "type": "binary", "public": "no"})),
    (COLLECTION, "binary with values", collection(attribute={"name": "r", "type": "binary", "values": ["a", "b"]})),
    (COLLECTION, "categorical without values", collection(attribute={"name": "r", "type": "categorical"})),
    (COLLECTION, "one category", collection(attribute={"name": "r", "type": "categorical", "values": ["a"]})),
    (COLLECTION, "repeated category",
     collection(attribute={"name": "r", "type": "categorical", "values": ["a", "a"]})),
    (COLLECTION, "numeric category", collection(attribute={"name": "r", "type": "categorical", "values": ["a", 1]})),
    (COLLECTION, "integer without max", collection(attribute={"name": "r", "type": "integer", "min": 1})),
    (COLLECTION, "integer min a boolean",
     collection(attribute={"name": "r", "type": "integer", "min": False, "max": 5})),
    (COLLECTION, "integer min a string", collection(attribute={"name": "r", "type": "integer", "min": "1", "max": 5})),
    (COLLECTION, "integer min below int64",
     collection(attribute={"name": "r", "type": "integer", "min": -(2**63) - 1, "max": 0})),
    (COLLECTION, "integer with lo",
     collection(attribute={"name": "r", "type": "integer", "min": 1, "max": 5, "lo": 0})),
    (COLLECTION, "continuous without hi", collection(attribute={"name": "r", "type": "continuous", "lo": 0})),
    (COLLECTION, "continuous lo a string",
     collection(attribute={"name": "r", "type": "continuous", "lo": "0", "hi": 1})),
    (COLLECTION, "bits 0", collection(attribute={"name": "r", "type": "continuous", "lo": 0, "hi": 1, "bits": 0})),
    (COLLECTION, "bits 25", collection(attribute={"name": "r", "type": "continuous", "lo": 0, "hi": 1, "bits": 25})),
    (COLLECTION, "bits null",
     collection(attribute={"name": "r", "type": "continuous", "lo": 0, "hi": 1, "bits": None})),
    (COLLECTION, "bits a string", collection(attribute={"name": "r", "type": "continuous", "lo": 0, "hi": 1,
                                                        "bits": "4"})),
    (COLLECTION, "unknown mechanism", collection(mechanism="RAPPOR")),
    (COLLECTION, "mechanism lowercase", collection(mechanism="oue")),
    (CARD, "an oracle card without its sampler", {k: v for k, v in ORACLE_CARD_DOC.items() if k != "sampler"}),
    (CARD, "an oracle card without its protocol", {k: v for k, v in ORACLE_CARD_DOC.items() if k != "protocol"}),
    (CARD, "an oracle's p a float", oracle_card(protocol={**ORACLE_CARD_DOC["protocol"], "p": 0.5})),
    (CARD, "an OLH sampler without its modulus",
     oracle_card(sampler={k: v for k, v in ORACLE_CARD_DOC["sampler"].items() if k != "field_modulus"})),
    (CARD, "an OLH card saying E/1", oracle_card(version="E/1")),
    (CARD, "an E card saying OLH", card(mechanism="OLH", version="OLH/1")),
    (CARD, "not an object", [CARD_DOC]),
    (CARD, "no format", card(drop=("format",))),
    (CARD, "another format", card(format="ldpsynth.mechanism-card/2")),
    (CARD, "another version", card(version="E/2")),
    (CARD, "another mechanism", card(mechanism="RAPPOR")),
    (CARD, "no schema", card(drop=("schema",))),
    (CARD, "schema with an unknown field", card(schema=collection(owner="me"))),
    (CARD, "schema with epsilon 0", card(schema=collection(epsilon=0))),
    (CARD, "keep_weight a number", card(keep_weight=int(CARD_DOC["keep_weight"]))),
    (CARD, "keep_weight with a leading zero", card(keep_weight="0" + CARD_DOC["keep_weight"])),
    (CARD, "negative lie_weight", card(lie_weight="-" + CARD_DOC["lie_weight"])),
    (CARD, "no total_weight", card(drop=("total_weight",))),
    (CARD, "domain_size 1", card(domain_size=1)),
    (CARD, "domain_size a string", card(domain_size="5")),
    (CARD, "no epsilon", card(drop=("epsilon",))),
    (CARD, "epsilon_requested 0", card(epsilon_requested=0)),
    (CARD, "keep_probability a string", card(keep_probability=str(CARD_DOC["keep_probability"]))),
    (CARD, "no lie_probability", card(drop=("lie_probability",))),
    (QUERIES, "not an array", {"kind": "linear", "weights": W}),
    (QUERIES, "a query not an object", [W]),
    (QUERIES, "no kind", [{"weights": W}]),
    (QUERIES, "unknown kind", [{"kind": "quantile", "weights": W}]),
    (QUERIES, "linear without weights", [{"kind": "linear"}]),
    (QUERIES, "empty weights", [{"kind": "linear", "weights": []}]),
    (QUERIES, "a string weight", [{"kind": "linear", "weights": [0, "1"]}]),
    (QUERIES, "a boolean weight", [{"kind": "linear", "weights": [0, True]}]),
    (QUERIES, "weights an object", [{"kind": "linear", "weights": {"0": 1}}]),
    (QUERIES, "normalization null", [{"kind": "linear", "weights": W, "normalization": None}]),
    (QUERIES, "unknown normalization", [{"kind": "linear", "weights": W, "normalization": "max"}]),
    (QUERIES, "label a number", [{"kind": "linear", "weights": W, "label": 5}]),
    (QUERIES, "label of 257 characters", [{"kind": "linear", "weights": W, "label": "x" * 257}]),
    (QUERIES, "unknown field", [{"kind": "linear", "weights": W, "where": []}]),
    (QUERIES, "where null", [{"kind": "predicate", "where": None}]),
    (QUERIES, "where an object", [{"kind": "predicate", "where": {"attribute": "rating", "op": "==", "value": 1}}]),
    (QUERIES, "condition without value", [{"kind": "predicate", "where": [{"attribute": "rating", "op": "=="}]}]),
    (QUERIES, "condition with an extra field",
     [{"kind": "predicate", "where": [{"attribute": "rating", "op": "==", "value": 1, "not": True}]}]),
    (QUERIES, "unknown operator", cond("~", 1)),
    (QUERIES, "empty condition attribute", cond("==", 1, attribute="")),
    (QUERIES, "condition attribute a number", cond("==", 1, attribute=3)),
    (QUERIES, "== a list", cond("==", [1])),
    (QUERIES, "== null", cond("==", None)),
    (QUERIES, "in an empty list", cond("in", [])),
    (QUERIES, "in a string", cond("in", "12")),
    (QUERIES, "in a nested list", cond("in", [[1]])),
    (QUERIES, "between three numbers", cond("between", [1, 2, 3])),
    (QUERIES, "between a boolean", cond("between", [0, True])),
    (QUERIES, "between a string", cond("between", ["1", 2])),
    (QUERIES, "< a string", cond("<", "3")),
    (QUERIES, "< a boolean", cond("<", True)),
    (QUERIES, "predicate value empty", [{"kind": "predicate", "value": ""}]),
    (QUERIES, "predicate value a number", [{"kind": "predicate", "value": 1}]),
    (QUERIES, "marginal without attributes", [{"kind": "marginal"}]),
    (QUERIES, "marginal of nothing", [{"kind": "marginal", "attributes": []}]),
    (QUERIES, "marginal attribute twice", [{"kind": "marginal", "attributes": ["rating", "rating"]}]),
    (QUERIES, "marginal attributes a string", [{"kind": "marginal", "attributes": "rating"}]),
    (QUERIES, "marginal attribute empty", [{"kind": "marginal", "attributes": [""]}]),
    (QUERIES, "marginal attribute a number", [{"kind": "marginal", "attributes": [1]}]),
    (QUERIES, "grouped without attribute", [{"kind": "grouped", "tables": [{"value": 1, "weights": W}]}]),
    (QUERIES, "grouped attribute empty",
     [{"kind": "grouped", "attribute": "", "tables": [{"value": 1, "weights": W}]}]),
    (QUERIES, "no tables", [{"kind": "grouped", "attribute": "movie", "tables": []}]),
    (QUERIES, "tables an object", [{"kind": "grouped", "attribute": "movie", "tables": {"1": W}}]),
    (QUERIES, "table without weights", [{"kind": "grouped", "attribute": "movie", "tables": [{"value": 1}]}]),
    (QUERIES, "table with an extra field",
     [{"kind": "grouped", "attribute": "movie", "tables": [{"value": 1, "weights": W, "label": "x"}]}]),
    (QUERIES, "table value null",
     [{"kind": "grouped", "attribute": "movie", "tables": [{"value": None, "weights": W}]}]),
    (QUERIES, "table value a list",
     [{"kind": "grouped", "attribute": "movie", "tables": [{"value": [1], "weights": W}]}]),
    (QUERIES, "empty default",
     [{"kind": "grouped", "attribute": "movie", "tables": [{"value": 1, "weights": W}], "default": []}]),
    (QUERIES, "cut without T", [{"kind": "cut", "S": [0]}]),
    (QUERIES, "empty S", [{"kind": "cut", "S": [], "T": [1]}]),
    (QUERIES, "repeated vertex", [{"kind": "cut", "S": [0, 0], "T": [1]}]),
    (QUERIES, "S a string", [{"kind": "cut", "S": "01", "T": [2]}]),
    (QUERIES, "S an object", [{"kind": "cut", "S": {"0": 1}, "T": [2]}]),
    (QUERIES, "vertex null", [{"kind": "cut", "S": [None], "T": [2]}]),
    (QUERIES, "source empty", [{"kind": "cut", "S": [0], "T": [1], "source": ""}]),
    (QUERIES, "edge a number", [{"kind": "cut", "S": [0], "T": [1], "edge": 2}]),
    (QUERIES, "dense without table", [{"kind": "dense"}]),
    (QUERIES, "empty table", [{"kind": "dense", "table": []}]),
    (QUERIES, "empty table row", [{"kind": "dense", "table": [[]]}]),
    (QUERIES, "table of numbers", [{"kind": "dense", "table": W}]),
]
GOOD: list[tuple[str, str, Any]] = [
    (COLLECTION, "name of 128 characters", collection(name="x" * 128)),
    (COLLECTION, "integer epsilon", collection(epsilon=2)),
    (COLLECTION, "public false given", collection(attribute={"name": "r", "type": "binary", "public": False})),
    (COLLECTION, "bits left out", collection(attribute={"name": "r", "type": "continuous", "lo": -1, "hi": 1})),
    (COLLECTION, "int64 ends with a span of 2^62",  # public: a private domain is at most 2^28 values
     collection(attributes=[{"name": "r", "type": "integer", "min": 2**63 - 2**62, "max": 2**63 - 1, "public": True},
                            RATINGS_DOC["attributes"][1]])),
    (COLLECTION, "a lifecycle", collection(opens="2026-12-01T00:00:00Z", closes="2027-01-01T01:00:00+01:00",
                                           min_batch=10**12)),
    (COLLECTION, "min_batch 1 beside a larger shuffle.min_batch",
     collection(min_batch=1, shuffle={"delta": 1e-9, "min_batch": 100})),
    (COLLECTION, "an oracle behind a shuffler", collection(mechanism="OLH", shuffle={"delta": 1e-9, "min_batch": 1})),
    (COLLECTION, "two categories", collection(attribute={"name": "r", "type": "categorical", "values": ["", " "]})),
    (COLLECTION, "private attribute first", collection(attributes=list(reversed(RATINGS_DOC["attributes"])))),
    (CARD, "no reference", card(drop=("reference",))),
    (CARD, "unknown field (ignored)", card(comment="published 2026-01")),
    (CARD, "epsilon_requested as an integer", card(epsilon_requested=1)),
    (QUERIES, "an empty batch", []),
    (QUERIES, "only a kind", [{"kind": "predicate"}]),
    (QUERIES, "label null", [{"kind": "linear", "weights": W, "label": None}]),
    (QUERIES, "label of 256 characters", [{"kind": "linear", "weights": W, "label": "x" * 256}]),
    (QUERIES, "every normalization", [{"kind": "linear", "weights": W, "normalization": n} for n in Q.NORMALIZATIONS]),
    (QUERIES, "the former name of range", [{"kind": "linear", "weights": W, "normalization": "eq10"}]),
    (QUERIES, "predicate value null", [{"kind": "predicate", "where": [], "value": None}]),
    (QUERIES, "== a boolean", cond("==", False)),
    (QUERIES, "in mixed values", cond("in", [1, "2", True, 2.5])),
    (QUERIES, "between equal bounds", cond("between", [2, 2])),
    (QUERIES, "default null", [{"kind": "grouped", "attribute": "movie", "tables": [{"value": "1", "weights": W}],
                                "default": None}]),
    (QUERIES, "cut names null", [{"kind": "cut", "S": ["a"], "T": [1.5], "source": None, "target": None,
                                  "edge": None}]),
    (QUERIES, "dense of integers", [{"kind": "dense", "table": [[1, 2], [3, 4]]}]),
]


@pytest.mark.parametrize(("kind", "doc"), [(k, d) for k, _, d in BAD], ids=[f"{k}: {i}" for k, i, _ in BAD])
def test_bad_documents_are_refused_by_the_json_schema_and_the_reader(kind: str, doc: Any) -> None:
    assert not schema_accepts(kind, doc)
    assert not python_accepts(kind, doc)


@pytest.mark.parametrize(("kind", "doc"), [(k, d) for k, _, d in GOOD], ids=[f"{k}: {i}" for k, i, _ in GOOD])
def test_edge_documents_are_accepted_by_the_json_schema_and_the_reader(kind: str, doc: Any) -> None:
    assert_valid(kind, doc)
    assert python_accepts(kind, doc)


LENIENT = [
    (QUERIES, "marginal attributes an object", [{"kind": "marginal", "attributes": {"rating": 1}}]),
    (CARD, "schema as a JSON string", card(schema=json.dumps(RATINGS_DOC))),
    (CARD, "reference not a string", card(reference=5)),
    (COLLECTION, "Unicode attribute name", collection(attribute={"name": "größe", "type": "binary"})),
]


@pytest.mark.xfail(strict=True, reason="docs/contract.md §13: the Python reader accepts what the JSON Schema refuses")
@pytest.mark.parametrize(("kind", "doc"), [(k, d) for k, _, d in LENIENT], ids=[f"{k}: {i}" for k, i, _ in LENIENT])
def test_known_leniencies_of_the_readers(kind: str, doc: Any) -> None:
    assert python_accepts(kind, doc) == schema_accepts(kind, doc)


# ----- the worked example of docs/contract.md -------------------------------------------------
def test_the_worked_example_is_what_the_code_computes(monkeypatch: pytest.MonkeyPatch) -> None:
    text = CONTRACT.read_text(encoding="utf-8")
    blocks = json_blocks(CONTRACT)
    schema = Schema.from_json(next(b for b in blocks if isinstance(b, dict) and b.get("name") == "demo"))
    row = {"region": ["south"], "age": [19], "smoker": [1], "score": [0.6]}
    assert [int(a.encode(row[a.name])[0]) for a in schema.attributes] == [1, 1, 1, 2]
    code = int(schema.encode_private({a.name: row[a.name] for a in schema.private_attributes})[0])
    assert code == 14 and "= **14**" in text
    assert {k: v.tolist() for k, v in schema.decode_private([14]).items()} == {"age": [19], "smoker": [1],
                                                                              "score": [0.5]}

    mech = MechanismCard.for_schema(schema).mechanism
    a, l, n = mech.keep_weight, mech.lie_weight, mech.total_weight
    for shown in (f'"{a}"', f'"{l}"', f'"{n}"', repr(mech.epsilon), repr(mech.keep_probability),
                  repr(mech.lie_probability), str(2**64 % n), str(2**64 - 2**64 % n)):
        assert shown in text, shown
    assert 2**64 - 2**64 % n == 4 * n and "(= 4N)" in text

    # The sampler of a device, fed the words of the table: reject, keep, lie below x, lie above x, lie at x.
    words = iter([2**64 - 1, 2**62, 10**18, 12345678901234567890, a + 14 * l + 5])
    monkeypatch.setattr(mechanism_module.os, "urandom", lambda size: int(next(words)).to_bytes(size, "little"))
    outcomes = [int(mech.perturb_secure(np.array([14]))[0]) for _ in range(4)]
    assert outcomes == [14, 3, 18, 15]
    for word, shown in ((2**62, "| R < A: report 14 |"), (10**18, "= 3 < 14: report 3 |"),
                        (12345678901234567890, "| j = 17 ≥ 14: report 18 |"),
                        (a + 14 * l + 5, "| j = 14 ≥ 14: report 15 (never x itself) |")):
        assert f"| {word} " in text and f"| {word % n} | " in text and shown in text

    reports = Reports(np.arange(16, dtype=np.uint8).reshape(1, 16), np.array([3]), np.array([[1]]))
    message = reports_to_proto(reports.validate(schema), "demo", mech.VERSION, 7).SerializeToString()
    assert len(message) == 51 and message.hex(" ") in text
    assert pb.BatchAck(sequence=7, accepted=1, duplicates=0).SerializeToString().hex(" ") == "08 07 10 01"

    queries = Q.queries_from_json(next(b for b in blocks if isinstance(b, list)))
    smoker = (np.arange(24) // 4) % 2
    np.testing.assert_array_equal(queries[0].weights, smoker)
    batch = Q.compile_queries(queries, schema)
    (plain, grouped) = sorted(batch.blocks, key=lambda b: b.attribute is not None)
    np.testing.assert_array_equal(plain.weights[:, 0], [smoker, smoker])        # linear == predicate
    assert grouped.attribute == "region" and grouped.values.tolist() == [1]     # "south" has code 1
