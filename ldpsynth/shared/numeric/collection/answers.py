"""A numeric collection's answers, overall or per value of a public attribute, from its stored reports: the mean
and sum of an HM attribute, the quantiles of an SW attribute.

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
the shards keep. An SW collection has no unbiased per-report value: its means are refused; its quantiles
(:func:`numeric_quantiles`) are those of the EMS histogram of the group's report counts
(:func:`~ldpsynth.shared.numeric.estimators.bootstrap_quantiles`, Li2020SIGMOD's EMS with a nonparametric
bootstrap standard error, docs/numeric.md "Estimators"), or on declared levels those of the EM on the levels
(:class:`~ldpsynth.shared.numeric.levels.LevelModel`, docs/numeric.md "Declared levels") with the same bootstrap.
An HM collection's quantiles are refused.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ...errors import ValidationError
from ...validation import check_codes
from ..estimators import (
    MeanEstimate,
    QuantileEstimate,
    bootstrap_from_counts,
    bootstrap_quantiles,
    estimate_mean_from_counts,
    z_value,
)
from ..levels import LevelModel
from ..samplers import HybridMechanism, SquareWave
from .mechanism import numeric_mechanism

if TYPE_CHECKING:
    from ...release import Release
    from ...schema import Schema

__all__ = ["GroupMean", "GroupQuantiles", "numeric_means", "release_means", "numeric_quantiles", "release_quantiles"]


@dataclass(frozen=True)
class GroupMean:
    """The mean (and, through :class:`MeanEstimate`, the sum) of the numeric attribute over one group of rows:
    ``value``, the public attribute's value (``None``: all rows)."""

    value: Any
    estimate: MeanEstimate


@dataclass(frozen=True)
class GroupQuantiles:
    """The quantiles of the numeric attribute over one group of rows (``value`` as in :class:`GroupMean`)."""

    value: Any
    estimate: QuantileEstimate
    n: int


def _grouped(schema: Schema, mechanism: str, public_keys: npt.ArrayLike, reports: npt.ArrayLike,
             by: str | None) -> tuple[HybridMechanism | SquareWave, list[Any], np.ndarray, np.ndarray]:
    """The sampler, the group labels, each report's group and its code, checked (see :func:`numeric_means`)."""
    attribute = schema.numeric
    if attribute is None or schema.mechanism != mechanism:
        wanted = "a mean needs a numeric attribute collected by HM" if mechanism == "HM" else \
            "quantiles need a numeric attribute collected by SW"
        raise ValidationError("mechanism", f"{mechanism} ({wanted})", f"got {schema.mechanism!r}")
    sampler = numeric_mechanism(schema.mechanism, schema.epsilon).sampler
    codes = check_codes(np.asarray(reports).reshape(-1), "reports", sampler.reports)
    keys = check_codes(np.asarray(public_keys).reshape(-1), "public_key", schema.public_domain_size)
    if len(keys) != len(codes):
        raise ValidationError("public_key", f"one public key per report ({len(codes)})", f"got {len(keys)}")
    if by is None:
        return sampler, [None], np.zeros(len(codes), np.int64), codes
    public = {a.name: a for a in schema.public_attributes}
    if by not in public:
        raise ValidationError("by", f"one of the public attributes {sorted(public)}", f"got {by!r}")
    digits = schema.public_digits(keys)[by]
    present = np.unique(digits)
    return sampler, public[by].decode(present).tolist(), np.searchsorted(present, digits), codes


def numeric_means(schema: Schema, public_keys: npt.ArrayLike, reports: npt.ArrayLike, by: str | None = None,
                  level: float = 0.95) -> list[GroupMean]:
    """The numeric attribute's mean over all rows (``by`` None) or per value of the public attribute ``by``
    (the values present, in code order), from each row's public key and report (module docstring).

    Raises :class:`ValidationError` naming ``mechanism`` (not a numeric HM collection), ``by`` (not a public
    attribute), ``reports`` or ``public_key`` (a report or key out of range, or columns of other lengths).
    """
    sampler, labels, groups, codes = _grouped(schema, "HM", public_keys, reports, by)
    assert isinstance(sampler, HybridMechanism) and schema.numeric is not None
    counts = np.zeros((len(labels), sampler.reports), np.int64)
    np.add.at(counts, (groups, codes), 1)
    return [GroupMean(label, estimate_mean_from_counts(sampler, row, schema.numeric.range, level))
            for label, row in zip(labels, counts)]


def numeric_quantiles(schema: Schema, public_keys: npt.ArrayLike, reports: npt.ArrayLike, q: npt.ArrayLike,
                      rng: np.random.Generator, by: str | None = None, *, replicates: int = 100,
                      level: float = 0.95) -> list[GroupQuantiles]:
    """The ``q``-quantiles of an SW attribute over all rows or per value of the public attribute ``by``, each with
    its bootstrap SE and interval (``replicates`` resamples drawn by ``rng``: analysis-side randomness, not a
    device's); errors as :func:`numeric_means` (``mechanism``: not an SW collection)."""
    sampler, labels, groups, codes = _grouped(schema, "SW", public_keys, reports, by)
    assert isinstance(sampler, SquareWave) and schema.numeric is not None
    levels = schema.numeric.levels
    if levels is not None:
        plain = LevelModel.of(sampler, levels, schema.numeric.level_units(), False)
        probs = np.asarray(q, dtype=np.float64).reshape(-1)
        out = []
        for g, label in enumerate(labels):
            counts = np.bincount(codes[groups == g], minlength=sampler.reports)
            model = plain.chosen(counts)
            value, se = bootstrap_from_counts(sampler, counts, functools.partial(model.quantiles, q=probs), rng,
                                              replicates=replicates, fit=model.fit)
            z = z_value(level)
            out.append(GroupQuantiles(label, QuantileEstimate(probs, value, se, value - z * se, value + z * se,
                                                              replicates), int(counts.sum())))
        return out
    return [GroupQuantiles(label, bootstrap_quantiles(sampler, codes[groups == g], schema.numeric.range, q, rng,
                                                      replicates=replicates, level=level), int((groups == g).sum()))
            for g, label in enumerate(labels)]


def release_means(release: Release, by: str | None = None, level: float = 0.95) -> list[GroupMean]:
    """:func:`numeric_means` of an export of a numeric HM collection (its rows' public keys and reports)."""
    return numeric_means(release.card.schema, release.public_keys(), release.private_reports(), by, level)


def release_quantiles(release: Release, q: npt.ArrayLike, rng: np.random.Generator, by: str | None = None, *,
                      replicates: int = 100, level: float = 0.95) -> list[GroupQuantiles]:
    """:func:`numeric_quantiles` of an export of a numeric SW collection."""
    return numeric_quantiles(release.card.schema, release.public_keys(), release.private_reports(), q, rng, by,
                             replicates=replicates, level=level)
