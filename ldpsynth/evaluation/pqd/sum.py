"""DP-PQD deciders for SUM (DP-PQD §5): LM_sum, R2T_sum, SVT_sum (with Algorithm 4), exact accept probabilities.

Values are non-negative and bounded by the public :math:`GS_q` (the domain's largest absolute
value, values clamped into the domain by :class:`~.access.PrivateView`); neighbours are
add/remove-one-tuple. :math:`J = \\max(1, \\lceil \\log_2 GS_q \\rceil)` truncation thresholds
:math:`t_j = 2^j` and :math:`q(D, t) = \\sum\\{A : \\varphi \\wedge A \\le t\\}` (tuples above
:math:`t` dropped, §5.2; the artifact's inclusive ``A <= 2^j``).

* **LM_sum** (§5.1): Algorithm 1 with :math:`q(D) + Lap(GS_q/\\epsilon)`.
* **R2T_sum** (§5.2, eqs. 11-12): :math:`\\tilde q_j = q(D,t_j) + Lap(J t_j/\\epsilon) -
  (J t_j/\\epsilon)\\ln(J/\\beta)`, :math:`\\tilde q = \\max(0, \\max_j \\tilde q_j)` (0 is
  :math:`q(D,0)`), then Algorithm 1. Each :math:`q(D,t_j)` has sensitivity :math:`t_j`, so each
  draw is :math:`\\epsilon/J`-DP: ε in total. (With :math:`J = 0` the artifact divides by zero;
  :math:`J \\ge 1` here.)
* **SVT_sum** (Algorithm 2 with Algorithm 4, §5.3; Algorithm 4, only in DP-PQD's full version
  arXiv:2309.08574, reconstructed from the artifact's ``private_bound_DS``): Algorithm 4 spends ε/3
  on a private bound J on
  :math:`\\log_2 DS_{q,D}` — a noisy count :math:`\\tilde n = n' + Lap(9/\\epsilon)` (ε/9) and an
  AboveThreshold run over the monotone counts :math:`|\\{\\varphi \\wedge A \\le 2^i\\}|` against
  :math:`\\theta\\tilde n` with threshold and query noise :math:`Lap(9/\\epsilon)` (ε/9 + ε/9); J is
  the first i that exceeds (else :math:`\\lceil\\log_2 GS_q\\rceil`). Then one SVT run over the
  monotone queries :math:`q(D,t_j)/t_j` (sensitivity 1) with :math:`\\rho, \\nu_j \\sim
  Lap(3/\\epsilon)` (ε/3 + ε/3): pass 1 answers 0 at the first :math:`q_j + \\nu_j \\ge r/t_j +
  \\rho`, pass 2 answers 1 at the first :math:`q_j + \\nu_j \\ge (l+1)/t_j + \\rho`, else 0.
  ``use_alg4=False`` is the paper's Algorithm 2 as printed: :math:`\\rho, \\nu_j \\sim
  Lap(2/\\epsilon)` over all :math:`\\lceil\\log_2 GS_q\\rceil` thresholds (ε/2 + ε/2). The
  comparison with :math:`l + 1` is the paper's (integer-valued sums: :math:`q > l \\iff q \\ge l + 1`).

The ``*_accept_probability`` functions give :math:`\\Pr[o = 1]` exactly (closed form for LM and
R2T; one-dimensional quadrature for SVT), used to check simulations and privacy at the boundary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy import integrate

from ldpsynth.evaluation.pqd.access import PrivateView
from ldpsynth.evaluation.pqd.noise import laplace, laplace_cdf
from ldpsynth.evaluation.pqd.problem import Decider, DecisionProblem, generic_decider
from ldpsynth.shared.validation import check_epsilon, check_probability, check_real, real_range


def truncation_thresholds(global_sensitivity: float) -> np.ndarray:
    """:math:`t_j = 2^j`, :math:`j = 1..\\max(1, \\lceil \\log_2 GS_q \\rceil)`."""
    j_max = max(1, math.ceil(math.log2(global_sensitivity))) if global_sensitivity > 1 else 1
    return 2.0 ** np.arange(1, j_max + 1)


# ----- LM_sum ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class LMSum(Decider):
    """LM_sum (§5.1): Algorithm 1 with :math:`q(D) + Lap(GS_q/\\epsilon)`."""

    name: ClassVar[str] = "LM_sum"
    aggregates: ClassVar[tuple[str, ...]] = ("sum",)

    def _decide(self, view: PrivateView, problem: DecisionProblem, rng: np.random.Generator, trials: int) -> np.ndarray:
        gs = problem.require_domain(self.name).global_sensitivity
        with view.accountant.step("Laplace sum q(D) + Lap(GS_q/eps)", problem.epsilon):
            estimates = view.total() + laplace(rng, gs / problem.epsilon, trials)
        return generic_decider(estimates, problem)


# ----- R2T_sum ---------------------------------------------------------------------------------
def r2t_scales(thresholds: np.ndarray, epsilon: float, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """Noise scales :math:`b_j = J t_j/\\epsilon` and downward shifts :math:`b_j \\ln(J/\\beta)` of eq. 11."""
    j = len(thresholds)
    scales = j * thresholds / epsilon
    return scales, scales * math.log(j / beta)


def r2t_accept_probability(truncated: np.ndarray, thresholds: np.ndarray, problem: DecisionProblem,
                           beta: float) -> float:
    """:math:`\\Pr[l < \\max(0, \\max_j \\tilde q_j) < r]` in closed form.

    :math:`\\Pr[\\tilde q \\le x] = \\prod_j F_{b_j}(x - q(D,t_j) + b_j\\ln(J/\\beta))` for
    :math:`x \\ge 0` (independent draws) and 0 for :math:`x < 0`.
    """
    scales, shifts = r2t_scales(thresholds, problem.epsilon, beta)
    centers = np.asarray(truncated, dtype=np.float64) - shifts
    l, r = problem.interval

    below_r = float(np.prod(laplace_cdf(r - centers, scales))) if r > 0 else 0.0
    at_most_l = float(np.prod(laplace_cdf(l - centers, scales))) if l >= 0 else 0.0
    return max(0.0, below_r - at_most_l)


@dataclass(frozen=True)
class R2TSum(Decider):
    """R2T_sum (§5.2): Algorithm 1 with the Race-to-the-Top estimate (eqs. 11-12)."""

    name: ClassVar[str] = "R2T_sum"
    aggregates: ClassVar[tuple[str, ...]] = ("sum",)
    beta: float = 0.05

    def __post_init__(self) -> None:
        check_probability(self.beta, "beta")

    def _decide(self, view: PrivateView, problem: DecisionProblem, rng: np.random.Generator, trials: int) -> np.ndarray:
        thresholds = truncation_thresholds(problem.require_domain(self.name, non_negative=True).global_sensitivity)
        scales, shifts = r2t_scales(thresholds, problem.epsilon, self.beta)
        with view.accountant.step(f"R2T: {len(thresholds)} truncated sums + Lap(J t_j/eps), eps/J each",
                                  problem.epsilon):
            noisy = view.truncated_sums(thresholds) + laplace(rng, 1.0, (trials, len(thresholds))) * scales - shifts
        return generic_decider(np.maximum(0.0, noisy.max(axis=1)), problem)


# ----- SVT_sum ---------------------------------------------------------------------------------
def _first_hit(hits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: whether any column hits, and the first hitting column."""
    return np.asarray(hits.any(axis=1)), hits.argmax(axis=1)


@dataclass(frozen=True)
class SVTSum(Decider):
    """SVT_sum (Algorithm 2; with Algorithm 4's private bound on :math:`DS_{q,D}` unless ``use_alg4=False``)."""

    name: ClassVar[str] = "SVT_sum"
    aggregates: ClassVar[tuple[str, ...]] = ("sum",)
    theta: float = 0.95
    use_alg4: bool = True

    def __post_init__(self) -> None:
        check_real(self.theta, "theta", low=0.0, high=1.0, low_open=True)

    def _decide(self, view: PrivateView, problem: DecisionProblem, rng: np.random.Generator, trials: int) -> np.ndarray:
        thresholds = truncation_thresholds(problem.require_domain(self.name, non_negative=True).global_sensitivity)
        eps = problem.epsilon
        if self.use_alg4:
            bound = algorithm4_bound(view, thresholds, eps / 3.0, self.theta, rng, trials)
            svt_eps = 2.0 * eps / 3.0
        else:
            bound = np.full(trials, len(thresholds))
            svt_eps = eps
        # AboveThreshold with threshold noise eps1 = svt_eps/2 and monotone-query noise eps2 = svt_eps/2.
        scale = 2.0 / svt_eps
        l, r = problem.interval
        with view.accountant.step(f"SVT over q(D, 2^j)/2^j: threshold Lap({scale:g}) + first-top Lap({scale:g}), "
                                  "monotone queries", svt_eps):
            normalized = view.truncated_sums(thresholds) / thresholds
        rho = laplace(rng, scale, (trials, 1))
        active = np.arange(len(thresholds))[None, :] < bound[:, None]
        pass1 = (normalized + laplace(rng, scale, (trials, len(thresholds))) >= r / thresholds + rho) & active
        pass2 = (normalized + laplace(rng, scale, (trials, len(thresholds))) >= (l + 1.0) / thresholds + rho) & active
        return (~pass1.any(axis=1) & pass2.any(axis=1)).astype(np.int8)


def algorithm4_bound(view: PrivateView, thresholds: np.ndarray, epsilon: float, theta: float,
                     rng: np.random.Generator, trials: int) -> np.ndarray:
    """Algorithm 4 (ε-DP, here called with ε/3): the number J of truncation thresholds SVT_sum uses.

    :math:`\\tilde n = n' + Lap(3/\\epsilon)`; AboveThreshold over the counts
    :math:`c_i = |\\{\\varphi \\wedge A \\le 2^i\\}|` (sensitivity 1, monotone) with threshold
    :math:`\\theta \\tilde n + \\rho`, :math:`\\rho, \\nu_i \\sim Lap(3/\\epsilon)`; J = first i with
    :math:`c_i + \\nu_i \\ge \\theta\\tilde n + \\rho`, else the largest. Returns J per trial.
    """
    scale = 3.0 / epsilon
    with view.accountant.step(f"Alg. 4: noisy count n' + Lap({scale:g})", epsilon / 3.0):
        noisy_n = view.count() + laplace(rng, scale, trials)
    with view.accountant.step(f"Alg. 4: AboveThreshold over counts(A <= 2^i), threshold Lap({scale:g}) + "
                              f"first-top Lap({scale:g}), monotone", 2.0 * epsilon / 3.0):
        counts = view.count_at_most(thresholds)
    threshold = theta * noisy_n + laplace(rng, scale, trials)
    hit, first = _first_hit(counts + laplace(rng, scale, (trials, len(thresholds))) >= threshold[:, None])
    return np.where(hit, first + 1, len(thresholds))


# ----- exact accept probability of SVT_sum ----------------------------------------------------
def _laplace_pdf(x: float, scale: float) -> float:
    return math.exp(-abs(x) / scale) / (2.0 * scale)


def _sum_of_laplaces_pdf(z: float, a: float, b: float) -> float:
    """Density of :math:`Lap(a) + Lap(b)`: :math:`(a e^{-|z|/a} - b e^{-|z|/b})/(2(a^2-b^2))` (a = b: its limit)."""
    if abs(a - b) <= 1e-12 * max(a, b):
        return (b + abs(z)) * math.exp(-abs(z) / b) / (4.0 * b * b)
    return (a * math.exp(-abs(z) / a) - b * math.exp(-abs(z) / b)) / (2.0 * (a * a - b * b))


def _expect(function, density, scale: float, kinks: np.ndarray) -> float:
    """:math:`\\int f(z) p(z) dz` over :math:`|z| \\le 60\\,scale` by adaptive quadrature, split at the kinks."""
    lo, hi = -60.0 * scale, 60.0 * scale
    points = np.unique(np.concatenate([[lo, 0.0, hi], kinks[(kinks > lo) & (kinks < hi)]]))
    total = 0.0
    for a, b in zip(points[:-1], points[1:]):
        value, _ = integrate.quad(lambda z: function(z) * density(z), a, b, epsabs=1e-13, epsrel=1e-10, limit=200)
        total += value
    return total


def svt_accept_given_bound(normalized: np.ndarray, thresholds: np.ndarray, l: float, r: float,
                           rho_scale: float, nu_scale: float) -> float:
    """:math:`\\Pr[o = 1]` of Algorithm 2 over ``len(thresholds)`` thresholds, by quadrature over ρ.

    :math:`\\int p_\\rho(\\rho)\\prod_j F_\\nu(r/t_j + \\rho - q_j)\\,[1 -
    \\prod_j F_\\nu((l+1)/t_j + \\rho - q_j)]\\,d\\rho`.
    """
    t1 = r / thresholds - normalized
    t2 = (l + 1.0) / thresholds - normalized

    def accept(rho: float) -> float:
        return float(np.prod(laplace_cdf(t1 + rho, nu_scale)) * (1.0 - np.prod(laplace_cdf(t2 + rho, nu_scale))))

    return _expect(accept, lambda z: _laplace_pdf(z, rho_scale), rho_scale, np.concatenate([-t1, -t2]))


def algorithm4_distribution(counts: np.ndarray, selected: float, epsilon: float, theta: float) -> np.ndarray:
    """:math:`\\Pr[J = i]`, i = 1..len(counts), of :func:`algorithm4_bound` (ε its budget), by quadrature.

    With :math:`Z = \\theta\\,Lap(3/\\epsilon) + Lap(3/\\epsilon)` (the noise of :math:`\\theta\\tilde n + \\rho`),
    :math:`\\Pr[J = i \\mid Z] = \\prod_{k<i} F_\\nu(\\theta n' + Z - c_k)\\,(1 - F_\\nu(\\theta n' + Z - c_i))` for
    i below the last, which takes the rest.
    """
    scale = 3.0 / epsilon
    shift = theta * selected - np.asarray(counts, dtype=np.float64)
    out = np.empty(len(counts))
    for i in range(len(counts)):
        def mass(z: float, i: int = i) -> float:
            below = laplace_cdf(shift[:i] + z, scale)
            stop = 1.0 if i == len(counts) - 1 else 1.0 - float(laplace_cdf(shift[i] + z, scale))
            return float(np.prod(below)) * stop

        out[i] = _expect(mass, lambda z: _sum_of_laplaces_pdf(z, theta * scale, scale), scale, -shift)
    return out


def svt_accept_probability(truncated: np.ndarray, counts: np.ndarray, selected: float, thresholds: np.ndarray,
                           problem: DecisionProblem, theta: float = 0.95, use_alg4: bool = True) -> float:
    """Exact :math:`\\Pr[o=1]` of :class:`SVTSum` from the private statistics it reads."""
    l, r = problem.interval
    normalized = np.asarray(truncated, dtype=np.float64) / thresholds
    if not use_alg4:
        scale = 2.0 / problem.epsilon
        return svt_accept_given_bound(normalized, thresholds, l, r, scale, scale)
    scale = 3.0 / problem.epsilon
    weights = algorithm4_distribution(counts, selected, problem.epsilon / 3.0, theta)
    return float(sum(w * svt_accept_given_bound(normalized[:j + 1], thresholds[:j + 1], l, r, scale, scale)
                     for j, w in enumerate(weights) if w > 0))


# ----- effectiveness thresholds (DP-PQD Def. 3.4): the upper bounds of §5 ------------------------
def _check_bound_inputs(global_sensitivity: float, epsilon: float, delta: float) -> None:
    check_real(global_sensitivity, "global_sensitivity", low=1.0, low_open=True,
               legal=real_range(1.0, low_open=True) + " (log2 GS_q > 0)")
    check_epsilon(epsilon)
    check_probability(delta, "delta")  # the error probability of Def. 3.4, in (0, 1) like a delta of (eps, delta)-DP


def lm_sum_tau_min_bound(global_sensitivity: float, epsilon: float, delta: float) -> float:
    """DP-PQD Prop. 5.2: :math:`\\tau_{min}^{LM_{sum},\\delta} \\le (GS_q/\\epsilon)\\ln(1/(2\\delta))` (Ex. 5.3)."""
    _check_bound_inputs(global_sensitivity, epsilon, delta)
    return global_sensitivity / epsilon * math.log(1.0 / (2.0 * delta))


def r2t_sum_tau_min_bound(global_sensitivity: float, downward_sensitivity: float, epsilon: float,
                          delta: float) -> float:
    """DP-PQD Prop. 5.5: the effectiveness threshold of R2T_sum is at most

    .. math::  \\tau_{min}^{R2T_{sum},\\delta} \\le 4\\log GS_q\\,\\ln(\\log GS_q/\\delta)\\,DS_{q,D}/\\epsilon.

    ``log`` is :math:`\\log_2` (unrounded), as in Ex. 5.6 (GS_q = 2M, DS_{q,D} = 9K, ε = 0.1, δ = 0.05 gives
    4.549e7); :math:`DS_{q,D}` (Def. 2.4) is the largest aggregated value among the selected tuples.
    """
    _check_bound_inputs(global_sensitivity, epsilon, delta)
    check_real(downward_sensitivity, "downward_sensitivity", low=0.0, high=global_sensitivity,
               legal=f"a number in [0, GS_q = {global_sensitivity:g}]")
    log_gs = math.log2(global_sensitivity)
    return 4.0 * log_gs * math.log(log_gs / delta) * downward_sensitivity / epsilon
