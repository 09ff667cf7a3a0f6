"""Frequency oracles built for large domains, OUE and OLH: their variance on any statistical query.

Reference: Tianhao Wang, Jeremiah Blocki, Ninghui Li, Somesh Jha, "Locally Differentially Private
Protocols for Frequency Estimation", USENIX Security 2017 (WBLJ17 below). Mechanism E is their direct
encoding (DE, k-ary randomized response): its count variance grows with |D|, theirs does not, and
the planner (:mod:`ldpsynth.shared.planning`) puts the two side by side.

**Pure protocols (WBLJ17 §3, Definition 3).** A user holding v reports y; the support of y is a set of
values. v is in it with probability :math:`p^*`, any other value with probability :math:`q^*`. The
count estimate :math:`\\hat c(v) = (\\sum_j 1[v \\in \\mathrm{Support}(y_j)] - n q^*)/(p^* - q^*)` is
unbiased with (WBLJ17 §3, eq. 2)

.. math::  \\mathrm{Var}\\,\\hat c(v) = \\frac{n q^*(1 - q^*)}{(p^* - q^*)^2}
           + \\frac{n f_v (1 - p^* - q^*)}{p^* - q^*},

:math:`f_v` the share of users holding v; eq. 4 keeps the first term.

* **OUE** (WBLJ17 §4.3): unary encoding, the true bit kept as 1 with :math:`p^* = 1/2`, every other bit
  set with :math:`q^* = 1/(e^\\epsilon + 1)`; :math:`\\mathrm{Var}^* = n\\,4e^\\epsilon/(e^\\epsilon - 1)^2`
  (eq. 9).
* **OLH** (WBLJ17 §4.4): the user hashes v into :math:`g` buckets with a random hash function H and
  reports (H, k-ary randomized response of H(v) over the g buckets): :math:`p^* = e^\\epsilon/(e^\\epsilon + g - 1)`,
  :math:`q^* = 1/g`. WBLJ17's optimum :math:`g = e^\\epsilon + 1` gives eq. 11, the variance of OUE; a hash
  range is an integer, so we use :math:`g = \\mathrm{round}(e^\\epsilon) + 1`.

**A weighted sum of counts.** A statistical query on a group of :math:`n_g` rows with weights
:math:`w(v)` over D is :math:`\\sum_v w(v) c_g(v)`; its oracle estimate is
:math:`\\sum_v (w(v) - m)\\,\\hat c_g(v) + m\\,n_g` with :math:`m` the mean of w over D (:math:`n_g` is
public; centring makes the figure invariant to adding a constant to w, as E's estimator is). One
user's support indicators of two distinct values are uncorrelated: OUE perturbs its bits
independently; for OLH with a uniformly random H, :math:`H(u)` for :math:`u \\ne v` is independent of
:math:`(H(v), y)` (derived here; WBLJ17's analysis assumes such hashing). So the variances add:

.. math::  \\mathrm{Var} = \\sum_v (w(v) - m)^2\\,\\mathrm{Var}\\,\\hat c_g(v)
           = A\\,n_g \\sum_v D(v) + B \\sum_v h_g(v) D(v), \\quad D(v) = (w(v) - m)^2,

.. math::  A = \\frac{q^*(1 - q^*)}{(p^* - q^*)^2}, \\qquad B = \\frac{1 - p^* - q^*}{p^* - q^*},

with :math:`h_g(v)` the rows of the group holding v (eq. 2, term by term). The planner evaluates
these with the same per-group sums as E's eq. 17 estimator (whose :math:`A, B` are in
:mod:`ldpsynth.shared.planning`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ldpsynth.shared.validation import check_epsilon


@dataclass(frozen=True)
class PureProtocol:
    """A pure LDP protocol by its support probabilities :math:`p^*` and :math:`q^*` (WBLJ17 Definition 3)."""

    name: str
    p: float
    q: float

    @property
    def a(self) -> float:
        """:math:`q^*(1-q^*)/(p^*-q^*)^2`: the variance per row of a centred weight (eq. 2, first term)."""
        return self.q * (1.0 - self.q) / (self.p - self.q) ** 2

    @property
    def b(self) -> float:
        """:math:`(1-p^*-q^*)/(p^*-q^*)`: the extra variance of a row holding the value (eq. 2, second term)."""
        return (1.0 - self.p - self.q) / (self.p - self.q)


def oue(epsilon: float) -> PureProtocol:
    """Optimized unary encoding at ε: :math:`p^* = 1/2`, :math:`q^* = 1/(e^\\epsilon+1)` (WBLJ17 §4.3)."""
    eps = check_epsilon(epsilon)
    return PureProtocol("OUE", 0.5, 1.0 / (math.exp(eps) + 1.0))


def olh_hash_range(epsilon: float) -> int:
    """The integer hash range :math:`g = \\mathrm{round}(e^\\epsilon) + 1` (WBLJ17 §4.4:
    :math:`g = e^\\epsilon + 1`)."""
    return int(round(math.exp(check_epsilon(epsilon)))) + 1


def olh(epsilon: float) -> PureProtocol:
    """Optimized local hashing at ε: :math:`p^* = e^\\epsilon/(e^\\epsilon+g-1)`, :math:`q^* = 1/g` (WBLJ17 §4.4)."""
    eps = check_epsilon(epsilon)
    g = olh_hash_range(eps)
    return PureProtocol("OLH", math.exp(eps) / (math.exp(eps) + g - 1.0), 1.0 / g)
