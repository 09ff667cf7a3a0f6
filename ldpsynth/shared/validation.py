"""Argument checks in the OpenDP style: NaN-safe, naming the parameter and its legal range.

Every check of one value (a number, an integer, a flag, a choice) or of an array of codes against
its legal range is written here once, so that a range is stated the same way wherever it is
checked. Each ``check_*`` returns the value converted (``float``, ``int``, an int64 array) or raises
:class:`~ldpsynth.shared.errors.ValidationError` naming the parameter and the legal range, never
quoting more than the offending scalar (no row of private data).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable, Iterable
from typing import TypeGuard, TypeVar

import numpy as np
import numpy.typing as npt

from ldpsynth.shared.errors import ValidationError

__all__ = [
    "is_real",
    "is_finite_real",
    "real_range",
    "check_real",
    "check_epsilon",
    "check_probability",
    "check_seconds",
    "check_int",
    "check_bool",
    "check_choice",
    "check_codes",
]

T = TypeVar("T")


def is_real(value: object) -> TypeGuard[numbers.Real]:
    """Whether ``value`` is a real number (``numbers.Real``: Python and numpy ints and floats, not bools)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_finite_real(value: object) -> TypeGuard[numbers.Real]:
    """Whether ``value`` is a real number other than ±inf and NaN.

    >>> is_finite_real(2), is_finite_real(float("nan")), is_finite_real(True), is_finite_real("1")
    (True, False, False, False)
    """
    if not is_real(value):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int beyond the float range
        return False


def _shown(bound: float) -> str:
    """A bound as written in a legal range: integers without a decimal point, floats exactly."""
    x = float(bound)
    return str(int(x)) if x.is_integer() and abs(x) < 2**53 else repr(x)


def real_range(low: float | None = None, high: float | None = None, *, low_open: bool = False,
               high_open: bool = False, finite: bool = True, unit: str = "") -> str:
    """The legal range :func:`check_real` states, e.g. ``"a finite number > 0"``, ``"a number in (0, 1]"``.

    >>> real_range(0, low_open=True), real_range(0, 1, low_open=True), real_range(0, unit="seconds")
    ('a finite number > 0', 'a number in (0, 1]', 'a finite number of seconds >= 0')
    """
    of_unit = f" of {unit}" if unit else ""
    if low is not None and high is not None:
        return (f"a number{of_unit} in {'(' if low_open else '['}{_shown(low)}, "
                f"{_shown(high)}{')' if high_open else ']'}")
    number = ("a finite number" if finite else "a number") + of_unit
    if low is not None:
        return f"{number} {'>' if low_open else '>='} {_shown(low)}"
    if high is not None:
        return f"{number} {'<' if high_open else '<='} {_shown(high)}"
    return number


def check_real(value: object, name: str, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False, finite: bool = True, unit: str = "",
               legal: str | None = None) -> float:
    """Return ``value`` as a float if it is a real number within the bounds, else raise.

    ``low``/``high`` (None: unbounded) are inclusive unless ``low_open``/``high_open``; NaN is
    never within, and ±inf only when ``finite`` is False and no bound excludes it. ``legal``
    replaces the stated range (:func:`real_range`) with a fuller statement of the same range.

    >>> check_real(0.5, "beta", low=0, high=1, low_open=True, high_open=True)
    0.5
    >>> check_real(float("nan"), "tau", low=0, low_open=True)
    Traceback (most recent call last):
    ...
    ldpsynth.shared.errors.ValidationError: tau: got nan; legal range: a finite number > 0
    """
    if legal is None:
        legal = real_range(low, high, low_open=low_open, high_open=high_open, finite=finite, unit=unit)
    if not is_real(value):
        raise ValidationError(name, legal, f"got a {type(value).__name__}")
    try:
        v = float(value)
    except OverflowError:
        raise ValidationError(name, legal, "too large for a float") from None
    within = not math.isnan(v) and (not finite or math.isfinite(v))
    if low is not None:
        within = within and (v > low if low_open else v >= low)
    if high is not None:
        within = within and (v < high if high_open else v <= high)
    if not within:
        raise ValidationError(name, legal, f"got {v!r}")
    return v


def check_epsilon(value: object, name: str = "epsilon") -> float:
    """A privacy parameter (ε; also ρ of zCDP, μ of GDP, a Lipschitz constant): a finite number > 0.

    >>> check_epsilon(1.0)
    1.0
    """
    return check_real(value, name, low=0.0, low_open=True)


def check_probability(value: object, name: str) -> float:
    """A probability in the open interval (0, 1): a confidence level, a δ of (ε, δ)-DP, a β.

    >>> check_probability(0.95, "level")
    0.95
    """
    return check_real(value, name, low=0.0, high=1.0, low_open=True, high_open=True)


def check_seconds(value: object, name: str, *, allow_zero: bool = False) -> float:
    """A duration: a finite number of seconds > 0 (>= 0 with ``allow_zero``).

    >>> check_seconds(0, "delay", allow_zero=True)
    0.0
    """
    return check_real(value, name, low=0.0, low_open=not allow_zero, unit="seconds")


def check_int(value: object, name: str, low: int, high: int | None = None, *, legal: str | None = None) -> int:
    """Return ``value`` as an int if it is an integer in ``[low, high]`` (``high`` None: unbounded).

    ``legal`` replaces the stated range with a fuller statement of the same range.

    >>> check_int(3, "rounds", 1)
    3
    """
    if legal is None:
        legal = f"an integer in [{low}, {high}]" if high is not None else f"an integer >= {low}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValidationError(name, legal, f"got a {type(value).__name__}")
    v = int(value)
    if v < low or (high is not None and v > high):
        raise ValidationError(name, legal, f"got {v}")
    return v


def check_bool(value: object, name: str) -> bool:
    """Return ``value`` if it is ``True`` or ``False`` (not 0/1, not a string)."""
    if not isinstance(value, bool):
        raise ValidationError(name, "true or false", f"got {value!r}")
    return value


def check_choice(value: object, name: str, choices: Iterable[T]) -> T:
    """Return the one of ``choices`` equal to ``value``, else raise listing them.

    >>> check_choice("paper", "noise", ("safe", "paper"))
    'paper'
    """
    options = tuple(choices)
    if isinstance(value, Hashable):  # an unhashable value (a list, an array) is never a choice
        for option in options:
            if value == option:
                return option
    raise ValidationError(name, "one of " + ", ".join(map(str, options)), f"got {value!r}")


def check_codes(values: npt.ArrayLike, name: str, size: int, *, ndim: int | None = None) -> np.ndarray:
    """Return ``values`` as an int64 array if every entry is an integer code in ``[0, size)``.

    Raises naming the first bad position (flat index). ``ndim``: also require that many
    dimensions. An empty array is accepted whatever its dtype (``np.asarray([])`` is float64).
    Checked with one ``min`` and one ``max`` (no temporary arrays) unless a code is bad.

    >>> check_codes([0, 4, 2], "codes", 5).tolist()
    [0, 4, 2]
    """
    arr = np.asarray(values)
    legal = f"integer codes in [0, {size - 1}]"
    if ndim is not None and arr.ndim != ndim:
        raise ValidationError(name, f"a {ndim}-d array of {legal}", f"got {arr.ndim} dimensions")
    if arr.size == 0:
        return arr.astype(np.int64)
    kind = arr.dtype.kind
    if kind not in "iu":
        raise ValidationError(name, legal, "not integers")
    if (kind == "i" and arr.min() < 0) or arr.max() >= size:
        bad = arr >= size  # compared before any cast: a uint64 above 2^63 must not wrap around
        if kind == "i":
            bad |= arr < 0
        raise ValidationError(name, legal, "out of range", int(np.flatnonzero(bad)[0]))
    return arr.astype(np.int64, copy=False)
