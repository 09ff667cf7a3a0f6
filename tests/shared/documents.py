"""Bad JSON documents for the card and schema tests: a good one with fields replaced or removed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The value of a change that removes the field.
DROP = object()


def replace_fields(doc: dict[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``doc``, changed in place: each field of ``changes`` set to its value, or removed when it is :data:`DROP`."""
    for key, value in changes.items():
        if value is DROP:
            doc.pop(key)
        else:
            doc[key] = value
    return doc
