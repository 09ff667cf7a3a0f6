"""The attribute kinds of a collection's schema: one column each, its values encoded as codes ``0 .. size-1``.

An attribute has a name, a type and a flag saying whether it is *public* (sent in clear, e.g. the movie
a rating is about) or *private* (perturbed by mechanism E on the device): categorical (listed strings,
code = position), binary (0/1), integer in ``[min, max]`` (code = value - min), continuous, or numeric
(:class:`NumericAttribute`: a number on a declared range, collected by a numeric mechanism, HM or SW).
:class:`~ldpsynth.shared.schema.Schema` combines them in mixed radix.

Continuous attributes on ``[lo, hi]`` are discretised to ``2**bits`` buckets as in WYZ
§V-A (each row is rounded down to the lower edge of its bucket, so
:math:`|x - \\hat x| \\le (hi - lo) / 2^{bits}`); :func:`bits_for_rows` picks ``bits`` from the
expected number of rows by the paper's rule :math:`2^{2k} = \\sqrt{n}`.

Error messages name the attribute, the position and the legal range, never the value itself:
a private value must not end up in a server log.
"""

from __future__ import annotations

import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ldpsynth.shared.errors import SchemaError, ValidationError, schema_field
from ldpsynth.shared.numeric.levels.declared import NumericLevels
from ldpsynth.shared.numeric.scale import NumericRange
from ldpsynth.shared.validation import check_bool, check_choice, check_codes, check_int, check_real

__all__ = [
    "MAX_DOMAIN_SIZE",
    "MAX_BITS",
    "MAX_CATEGORIES",
    "bits_for_rows",
    "Attribute",
    "CategoricalAttribute",
    "BinaryAttribute",
    "IntegerAttribute",
    "ContinuousAttribute",
    "NUMERIC_MECHANISMS",
    "NUMERIC_CODE_BITS",
    "NumericAttribute",
    "attribute_from_json",
]

#: Largest domain we encode (an attribute's, the public one): codes, and report codes on the wire, must
#: fit an int64 with room to spare. (The private domain is bounded further by
#: ``schema.MAX_BATCH_WEIGHTS``, and mechanism E's exact sampler by ``mechanism.MAX_SAMPLER_DOMAIN_SIZE``.)
MAX_DOMAIN_SIZE = 2**62
#: Largest number of buckets of a continuous attribute.
MAX_BITS = 24
#: Largest number of listed values of a categorical attribute.
MAX_CATEGORIES = 1 << 20
#: The mechanisms of a numeric attribute: HM (Hybrid Mechanism, means and sums; the default) and SW (Square
#: Wave, distributions and quantiles).
NUMERIC_MECHANISMS = ("HM", "SW")
#: A numeric attribute's code is its value on [-1, 1] in fixed point: ``round((x + 1) 2^NUMERIC_CODE_BITS)``.
NUMERIC_CODE_BITS = 52


def bits_for_rows(n: int) -> int:
    """Bits k of a continuous attribute for an expected ``n`` rows, by :math:`2^{2k} = \\sqrt n`.

    WYZ §V-A (the step before Prop. 1) balances discretisation error
    :math:`L/(c 2^k)` against estimation error :math:`O(2^k/\\sqrt n)` with :math:`2^{2k}=\\sqrt n`,
    i.e. :math:`k = \\log_2(n) / 4`, rounded to the nearest integer and at least 1.

    >>> bits_for_rows(65536)
    4
    """
    return int(min(MAX_BITS, max(1, round(math.log2(check_int(n, "n", 1)) / 4))))


def _as_array(values: npt.ArrayLike) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    return arr


def _first_bad(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


@dataclass(frozen=True)
class Attribute(ABC):
    """One column of a collection. ``size`` values, encoded as codes ``0 .. size-1``."""

    name: str
    public: bool = False

    @property
    @abstractmethod
    def size(self) -> int:
        """Number of distinct codes."""

    @property
    @abstractmethod
    def legal_range(self) -> str:
        """Human-readable legal range of a raw value (used in error messages)."""

    @abstractmethod
    def _encode(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(codes, bad)``: codes of the values and a mask of illegal entries."""

    @abstractmethod
    def decode(self, codes: npt.ArrayLike) -> np.ndarray:
        """Raw values (bucket lower edges for continuous attributes) of the given codes."""

    @abstractmethod
    def _type_json(self) -> dict[str, Any]:
        """The type-specific JSON fields."""

    def encode(self, values: npt.ArrayLike, *, offset: int = 0) -> np.ndarray:
        """Encode a whole column to int64 codes; raise naming the first bad position.

        ``offset`` is added to the position reported in errors (for chunked input).
        """
        arr = _as_array(values)
        try:
            codes, bad = self._encode(arr)
            first = _first_bad(bad) if bad.any() else None
        except (TypeError, ValueError):
            # A column that cannot even be converted: find the first bad cell one by one.
            codes, first = None, self._first_unconvertible(arr)
        # Raised outside the handler: `raise ... from None` would still keep the conversion error,
        # which quotes the raw value, in __context__.
        if first is not None:
            raise ValidationError(self.name, self.legal_range, "illegal value", offset + first)
        if codes is None:
            raise ValidationError(self.name, self.legal_range, "illegal values")
        return codes.astype(np.int64, copy=False)

    def _first_unconvertible(self, arr: np.ndarray) -> int | None:
        for i, v in enumerate(arr):
            try:
                _, b = self._encode(np.asarray([v]))
            except (TypeError, ValueError):
                return i
            if b[0]:
                return i
        return None

    def check_codes(self, codes: npt.ArrayLike, *, field_name: str | None = None) -> np.ndarray:
        """Check that already-encoded codes lie in ``[0, size)``."""
        return check_codes(codes, field_name or self.name, self.size)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        out.update(self._type_json())
        out["public"] = self.public
        return out


@dataclass(frozen=True)
class CategoricalAttribute(Attribute):
    """Listed values (strings); code = position in the list."""

    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not (2 <= len(self.values) <= MAX_CATEGORIES):
            raise SchemaError(f"attributes[{self.name}].values", f"2 to {MAX_CATEGORIES} distinct strings",
                              f"got {len(self.values)}")
        if len(set(self.values)) != len(self.values):
            raise SchemaError(f"attributes[{self.name}].values", "distinct strings", "duplicates")
        object.__setattr__(self, "_index", {v: i for i, v in enumerate(self.values)})

    @property
    def size(self) -> int:
        return len(self.values)

    @property
    def legal_range(self) -> str:
        shown = ", ".join(repr(v) for v in self.values[:8])
        more = ", ..." if len(self.values) > 8 else ""
        return f"one of {{{shown}{more}}} ({len(self.values)} values)"

    def _encode(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        index = self._index  # type: ignore[attr-defined]
        codes = np.fromiter((index.get(str(v), -1) for v in values.tolist()), dtype=np.int64, count=len(values))
        return codes, codes < 0

    def decode(self, codes: npt.ArrayLike) -> np.ndarray:
        return np.asarray(self.values, dtype=object)[self.check_codes(codes)]

    def _type_json(self) -> dict[str, Any]:
        return {"type": "categorical", "values": list(self.values)}


_TRUE = {"1", "true", "True", "TRUE", "yes"}
_FALSE = {"0", "false", "False", "FALSE", "no"}


@dataclass(frozen=True)
class BinaryAttribute(Attribute):
    """0/1 (also accepts booleans and the strings true/false, yes/no)."""

    @property
    def size(self) -> int:
        return 2

    @property
    def legal_range(self) -> str:
        return "0 or 1"

    def _encode(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if values.dtype.kind in "biuf":
            v = values.astype(np.float64)
            bad = ~((v == 0) | (v == 1))
            return np.where(bad, 0, v).astype(np.int64), bad
        strings = [str(x).strip() for x in values.tolist()]
        codes = np.fromiter((1 if s in _TRUE else 0 if s in _FALSE else -1 for s in strings), np.int64, len(strings))
        return np.maximum(codes, 0), codes < 0

    def decode(self, codes: npt.ArrayLike) -> np.ndarray:
        return self.check_codes(codes)

    def _type_json(self) -> dict[str, Any]:
        return {"type": "binary"}


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
#: Every integer of absolute value <= 2^53 is a float64; beyond, floats skip integers.
_FLOAT_EXACT_INT = 2**53


def _exact_int(value: object) -> int | None:
    """``value`` as an exact int if it is an integer (a number or a numeric string), else None."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return int(f) if math.isfinite(f) and f.is_integer() else None
    text = str(value).strip()
    try:
        return int(text)
    except ValueError:
        pass
    try:
        f = float(text)
    except ValueError:
        return None
    return int(f) if math.isfinite(f) and f.is_integer() else None


def _to_float(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind in "biuf":
        return values.astype(np.float64)
    return np.array([float(str(v).strip()) for v in values.tolist()], dtype=np.float64)


@dataclass(frozen=True)
class IntegerAttribute(Attribute):
    """Integers in ``[min, max]``; code = value - min."""

    min: int = 0
    max: int = 1

    def __post_init__(self) -> None:
        with schema_field():
            for key in ("min", "max"):  # codes and decoded values are int64
                check_int(getattr(self, key), f"attributes[{self.name}].{key}", _INT64_MIN, _INT64_MAX,
                          legal="an integer in [-2^63, 2^63 - 1]")
        if not (self.min < self.max) or self.max - self.min + 1 > MAX_DOMAIN_SIZE:
            raise SchemaError(f"attributes[{self.name}]",
                              f"integers with min < max and at most {MAX_DOMAIN_SIZE} values",
                              f"got min={self.min}, max={self.max}")

    @property
    def size(self) -> int:
        return int(self.max - self.min + 1)

    @property
    def legal_range(self) -> str:
        return f"an integer in [{self.min}, {self.max}]"

    def _encode(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = int(self.min), int(self.max)
        kind = values.dtype.kind
        if kind in "biu":
            # Compare before casting: a uint64 above 2^63 - 1 must not wrap around into [min, max].
            over = values > _INT64_MAX if kind == "u" else np.zeros(values.shape, bool)
            v = np.where(over, 0, values).astype(np.int64)
            bad = over | (v < lo) | (v > hi)
            return np.where(bad, lo, v) - lo, bad
        if kind == "f" and -_FLOAT_EXACT_INT <= lo and hi <= _FLOAT_EXACT_INT:
            x = values.astype(np.float64)
            with np.errstate(invalid="ignore"):
                bad = ~np.isfinite(x) | (x != np.floor(x)) | (x < lo) | (x > hi)
            return np.where(bad, lo, x).astype(np.int64) - lo, bad
        # Strings, objects, or a range beyond 2^53: parse every value to an exact int. (Going through
        # float64 rounds integers above 2^53: silently wrong codes, even codes >= size.)
        ints = [_exact_int(v) for v in values.tolist()]
        bad = np.fromiter((i is None or i < lo or i > hi for i in ints), dtype=bool, count=len(ints))
        codes = np.fromiter((i - lo if i is not None and not b else 0 for i, b in zip(ints, bad.tolist())),
                            dtype=np.int64, count=len(ints))
        return codes, bad

    def decode(self, codes: npt.ArrayLike) -> np.ndarray:
        return self.check_codes(codes) + self.min

    def _type_json(self) -> dict[str, Any]:
        return {"type": "integer", "min": int(self.min), "max": int(self.max)}


@dataclass(frozen=True)
class ContinuousAttribute(Attribute):
    """Reals in ``[lo, hi]`` discretised to ``2**bits`` equal buckets (WYZ §V-A).

    .. math::  \\mathrm{code}(x) = \\min\\left(\\lfloor 2^{bits} (x - lo)/(hi - lo) \\rfloor, 2^{bits}-1\\right),
               \\qquad \\hat x = lo + \\mathrm{code} \\cdot (hi - lo) / 2^{bits}.
    """

    lo: float = 0.0
    hi: float = 1.0
    bits: int = 4

    def __post_init__(self) -> None:
        with schema_field():
            for key in ("lo", "hi"):
                check_real(getattr(self, key), f"attributes[{self.name}].{key}")
        if not float(self.lo) < float(self.hi) or not math.isfinite(float(self.hi) - float(self.lo)):
            raise SchemaError(f"attributes[{self.name}]", "lo < hi with a finite hi - lo",
                              f"got lo={self.lo}, hi={self.hi}")
        with schema_field():
            check_int(self.bits, f"attributes[{self.name}].bits", 1, MAX_BITS)
        # Distinct buckets need distinct float lower edges: the width must exceed the float resolution.
        scale = max(abs(float(self.lo)), abs(float(self.hi)), float(self.hi) - float(self.lo))
        if not self.width > 8 * math.ulp(scale):
            raise SchemaError(f"attributes[{self.name}].bits", f"an integer in [1, {MAX_BITS}] with (hi - lo)/2^bits "
                              "above 8 float ulps of max(|lo|, |hi|)", f"got {self.bits!r}")

    @property
    def size(self) -> int:
        return 1 << int(self.bits)

    @property
    def width(self) -> float:
        """Bucket width :math:`(hi - lo)/2^{bits}`."""
        return (float(self.hi) - float(self.lo)) / self.size

    @property
    def legal_range(self) -> str:
        return f"a number in [{self.lo}, {self.hi}]"

    def _encode(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = _to_float(values)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(x) | (x < self.lo) | (x > self.hi)
        x = np.where(bad, float(self.lo), x)
        scaled = np.floor((x - self.lo) / (float(self.hi) - float(self.lo)) * self.size)
        codes = np.clip(scaled, 0, self.size - 1).astype(np.int64)
        # The division can land one bucket off at a bucket edge; snap to the last bucket whose decoded
        # lower edge is <= x, so decode(encode(x)) <= x and encode(decode(c)) == c exactly.
        codes -= self._lower_edge(codes) > x
        up = np.minimum(codes + 1, self.size - 1)
        codes += (up > codes) & (self._lower_edge(up) <= x)
        return codes, bad

    def _lower_edge(self, codes: np.ndarray) -> np.ndarray:
        return float(self.lo) + codes * self.width

    def decode(self, codes: npt.ArrayLike) -> np.ndarray:
        return self._lower_edge(self.check_codes(codes))

    def _type_json(self) -> dict[str, Any]:
        return {"type": "continuous", "lo": float(self.lo), "hi": float(self.hi), "bits": int(self.bits)}


@dataclass(frozen=True)
class NumericAttribute(Attribute):
    """A number on the declared range ``[lo, hi]``, collected by the numeric mechanism ``mechanism`` (HM or SW).

    Not bucketed: the device maps a value to :math:`x = 2(v - lo)/(hi - lo) - 1 \\in [-1, 1]`
    (:class:`~ldpsynth.shared.numeric.scale.NumericRange`, which refuses NaN, infinities and values out of the
    range, never clips) and keeps it as the fixed-point code :math:`c = \\mathrm{round}((x + 1) 2^{52})`,
    :math:`0 \\le c \\le 2^{53}` (an error below :math:`2^{-53}` on [-1, 1], under the float's own
    resolution near 1). The code is what the device memoizes a report for; the numeric mechanism
    (:class:`~ldpsynth.shared.numeric.collection.NumericMechanism`) perturbs :math:`x = c/2^{52} - 1`.

    ``step`` (optional) declares the levels :math:`lo, lo + step, \\dots, hi`
    (:class:`~ldpsynth.shared.numeric.levels.NumericLevels`): a value off them is refused like one outside the
    range, and a value on level k is encoded as :math:`v_k` exactly. The mechanism is unchanged; SW's distribution is
    then fitted on the levels (docs/numeric.md, "Declared levels").
    """

    lo: float = 0.0
    hi: float = 1.0
    mechanism: str = "HM"
    step: float | None = None

    def __post_init__(self) -> None:
        where = f"attributes[{self.name}]"
        if self.public:
            raise SchemaError(f"{where}.public", "false (a numeric attribute is private: it is perturbed by its "
                              "mechanism)", "got true")
        with schema_field():
            NumericRange(self.lo, self.hi, f"{where}.range")
            check_choice(self.mechanism, f"{where}.mechanism", NUMERIC_MECHANISMS)
            if self.step is not None:
                NumericLevels(float(self.lo), float(self.hi), self.step, f"{where}.step")
        object.__setattr__(self, "lo", float(self.lo))
        object.__setattr__(self, "hi", float(self.hi))
        if self.step is not None:
            object.__setattr__(self, "step", float(self.step))

    @property
    def levels(self) -> NumericLevels | None:
        """The declared levels (``step``), or None."""
        return None if self.step is None else NumericLevels(self.lo, self.hi, self.step, self.name)

    @property
    def range(self) -> NumericRange:
        """The declared range, naming this attribute in its errors."""
        return NumericRange(self.lo, self.hi, self.name)

    @property
    def size(self) -> int:
        """Distinct codes: :math:`2^{53} + 1` fixed-point values on [-1, 1]."""
        return (2 << NUMERIC_CODE_BITS) + 1

    @property
    def legal_range(self) -> str:
        if self.step is None:
            return f"a number in [{self.lo}, {self.hi}]"
        return f"a number in [{self.lo}, {self.hi}] on the levels every {self.step} from {self.lo}"

    def _encode(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Fixed-point codes (class docstring); bad: NaN, infinite, outside ``[lo, hi]`` (never clipped) or off the
        declared levels (a value on level k is encoded as :math:`v_k`)."""
        v = _to_float(values)
        bad = ~((v >= self.lo) & (v <= self.hi))      # NaN compares False: bad
        levels = self.levels
        if levels is not None:
            k = levels.index(v)
            bad |= k < 0
            v = np.where(k < 0, v, levels.values()[np.maximum(k, 0)])
        x = self.range.to_unit(np.where(bad, self.lo, v))
        return np.rint((x + 1.0) * float(1 << NUMERIC_CODE_BITS)).astype(np.int64), bad

    def level_units(self) -> np.ndarray:
        """The declared levels on [-1, 1] as the device's mechanism reads them (through their codes); empty without
        ``step``."""
        levels = self.levels
        return np.zeros(0) if levels is None else self.unit(self.encode(levels.values()))

    def unit(self, codes: npt.ArrayLike) -> np.ndarray:
        """The values on [-1, 1] of codes (checked)."""
        return self.check_codes(codes) / float(1 << NUMERIC_CODE_BITS) - 1.0

    def decode(self, codes: npt.ArrayLike) -> np.ndarray:
        return self.range.from_unit(self.unit(codes))

    def _type_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "numeric", "range": [self.lo, self.hi], "mechanism": self.mechanism}
        if self.step is not None:
            out["step"] = self.step
        return out


def attribute_from_json(obj: Any, position: int) -> Attribute:
    """The attribute of a JSON object, the ``position``-th of a schema's ``attributes``; a
    :class:`~ldpsynth.shared.errors.SchemaError` naming the field that is missing, unknown or malformed."""
    where = f"attributes[{position}]"
    if not isinstance(obj, Mapping):
        raise SchemaError(where, "an object with name, type and its type's fields", f"got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name or not name.isidentifier():
        raise SchemaError(f"{where}.name", "a non-empty identifier (letters, digits, _)", f"got {name!r}")
    known = {"categorical": {"values"}, "binary": set(), "integer": {"min", "max"}, "continuous": {"lo", "hi", "bits"},
             "numeric": {"range", "mechanism", "step"}}
    with schema_field():
        public = check_bool(obj.get("public", False), f"attributes[{name}].public")
        kind = check_choice(obj.get("type"), f"attributes[{name}].type", known)
    extra = set(obj) - {"name", "type", "public"} - known[kind]
    if extra:
        raise SchemaError(f"attributes[{name}]", f"fields name, type, public, {', '.join(sorted(known[kind]))}",
                          f"unknown fields {sorted(extra)}")
    optional = {"continuous": {"bits"}, "numeric": {"mechanism", "step"}}.get(kind, set())
    missing = known[kind] - set(obj) - optional
    if missing:
        raise SchemaError(f"attributes[{name}]", f"the fields {sorted(known[kind])}", f"missing {sorted(missing)}")
    if kind == "categorical":
        values = obj["values"]
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise SchemaError(f"attributes[{name}].values", "a list of strings", "wrong type")
        return CategoricalAttribute(name, public, tuple(values))
    if kind == "binary":
        return BinaryAttribute(name, public)
    if kind == "integer":
        return IntegerAttribute(name, public, obj["min"], obj["max"])
    if kind == "numeric":
        bounds = obj["range"]
        if not isinstance(bounds, list) or len(bounds) != 2 or \
                not all(isinstance(b, numbers.Real) and not isinstance(b, bool) for b in bounds):
            raise SchemaError(f"attributes[{name}].range", "a list [lo, hi] of two finite numbers, lo < hi",
                              "wrong type")
        step = obj.get("step")
        if "step" in obj and (not isinstance(step, numbers.Real) or isinstance(step, bool)):
            raise SchemaError(f"attributes[{name}].step", "a number > 0 with (hi - lo)/step an integer in [1, 255]",
                              "wrong type")
        return NumericAttribute(name, public, bounds[0], bounds[1], obj.get("mechanism", "HM"),
                                None if step is None else float(step))
    return ContinuousAttribute(name, public, obj["lo"], obj["hi"], obj.get("bits", 4))
