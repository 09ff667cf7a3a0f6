"""A numeric collection's mean and sum, overall or per value of a public attribute, from its stored reports.

The reports of a numeric collection are output indices of its HM sampler
(:class:`~ldpsynth.shared.numeric.collection.NumericMechanism`), and the counts :math:`c_{g,y}` of reports y
per group g are sufficient: the mean of group g on [-1, 1] is :math:`\\bar x_g = \\frac{1}{n_g}\\sum_y
c_{g,y}\\hat x_y` with :math:`\\hat x_y` HM's unbiased value of report y (Wang2019ICDE §III-C), its standard
error and interval are :func:`~ldpsynth.shared.numeric.estimators.estimate_mean_from_counts` (analytic:
:math:`\\mathrm{Var}[\\bar x_g] = (a m_2 + c)/n_g`), mapped to the declared range; the sum is :math:`n_g \\bar v_g`
with SE :math:`n_g \\mathrm{SE}` (:math:`n_g` is public). Groups are independent (each report is in one), so a
per-group answer is the same estimator on the group's reports.

Input: the public keys and reports of the collection's rows, as an export gives them
(:class:`~ldpsynth.shared.release.Release`: :func:`release_means`), or the counts per (public key, report)
the shards keep. SW collections estimate distributions, not means: refused here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ...errors import ValidationError
from ...validation import check_codes
from ..estimators import MeanEstimate, estimate_mean_from_counts
from ..samplers import HybridMechanism
from .mechanism import numeric_mechanism

if TYPE_CHECKING:
    from ...release import Release
    from ...schema import Schema

__all__ = ["GroupMean", "numeric_means", "release_means"]


@dataclass(frozen=True)
class GroupMean:
    """The mean (and, through :class:`MeanEstimate`, the sum) of the numeric attribute over one group of rows:
    ``value``, the public attribute's value (``None``: all rows)."""

    value: Any
    estimate: MeanEstimate


def numeric_means(schema: Schema, public_keys: npt.ArrayLike, reports: npt.ArrayLike, by: str | None = None,
                  level: float = 0.95) -> list[GroupMean]:
    """The numeric attribute's mean over all rows (``by`` None) or per value of the public attribute ``by``
    (the values present, in code order), from each row's public key and report (module docstring).

    Raises :class:`ValidationError` naming ``mechanism`` (not a numeric HM collection), ``by`` (not a public
    attribute), ``reports`` or ``public_key`` (a report or key out of range, or columns of other lengths).
    """
    attribute = schema.numeric
    if attribute is None or schema.mechanism != "HM":
        raise ValidationError("mechanism", "HM (a mean needs a numeric attribute collected by HM; SW collections "
                              "estimate distributions)", f"got {schema.mechanism!r}")
    sampler = numeric_mechanism(schema.mechanism, schema.epsilon).sampler
    assert isinstance(sampler, HybridMechanism)
    codes = check_codes(np.asarray(reports).reshape(-1), "reports", sampler.reports)
    keys = check_codes(np.asarray(public_keys).reshape(-1), "public_key", schema.public_domain_size)
    if len(keys) != len(codes):
        raise ValidationError("public_key", f"one public key per report ({len(codes)})", f"got {len(keys)}")
    if by is None:
        groups, labels = np.zeros(len(codes), np.int64), [None]
    else:
        public = {a.name: a for a in schema.public_attributes}
        if by not in public:
            raise ValidationError("by", f"one of the public attributes {sorted(public)}", f"got {by!r}")
        digits = schema.public_digits(keys)[by]
        present = np.unique(digits)
        groups = np.searchsorted(present, digits)
        labels = public[by].decode(present).tolist()
    counts = np.zeros((len(labels), sampler.reports), np.int64)
    np.add.at(counts, (groups, codes), 1)
    return [GroupMean(label, estimate_mean_from_counts(sampler, row, attribute.range, level))
            for label, row in zip(labels, counts)]


def release_means(release: Release, by: str | None = None, level: float = 0.95) -> list[GroupMean]:
    """:func:`numeric_means` of an export of a numeric HM collection (its rows' public keys and reports)."""
    return numeric_means(release.card.schema, release.public_keys(), release.private_reports(), by, level)
