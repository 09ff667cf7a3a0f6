"""Argument checks in the OpenDP style: NaN-safe, naming the parameter and its legal range."""

from __future__ import annotations

import math
import numbers

from .errors import ValidationError


def check_epsilon(value: object, name: str = "epsilon") -> float:
    """Return ``value`` as a float if it is a finite number > 0, else raise.

    >>> check_epsilon(1.0)
    1.0
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValidationError(name, "a finite number > 0", f"got a {type(value).__name__}")
    eps = float(value)
    if not math.isfinite(eps) or eps <= 0.0:
        raise ValidationError(name, "a finite number > 0", f"got {eps!r}")
    return eps


def check_int(value: object, name: str, low: int, high: int | None = None) -> int:
    """Return ``value`` as an int if it is an integer in ``[low, high]`` (``high`` None: unbounded)."""
    legal = f"an integer in [{low}, {high}]" if high is not None else f"an integer >= {low}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValidationError(name, legal, f"got a {type(value).__name__}")
    v = int(value)
    if v < low or (high is not None and v > high):
        raise ValidationError(name, legal, f"got {v}")
    return v


def check_probability_level(value: object, name: str = "level") -> float:
    """Return a confidence level in the open interval (0, 1)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValidationError(name, "a number in (0, 1)", f"got a {type(value).__name__}")
    v = float(value)
    if not (0.0 < v < 1.0):  # also rejects NaN
        raise ValidationError(name, "a number in (0, 1)", f"got {v!r}")
    return v


def check_delta(value: object, name: str = "delta") -> float:
    """Return a δ of (ε, δ)-DP: a number in the open interval (0, 1) (NaN rejected)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValidationError(name, "a number in (0, 1)", f"got a {type(value).__name__}")
    v = float(value)
    if not 0.0 < v < 1.0:
        raise ValidationError(name, "a number in (0, 1)", f"got {v!r}")
    return v
