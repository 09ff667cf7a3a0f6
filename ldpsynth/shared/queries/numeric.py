"""Numeric query kinds: the mean, sum, variance, quantiles and histogram of a numeric collection's attribute.

A numeric collection (docs/numeric.md, "The collection mode") stores one report per row, the output index of
its attribute's exact sampler, and the counts :math:`c_{g,y}` of reports y per public key g are sufficient for
these answers (:mod:`ldpsynth.shared.numeric.answering`):

* ``mean`` and ``sum`` (HM, Wang2019ICDE §III-C): :math:`\\bar v = \\frac1n\\sum_y c_y \\hat x_y` mapped to the
  range, with its analytic standard error; the sum is :math:`n \\bar v` (n public);
* ``variance`` (HM above ε* ≈ 0.61, or SW): the population variance of the values,
  :mod:`ldpsynth.shared.numeric.variance` (HM: unbiased from the reports' second moments, delta-method SE; SW: the
  EMS histogram's, bootstrap SE);
* ``quantiles`` and ``histogram`` (SW with EMS, Li2020SIGMOD): read off the EMS histogram of the counts, with a
  bootstrap standard error.

Each may be grouped ``by`` a public attribute: one answer per value of it (in code order). A kind the attribute's
mechanism cannot answer is refused when the batch is compiled against the schema (naming the field and the
mechanism that would answer it). The JSON form (:mod:`ldpsynth.shared.queries.json_form`)::

    {"kind": "mean", "attribute": "hours", "by": "region"}
    {"kind": "sum", "attribute": "hours"}
    {"kind": "variance", "attribute": "hours", "by": "region"}
    {"kind": "quantiles", "attribute": "hours", "q": [0.25, 0.5, 0.75]}
    {"kind": "histogram", "attribute": "hours", "bins": 10}

Every kind also takes ``label`` (at most 256 characters); none takes ``normalization`` (the answers are on the
attribute's own scale).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_int, is_finite_real

__all__ = ["NumericQuery", "MeanQuery", "SumQuery", "VarianceQuery", "QuantilesQuery", "HistogramQuery",
           "NUMERIC_KINDS", "MAX_QUANTILES", "MAX_BINS"]

#: Most probabilities one quantiles query lists.
MAX_QUANTILES = 1000
#: Most bins of one histogram query.
MAX_BINS = 4096


def _name(value: object, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(name, "an attribute name (a non-empty string)", f"got {value!r}")
    return value


@dataclass(frozen=True)
class NumericQuery:
    """What every numeric kind has: the numeric ``attribute``, an optional public attribute ``by`` to group by,
    and ``label``. A kind names itself (``kind``) and the mechanisms whose reports answer it (``mechanisms``)."""

    kind: ClassVar[str]
    mechanisms: ClassVar[tuple[str, ...]]
    attribute: str
    by: str | None = field(default=None, kw_only=True)
    label: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        _name(self.attribute, "attribute")
        if self.by is not None:
            _name(self.by, "by")
        if self.label is not None and (not isinstance(self.label, str) or len(self.label) > 256):
            raise ValidationError("label", "a string of at most 256 characters", f"got {self.label!r}")


@dataclass(frozen=True)
class MeanQuery(NumericQuery):
    """The mean of the attribute (HM), overall or per value of ``by``."""

    kind: ClassVar[str] = "mean"
    mechanisms: ClassVar[tuple[str, ...]] = ("HM",)


@dataclass(frozen=True)
class SumQuery(NumericQuery):
    """The sum of the attribute (HM), overall or per value of ``by``."""

    kind: ClassVar[str] = "sum"
    mechanisms: ClassVar[tuple[str, ...]] = ("HM",)


@dataclass(frozen=True)
class VarianceQuery(NumericQuery):
    """The population variance of the attribute's values (HM above ε*, or SW), overall or per value of ``by``."""

    kind: ClassVar[str] = "variance"
    mechanisms: ClassVar[tuple[str, ...]] = ("HM", "SW")


@dataclass(frozen=True)
class QuantilesQuery(NumericQuery):
    """The ``q``-quantiles of the attribute (SW), ``q`` a non-empty list of probabilities in [0, 1]."""

    kind: ClassVar[str] = "quantiles"
    mechanisms: ClassVar[tuple[str, ...]] = ("SW",)
    q: tuple[float, ...] = field(default=(), kw_only=True)

    def __post_init__(self) -> None:
        legal = f"a non-empty list of at most {MAX_QUANTILES} probabilities in [0, 1]"
        if isinstance(self.q, (str, bytes)) or not isinstance(self.q, (list, tuple, np.ndarray)):
            raise ValidationError("q", legal, f"got {type(self.q).__name__}")
        probs = []
        for j, p in enumerate(list(self.q)):
            if not is_finite_real(p) or not 0.0 <= float(p) <= 1.0:
                raise ValidationError("q", legal, f"got {p!r}", j)
            probs.append(float(p))
        if not probs or len(probs) > MAX_QUANTILES:
            raise ValidationError("q", legal, f"got {len(probs)} probabilities")
        object.__setattr__(self, "q", tuple(probs))
        super().__post_init__()


@dataclass(frozen=True)
class HistogramQuery(NumericQuery):
    """The shares of the attribute's values in ``bins`` equal bins of its range (SW)."""

    kind: ClassVar[str] = "histogram"
    mechanisms: ClassVar[tuple[str, ...]] = ("SW",)
    bins: int = field(default=0, kw_only=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "bins", check_int(self.bins, "bins", 1, MAX_BINS))
        super().__post_init__()


#: The numeric query classes by their ``kind`` (the JSON field).
NUMERIC_KINDS: dict[str, type[NumericQuery]] = {cls.kind: cls for cls in
                                                (MeanQuery, SumQuery, VarianceQuery, QuantilesQuery,
                                                 HistogramQuery)}
