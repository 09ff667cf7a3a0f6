"""JSON from users, parsed within limits: the one JSON parser of every file and message we are given.

Python's :func:`json.loads` has two failure modes that are not JSON errors: arrays or objects
nested about 1,000 deep exhaust the interpreter's recursion limit (``RecursionError``), and an
integer of more than 4,300 digits exceeds ``sys.get_int_max_str_digits()`` (``ValueError``);
a number such as ``1e400`` silently becomes ``inf``. :func:`loads` refuses all three up front
with a :class:`~ldpsynth.shared.errors.ValidationError` naming the field and the limit, so a
bad document is INVALID_ARGUMENT over gRPC and one line with exit 2 on the command line, never
INTERNAL or a traceback.

Limits (every format of the project, :mod:`~ldpsynth.shared.schema`, the mechanism card, the
query batches of :mod:`~ldpsynth.shared.queries.json_form` and the tokens file, nests at most 5 deep):

* :data:`MAX_JSON_DEPTH` levels of arrays and objects;
* integers of at most :data:`MAX_INT_DIGITS` digits: every such integer is a finite float64
  (:math:`10^{308} - 1 < 1.797 \\times 10^{308}`), the largest value any field accepts;
* numbers with a fraction or exponent must be finite float64 (no overflow to ``inf``).
  The non-standard literals ``NaN`` and ``Infinity`` are still parsed (the fields that need
  finite numbers refuse them by name).

What we print is strict RFC 8259 (:func:`dumps`): a number that is not finite (a bound that does not apply,
an answer with no rows) is written as ``null``, never as the non-standard ``NaN`` or ``Infinity``.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from ldpsynth.shared.errors import ValidationError

__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_INT_DIGITS",
    "nesting_depth",
    "loads",
    "dumps",
    "read_text",
    "load_file",
]

#: Deepest nesting of arrays and objects accepted (well under the interpreter's recursion limit).
MAX_JSON_DEPTH = 64
#: Most digits of a JSON integer (every integer of this many digits is a finite float64).
MAX_INT_DIGITS = 308

_ESCAPE = re.compile(r"\\.", re.DOTALL)
#: Every byte except the quote and the brackets: deleted before the nesting is measured.
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_QUOTE, _OPEN_ARRAY, _CLOSE_ARRAY, _OPEN_OBJECT, _CLOSE_OBJECT = b'"[]{}'


def nesting_depth(text: str) -> int:
    """Deepest nesting of arrays and objects in ``text`` (brackets inside strings not counted).

    Escapes are dropped first (inside a JSON string a backslash always starts a two-character
    escape), then every byte but quotes and brackets; a bracket counts when an even number of
    quotes precede it. Vectorised (its cost beside json.loads': benchmarks/results/).
    """
    bare = _ESCAPE.sub("", text) if "\\" in text else text
    marks = np.frombuffer(bare.encode("utf-8", "surrogatepass").translate(None, _NOT_STRUCTURE), np.uint8)
    outside = (np.cumsum(marks == _QUOTE) & 1) == 0
    steps = (marks == _OPEN_ARRAY) | (marks == _OPEN_OBJECT)
    steps = steps.astype(np.int64) - ((marks == _CLOSE_ARRAY) | (marks == _CLOSE_OBJECT))
    return int(np.cumsum(np.where(outside, steps, 0)).max(initial=0))


def _parser(field: str) -> json.JSONDecoder:
    def parse_int(text: str) -> int:
        digits = len(text) - text.startswith("-")
        if digits > MAX_INT_DIGITS:
            raise ValidationError(field, f"JSON integers of at most {MAX_INT_DIGITS} digits",
                                  f"an integer of {digits} digits")
        return int(text)

    def parse_float(text: str) -> float:
        value = float(text)
        if math.isinf(value):
            raise ValidationError(field, "JSON numbers within the float64 range (|x| <= 1.7976931348623157e308)",
                                  "a number that overflows float64")
        return value

    return json.JSONDecoder(parse_int=parse_int, parse_float=parse_float)


def loads(text: str | bytes, field: str, expected: str) -> Any:
    """Parse the JSON ``text`` (bytes must be UTF-8) within the limits of this module.

    Raises :class:`ValidationError` naming ``field``: with legal range ``expected`` (e.g. "a JSON
    array of query objects") when the text is not UTF-8 or not JSON, with the limit when the
    nesting or a number exceeds it.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(field, expected, f"not UTF-8 (byte {exc.start})") from None
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH:  # else the nesting cannot exceed the limit
        depth = nesting_depth(text)
        if depth > MAX_JSON_DEPTH:
            raise ValidationError(field, f"JSON nested at most {MAX_JSON_DEPTH} levels deep", f"nested {depth} deep")
    try:
        return _parser(field).decode(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(field, expected, f"invalid JSON ({exc.msg} at line {exc.lineno})") from None


def read_text(path: str | os.PathLike[str], field: str) -> str:
    """The UTF-8 text of the file at ``path``; a :class:`ValidationError` naming ``field`` and the
    file when it cannot be read or is not UTF-8."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValidationError(field, "a readable UTF-8 file", f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ValidationError(field, "a readable UTF-8 file", f"{path}: not UTF-8 (byte {exc.start})") from None


def load_file(path: str | Path, field: str, expected: str) -> Any:
    """The JSON document in the file at ``path`` (:func:`read_text`, then :func:`loads`); every error
    names ``field`` and the file."""
    text = read_text(path, field)
    try:
        return loads(text, field, expected)
    except ValidationError as exc:
        raise ValidationError(exc.field, exc.legal, f"{path}: {exc.problem}") from None


def _finite_or_null(value: Any) -> Any:
    """``value`` with every float that is not finite replaced by ``None``, through lists, tuples and dicts."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_null(v) for v in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """``value`` as strict JSON text (RFC 8259): non-finite floats become ``null`` (module docstring);
    ``options`` go to :func:`json.dumps` (``indent``, ``sort_keys``)."""
    return json.dumps(_finite_or_null(value), allow_nan=False, **options)
