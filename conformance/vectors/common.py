"""Notation shared by every vector file: exact floats and integers in JSON, schema objects, the worked example."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from ldpsynth.shared.errors import ValidationError

FORMAT = "ldpsynth.conformance/1"


def float_bits(x: float) -> str:
    """The IEEE-754 binary64 bit pattern of ``x`` as 16 hex digits (most significant first)."""
    return struct.pack(">d", x).hex()


def exact_float(x: float) -> dict[str, Any]:
    """A float three ways: the JSON number (shortest round trip), its bits, its hex literal."""
    return {"value": x, "bits": float_bits(x), "hex": x.hex()}


def dec(values: Any) -> Any:
    """Integers (or lists of them) as decimal strings: exact in every JSON reader."""
    if isinstance(values, (list, tuple, np.ndarray)):
        return [dec(v) for v in values]
    return str(int(values))


def attribute(name: str, kind: str, public: bool = False, **fields: Any) -> dict[str, Any]:
    """An attribute object of a schema (docs/contract.md §2)."""
    return {"name": name, "type": kind, **fields, **({"public": True} if public else {})}


def schema_doc(name: str, *attributes: dict[str, Any], epsilon: float = 1.0) -> dict[str, Any]:
    """A schema object (docs/contract.md §2) of ``attributes``."""
    return {"name": name, "epsilon": epsilon, "attributes": list(attributes)}


WORKED_EXAMPLE = schema_doc("demo",
                            attribute("region", "categorical", True, values=["north", "south"]),
                            attribute("age", "integer", min=18, max=20),
                            attribute("smoker", "binary"),
                            attribute("score", "continuous", lo=0.0, hi=1.0, bits=2))


def field_of(action: Callable[..., object], *args: Any) -> tuple[str, int | None]:
    """The field and position of the ValidationError that ``action(*args)`` raises."""
    try:
        action(*args)
    except ValidationError as exc:
        return exc.field, exc.position
    raise AssertionError("expected a ValidationError")


def legal_of(action: Callable[..., object], *args: Any) -> str:
    """The legal range that the ValidationError raised by ``action(*args)`` states."""
    try:
        action(*args)
    except ValidationError as exc:
        return exc.legal
    raise AssertionError("expected a ValidationError")
