"""The discovered values as a finite attribute (ldpsynth.shared.heavy_hitters.finite)."""

from __future__ import annotations

import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.heavy_hitters.collection import DiscoverySchema
from ldpsynth.shared.heavy_hitters.finite import finite_collection, finite_values
from ldpsynth.shared.schema import Schema

WORDS = DiscoverySchema.from_json({
    "name": "words", "epsilon": 2.0,
    "attributes": [{"name": "app", "type": "categorical", "values": ["a", "b"], "public": True},
                   {"name": "word", "type": "string", "max_length": 4, "alphabet": "abcdefghijklmnopqrstuvwxyz"}],
    "discovery": {"first_bits": 10, "fragment_bits": 10, "top_k": 3, "salt": "11" * 16,
                  "min_reports_per_round": 10}})


def test_the_follow_up_collection_keeps_the_public_attributes_and_adds_the_other_bucket():
    follow = finite_collection(WORDS, ["hell", "abc", "abc"], name="words-values")
    schema = Schema.from_json(follow)
    assert [a.name for a in schema.attributes] == ["app", "word"] and schema.epsilon == 2.0
    assert schema.attribute("word").values == ("hell", "abc", "other") and schema.attribute("app").public
    taken = Schema.from_json(finite_collection(WORDS, ["other", "(other)"], name="w", epsilon=1.0))
    assert taken.attribute("word").values == ("other", "(other)", "((other))") and taken.epsilon == 1.0
    with pytest.raises(ValidationError, match="values"):
        finite_collection(WORDS, [], name="w")


def test_a_devices_string_is_seen_as_the_discovery_saw_it():
    schema = Schema.from_json(finite_collection(WORDS, ["hell", "abc"], name="words-values"))
    # "hello" truncates to "hell" (max_length 4); "ABC" is outside the alphabet; "zzz" was not discovered
    assert finite_values(WORDS, schema, ["hello", "abc", "ABC", "zzz", "hell"]) == \
        ["hell", "abc", "other", "other", "hell"]
    with pytest.raises(ValidationError, match="values") as err:
        finite_values(WORDS, schema, ["abc", 7])  # type: ignore[list-item]
    assert err.value.position == 1
    plain = Schema.from_json({"name": "p", "epsilon": 1.0, "attributes": [{"name": "word", "type": "binary"}]})
    with pytest.raises(ValidationError, match="schema"):
        finite_values(WORDS, plain, ["abc"])
