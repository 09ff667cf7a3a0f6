"""Analytic answers for a marginal inside measured views: the views' estimates, combined, with standard errors.

A marginal of attributes A is inside every view V with :math:`A \\subseteq V`. Each such view gives
:math:`\\hat f_{A,V} = M_{A,V}\\hat f_V` (:func:`~ldpsynth.shared.wide.views.project`), unbiased, with the
variance of a linear query (:meth:`~ldpsynth.shared.wide.measure.ViewMeasurement.linear_share_variance`).
The views' devices are disjoint, so their estimates are independent up to the sampling without replacement
across views (a negative correlation of order :math:`1/N`, ignored), and the inverse-variance weighted mean

.. math::  \\hat f_A(u) = \\frac{\\sum_V \\hat f_{A,V}(u)/\\sigma^2_V(u)}{\\sum_V 1/\\sigma^2_V(u)}, \\qquad
           \\operatorname{Var}\\hat f_A(u) = \\Big(\\sum_V 1/\\sigma^2_V(u)\\Big)^{-1}

is the minimum-variance unbiased combination (with the plug-in variances as weights; CALM's and
PriView's consistency step averages shared margins the same way, ZWLHC18). Per cell, so the
combined vector need not sum to 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from .measure import ViewMeasurement
from .views import project

__all__ = ["Answer", "analytic_linear", "analytic_marginal"]

#: The normal quantile of a two-sided 95 % interval.
Z95 = 1.959963984540054


@dataclass(frozen=True, eq=False)
class Answer:
    """A marginal's shares, their standard errors, and the views they come from."""

    attributes: tuple[int, ...]
    shares: np.ndarray
    standard_errors: np.ndarray
    views: tuple[tuple[int, ...], ...]

    def interval(self, z: float = Z95) -> tuple[np.ndarray, np.ndarray]:
        """``shares -+ z standard_errors`` (default: 95 %)."""
        return self.shares - z * self.standard_errors, self.shares + z * self.standard_errors


def analytic_linear(measurements: Sequence[ViewMeasurement], attributes: Sequence[int], weights: npt.ArrayLike,
                    population: int) -> Answer:
    """Linear queries :math:`w\\cdot f_A` of the marginal of ``attributes`` (each row of ``weights`` a query over
    its cells, mixed radix in the order of ``attributes``), each combined across every measured view that holds
    A by its own inverse-variance weights (module docstring, with :math:`wM_{A,V}` in place of a cell's
    indicator: the protocol's exact linear variance plus the sampling term)."""
    attrs = tuple(attributes)
    holding = [m for m in measurements if set(attrs) <= set(m.view.attributes) and m.n > 0]
    if not holding:
        raise ValidationError("attributes", "attributes inside a measured view", f"got {attrs}")
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    estimates, precisions = [], []
    for m in holding:
        on_view = w @ project(np.eye(m.view.size), m.view, attrs).T          # (queries, view cells)
        estimates.append(on_view @ m.shares())
        precisions.append(1.0 / np.maximum(m.linear_share_variance(on_view, population), 1e-300))
    precision = np.sum(precisions, axis=0)
    shares = np.sum([e * p for e, p in zip(estimates, precisions)], axis=0) / precision
    return Answer(attrs, shares, 1.0 / np.sqrt(precision), tuple(m.view.attributes for m in holding))


def analytic_marginal(measurements: Sequence[ViewMeasurement], attributes: Sequence[int],
                      population: int) -> Answer:
    """The marginal of ``attributes`` from every measured view that holds them (module docstring): the
    :func:`analytic_linear` queries of its cells' indicators."""
    attrs = tuple(attributes)
    view = next((m.view for m in measurements if set(attrs) <= set(m.view.attributes)), None)
    cells = 1 if view is None else math.prod(view.sizes[view.attributes.index(a)] for a in attrs)
    return analytic_linear(measurements, attrs, np.eye(cells), population)
