"""The fields every collection JSON has (an ordinary schema's, a wide collection's): name, ε, attributes, the
shuffle block, the lifecycle and the minimum batch, parsed and written in one place."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from ldpsynth.shared.attributes import Attribute, attribute_from_json
from ldpsynth.shared.errors import SchemaError, schema_field
from ldpsynth.shared.lifecycle import format_time, parse_time
from ldpsynth.shared.shuffle_spec import ShuffleSpec
from ldpsynth.shared.validation import check_epsilon

__all__ = ["collection_fields_json", "parse_collection_fields"]


def parse_collection_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The fields every collection JSON has (a :class:`~ldpsynth.shared.schema.Schema`'s and a wide schema's),
    parsed: ``name`` (not checked here), ``epsilon``, ``attributes``, ``shuffle``, ``opens``, ``closes``,
    ``min_batch``, as keyword arguments of the constructors; a :class:`SchemaError` naming the field that is missing
    or malformed."""
    attrs = obj.get("attributes")
    if not isinstance(attrs, list) or not attrs:
        raise SchemaError("attributes", "a non-empty list of attribute objects", "missing or empty")
    if "epsilon" not in obj:
        raise SchemaError("epsilon", "a finite number > 0", "missing")
    with schema_field():
        epsilon = check_epsilon(obj["epsilon"], "epsilon")
    shuffle = ShuffleSpec.from_json(obj["shuffle"]) if "shuffle" in obj else None
    opens, closes = (parse_time(obj[key], key) if key in obj else None for key in ("opens", "closes"))
    return {"name": cast(str, obj.get("name")), "epsilon": epsilon,
            "attributes": tuple(attribute_from_json(a, i) for i, a in enumerate(attrs)), "shuffle": shuffle,
            "opens": opens, "closes": closes, "min_batch": obj.get("min_batch", 1)}


def collection_fields_json(name: str, epsilon: float, attributes: Sequence[Attribute], shuffle: ShuffleSpec | None,
                           opens: int | None, closes: int | None, min_batch: int) -> dict[str, Any]:
    """The JSON of the fields :func:`parse_collection_fields` reads (the optional ones only when set)."""
    out: dict[str, Any] = {"name": name, "epsilon": epsilon, "attributes": [a.to_json() for a in attributes]}
    if shuffle is not None:
        out["shuffle"] = shuffle.to_json()
    if opens is not None:
        out["opens"] = format_time(opens)
    if closes is not None:
        out["closes"] = format_time(closes)
    if min_batch != 1:
        out["min_batch"] = min_batch
    return out
