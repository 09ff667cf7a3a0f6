"""The discovered values as a finite attribute: the collection that follows a finished discovery.

A discovery finds the heavy hitters of a string nobody could list; once they are known, the string becomes an
ordinary categorical attribute whose values are the discovered ones and an *other* bucket for every value that was
not discovered, and a later collection asks it with E or an oracle like any other (so every query kind works on
it). :func:`finite_collection` writes that collection's JSON from the discovery's schema and its results;
:func:`finite_values` maps a device's strings to that attribute's values the way the discovery saw them: each is
encoded and truncated as the discovery's encoding does (:class:`~.encoding.StringEncoding`), so a value longer than
``max_length`` lands in the bucket of its discovered prefix, and a value outside the alphabet, or not discovered,
in the other bucket.

The follow-up collection costs its own ε (a device reports again); its name, ε and lifecycle are the operator's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ValidationError
from ..schema import Schema
from .collection import DiscoverySchema

__all__ = ["OTHER", "finite_collection", "finite_values"]

#: The other bucket's value (made distinct from every discovered value by prefixing "(" and suffixing ")").
OTHER = "other"


def _other_label(values: Sequence[str]) -> str:
    label = OTHER
    while label in values:
        label = f"({label})"
    return label


def finite_collection(discovery: DiscoverySchema, values: Sequence[str], *, name: str,
                      epsilon: float | None = None) -> dict[str, Any]:
    """The JSON of a collection ``name`` whose private attribute is the discovery's string as a categorical
    attribute (the discovered ``values``, in their order, then the other bucket, the last value), with the
    discovery's public attributes and its ε unless ``epsilon`` is given; checked by :class:`Schema`."""
    found = list(dict.fromkeys(str(v) for v in values))
    if not found:
        raise ValidationError("values", "at least one discovered value", "the discovery found none")
    attributes = [a.to_json() for a in discovery.attributes]
    attributes.insert(discovery.position, {"name": discovery.word, "type": "categorical",
                                           "values": [*found, _other_label(found)]})
    out = {"name": name, "epsilon": discovery.epsilon if epsilon is None else epsilon, "attributes": attributes}
    Schema.from_json(out)  # a legal collection (names, sizes, ε)
    return out


def finite_values(discovery: DiscoverySchema, schema: Schema, values: Sequence[str]) -> list[str]:
    """The values of the finite attribute (``schema``'s attribute named as the discovery's string, its last value
    the other bucket) of a device's strings ``values`` (module docstring)."""
    attribute = schema.attribute(discovery.word)
    levels = list(getattr(attribute, "values", ()))
    if len(levels) < 2:
        raise ValidationError("schema", f"a categorical attribute {discovery.word!r} of discovered values and the "
                              "other bucket (finite_collection)", "not found")
    known, other = set(levels[:-1]), levels[-1]
    out: list[str] = []
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise ValidationError("values", "strings", f"got {type(value).__name__}", i)
        try:
            seen: str | None = discovery.encoding.decode(discovery.encoding.encode([value]))[0]
        except ValidationError:        # outside the alphabet (or U+0000): never discovered
            seen = None
        out.append(seen if seen is not None and seen in known else str(other))
    return out
