"""Choosing the views: 1-way views of every attribute plus the 2-way views of a tree of attribute pairs.

With every pair measured, Private-PGM's junction tree is one clique of the whole row domain (docs/wide.md);
with the pairs of a tree (a forest) every clique is a pair, so a fit is fast, and the devices spread over
d + (d − 1) views instead of d(d − 1)/2. The tree is a Chow-Liu tree (ChowLiu1968): the maximum
spanning tree of the pairs' dependence scores. The scores come without spending ε beyond the views' own
reports, either from a public prior sample (:func:`prior_scores`) or from a **pilot**: a fraction of the
devices, chosen by key (:func:`pilot_devices`), report one of all the pairs; the rest report the chosen views.
The pilot's reports of the chosen pairs are measurements like the others (fit them together).

The score of a pair (a, b) is a debiased estimate of the mutual information in its χ² approximation
(:math:`I \\approx \\chi^2/2` for weak dependence, Adult's case):

.. math::  s_{ab} = \\tfrac12 \\sum_{u,v} \\frac{(\\hat f(u,v) - \\hat f_a(u)\\hat f_b(v))^2
           - r_{ab}\\widehat{\\operatorname{Var}}\\hat f(u,v)}{\\max(\\hat f_a(u)\\hat f_b(v),\\ 1/(2k_ak_b))},
           \\qquad r_{ab} = \\frac{(k_a - 1)(k_b - 1)}{k_a k_b},

the unbiased shares :math:`\\hat f` and their plug-in variances from :mod:`.measure`, the margins clipped
to [0, 1]: subtracting the variance removes the noise's own contribution, which would otherwise favour the
pairs with the most cells; :math:`r_{ab}` is the share of the noise left in the residual after the margins
are fitted from the same cells (the χ² test's (k_a − 1)(k_b − 1) degrees of freedom out of k_a k_b; an
approximation for the oracles' nearly independent per-cell noise). Pairs with :math:`s_{ab} \\le 0` are left
out (a forest).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from .assignment import assign_view
from .measure import ViewMeasurement
from .views import View, WideDomain

__all__ = ["DEFAULT_Z", "PILOT_RESOLUTION", "chow_liu", "pair_gain", "pair_score", "pilot_devices", "prior_scores",
           "tree_views"]

#: Standard deviations of a pilot score's noise a pair's gain must clear (:func:`pair_gain`).
DEFAULT_Z = 3.0
#: The pilot's fraction is a multiple of 1/PILOT_RESOLUTION (the assignment is exactly uniform over these).
PILOT_RESOLUTION = 1_000_000
_PILOT_TAG = b"ldpsynth/wide/pilot\x00"


def pilot_devices(salt: bytes, device_keys: Sequence[bytes], fraction: float) -> np.ndarray:
    """Whether each device is in the pilot: :func:`~.assignment.assign_view` of the tagged key over
    :data:`PILOT_RESOLUTION` slots below ``round(fraction * PILOT_RESOLUTION)`` (exactly uniform, from the key
    alone, independent of the row)."""
    if not 0.0 < fraction < 1.0:
        raise ValidationError("fraction", "a number in (0, 1)", f"got {fraction}")
    cut = round(fraction * PILOT_RESOLUTION)
    return np.fromiter((assign_view(salt, _PILOT_TAG + key, PILOT_RESOLUTION) < cut for key in device_keys),
                       bool, len(device_keys))


def _score(shares: np.ndarray, variance: np.ndarray, sizes: tuple[int, int], cost: float = 0.0) -> float:
    """:math:`s_{ab}`, less ``cost`` times the noise term once more (:func:`pair_gain`)."""
    cube = shares.reshape(sizes)
    fa = np.clip(cube.sum(axis=1), 0.0, 1.0)
    fb = np.clip(cube.sum(axis=0), 0.0, 1.0)
    expected = np.maximum(np.outer(fa, fb), 0.5 / (sizes[0] * sizes[1]))
    noise = (sizes[0] - 1) * (sizes[1] - 1) / (sizes[0] * sizes[1]) * variance.reshape(sizes)
    return 0.5 * float((((cube - np.outer(fa, fb)) ** 2 - (1.0 + cost) * noise) / expected).sum())


def pair_score(measurement: ViewMeasurement, population: int) -> float:
    """:math:`s_{ab}` (module docstring) of a measured pair view."""
    view = measurement.view
    if len(view.attributes) != 2:
        raise ValidationError("measurement", "a 2-way view", f"got view {view.attributes}")
    return _score(measurement.shares(), measurement.share_variance(population), (view.sizes[0], view.sizes[1]))


def pair_gain(measurement: ViewMeasurement, population: int, devices: float, z: float = DEFAULT_Z) -> float:
    """:math:`s_{ab}` less the noise of the pair measured by ``devices`` devices and less ``z`` standard
    deviations of the score's own noise (module docstring)."""
    view = measurement.view
    if len(view.attributes) != 2 or not devices > 0:
        raise ValidationError("measurement", "a 2-way view and devices > 0",
                              f"got view {view.attributes}, devices {devices}")
    return _score(measurement.shares(), measurement.share_variance(population), (view.sizes[0], view.sizes[1]),
                  measurement.n / devices + z * np.sqrt(2.0 / ((view.sizes[0] - 1) * (view.sizes[1] - 1))))


def prior_scores(domain: WideDomain, rows: npt.ArrayLike) -> dict[tuple[int, int], float]:
    """:math:`s_{ab}` of every pair from a public prior sample's exact shares (no noise, no variance)."""
    x = domain.check_rows(rows)
    if len(x) == 0:
        raise ValidationError("rows", "a non-empty prior sample", "got no rows")
    out = {}
    for a in range(domain.width):
        for b in range(a + 1, domain.width):
            view = domain.view((a, b))
            out[(a, b)] = _score(view.histogram(x) / len(x), np.zeros(view.size), (view.sizes[0], view.sizes[1]))
    return out


def chow_liu(width: int, scores: dict[tuple[int, int], float]) -> list[tuple[int, int]]:
    """The maximum spanning forest of the positive ``scores`` over ``width`` attributes (Kruskal; ties broken
    by the pair's order): at most ``width - 1`` pairs ``(a, b)`` with ``a < b``, in decreasing score."""
    parent = list(range(width))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    edges = []
    for (a, b), s in sorted(scores.items(), key=lambda item: (-item[1], item[0])):
        if s <= 0:
            break
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[ra] = rb
            edges.append((min(a, b), max(a, b)))
    return edges


def tree_views(domain: WideDomain, edges: Sequence[tuple[int, int]]) -> tuple[View, ...]:
    """The 1-way view of every attribute, then the 2-way views of ``edges``."""
    return (*(domain.view((a,)) for a in range(domain.width)), *(domain.view(e) for e in edges))
