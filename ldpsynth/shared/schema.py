"""Collection schema and the mixed-radix encoding of the private domain D.

A collection's schema is its public contract: attributes with a name, a type and a flag saying
whether the attribute is *public* (sent in clear, e.g. the movie a rating is about) or *private*
(perturbed by mechanism E on the device). The private domain is the product of the private
attributes' value sets,

.. math::  D = A_1 \\times \\dots \\times A_m, \\qquad |D| = \\prod_j |A_j|,

and a private row :math:`(a_1, \\dots, a_m)` is encoded in mixed radix (first attribute most
significant, like C order): :math:`\\mathrm{code} = \\sum_j a_j \\prod_{l > j} |A_l|`.
Public attributes are encoded the same way into a *public key*.

Continuous attributes on ``[lo, hi]`` are discretised to ``2**bits`` buckets as in WYZ
§V-A (each row is rounded down to the lower edge of its bucket, so
:math:`|x - \\hat x| \\le (hi - lo) / 2^{bits}`); :func:`bits_for_rows` picks ``bits`` from the
expected number of rows by the paper's rule :math:`2^{2k} = \\sqrt{n}`.

Error messages name the attribute, the position and the legal range, never the value itself:
a private value must not end up in a server log.
"""

from __future__ import annotations

import functools
import json
import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from ldpsynth.shared import jsonio
from ldpsynth.shared.errors import SchemaError, ValidationError
from ldpsynth.shared.lifecycle import Lifecycle, format_time, parse_time
from ldpsynth.shared.mechanisms.registry import MECHANISMS, max_domain_size
from ldpsynth.shared.validation import check_bool, check_choice, check_codes, check_epsilon, check_int, check_real

__all__ = [
    "MAX_DOMAIN_SIZE",
    "MAX_BATCH_WEIGHTS",
    "MAX_BITS",
    "bits_for_rows",
    "Attribute",
    "CategoricalAttribute",
    "BinaryAttribute",
    "IntegerAttribute",
    "ContinuousAttribute",
    "Schema",
]

#: Largest domain we encode (an attribute's, the public one): codes, and report codes on the wire, must
#: fit an int64 with room to spare. (The private domain is bounded further by MAX_BATCH_WEIGHTS, and
#: mechanism E's exact sampler by ``mechanism.MAX_SAMPLER_DOMAIN_SIZE``.)
MAX_DOMAIN_SIZE = 2**62
#: Most weights (float64, held in memory) of one batch of queries: the query service refuses a larger
#: batch (RESOURCE_EXHAUSTED). Every query holds at least one weight per value of the private domain
#: D (a packed linear query exactly |D|, JSON queries at least |D|, at most 2^24), so a schema with a
#: larger |D| could not be queried at all: it is refused here, with this same limit. (A packed row of
#: |D| float64 weights must also fit in one message, at most 2^31 - 1 bytes: the same bound, give or
#: take the message's envelope; the default --max-message-bytes, 64 MiB, allows about 2^23.)
MAX_BATCH_WEIGHTS = 1 << 28
#: Largest number of buckets of a continuous attribute.
MAX_BITS = 24
#: Largest number of listed values of a categorical attribute.
MAX_CATEGORIES = 1 << 20
#: Largest minimum batch of a shuffled collection (the accountant's largest number of reports).
MAX_MIN_BATCH = 10**12
#: Most reports one device may send to a shuffled collection (the accountant composes at most this many).
MAX_ROWS_PER_DEVICE = 10**6
#: Who runs the shuffler of a shuffled collection (``ShuffleSpec.shuffler``).
SHUFFLERS = ("aggregator-operator", "independent")


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


@contextmanager
def _schema_field() -> Iterator[None]:
    """Checks of a field of the schema itself: their :class:`ValidationError` is a :class:`SchemaError`."""
    try:
        yield
    except ValidationError as exc:
        raise SchemaError(exc.field, exc.legal, exc.problem, exc.position) from None


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
        with _schema_field():
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
        with _schema_field():
            for key in ("lo", "hi"):
                check_real(getattr(self, key), f"attributes[{self.name}].{key}")
        if not float(self.lo) < float(self.hi) or not math.isfinite(float(self.hi) - float(self.lo)):
            raise SchemaError(f"attributes[{self.name}]", "lo < hi with a finite hi - lo",
                              f"got lo={self.lo}, hi={self.hi}")
        with _schema_field():
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


def _radix_weights(sizes: Sequence[int]) -> np.ndarray:
    """Place values of a mixed-radix number, first digit most significant."""
    weights = [1] * len(sizes)
    for j in range(len(sizes) - 2, -1, -1):
        weights[j] = weights[j + 1] * int(sizes[j + 1])
    return np.asarray(weights, dtype=np.int64)


def _attribute_from_json(obj: Any, position: int) -> Attribute:
    where = f"attributes[{position}]"
    if not isinstance(obj, Mapping):
        raise SchemaError(where, "an object with name, type and its type's fields", f"got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name or not name.isidentifier():
        raise SchemaError(f"{where}.name", "a non-empty identifier (letters, digits, _)", f"got {name!r}")
    known = {"categorical": {"values"}, "binary": set(), "integer": {"min", "max"}, "continuous": {"lo", "hi", "bits"}}
    with _schema_field():
        public = check_bool(obj.get("public", False), f"attributes[{name}].public")
        kind = check_choice(obj.get("type"), f"attributes[{name}].type", known)
    extra = set(obj) - {"name", "type", "public"} - known[kind]
    if extra:
        raise SchemaError(f"attributes[{name}]", f"fields name, type, public, {', '.join(sorted(known[kind]))}",
                          f"unknown fields {sorted(extra)}")
    missing = known[kind] - set(obj) - ({"bits"} if kind == "continuous" else set())
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
    return ContinuousAttribute(name, public, obj["lo"], obj["hi"], obj.get("bits", 4))


@dataclass(frozen=True)
class ShuffleSpec:
    """A shuffled collection's central guarantee: the schema's optional ``"shuffle"`` block.

    Reports reach the aggregator through a shuffler (design §9); then mechanism E at the local ε0 is
    (ε, δ)-DP centrally, ε computed from the number of reports by ``ldpsynth.shared.amplification``
    (docs/shuffle-accountant.md; docs/contract.md §2 says how the fields are used).

    ``delta``
        δ of the central guarantee, in (0, 1) (well below 1/n is the usual choice).
    ``min_batch``
        The fewest reports from which anything is released, in [1, 10^12]: a query whose rows
        (per public-key group, where the query groups by public attributes) or an export whose
        public-key groups hold fewer reports is refused (FAILED_PRECONDITION), since the shuffle of
        a small group amplifies little.
    ``rows_per_device``
        The most reports one device sends to the collection, in [1, 10^6] (default 1); the central
        guarantee composes over them (``composed_epsilon``). The device's ledger charges ε0 per
        report, so a device's budget divided by ε0 bounds it too.
    ``shuffler``
        ``"aggregator-operator"`` (default: the central guarantee holds against analysts only) or
        ``"independent"`` (the shuffler is run by a party that does not collude with the
        aggregator's operator: it holds against the operator too).
    """

    delta: float
    min_batch: int
    rows_per_device: int = 1
    shuffler: str = SHUFFLERS[0]

    def __post_init__(self) -> None:
        with _schema_field():
            object.__setattr__(self, "delta", check_real(self.delta, "shuffle.delta", low=0.0, high=1.0,
                                                         low_open=True, high_open=True))
            object.__setattr__(self, "min_batch", check_int(self.min_batch, "shuffle.min_batch", 1, MAX_MIN_BATCH))
            object.__setattr__(self, "rows_per_device", check_int(self.rows_per_device, "shuffle.rows_per_device",
                                                                  1, MAX_ROWS_PER_DEVICE))
            object.__setattr__(self, "shuffler", check_choice(self.shuffler, "shuffle.shuffler", SHUFFLERS))

    @property
    def independent(self) -> bool:
        """Whether the shuffler is run by a party other than the aggregator's operator."""
        return self.shuffler == "independent"

    @property
    def against(self) -> str:
        """Whom the central guarantee protects against."""
        if self.independent:
            return "analysts and the aggregator's operator (the shuffler is run by an independent party)"
        return "analysts (the aggregator's operator runs the shuffler too: against it only the local epsilon0 holds)"

    def to_json(self) -> dict[str, Any]:
        return {"delta": self.delta, "min_batch": self.min_batch, "rows_per_device": self.rows_per_device,
                "shuffler": self.shuffler}

    @classmethod
    def from_json(cls, obj: object) -> ShuffleSpec:
        legal = "an object with delta, min_batch and optionally rows_per_device, shuffler"
        if not isinstance(obj, Mapping):
            raise SchemaError("shuffle", legal, f"got {type(obj).__name__}")
        extra = set(obj) - {"delta", "min_batch", "rows_per_device", "shuffler"}
        if extra:
            raise SchemaError("shuffle", legal, f"unknown fields {sorted(extra)}")
        missing = {"delta", "min_batch"} - set(obj)
        if missing:
            raise SchemaError(f"shuffle.{sorted(missing)[0]}", legal, "missing")
        return cls(obj["delta"], obj["min_batch"], obj.get("rows_per_device", 1), obj.get("shuffler", SHUFFLERS[0]))


@dataclass(frozen=True)
class Schema:
    """A collection: its name, ε, attributes, mechanism, lifecycle and (shuffled) :class:`ShuffleSpec`.

    Parameters
    ----------
    name : str
        The collection's name: a non-empty string of at most 128 characters.
    epsilon : float
        The ε each row is released with: a finite number > 0.
    attributes : sequence of Attribute
        The columns, with distinct names and at least one private attribute; the private domain
        :math:`|D|` (the product of the private attributes' sizes) at most 2^28
        (:data:`MAX_BATCH_WEIGHTS`), the public domain at most 2^62 values.
    shuffle : ShuffleSpec or None, default None
        A shuffled collection's central guarantee; ``None``: the collection is not shuffled.
    mechanism : str, default "E"
        ``"E"`` (k-ary randomized response, WYZ eq. 16) or a frequency oracle, ``"OUE"``,
        ``"OLH"``, ``"HR"``, ``"SS"`` (:mod:`ldpsynth.shared.mechanisms`).
    opens, closes : int or None, default None
        The lifecycle (:mod:`ldpsynth.shared.lifecycle`): when the collection starts and stops
        taking reports, in whole seconds since the Unix epoch; ``None``: not given.
    min_batch : int, default 1
        The fewest reports a release or answer is computed from: an integer in
        [1, :data:`MAX_MIN_BATCH`].

    Raises
    ------
    SchemaError
        A :class:`~ldpsynth.shared.errors.ValidationError` naming the field (``name``, ``epsilon``,
        ``attributes``, ``shuffle``, ``mechanism``, ``opens``,
        ``closes``, ``min_batch``) that is out of its legal range.
    """

    name: str
    epsilon: float
    attributes: tuple[Attribute, ...]
    shuffle: ShuffleSpec | None = None
    mechanism: str = "E"
    opens: int | None = None
    closes: int | None = None
    min_batch: int = 1
    _by_name: dict[str, Attribute] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or len(self.name) > 128:
            raise SchemaError("name", "a non-empty string of at most 128 characters", f"got {self.name!r}")
        with _schema_field():
            object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, "epsilon"))
        attrs = tuple(self.attributes)
        object.__setattr__(self, "attributes", attrs)
        names = [a.name for a in attrs]
        if len(set(names)) != len(names):
            raise SchemaError("attributes", "distinct attribute names", "duplicate names")
        if not any(not a.public for a in attrs):
            raise SchemaError("attributes", "at least one private attribute", "all attributes are public")
        object.__setattr__(self, "_by_name", {a.name: a for a in attrs})
        if self.private_domain_size > MAX_BATCH_WEIGHTS:
            raise SchemaError("attributes", f"a private domain of at most {MAX_BATCH_WEIGHTS} values (2^28: every "
                              "query holds a weight per value of D and a query batch at most that many weights)",
                              f"got |D| = {self.private_domain_size}")
        if self.public_domain_size > MAX_DOMAIN_SIZE:
            raise SchemaError("attributes", "a public domain of at most 2^62 values", "too large")
        if self.shuffle is not None and not isinstance(self.shuffle, ShuffleSpec):
            raise SchemaError("shuffle", "a ShuffleSpec or None", f"got {type(self.shuffle).__name__}")
        with _schema_field():
            check_choice(self.mechanism, "mechanism", MECHANISMS)
            object.__setattr__(self, "min_batch", check_int(self.min_batch, "min_batch", 1, MAX_MIN_BATCH))
            for key in ("opens", "closes"):
                if getattr(self, key) is not None:
                    check_int(getattr(self, key), key, -(2**62), 2**62, legal="whole seconds since the Unix epoch")
        if self.mechanism != "E":
            if self.shuffle is not None:
                raise SchemaError("mechanism", "'E' in a collection with a shuffle block (its central guarantee is "
                                  "computed for k-ary randomized response only: ldpsynth.shared.amplification)",
                                  f"got {self.mechanism!r} with shuffle")
            largest = max_domain_size(self.mechanism)
            if self.private_domain_size > largest:
                raise SchemaError("mechanism", f"E, or {self.mechanism} over a private domain of at most "
                                  f"{largest} values", f"got |D| = {self.private_domain_size}")
        Lifecycle(self.opens, self.closes)  # closes after opens

    # ----- lifecycle -----------------------------------------------------------------------
    @property
    def lifecycle(self) -> Lifecycle:
        """When the collection takes reports."""
        return Lifecycle(self.opens, self.closes)

    @property
    def minimum_batch(self) -> tuple[int, str]:
        """The fewest reports a release is computed from, and the field that sets it: the larger of
        ``min_batch`` and a shuffled collection's ``shuffle.min_batch`` (1, ``"min_batch"``: no minimum)."""
        if self.shuffle is not None and self.shuffle.min_batch > self.min_batch:
            return self.shuffle.min_batch, "shuffle.min_batch"
        return self.min_batch, "min_batch"

    # ----- views -------------------------------------------------------------------------
    @functools.cached_property
    def private_attributes(self) -> tuple[Attribute, ...]:
        return tuple(a for a in self.attributes if not a.public)

    @functools.cached_property
    def public_attributes(self) -> tuple[Attribute, ...]:
        return tuple(a for a in self.attributes if a.public)

    @functools.cached_property
    def private_domain_size(self) -> int:
        """:math:`|D|`, the product of the private attributes' sizes."""
        return math.prod(a.size for a in self.private_attributes)

    @functools.cached_property
    def public_domain_size(self) -> int:
        """Number of distinct public keys (1 when there are no public attributes)."""
        return math.prod(a.size for a in self.public_attributes)

    def attribute(self, name: str) -> Attribute:
        """The attribute called ``name``.

        Parameters
        ----------
        name : str
            One of the schema's attribute names.

        Returns
        -------
        Attribute

        Raises
        ------
        ValidationError
            Naming ``attribute``: no attribute of that name.
        """
        try:
            return self._by_name[name]
        except KeyError:
            raise ValidationError("attribute", f"one of {sorted(self._by_name)}",
                                  f"unknown attribute {name!r}") from None

    # ----- mixed radix ---------------------------------------------------------------------
    @staticmethod
    def _combine(group: tuple[Attribute, ...], columns: Mapping[str, npt.ArrayLike], *, encoded: bool,
                 offset: int) -> np.ndarray:
        weights = _radix_weights([a.size for a in group])
        total: np.ndarray | None = None
        for attr, w in zip(group, weights):
            if attr.name not in columns:
                raise ValidationError(attr.name, attr.legal_range, "missing column")
            col = columns[attr.name]
            codes = attr.check_codes(col) if encoded else attr.encode(col, offset=offset)
            if total is not None and len(codes) != len(total):
                raise ValidationError(attr.name, f"a column of {len(total)} rows", f"got {len(codes)} rows")
            total = codes * w if total is None else total + codes * w
        return np.zeros(0, np.int64) if total is None else total

    def encode_private(self, columns: Mapping[str, npt.ArrayLike], *, offset: int = 0) -> np.ndarray:
        """Raw private columns -> codes in ``[0, |D|)`` (mixed radix, first attribute most significant).

        Parameters
        ----------
        columns : mapping of str to array_like
            Attribute name -> raw values, one column of equal length per private attribute
            (other columns are ignored); each value in its attribute's legal range.
        offset : int, default 0
            Added to the row position an error names (the index of the first row, for chunked input).

        Returns
        -------
        numpy.ndarray
            int64 codes over D, one per row.

        Raises
        ------
        ValidationError
            Naming the attribute: a missing column, an illegal value (at its position) or a column
            of another length.
        """
        return self._combine(self.private_attributes, columns, encoded=False, offset=offset)

    def encode_public(self, columns: Mapping[str, npt.ArrayLike], *, offset: int = 0) -> np.ndarray:
        """Raw public columns -> public keys in ``[0, public_domain_size)``; zeros when there are none.

        Parameters
        ----------
        columns : mapping of str to array_like
            Attribute name -> raw values, one column of equal length per public attribute (other
            columns are ignored; with no public attribute only the first column's length is used).
        offset : int, default 0
            Added to the row position an error names (the index of the first row, for chunked input).

        Returns
        -------
        numpy.ndarray
            int64 public keys, one per row.

        Raises
        ------
        ValidationError
            Naming the attribute: a missing column, an illegal value (at its position) or a column
            of another length.
        """
        if not self.public_attributes:
            n = np.shape(next(iter(columns.values())))[0] if columns else 0
            return np.zeros(n, np.int64)
        return self._combine(self.public_attributes, columns, encoded=False, offset=offset)

    def private_codes_of(self, digits: Mapping[str, npt.ArrayLike]) -> np.ndarray:
        """Per-attribute private codes (checked) -> codes over D: the inverse of :meth:`private_digits`.

        Parameters
        ----------
        digits : mapping of str to array_like
            Private attribute name -> integer codes in ``[0, size)`` of that attribute, one column
            of equal length per private attribute.

        Returns
        -------
        numpy.ndarray
            int64 codes in ``[0, |D|)``.

        Raises
        ------
        ValidationError
            Naming the attribute: a missing column, a code out of its range (at its position) or a
            column of another length.
        """
        return self._combine(self.private_attributes, digits, encoded=True, offset=0)

    @functools.cached_property
    def _public_weights(self) -> np.ndarray:
        return _radix_weights([a.size for a in self.public_attributes])

    def fold_public_codes(self, codes: np.ndarray) -> np.ndarray:
        """Public keys of public codes already checked against their attributes, not checked again.

        The same mixed radix as :meth:`public_keys_of` (the schema's one set of place values), as one
        product: for the ``public_codes`` of a validated :class:`~ldpsynth.shared.reports.Reports`.

        Parameters
        ----------
        codes : numpy.ndarray
            ``(n, m)`` int64 codes, column ``j`` in ``[0, size)`` of the j-th public attribute.

        Returns
        -------
        numpy.ndarray
            ``(n,)`` int64 public keys (zeros when there is no public attribute).
        """
        if not self.public_attributes:
            return np.zeros(len(codes), np.int64)
        return codes @ self._public_weights

    def public_keys_of(self, digits: Mapping[str, npt.ArrayLike], rows: int) -> np.ndarray:
        """Per-attribute public codes (checked) -> public keys (zeros when there is no public attribute).

        Parameters
        ----------
        digits : mapping of str to array_like
            Public attribute name -> integer codes in ``[0, size)`` of that attribute, one column
            of equal length per public attribute.
        rows : int
            The number of rows: the length of the zeros returned when the schema has no public
            attribute (not used otherwise).

        Returns
        -------
        numpy.ndarray
            int64 public keys in ``[0, public_domain_size)``.

        Raises
        ------
        ValidationError
            Naming the attribute: a missing column, a code out of its range (at its position) or a
            column of another length.
        """
        if not self.public_attributes:
            return np.zeros(rows, np.int64)
        return self._combine(self.public_attributes, digits, encoded=True, offset=0)

    def private_digits(self, codes: npt.ArrayLike) -> dict[str, np.ndarray]:
        """Split private codes into per-attribute codes (inverse of the mixed radix).

        Parameters
        ----------
        codes : array_like
            Integer codes in ``[0, |D|)``.

        Returns
        -------
        dict of str to numpy.ndarray
            Private attribute name -> int64 codes of that attribute.

        Raises
        ------
        ValidationError
            Naming ``private_code``: codes that are not integers or lie outside ``[0, |D|)``.
        """
        return self._split(self.private_attributes, self.check_private_codes(codes))

    def public_digits(self, keys: npt.ArrayLike) -> dict[str, np.ndarray]:
        """Split public keys into per-attribute codes.

        Parameters
        ----------
        keys : array_like
            Integer public keys in ``[0, public_domain_size)``.

        Returns
        -------
        dict of str to numpy.ndarray
            Public attribute name -> int64 codes of that attribute (empty with no public attribute).

        Raises
        ------
        ValidationError
            Naming ``public_key``: keys that are not integers or lie outside ``[0, public_domain_size)``.
        """
        return self._split(self.public_attributes, check_codes(keys, "public_key", self.public_domain_size))

    @staticmethod
    def _split(group: tuple[Attribute, ...], codes: np.ndarray) -> dict[str, np.ndarray]:
        weights = _radix_weights([a.size for a in group])
        return {a.name: (codes // w) % a.size for a, w in zip(group, weights)}

    def decode_private(self, codes: npt.ArrayLike) -> dict[str, np.ndarray]:
        """Private codes -> raw columns (continuous attributes: bucket lower edges).

        Parameters
        ----------
        codes : array_like
            Integer codes in ``[0, |D|)``.

        Returns
        -------
        dict of str to numpy.ndarray
            Private attribute name -> its values (categorical: the listed strings; binary: 0/1;
            integer: the integers; continuous: bucket lower edges).

        Raises
        ------
        ValidationError
            Naming ``private_code``: codes that are not integers or lie outside ``[0, |D|)``.
        """
        return {name: self._by_name[name].decode(d) for name, d in self.private_digits(codes).items()}

    def decode_public(self, keys: npt.ArrayLike) -> dict[str, np.ndarray]:
        """Public keys -> raw columns.

        Parameters
        ----------
        keys : array_like
            Integer public keys in ``[0, public_domain_size)``.

        Returns
        -------
        dict of str to numpy.ndarray
            Public attribute name -> its values (as :meth:`decode_private`).

        Raises
        ------
        ValidationError
            Naming ``public_key``: keys that are not integers or lie outside ``[0, public_domain_size)``.
        """
        return {name: self._by_name[name].decode(d) for name, d in self.public_digits(keys).items()}

    def check_private_codes(self, codes: npt.ArrayLike, field_name: str = "private_code") -> np.ndarray:
        """Check that perturbed codes lie in ``[0, |D|)`` (the server's validation of a report).

        Parameters
        ----------
        codes : array_like
            Integer codes in ``[0, |D|)``.
        field_name : str, default "private_code"
            The field an error names.

        Returns
        -------
        numpy.ndarray
            ``codes`` as int64.

        Raises
        ------
        ValidationError
            Naming ``field_name``: codes that are not integers or lie outside ``[0, |D|)`` (the
            first bad position).
        """
        return check_codes(codes, field_name, self.private_domain_size)

    # ----- JSON ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The schema as its JSON object (what :meth:`from_json` reads).

        Returns
        -------
        dict
            ``name``, ``epsilon``, ``attributes`` and, for a shuffled collection, ``shuffle``.
        """
        out: dict[str, Any] = {"name": self.name, "epsilon": self.epsilon,
                               "attributes": [a.to_json() for a in self.attributes]}
        if self.shuffle is not None:
            out["shuffle"] = self.shuffle.to_json()
        if self.mechanism != "E":  # absent for E: E's schemas, and so its cards and fingerprints, stay as they were
            out["mechanism"] = self.mechanism
        if self.opens is not None:
            out["opens"] = format_time(self.opens)
        if self.closes is not None:
            out["closes"] = format_time(self.closes)
        if self.min_batch != 1:
            out["min_batch"] = self.min_batch
        return out

    def dumps(self) -> str:
        """The schema as compact JSON text with sorted keys.

        Returns
        -------
        str
        """
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | str) -> Schema:
        """The schema of a JSON object (docs/contract.md §2), or of its JSON text.

        Parameters
        ----------
        obj : mapping or str
            An object with the fields ``name``, ``epsilon``, ``attributes`` (a non-empty list of
            attribute objects) and optionally ``shuffle``, and no others; or its JSON text.

        Returns
        -------
        Schema

        Raises
        ------
        SchemaError
            A :class:`~ldpsynth.shared.errors.ValidationError` naming the field (``schema``,
            ``name``, ``epsilon``, ``attributes``, ``attributes[i]...``, ``shuffle...``) that is
            missing, unknown, malformed or out of its legal range.
        """
        if isinstance(obj, str):
            with _schema_field():
                obj = jsonio.loads(obj, "schema", "a JSON object")
        if not isinstance(obj, Mapping):
            raise SchemaError("schema", "a JSON object with name, epsilon, attributes", "not an object")
        extra = set(obj) - {"name", "epsilon", "attributes", "shuffle", "mechanism", "opens", "closes", "min_batch"}
        if extra:
            raise SchemaError("schema", "fields name, epsilon, attributes, shuffle, mechanism, opens, closes, "
                              "min_batch",
                              f"unknown fields {sorted(extra)}")
        attrs = obj.get("attributes")
        if not isinstance(attrs, list) or not attrs:
            raise SchemaError("attributes", "a non-empty list of attribute objects", "missing or empty")
        if "epsilon" not in obj:
            raise SchemaError("epsilon", "a finite number > 0", "missing")
        with _schema_field():
            epsilon = check_epsilon(obj["epsilon"], "epsilon")
        shuffle = ShuffleSpec.from_json(obj["shuffle"]) if "shuffle" in obj else None
        opens, closes = (parse_time(obj[key], key) if key in obj else None for key in ("opens", "closes"))
        return cls(cast(str, obj.get("name")), epsilon, tuple(_attribute_from_json(a, i) for i, a in enumerate(attrs)),
                   shuffle, obj.get("mechanism", "E"), opens, closes, obj.get("min_batch", 1))

    @classmethod
    def load(cls, path: str | Path) -> Schema:
        """The schema in the JSON file at ``path`` (:meth:`from_json`).

        Parameters
        ----------
        path : str or pathlib.Path
            A readable UTF-8 JSON file.

        Returns
        -------
        Schema

        Raises
        ------
        ValidationError
            Naming ``schema``: the file cannot be read or is not UTF-8; a
            :class:`~ldpsynth.shared.errors.SchemaError` for its content (as :meth:`from_json`).
        """
        return cls.from_json(jsonio.read_text(path, "schema"))
