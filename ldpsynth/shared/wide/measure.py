"""Measuring the views: each device reports its view's cell with the full ε, by the best oracle for the view.

Per view V of k cells with :math:`n_V` devices: the oracle's support counts :math:`S(v)` give the
unbiased counts (WBLJ17 §3, eq. 2 and WYZ eq. 17 for E)

.. math::  \\hat c(v) = \\frac{S(v) - n_V q^*}{p^* - q^*}, \\qquad
           \\operatorname{Var}\\hat c(v) = n_V\\frac{q^*(1-q^*)}{(p^*-q^*)^2}
           + c(v)\\frac{1 - p^* - q^*}{p^* - q^*}

exactly (:meth:`~ldpsynth.shared.mechanisms.pure.PureProtocol.linear_variance` with one cell's indicator
as the weights, where the pair probabilities cancel). The share of cell v among all N
devices is estimated by :math:`\\hat f(v) = \\hat c(v)/n_V`; given :math:`n_V`, the view's devices are a
uniform random subset of the N (the assignment is uniform and independent of the rows), so

.. math::  \\operatorname{Var}\\hat f(v) = \\frac{\\operatorname{Var}\\hat c(v)}{n_V^2}
           + \\frac{N - n_V}{N - 1}\\,\\frac{f(v)(1 - f(v))}{n_V}

(the second term: sampling without replacement). The oracle is the one with the smallest variance
per report for a rare value, :math:`q^*(1-q^*)/(p^*-q^*)^2` (WBLJ17 eq. 4), among E (GRR), OUE and
OLH at the view's size; E is kept while within :data:`~ldpsynth.shared.planning.choice.CLOSE` of the best.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..mechanism import MechanismE
from ..mechanisms.pure import PureProtocol
from ..mechanisms.registry import Mechanism, categorical, least_variance, make_mechanism, name_of, protocol_of
from ..planning.choice import CLOSE
from ..validation import check_codes, check_epsilon
from .assignment import assign_view
from .views import View, WideDomain

__all__ = ["VIEW_MECHANISMS", "best_mechanism", "sampling_variance", "support_counts", "ViewMeasurement",
           "measure", "simulate", "device_report"]

#: The mechanisms a view may use, in order of preference at equal error.
VIEW_MECHANISMS = ("E", "OLH", "OUE")


def sampling_variance(population: int, n: float, spread: npt.ArrayLike) -> np.ndarray:
    """The sampling-without-replacement term :math:`\\frac{N - n_V}{N - 1}\\,\\mathrm{spread}/n_V` of a view's
    share estimate (module docstring), ``spread`` the population variance of the query's weight per device
    (:math:`f(1-f)` for one cell)."""
    return (population - n) / max(population - 1, 1) * np.asarray(spread, dtype=np.float64) / n


@functools.lru_cache(maxsize=256)
def best_mechanism(epsilon: float, size: int) -> Mechanism:
    """The mechanism of :data:`VIEW_MECHANISMS` for a view of ``size`` cells at ``epsilon`` (module docstring)."""
    eps = check_epsilon(epsilon)
    return make_mechanism(least_variance(eps, size, VIEW_MECHANISMS, CLOSE), eps, size)


def support_counts(mechanism: Mechanism, reports: npt.ArrayLike) -> tuple[int, np.ndarray]:
    """``(n, S)``: the number of reports and the support counts :math:`S(v)` of each cell."""
    oracle = categorical(mechanism)
    if isinstance(oracle, MechanismE):
        codes = check_codes(reports, "reports", oracle.domain_size, ndim=1)
        return len(codes), np.bincount(codes, minlength=oracle.domain_size).astype(np.int64)
    stats = oracle.statistics(reports)
    return stats.n, stats.support_counts()


@dataclass(frozen=True, eq=False)
class ViewMeasurement:
    """One view's reports reduced to their sufficient statistic: n, the support counts, the mechanism."""

    view: View
    mechanism: Mechanism
    n: int
    support: np.ndarray

    @property
    def protocol(self) -> PureProtocol:
        return protocol_of(self.mechanism)

    def counts(self) -> np.ndarray:
        """:math:`\\hat c(v)`, unbiased for the counts among the view's n devices."""
        return self.protocol.count_estimates(self.support, self.n)

    def count_variance(self, histogram: npt.ArrayLike) -> np.ndarray:
        """The exact variance of each :math:`\\hat c(v)` when the view's devices have ``histogram``."""
        return self.protocol.linear_variance(np.eye(self.view.size), histogram)

    def count_variance_estimate(self) -> np.ndarray:
        """The unbiased plug-in estimate of :meth:`count_variance`."""
        return self.protocol.linear_variance_estimate(np.eye(self.view.size), self.counts(), self.n)

    def shares(self) -> np.ndarray:
        """:math:`\\hat f(v) = \\hat c(v)/n_V`: the estimated share of each cell among all devices."""
        return self.counts() / max(self.n, 1)

    def share_variance(self, population: int, shares: npt.ArrayLike | None = None) -> np.ndarray:
        """:math:`\\operatorname{Var}\\hat f(v)` among ``population`` devices (module docstring) at the true
        ``shares`` (default: the estimates, clipped to [0, 1], and the plug-in count variance)."""
        n, total = self.n, int(population)
        if n < 1 or total < n:
            raise ValidationError("population", f"an integer >= the view's {n} devices (>= 1)", f"got {population}")
        if shares is None:
            f = np.clip(self.shares(), 0.0, 1.0)
            ldp = self.count_variance_estimate()
        else:
            f = np.asarray(shares, dtype=np.float64)
            ldp = self.protocol.linear_variance(np.eye(self.view.size), np.rint(f * n).astype(np.int64))
        return ldp / n**2 + sampling_variance(total, n, f * (1.0 - f))

    def share_covariance(self, population: int) -> np.ndarray:
        """The plug-in covariance matrix of :math:`\\hat f` among ``population`` devices: the protocol's
        :meth:`~ldpsynth.shared.mechanisms.pure.PureProtocol.count_covariance` at :math:`\\hat c`, over
        :math:`n_V^2`, plus the sampling term :math:`\\frac{N - n_V}{N - 1}(\\mathrm{diag} f - ff^\\top)/n_V`
        (f clipped to [0, 1]); :math:`w^\\top\\Sigma w` is :meth:`linear_share_variance` before its clipping."""
        n, total = self.n, int(population)
        if n < 1 or total < n:
            raise ValidationError("population", f"an integer >= the view's {n} devices (>= 1)", f"got {population}")
        c = self.counts()
        f = np.clip(c / n, 0.0, 1.0)
        return (self.protocol.count_covariance(c, n) / n**2
                + (total - n) / max(total - 1, 1) * (np.diag(f) - np.outer(f, f)) / n)

    def linear_share_variance(self, weights: npt.ArrayLike, population: int) -> np.ndarray:
        """The plug-in variance of :math:`\\sum_v w(v)\\hat f(v)` for each row w of ``weights`` (e.g. the cells
        of a sub-marginal): :math:`\\operatorname{Var}(w\\cdot\\hat c)/n_V^2` (the protocol's exact linear
        variance, estimated) plus the sampling term
        :math:`\\frac{N - n_V}{N - 1}\\,(\\sum_v w(v)^2 f(v) - (\\sum_v w(v) f(v))^2)/n_V`."""
        n, total = self.n, int(population)
        if n < 1 or total < n:
            raise ValidationError("population", f"an integer >= the view's {n} devices (>= 1)", f"got {population}")
        w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
        c = self.counts()
        f = np.clip(c / n, 0.0, 1.0)
        ldp = self.protocol.linear_variance_estimate(w, c, n)
        spread = np.maximum((w * w) @ f - (w @ f) ** 2, 0.0)
        return np.maximum(ldp, 0.0) / n**2 + sampling_variance(total, n, spread)


def measure(view: View, mechanism: Mechanism, reports: npt.ArrayLike) -> ViewMeasurement:
    """The measurement of ``view`` from its devices' ``reports`` (the aggregator's side)."""
    if mechanism.domain_size != view.size:
        raise ValidationError("mechanism", f"a mechanism over the view's {view.size} cells",
                              f"got {mechanism.domain_size}")
    n, support = support_counts(mechanism, reports)
    return ViewMeasurement(view, mechanism, n, support)


def simulate(domain: WideDomain, views: Sequence[View], rows: npt.ArrayLike, assignment: npt.ArrayLike,
             epsilon: float, rng: np.random.Generator) -> list[ViewMeasurement]:
    """Every view measured from the ``rows`` assigned to it (``assignment[i]``: row i's view), each device's
    cell perturbed by the view's :func:`best_mechanism` from the seeded ``rng`` (simulations only)."""
    x = domain.check_rows(rows)
    views_of = check_codes(assignment, "assignment", len(views), ndim=1)
    if len(views_of) != len(x):
        raise ValidationError("assignment", f"one view per row ({len(x)})", f"got {len(views_of)}")
    out = []
    for i, view in enumerate(views):
        mechanism = best_mechanism(epsilon, view.size)
        reports = mechanism.perturb(view.cells(x[views_of == i]), rng)
        out.append(measure(view, mechanism, reports))
    return out


def device_report(domain: WideDomain, views: Sequence[View], salt: bytes, device_key: bytes,
                  row: npt.ArrayLike, epsilon: float) -> tuple[int, str, np.ndarray]:
    """A device's report: ``(its view, the mechanism's name, the report)``, the view from
    :func:`~ldpsynth.shared.wide.assignment.assign_view`, the report from the OS CSPRNG with the full ε."""
    x = domain.check_rows(np.asarray(row)[None, :])
    index = assign_view(salt, device_key, len(views))
    view = views[index]
    mechanism = best_mechanism(epsilon, view.size)
    cell = view.cells(x)
    report = mechanism.perturb_secure(cell)
    return index, name_of(mechanism), report

