"""The discovery collection: its schema, card and state machine (ldpsynth.shared.heavy_hitters.collection)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import SchemaError, Status, ValidationError
from ldpsynth.shared.heavy_hitters.collection import (
    CARD_FORMAT,
    DiscoveryCard,
    DiscoverySchema,
    DiscoveryState,
    RoundNotReady,
    parent_of,
    round_name,
)
from ldpsynth.shared.heavy_hitters.device import RoundSpec, choose_mechanism
from ldpsynth.shared.heavy_hitters.rounds import assign_rounds, round_of
from ldpsynth.shared.heavy_hitters.server import decode_round, decode_support, support_counts
from ldpsynth.shared.schema import Schema

ROOT = Path(__file__).resolve().parents[3]
VALIDATOR = jsonschema.Draft202012Validator(
    json.loads((ROOT / "docs" / "schemas" / "collection.schema.json").read_text(encoding="utf-8")))
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def words(**discovery: Any) -> dict[str, Any]:
    block = {"first_bits": 10, "fragment_bits": 10, "top_k": 10, "salt": "ab" * 16, "min_reports_per_round": 100}
    block.update(discovery)
    return {"name": "words", "epsilon": 2.0, "discovery": block,
            "attributes": [{"name": "word", "type": "string", "max_length": 6, "alphabet": LETTERS}]}


def rich() -> dict[str, Any]:
    """Every optional part: public attributes around the string, UTF-8, lifecycle, min_batch, cap."""
    obj = words(cap=30)
    obj["attributes"] = [{"name": "app", "type": "categorical", "values": ["a", "b"], "public": True},
                         {"name": "text", "type": "string", "max_length": 8, "encoding": "utf-8"},
                         {"name": "day", "type": "integer", "min": 1, "max": 7, "public": True}]
    obj.update(opens="2026-12-01T00:00:00Z", closes="2026-12-31T00:00:00Z", min_batch=5)
    return obj


@pytest.mark.parametrize("obj", [words(), rich(), words(threshold=0.01, top_k=None)], ids=["alphabet", "rich",
                                                                                            "threshold"])
def test_schema_round_trips_and_validates(obj):
    obj = {k: v for k, v in obj.items()}
    obj["discovery"] = {k: v for k, v in obj["discovery"].items() if v is not None}
    schema = DiscoverySchema.from_json(json.dumps(obj))
    assert schema.to_json() == obj
    assert DiscoverySchema.from_json(schema.dumps()) == schema
    assert not list(VALIDATOR.iter_errors(obj))


def _set(path: str, value: Any) -> dict[str, Any]:
    obj = words()
    *parents, last = path.split(".")
    target: Any = obj
    for key in parents:
        target = target[int(key)] if key.isdigit() else target[key]
    if value is _DROP:
        del target[last]
    else:
        target[last] = value
    return obj


_DROP = object()
BAD = [
    ("discovery.first_bits", _set("discovery.first_bits", 23), True),
    ("discovery.first_bits", _set("discovery.first_bits", _DROP), True),
    ("discovery.fragment_bits", _set("discovery.fragment_bits", 0), True),
    ("discovery.top_k", _set("discovery.threshold", 0.1), True),
    ("discovery.top_k", _set("discovery.top_k", _DROP), True),
    ("discovery.threshold", {**words(), "discovery": {**words()["discovery"], "top_k": None, "threshold": 1.5}},
     True),
    ("discovery.cap", _set("discovery.cap", 5), False),
    ("discovery.salt", _set("discovery.salt", "ab" * 15), True),
    ("discovery.salt", _set("discovery.salt", "AB" * 16), True),
    ("discovery.min_reports_per_round", _set("discovery.min_reports_per_round", 0), True),
    ("discovery", _set("discovery.rounds", 3), True),
    ("attributes[word].max_length", _set("attributes.0.max_length", 65), True),
    ("attributes[word].max_length", _set("attributes.0.max_length", _DROP), True),
    ("attributes[word].encoding", {**words(), "attributes": [{"name": "word", "type": "string", "max_length": 6,
                                                              "encoding": "latin-1"}]}, True),
    ("attributes[word]", _set("attributes.0.encoding", "utf-8"), True),
    ("attributes[word].alphabet", _set("attributes.0.alphabet", "aab"), False),
    ("attributes[word].public", _set("attributes.0.public", True), True),
    ("attributes", {**words(), "attributes": words()["attributes"] * 2}, True),
    ("attributes", {**words(), "attributes": [{"name": "n", "type": "integer", "min": 0, "max": 3}]}, True),
    ("attributes", {**words(), "attributes": [*words()["attributes"],
                                              {"name": "n", "type": "integer", "min": 0, "max": 3}]}, True),
    ("attributes", {**words(), "attributes": [*words()["attributes"], {"name": "cell", "type": "binary",
                                                                        "public": True}]}, False),
    ("schema", {**words(), "mechanism": "OLH"}, True),
    ("name", {**words(), "name": "x" * 121}, False),
    ("epsilon", {**words(), "epsilon": 0}, True),
]


@pytest.mark.parametrize("field,obj,json_schema_refuses", BAD, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD)])
def test_each_validation_error_names_its_field(field, obj, json_schema_refuses):
    with pytest.raises(SchemaError) as info:
        DiscoverySchema.from_json(obj)
    assert info.value.field == field
    assert info.value.legal                                  # the legal range is stated
    if json_schema_refuses:                                  # the rest are in the JSON Schema's $comment
        assert list(VALIDATOR.iter_errors(obj))


def test_a_string_attribute_needs_a_discovery_block():
    obj = words()
    del obj["discovery"]
    with pytest.raises(SchemaError):
        Schema.from_json(obj)
    assert list(VALIDATOR.iter_errors(obj))


def test_round_schema_is_an_ordinary_collection():
    schema = DiscoverySchema.from_json(rich())
    r0 = schema.round_schema(0, np.zeros((1, 0), np.uint8))
    assert r0.name == "words/round-0" and parent_of(r0.name) == ("words", 0) and parent_of("words") is None
    assert [a.name for a in r0.attributes] == ["app", "cell", "day"]
    assert [a.name for a in r0.private_attributes] == ["cell"] and r0.private_domain_size == 1 << 10
    assert (r0.epsilon, r0.opens, r0.closes, r0.min_batch) == (2.0, schema.opens, schema.closes, 5)
    assert r0.mechanism == choose_mechanism(2.0, 1 << 10)
    candidates = np.array([[3, 0x40], [200, 0x80]], np.uint8)                  # 10-bit prefixes
    r1 = schema.round_schema(1, candidates)
    assert r1.name == round_name("words", 1) and r1.private_domain_size == 2 * (1 << 10) + 1
    assert r1.mechanism == choose_mechanism(2.0, r1.private_domain_size)
    card = MechanismCard.for_schema(r1)                       # the sub-collection's card: the round's own oracle
    spec = schema.round_spec(1, candidates)
    assert card.mechanism.domain_size == spec.mechanism.domain_size and card.version.startswith(r1.mechanism)
    assert Schema.from_json(r1.dumps()) == r1


def test_a_shuffled_discovery_uses_E_in_every_round():
    obj = words()
    obj["shuffle"] = {"delta": 1e-9, "min_batch": 100}
    schema = DiscoverySchema.from_json(obj)
    assert not list(VALIDATOR.iter_errors(obj))
    candidates = np.array([[1, 0], [9, 0]], np.uint8)
    assert schema.round_schema(1, candidates).mechanism == "E"
    assert schema.round_spec(1, candidates).mechanism.domain_size == 2 * 1024 + 1
    assert type(schema.round_spec(1, candidates).mechanism).__name__ == "MechanismE"


def test_device_round_is_the_hmac_split():
    schema = DiscoverySchema.from_json(words())
    key = b"k" * 32
    assert schema.device_round(key) == round_of(key, bytes.fromhex("ab" * 16), schema.schedule.rounds)


def _card_json(state: DiscoveryState) -> dict[str, Any]:
    return json.loads(state.card().dumps())


def test_card_round_trips_and_refuses_tampering():
    state = DiscoveryState(DiscoverySchema.from_json(words()))
    good = _card_json(state)
    assert good["format"] == CARD_FORMAT and good["candidates"] == [""] and good["round_collection"] == \
        "words/round-0"
    assert DiscoveryCard.from_json(json.dumps(good)).to_json() == good
    one = copy.deepcopy(good)
    one["candidates"] = ["00"]
    two = copy.deepcopy(good)
    two["round_collection"] = "words/round-1"
    three = copy.deepcopy(good)
    three["card"]["schema"]["name"] = "words/round-1"
    seven = copy.deepcopy(good)
    seven["card"]["schema"]["epsilon"] = 4.0
    four = copy.deepcopy(good)
    four["schedule"]["rounds"] = 9
    five = copy.deepcopy(good)
    five["round"] = 1
    six = copy.deepcopy(good)
    six["mechanism_version"] = "discovery/2"
    for bad, field in [(one, "card.candidates"), (two, "card.round_collection"), (three, "card.card"),
                       (four, "card.schedule"), (five, "card.candidates"), (six, "card.mechanism_version"),
                       (seven, "card.epsilon_requested")]:
        with pytest.raises(ValidationError) as info:
            DiscoveryCard.from_json(bad)
        assert info.value.field == field


def test_later_round_card_checks_candidate_order():
    schema = DiscoverySchema.from_json(words())
    card = DiscoveryCard.for_round(schema, 1, np.array([[1, 0], [9, 0]], np.uint8)).to_json()
    assert card["candidates"] == ["0100", "0900"]
    assert DiscoveryCard.from_json(card).to_json() == card
    card["candidates"] = ["0900", "0100"]
    with pytest.raises(ValidationError, match="increasing order"):
        DiscoveryCard.from_json(card)
    card["candidates"] = ["0120", "0900"]                    # bit 10 set: past the 10-bit prefix
    with pytest.raises(ValidationError, match="bits set past the prefix"):
        DiscoveryCard.from_json(card)


def zipf_population(n: int, rng: np.random.Generator) -> tuple[list[str], list[str]]:
    """n devices' words: half of them the 10 planted words at Zipf(1.1) shares (the 10th: 1.5% of all), the other
    half uniform over 3,000 random words of 2 to 6 letters (each about 0.02%); the planted words."""
    vocabulary = sorted({"".join(rng.choice(list(LETTERS), rng.integers(2, 7))) for _ in range(4000)})[:3010]
    rng.shuffle(vocabulary)
    p = 1.0 / np.arange(1, 11) ** 1.1
    p = np.concatenate([0.5 * p / p.sum(), np.full(3000, 0.5 / 3000)])
    draws = rng.choice(len(vocabulary), size=n, p=p)
    return [vocabulary[i] for i in draws], vocabulary[:10]


def run_rounds(state: DiscoveryState, values: list[str], rng: np.random.Generator) -> DiscoveryState:
    """Every round: its devices (by their keys' HMAC) report through the round's mechanism, the support counts
    close it, and the state goes through its JSON each time."""
    schema = state.schema
    codes = schema.encoding.encode(values)
    rounds = assign_rounds([f"device-{i}".encode() for i in range(len(values))], schema.discovery.salt,
                           schema.schedule.rounds)
    while not state.finished:
        spec = state.spec()
        assert DiscoveryCard.from_json(state.card().dumps()).round == spec.index
        reports = spec.mechanism.perturb(spec.cells_of(codes[rounds == spec.index]), rng)
        state.close_round(*support_counts(spec, reports))
        state = DiscoveryState.from_json(state.dumps())
    return state


def test_state_machine_finds_a_planted_zipf_top_10():
    rng = np.random.default_rng(2026)
    values, top = zipf_population(90_000, rng)
    state = run_rounds(DiscoveryState(DiscoverySchema.from_json({**words(cap=20), "epsilon": 4.0})), values, rng)
    assert state.round == state.schema.schedule.rounds == 3
    result = state.result_json()
    found = [row["value"] for row in result["heavy_hitters"]]
    # the 10th planted word (about 1,350 devices) against a round's noise (se about 150 at ε = 4): all found
    assert sorted(found) == sorted(top)
    truth = {w: values.count(w) for w in found}
    for row in result["heavy_hitters"]:
        assert row["ci_low"] < row["count"] < row["ci_high"]
        assert abs(row["count"] - truth[row["value"]]) < 4 * row["std_error"]   # fixed seed; about 6e-5 each
    assert abs(result["population"] - 90_000) < 2_000             # R n_0, n_0 binomial(90,000, 1/3): R sd = 424
    assert state.card().round is None and state.card().to_json()["candidates"] == []
    assert DiscoveryCard.from_json(state.card().dumps()).round is None


def test_an_under_filled_round_is_refused_and_stays_open():
    state = DiscoveryState(DiscoverySchema.from_json(words(min_reports_per_round=500)))
    spec = state.spec()
    reports = spec.mechanism.perturb(np.arange(499) % 1024, np.random.default_rng(1))
    with pytest.raises(RoundNotReady, match="round 0 has 499.*|at least 500") as info:
        state.close_round(*support_counts(spec, reports))
    assert "at least 500" in str(info.value) and "has 499" in str(info.value)
    assert info.value.refused_as is Status.FAILED_PRECONDITION and state.round == 0
    with pytest.raises(RoundNotReady, match="a finished discovery"):
        state.result()


def test_support_of_the_wrong_size_is_refused():
    state = DiscoveryState(DiscoverySchema.from_json(words()))
    with pytest.raises(ValidationError, match="support"):
        state.close_round(np.zeros(1000, np.int64), 200)


def test_a_tampered_state_is_refused_on_load():
    rng = np.random.default_rng(3)
    state = DiscoveryState(DiscoverySchema.from_json(words()))
    spec = state.spec()
    state.close_round(*support_counts(spec, spec.mechanism.perturb(rng.integers(0, 1024, 3000), rng)))
    good = json.loads(state.dumps())
    assert DiscoveryState.from_json(good).card().to_json() == state.card().to_json()
    bad = copy.deepcopy(good)
    bad["round"] = 2
    with pytest.raises(ValidationError, match="state.round"):
        DiscoveryState.from_json(bad)
    bad = copy.deepcopy(good)
    bad["card_sha256"] = "0" * 64
    with pytest.raises(ValidationError, match="state.card_sha256"):
        DiscoveryState.from_json(bad)
    bad = copy.deepcopy(good)
    bad["closed"][0]["support"] = "!!"
    with pytest.raises(ValidationError, match="support"):
        DiscoveryState.from_json(bad)


@pytest.mark.parametrize("mechanism", ["E", "HR", "OLH"])
def test_decoding_support_counts_is_decoding_the_reports(mechanism):
    spec = RoundSpec(1, 8, 4, np.array([[1], [5], [9]], np.uint8), 1.0, mechanism)
    assert (type(spec.mechanism).__name__ == "MechanismE") == (mechanism == "E")
    rng = np.random.default_rng(4)
    reports = spec.mechanism.perturb(rng.integers(0, spec.domain_size, 500), rng)
    a = decode_round(spec, reports, 2000)
    b = decode_support(spec, *support_counts(spec, reports), 2000)
    assert np.array_equal(a.counts, b.counts) and np.array_equal(a.std_errors, b.std_errors) and a.n == b.n == 500
    with pytest.raises(ValidationError, match="support"):
        decode_support(spec, np.zeros(3), 500, 2000)


def test_a_round_mechanism_outside_the_candidates_is_refused():
    with pytest.raises(ValidationError, match="mechanism"):
        RoundSpec(0, 0, 4, np.zeros((1, 0), np.uint8), 1.0, "OUE")
