"""A collection's lifecycle in its schema: opens, closes, min_batch; what is refused, naming the field."""

from __future__ import annotations

import pytest

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import SchemaError
from ldpsynth.shared.lifecycle import CLOSED, NOT_OPEN, OPEN, Lifecycle, format_time, parse_time
from ldpsynth.shared.schema import Schema

BASE = {"name": "r", "epsilon": 1.0, "attributes": [{"name": "rating", "type": "integer", "min": 1, "max": 5}]}
OPENS, CLOSES = 1_796_083_200, 1_798_761_600  # 2026-12-01, 2027-01-01 (UTC)


def test_the_schema_and_the_card_carry_the_lifecycle_in_utc():
    schema = Schema.from_json({**BASE, "opens": "2026-12-01T01:00:00+01:00", "closes": "2027-01-01T00:00:00Z",
                               "min_batch": 25})
    assert (schema.opens, schema.closes, schema.min_batch) == (OPENS, CLOSES, 25)
    assert schema.to_json()["opens"] == "2026-12-01T00:00:00Z" and Schema.from_json(schema.dumps()) == schema
    card = MechanismCard.for_schema(schema)
    assert MechanismCard.from_json(card.dumps()) == card
    assert "opens" not in Schema.from_json(BASE).to_json() and "min_batch" not in Schema.from_json(BASE).to_json()


def test_the_states_at_their_boundaries():
    life = Lifecycle(OPENS, CLOSES)
    assert [life.state(t) for t in (OPENS - 1, OPENS, CLOSES - 1, CLOSES)] == [NOT_OPEN, OPEN, OPEN, CLOSED]
    assert Lifecycle().state(0) == OPEN and Lifecycle(closes=CLOSES).state(0) == OPEN
    assert life.refusal("r", OPENS) is None
    assert "opens at 2026-12-01T00:00:00Z (opens)" in life.refusal("r", OPENS - 1)
    assert "closed at 2027-01-01T00:00:00Z (closes)" in life.refusal("r", CLOSES)
    assert parse_time(format_time(OPENS), "opens") == OPENS


@pytest.mark.parametrize("fields, field, legal", [
    ({"opens": "2026-12-01"}, "opens", "RFC 3339"),
    ({"opens": "2026-12-01T00:00:00"}, "opens", "time zone"),
    ({"closes": "2026-12-01T00:00:00.250Z"}, "closes", "whole seconds"),
    ({"closes": 1796083200}, "closes", "RFC 3339"),
    ({"opens": "2026-13-01T00:00:00Z"}, "opens", "RFC 3339"),
    ({"opens": "2027-01-01T00:00:00Z", "closes": "2026-12-01T00:00:00Z"}, "closes", "after opens"),
    ({"opens": "2026-12-01T00:00:00Z", "closes": "2026-12-01T00:00:00Z"}, "closes", "after opens"),
    ({"min_batch": 0}, "min_batch", "[1, 1000000000000]"),
    ({"min_batch": 2.5}, "min_batch", "[1, 1000000000000]"),
    ({"window": 3600}, "schema", "unknown fields ['window']"),
])
def test_a_bad_lifecycle_is_refused_naming_the_field(fields, field, legal):
    with pytest.raises(SchemaError) as caught:
        Schema.from_json({**BASE, **fields})
    assert caught.value.field == field and legal in str(caught.value)
