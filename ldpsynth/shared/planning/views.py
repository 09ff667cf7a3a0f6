"""The views mode of a plan: each query's error when devices are split across low-dimensional views
(docs/wide.md) instead of reporting the full private domain.

N devices are split evenly across the m views (:math:`n_V = N/m` each; the assignment is uniform);
each view's devices report their cell with the full ε by the view's best oracle
(:func:`~ldpsynth.shared.wide.measure.best_mechanism`). A query whose row function depends on at most
the attributes A of some view (and on no public attribute) has weights :math:`w_V` on every view
:math:`V \\supseteq A`; the view estimates the mean weight per device :math:`\\bar y = \\sum_v f(v) w_V(v)`
by :math:`w_V\\cdot\\hat c/n_V` with variance (docs/wide.md, step 3)

.. math::  \\sigma^2_V(f) = \\frac{\\sum_v f(v)\\,a_V(v)}{n_V}
           + \\frac{N - n_V}{N - 1}\\,\\frac{\\sum_v f(v) w_V(v)^2 - \\bar y^2}{n_V},

:math:`a_V(v)` the protocol's exact variance of :math:`w_V\\cdot\\hat c` for one device at v
(:meth:`~ldpsynth.shared.mechanisms.pure.PureProtocol.linear_variance`), the second term
:func:`~ldpsynth.shared.wide.measure.sampling_variance`. Several views: the inverse-variance mean,
variance :math:`(\\sum_V 1/\\sigma^2_V)^{-1}` (:mod:`~ldpsynth.shared.wide.answers`). The answer is
:math:`(N/Z)\\,\\bar y` (Z: eq. 10's normaliser), so its variance is :math:`(N/Z)^2` times that.

With a prior, f is its projection on each view. Worst case: :math:`a_V(v)` depends on v only through
:math:`w_V(v)`, so σ² depends on f only through the law of the weight y; for one view it is a linear
plus a concave function of that law, maximal on at most two values of y; the plan takes the maximum of
the combined variance over laws on two values (a grid of :data:`GRID` mixtures per pair), exact for
a query with two weights (a cell share, a marginal's cell). Any other query (more attributes than a
view, or a public attribute): from the model, no closed form.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanisms.registry import name_of, protocol_of
from ldpsynth.shared.planning.row_distribution import RowDistribution
from ldpsynth.shared.queries.batch import QueryBatch, TableBlock
from ldpsynth.shared.queries.model import MEAN, RANGE
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.validation import check_epsilon, check_int
from ldpsynth.shared.wide.measure import best_mechanism, sampling_variance
from ldpsynth.shared.wide.views import View, WideDomain, pairs

__all__ = ["GRID", "MODEL", "ViewsPlan", "plan_views", "private_domain", "workload_views"]

#: Mixtures of two weight values tried for the worst case.
GRID = 2001
#: What a plan says of a query no view holds.
MODEL = "from the model (no closed form; see docs/wide.md)"


@dataclass(frozen=True, eq=False)
class ViewsPlan:
    """Per query of the batch: the standard errors in the views mode (NaN where no view holds it), the
    views holding it (attribute names), and the mechanism of each view."""

    views: tuple[tuple[str, ...], ...]
    mechanisms: tuple[str, ...]
    devices_per_view: float
    se_worst: np.ndarray
    se_prior: np.ndarray | None
    holding: tuple[tuple[tuple[str, ...], ...], ...]

    @property
    def headline(self) -> np.ndarray:
        """The prior's figure when there is one, else the worst case."""
        return self.se_worst if self.se_prior is None else self.se_prior


def private_domain(schema: Schema) -> WideDomain:
    """The schema's private attributes as a :class:`~ldpsynth.shared.wide.views.WideDomain` (the same
    mixed-radix order as the schema's private codes)."""
    return WideDomain(tuple(a.name for a in schema.private_attributes),
                      tuple(a.size for a in schema.private_attributes))


def _query_weights(batch: QueryBatch) -> list[tuple[np.ndarray | None, int]]:
    """Per query: its weights over D when its row function ignores the public attributes (else None),
    and its normalisation code."""
    out: list[tuple[np.ndarray | None, int]] = [(None, 0)] * batch.size
    for block in batch.blocks:
        for q, pos in enumerate(block.positions):
            weights: np.ndarray | None = None
            if isinstance(block, TableBlock):
                tables = np.concatenate([block.weights[q], block.default[q][None, :]]) \
                    if block.attribute is not None else block.weights[q]
                if np.all(tables == tables[0]):
                    weights = tables[0]
            out[int(pos)] = (weights, int(block.normalization[q]))
    return out


def _depends(cube: np.ndarray) -> tuple[int, ...]:
    """The axes along which ``cube`` is not constant."""
    return tuple(a for a in range(cube.ndim) if not np.all(cube == np.take(cube, [0], axis=a)))


def _on_view(cube: np.ndarray, attrs: tuple[int, ...], view: View) -> np.ndarray:
    """The weights over ``view``'s cells of a query depending on ``attrs`` (a subset of the view's)."""
    reduced = cube[tuple(slice(None) if a in attrs else 0 for a in range(cube.ndim))]
    shape = [size if a in attrs else 1 for a, size in zip(view.attributes, view.sizes)]
    order = sorted(attrs, key=view.attributes.index)
    reduced = np.transpose(reduced, [sorted(attrs).index(a) for a in order])
    return np.broadcast_to(reduced.reshape(shape), view.sizes).reshape(-1)


def _per_device(view: View, w: np.ndarray, epsilon: float) -> np.ndarray:
    """:math:`a_V(v)`: the exact variance of :math:`w\\cdot\\hat c` from one device at each cell v."""
    protocol = protocol_of(best_mechanism(epsilon, view.size))
    one = np.zeros(view.size, np.int64)
    out = np.empty(view.size)
    for v in range(view.size):
        one[v] = 1
        out[v] = protocol.linear_variance(w[None, :], one)[0]
        one[v] = 0
    return out


def workload_views(schema: Schema, batch: QueryBatch) -> tuple[tuple[str, ...], ...]:
    """The views the queries of ``batch`` need: each query's private attributes (those its weights vary along;
    a query reading a public attribute, or no private one, needs none), a set held by another dropped."""
    domain = private_domain(schema)
    needed: list[tuple[int, ...]] = []
    for weights, _ in _query_weights(batch):
        attrs = () if weights is None else _depends(weights.reshape(domain.sizes))
        if attrs and attrs not in needed:
            needed.append(attrs)
    kept = [a for a in needed if not any(set(a) < set(b) for b in needed)]
    return tuple(tuple(domain.names[j] for j in a) for a in kept)


def plan_views(schema: Schema, batch: QueryBatch, devices: int, epsilon: float, *,
               attributes: Sequence[str] | None = None, prior: RowDistribution | None = None,
               views: Sequence[Sequence[str]] | None = None) -> ViewsPlan:
    """The views mode's standard errors of every query of ``batch`` (module docstring): all 2-way views of
    the private ``attributes`` (default: every private attribute), or the ``views`` given (tuples of private
    attribute names, e.g. :func:`workload_views`), ``devices`` devices, ``epsilon``."""
    n_total = check_int(devices, "devices", 1)
    eps = check_epsilon(epsilon)
    domain = private_domain(schema)
    if views is not None:
        if attributes is not None:
            raise ValidationError("attributes", "absent when the views are given", "given")
        if not views:
            raise ValidationError("views", "at least one view (no query reads a private attribute alone)", "none")
        for i, view in enumerate(views):
            if not view or not set(view) <= set(domain.names) or len(set(view)) != len(view):
                raise ValidationError(f"views[{i}]", f"distinct private attributes of {', '.join(domain.names)}",
                                      f"got {', '.join(view) or 'none'}")
        chosen_views = tuple(domain.view(tuple(domain.names.index(a) for a in view)) for view in views)
    elif attributes is None:
        chosen = tuple(range(domain.width))
    else:
        names = tuple(attributes)
        legal = f"two or more distinct private attributes of {', '.join(domain.names)}"
        if len(names) < 2 or len(set(names)) != len(names) or not set(names) <= set(domain.names):
            raise ValidationError("attributes", legal, f"got {', '.join(names) or 'none'}")
        chosen = tuple(domain.names.index(a) for a in names)
    if views is None:
        if len(chosen) < 2:
            raise ValidationError("attributes", "two or more private attributes (a 2-way view)", f"got {len(chosen)}")
        chosen_views = pairs(domain, chosen)
    n_view = n_total / len(chosen_views)
    if n_view < 1:
        raise ValidationError("devices", f"at least one device per view ({len(chosen_views)} views)",
                              f"got {n_total}")
    sampling = sampling_variance(n_total, n_view, 1.0)  # the factor of the weights' spread
    prior_cube = None if prior is None else prior.private().reshape(domain.sizes)
    worst = np.full(batch.size, np.nan)
    prior_var = np.full(batch.size, np.nan)
    holding: list[tuple[tuple[str, ...], ...]] = []
    for j, (weights, norm) in enumerate(_query_weights(batch)):
        cube = None if weights is None else weights.reshape(domain.sizes)
        attrs = () if cube is None else _depends(cube)
        held = [] if cube is None else [v for v in chosen_views if set(attrs) <= set(v.attributes)]
        holding.append(tuple(tuple(domain.names[a] for a in v.attributes) for v in held))
        if cube is None or not held:
            continue
        scale = {MEAN: 1.0, RANGE: 1.0 / max(float(np.ptp(cube)), 1e-300)}.get(norm, float(n_total))
        on_views = [_on_view(cube, attrs, v) for v in held]
        per_device = [_per_device(v, w, eps) for v, w in zip(held, on_views)]
        if prior_cube is not None:
            precision = 0.0
            for v, w, a in zip(held, on_views, per_device):
                f = prior_cube.sum(axis=tuple(x for x in range(domain.width) if x not in v.attributes))
                f = f.transpose([sorted(v.attributes).index(x) for x in v.attributes]).reshape(-1)
                var = f @ a / n_view + sampling * max(f @ (w * w) - (f @ w) ** 2, 0.0)
                precision += 1.0 / var
            prior_var[j] = scale**2 / precision
        values = np.unique(on_views[0])
        t = np.linspace(0.0, 1.0, GRID)
        best = 0.0
        for lo, hi in itertools.combinations_with_replacement(range(len(values)), 2):
            mean = t * values[hi] + (1 - t) * values[lo]
            second = t * values[hi] ** 2 + (1 - t) * values[lo] ** 2
            precision_t = np.zeros(GRID)
            for w, a in zip(on_views, per_device):
                a_hi, a_lo = a[w == values[hi]][0], a[w == values[lo]][0]
                precision_t += 1.0 / ((t * a_hi + (1 - t) * a_lo) / n_view
                                      + sampling * np.maximum(second - mean**2, 0.0))
            best = max(best, float(np.max(1.0 / precision_t)))
        worst[j] = scale**2 * best
    return ViewsPlan(views=tuple(tuple(domain.names[a] for a in v.attributes) for v in chosen_views),
                     mechanisms=tuple(name_of(best_mechanism(eps, v.size)) for v in chosen_views),
                     devices_per_view=n_view, se_worst=np.sqrt(worst),
                     se_prior=None if prior is None else np.sqrt(prior_var), holding=tuple(holding))
