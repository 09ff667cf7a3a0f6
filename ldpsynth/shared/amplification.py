"""The shuffle accountant: the central (ε, δ) of mechanism E (k-ary randomized response) behind a shuffler, and of
any ε0-LDP mechanism by FMT21's clones (``bound="fmt21-numerical"``; which a collection gets:
``ldpsynth.shared.mechanisms.registry.shuffle_bound``).

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.amplification``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats

from .errors import ValidationError
from .validation import check_choice, check_int, check_probability, check_real

__all__ = [
    "BOUNDS",
    "central_epsilon",
    "central_epsilon_lower_bound",
    "certifies",
    "local_epsilon_for",
    "reports_needed",
    "composed_epsilon",
]

#: The upper bounds :func:`central_epsilon` accepts; the first is the default.
BOUNDS = ("blanket", "fmt21-numerical", "fmt21-closed-form")
#: Largest local ε0 accepted (beyond it no shuffle of at most MAX_REPORTS reports amplifies).
MAX_EPSILON0 = 50.0
#: Largest number of reports accepted (the speed goal is stated for n <= 10^9).
MAX_REPORTS = 10**12
#: Relative width of a block of blanket (or clone) counts evaluated at its smallest count.
BLOCK_WIDTH = 1e-4
#: Counts whose window spans at most this many values are summed value by value (no blocks).
EXACT_SPAN = 256
#: Relative margin added to every computed δ before it is compared with the target.
SAFETY = 1e-6
#: Relative precision of a numerical ε (the returned value is the bracket's safe end).
RTOL = 1e-6
#: Factor by which a bracket grows or shrinks from a first guess of ε.
WALK = 1.25
#: Tail mass of a count left out of a sum, relative to the target δ (it is added back as slack).
TAIL = 1e-6


def _check_common(epsilon0: object, domain_size: object, delta: object) -> tuple[float, int, float]:
    eps0 = check_real(epsilon0, "epsilon0", low=0.0, high=MAX_EPSILON0, low_open=True)
    k = check_int(domain_size, "domain_size", 2)
    return eps0, k, check_probability(delta, "delta")


def _check_n(n: object, name: str = "n") -> int:
    return check_int(n, name, 1, MAX_REPORTS)


# --------------------------------------------------------------------------- counts and their tails


def _window(trials: npt.NDArray[np.float64], prob: float, tail: float) -> tuple[np.ndarray, np.ndarray]:
    """Per entry of ``trials``, a window [lo, hi] of X ~ Bin(trials, prob) with at most ``tail`` on
    each side, by Bernstein's inequality: P[|X − μ| >= t] <= exp(−t² / (2 (σ² + t/3))) on each side,
    so t = L/3 + sqrt(L²/9 + 2 σ² L) with L = ln(1/tail). (scipy's ``binom.isf`` is wrong below
    about 1e-17.) Callers add the exact tails back from ``binom.cdf``/``binom.sf``."""
    if prob >= 1.0:
        return trials.copy(), trials.copy()
    log_tail = math.log(1.0 / tail)
    mean = trials * prob
    spread = log_tail / 3.0 + np.sqrt(log_tail**2 / 9.0 + 2.0 * mean * (1.0 - prob) * log_tail)
    return np.maximum(np.floor(mean - spread), 0.0), np.minimum(np.ceil(mean + spread), trials)


@dataclass(frozen=True)
class _Blocks:
    """A count X ~ Bin(trials, prob) cut into blocks: ``start[j]`` is a block's smallest value,
    ``weight[j]`` its probability (the last block also holds the upper tail), ``below`` the
    probability of the values below the first block."""

    start: np.ndarray
    weight: np.ndarray
    below: float


def _blocks(trials: int, prob: float, tail: float) -> _Blocks:
    """Cut X ~ Bin(trials, prob) into blocks: one per value when its window spans at most
    :data:`EXACT_SPAN` values; else blocks of relative width :data:`BLOCK_WIDTH` (one value per
    block below 1/BLOCK_WIDTH) from four standard deviations below the mean on, and one block for
    the lower tail (probability below 4e-5). The last block also holds the upper tail."""
    if trials == 0 or prob >= 1.0:
        return _Blocks(np.array([float(trials)]), np.array([1.0]), 0.0)
    lo_a, hi_a = _window(np.array([float(trials)]), prob, tail)
    lo, hi = float(lo_a[0]), float(hi_a[0])
    if hi - lo <= EXACT_SPAN:
        return _weighted(np.arange(lo, hi + 2.0), trials, prob)
    mean = trials * prob
    sd = math.sqrt(mean * (1.0 - prob))
    core_lo, core_hi = max(lo, math.floor(mean - 4.0 * sd), 1.0), min(hi, math.floor(mean + 4.0 * sd))
    if core_hi <= core_lo:
        core_lo = core_hi = max(lo, 1.0)
    steps = math.ceil(math.log(core_hi / core_lo) / math.log1p(BLOCK_WIDTH)) + 1
    cuts = np.unique(np.floor(core_lo * np.exp(math.log1p(BLOCK_WIDTH) * np.arange(steps + 1))))
    cuts = np.unique(np.concatenate((cuts[cuts < core_hi], np.arange(core_lo, min(core_hi, 1.0 / BLOCK_WIDTH)))))
    return _weighted(np.concatenate(([lo], cuts[(cuts > lo) & (cuts <= hi)], [hi + 1.0])), trials, prob)


def _weighted(edges: np.ndarray, trials: int, prob: float) -> _Blocks:
    """Blocks [edges[j], edges[j + 1]) of Bin(trials, prob), the last one with the upper tail."""
    cdf = stats.binom.cdf(edges - 1.0, trials, prob)
    weight = np.diff(cdf)
    weight[-1] += float(stats.binom.sf(edges[-1] - 1.0, trials, prob))
    return _Blocks(edges[:-1], np.maximum(weight, 0.0), float(cdf[0]))


def _half_tail(x: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P[Bin(size, 1/2) > x], P[Bin(size, 1/2) = x]) for integer-valued float arrays; the pmf is
    seven times cheaper than the tail, and P[> x − 1] = P[> x] + P[= x]."""
    return (np.asarray(stats.binom.sf(x, size, 0.5), dtype=np.float64),
            np.asarray(stats.binom.pmf(x, size, 0.5), dtype=np.float64))


# --------------------------------------------------------------------------- the divergences


def _victim_among_others(e: float, p: float, alpha: float, rest: float, users: np.ndarray, others: np.ndarray,
                         weight: np.ndarray) -> float:
    """Σ weight · (hockey-stick at e = e^ε, e <= p, of the counts (N_a, N_b) of ``users`` reports),
    where the differing device reports a, b or "rest" with probabilities pα, α, 1 − α − pα (b, a,
    rest under the other data set) and ``others`` of the remaining ``users − 1`` reports are a or
    b, each with probability 1/2.

    The likelihood ratio of an outcome with :math:`t = N_a + N_b` is
    :math:`(p N_a + N_b + g (u - t)) / (N_a + p N_b + g (u - t))` with ``g = rest``
    (WPLWLYWY24 eq. 9), above e exactly when :math:`N_a > \\theta(t)`,
    :math:`\\theta(t) = ((e p - 1) t + (e - 1) g (u - t)) / ((p - 1)(1 + e))`; summing
    :math:`P - e Q` over that region by the differing device's report gives WPLWLYWY24 Thm 4.8:
    report a (others' count A of a's needs A + 1 > θ(s + 1)), report b (A > θ(s + 1)), rest
    (A > θ(s)). Since θ(s + 1) − θ(s) lies in (0, 1] for e <= p, the three tails differ by one
    pmf term at most.
    """
    denominator = (p - 1.0) * (1.0 + e)
    slope = ((e * p - 1.0) - (e - 1.0) * rest) / denominator
    theta = ((e * p - 1.0) * (others + 1.0) + (e - 1.0) * rest * (users - others - 1.0)) / denominator
    cut = np.floor(theta)
    step = cut - np.clip(np.floor(theta - slope), cut - 1.0, cut)  # 1 where θ(s) < cut
    tail_b, at_cut = _half_tail(cut, others)
    terms = ((p - e) * alpha * (tail_b + at_cut)
             + (1.0 - e * p) * alpha * tail_b
             + (1.0 - alpha - p * alpha) * (1.0 - e) * (tail_b + step * at_cut))
    return float(np.dot(weight, terms))


@dataclass(frozen=True)
class _BlanketGrid:
    """The (m, s) grid of the blanket bound for one (ε0, k, n, δ): m blanket reports (block starts),
    s of them a or b; ``weight`` = P[block] · P[S = s | m]; ``slack`` the probability left out."""

    p: float
    alpha: float
    m: np.ndarray
    s: np.ndarray
    weight: np.ndarray
    slack: float


def _blanket_grid(eps0: float, k: int, n: int, delta: float) -> _BlanketGrid:
    p = math.exp(eps0)
    alpha = 1.0 / (p + k - 1.0)
    gamma = k * alpha
    tail = max(delta * TAIL, 1e-300)
    blocks = _blocks(n - 1, gamma, tail)
    rate = 2.0 / k
    lo, hi = _window(blocks.start, rate, tail)
    sizes = (hi - lo + 1).astype(np.int64)
    m = np.repeat(blocks.start, sizes)
    s = np.repeat(lo, sizes) + (np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes))
    pmf = np.ones_like(s) if rate >= 1.0 else stats.binom.pmf(s, m, rate)
    weight = np.repeat(blocks.weight, sizes) * pmf
    outside = (np.zeros_like(lo) if rate >= 1.0
               else stats.binom.cdf(lo - 1, blocks.start, rate) + stats.binom.sf(hi, blocks.start, rate))
    return _BlanketGrid(p, alpha, m, s, weight, blocks.below + float(np.dot(blocks.weight, outside)))


def _blanket_delta(grid: _BlanketGrid, eps: float) -> float:
    """δ(ε) of the blanket bound: Σ_m P[M = m] D_m(ε), plus the slack at its largest contribution
    (a left-out term is at most α max(0, p − e^ε), the divergence D_0 of the device alone)."""
    e = math.exp(eps)
    value = _victim_among_others(e, grid.p, grid.alpha, 1.0, grid.m + 1.0, grid.s, grid.weight)
    return max(value, 0.0) + grid.slack * grid.alpha * max(0.0, grid.p - e)


@dataclass(frozen=True)
class _CloneGrid:
    p: float
    c: np.ndarray
    weight: np.ndarray
    below: float


def _clone_grid(eps0: float, n: int, delta: float) -> _CloneGrid:
    blocks = _blocks(n - 1, math.exp(-eps0), max(delta * TAIL, 1e-300))
    return _CloneGrid(math.exp(eps0), blocks.start, blocks.weight, blocks.below)


def _clone_delta(grid: _CloneGrid, eps: float) -> float:
    """δ(ε) of FMT21 Lemma 3.3's pair: the device (binary RR, keep probability q = p/(p+1)) among
    c clones that are each 0 or 1 with probability 1/2. With x reports of 0 out of c + 1 the
    likelihood ratio is (p x + c + 1 − x)/(x + p (c + 1 − x)), above e exactly when
    x > θ = (e p − 1)(c + 1)/((p − 1)(1 + e)). The divergence given c does not increase with c
    (an extra clone is a post-processing), so blocks use their smallest c; below them, the
    device alone: max(0, p − e)/(p + 1)."""
    e, p = math.exp(eps), grid.p
    q = p / (p + 1.0)
    theta = np.floor((e * p - 1.0) * (grid.c + 1.0) / ((p - 1.0) * (1.0 + e)))
    tail, at_cut = _half_tail(theta, grid.c)
    terms = (q - e * (1.0 - q)) * (tail + at_cut) + ((1.0 - q) - e * q) * tail
    value = float(np.dot(grid.weight, terms))
    return max(value, 0.0) + grid.below * max(0.0, p - e) / (p + 1.0)


def _fmt21_closed_form(eps0: float, n: int, delta: float) -> float:
    """FMT21 Thm 3.1 as the authors' reference implementation evaluates it: with
    :math:`a = 8\\sqrt{e^{\\epsilon_0} \\ln(4/\\delta) / n}`, :math:`c = 8 e^{\\epsilon_0}/n` and
    :math:`\\epsilon' = \\ln(1 + a + c)`,
    :math:`\\epsilon = \\ln(1 + (1 - e^{-\\epsilon_0}) (a + c) / (1 + e^{-\\epsilon_0 - \\epsilon'}))`.
    This is at least the theorem's simplified statement :math:`\\ln(1 + \\frac{e^{\\epsilon_0} - 1}
    {e^{\\epsilon_0} + 1}(a + c))`, so it is valid whichever form the text proves. Outside
    :math:`\\epsilon_0 \\le \\ln(n / (16 \\ln(4/\\delta)))` (the stricter of the condition's two
    readings, ln(2/δ) in the theorem, ln(4/δ) in the code) it certifies nothing: returns ε0."""
    if eps0 > math.log(n / (16.0 * math.log(4.0 / delta))):
        return eps0
    a = 8.0 * math.sqrt(math.exp(eps0) * math.log(4.0 / delta) / n)
    c = 8.0 * math.exp(eps0) / n
    inner = math.log1p(a + c)
    return min(eps0, math.log1p(-math.expm1(-eps0) * (a + c) / (1.0 + math.exp(-eps0 - inner))))


# --------------------------------------------------------------------------- from δ(ε) to ε


def _certified(delta_at: Callable[[float], float], eps: float, delta: float) -> bool:
    return delta_at(eps) * (1.0 + SAFETY) <= delta


def _smallest_epsilon(delta_at: Callable[[float], float], delta: float, high: float,
                      guess: float | None = None) -> float:
    """The smallest ε in [0, high] with δ(ε) (1 + SAFETY) <= delta, to a relative RTOL, rounded up:
    the upper end of a bracket [lo, hi] with hi certified and lo not. ``delta_at`` must not
    increase and must certify ``high``; ``guess`` (optional) seeds the bracket, which then halves
    or grows by :data:`WALK` from it. Illinois (modified regula falsi) steps on sqrt(ln(1/δ)), nearly linear in ε
    for a Gaussian-like privacy loss; bisection while an end has δ = 0."""
    level = math.sqrt(math.log((1.0 + SAFETY) / delta))

    def gap(eps: float) -> float:  # > 0: not certified; <= 0: certified
        value = delta_at(eps)
        return level - math.sqrt(max(-math.log(value), 0.0)) if value > 0.0 else -math.inf

    lo, hi = 0.0, high
    f_lo, f_hi = gap(lo), -math.inf  # high is certified by the caller's contract
    if f_lo <= 0.0:
        return 0.0
    if guess is not None and 0.0 < guess < high:
        point, f_point = guess, gap(guess)
        while f_point <= 0.0 and point > RTOL * high:  # certified: walk down
            hi, f_hi = point, f_point
            point /= WALK
            f_point = gap(point)
        while f_point > 0.0 and point < hi:  # not certified: walk up
            lo, f_lo = point, f_point
            point = min(WALK * point, hi)
            f_point = gap(point) if point < hi else f_hi
        if f_point <= 0.0 and point < hi:
            hi, f_hi = point, f_point
        elif f_point > 0.0 and point > lo:
            lo, f_lo = point, f_point
    side = 0
    while hi - lo > RTOL * hi:
        width = hi - lo
        if math.isfinite(f_lo) and math.isfinite(f_hi):
            point = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
            point = min(max(point, lo + 1e-9 * width), hi - 1e-9 * width)
        else:
            point = lo + width / 2.0
        f_point = gap(point)
        if f_point <= 0.0:
            hi, f_hi = point, f_point
            if side == -1 and math.isfinite(f_lo):
                f_lo /= 2.0
            side = -1
        else:
            lo, f_lo = point, f_point
            if side == 1 and math.isfinite(f_hi):
                f_hi /= 2.0
            side = 1
    return hi


def _largest_epsilon(delta_at: Callable[[float], float], delta: float, high: float) -> float:
    """The largest ε with delta_at(ε) > delta (a lower-bound curve), to a relative RTOL, rounded
    down: the lower end of the final bracket. 0.0 when delta_at(0) <= delta."""
    if delta_at(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, high
    while hi - lo > RTOL * hi:
        mid = (lo + hi) / 2.0
        if delta_at(mid) > delta:
            lo = mid
        else:
            hi = mid
    return lo


def _guess(bound: str, eps0: float, k: int, n: int, delta: float) -> float:
    """A first guess of the numerical ε (only seeds the search). Blanket: the privacy loss is about
    (p − 1)(N_a − N_b)/(γ n), Gaussian with μ = (p − 1) sqrt(α/(2n)); ε ≈ 1.5 μ sqrt(2 ln(1.25/δ)).
    Clones: a third of FMT21 Thm 3.1's leading term."""
    p = math.exp(eps0)
    if bound == "blanket":
        mu = (p - 1.0) * math.sqrt(1.0 / (p + k - 1.0) / (2.0 * n))
        return 1.5 * mu * math.sqrt(2.0 * math.log(1.25 / delta))
    return 8.0 / 3.0 * (p - 1.0) / (p + 1.0) * math.sqrt(p * math.log(4.0 / delta) / n)


def _delta_curve(bound: str, eps0: float, k: int, n: int, delta: float) -> Callable[[float], float]:
    """δ(ε) of a numerical bound for one (ε0, k, n); ``delta`` only sets the truncation."""
    if bound == "blanket":
        grid = _blanket_grid(eps0, k, n, delta)
        return lambda eps: _blanket_delta(grid, eps)
    clones = _clone_grid(eps0, n, delta)
    return lambda eps: _clone_delta(clones, eps)


def _central(eps0: float, k: int, n: int, delta: float, bound: str) -> float:
    if bound == "fmt21-closed-form":
        return _fmt21_closed_form(eps0, n, delta)
    curve = _delta_curve(bound, eps0, k, n, delta)
    return min(eps0, _smallest_epsilon(curve, delta, eps0, _guess(bound, eps0, k, n, delta)))


def central_epsilon(epsilon0: float, domain_size: int, n: int, delta: float, *, bound: str = "blanket") -> float:
    """The smallest central ε the chosen bound certifies for k-RR at ``epsilon0`` behind a shuffler.

    Parameters
    ----------
    epsilon0:
        Local ε0 of each report, in (0, :data:`MAX_EPSILON0`].
    domain_size:
        k = |D| >= 2 (the blanket probability is γ = k/(e^ε0 + k − 1)).
    n:
        Number of reports shuffled together, one per device, in [1, :data:`MAX_REPORTS`]. A lower
        bound on it is safe: extra reports from other devices are a post-processing.
    delta:
        Target δ in (0, 1).
    bound:
        One of :data:`BOUNDS` (module docstring).

    Returns
    -------
    float
        ε with the shuffled reports (ε, δ)-DP for replace-one neighbours; never above ``epsilon0``
        (the local guarantee holds regardless, with δ = 0). Numerical bounds are rounded up.
    """
    eps0, k, dlt = _check_common(epsilon0, domain_size, delta)
    return _central(eps0, k, _check_n(n), dlt, check_choice(bound, "bound", BOUNDS))


def central_epsilon_lower_bound(epsilon0: float, domain_size: int, n: int, delta: float) -> float:
    """A lower bound on the true central ε: the ε of one real neighbouring pair, seen through the
    counts of its two values (WPLWLYWY24 Thm 4.8, which Thm 5.1 identifies with this pair).

    The device holds ``a`` or ``b``; every other device holds a third value ``c`` (so
    ``domain_size >= 3``); the counts :math:`(N_a, N_b)` of the shuffled reports are a
    post-processing of the view, so no valid bound can certify a smaller ε than the one at which
    their hockey-stick divergence equals δ. Rounded down. Compare with :func:`central_epsilon`.
    """
    eps0, k, dlt = _check_common(epsilon0, domain_size, delta)
    k = check_int(k, "domain_size", 3)
    n = _check_n(n)
    p = math.exp(eps0)
    alpha = 1.0 / (p + k - 1.0)
    rest = (k - 2.0) * alpha / (1.0 - 2.0 * alpha)  # WPLWLYWY24 eq. 9 with r = α: (1 − α − pα) r / ((1 − 2r) α)
    tail = max(dlt * TAIL, 1e-300)
    lo, hi = _window(np.array([float(n - 1)]), 2.0 * alpha, tail)
    c = np.arange(lo[0], hi[0] + 1.0)
    weight = stats.binom.pmf(c, n - 1, 2.0 * alpha)
    left_out = float(stats.binom.cdf(lo[0] - 1, n - 1, 2.0 * alpha) + stats.binom.sf(hi[0], n - 1, 2.0 * alpha))

    def delta_at(eps: float) -> float:
        e = math.exp(eps)
        # a left-out term is at least −e times its probability
        return _victim_among_others(e, p, alpha, rest, np.full_like(c, float(n)), c, weight) - e * left_out

    return min(eps0, _largest_epsilon(delta_at, dlt, eps0))


# --------------------------------------------------------------------------- inverses


def _certifies(eps0: float, k: int, n: int, target: float, delta: float, bound: str, rounds: int = 1) -> bool:
    """Whether the bound certifies (target, δ) at (ε0, n) for ``rounds`` reports per device: central ε <= target."""
    if rounds * eps0 <= target:
        return True
    if rounds > 1:
        return composed_epsilon(eps0, k, n, delta, rounds, bound=bound) <= target
    if bound == "fmt21-closed-form":
        return _fmt21_closed_form(eps0, n, delta) <= target
    return _certified(_delta_curve(bound, eps0, k, n, delta), target, delta)


def certifies(epsilon0: float, domain_size: int, n: int, central_epsilon: float, delta: float, *,
              bound: str = "blanket", reports_per_device: int = 1) -> bool:
    """Whether ``bound`` certifies the central (``central_epsilon``, ``delta``) at ``epsilon0`` and ``n`` reports
    per round, each device sending ``reports_per_device`` = m: m·ε0 <= ε (the local guarantee), else for m = 1
    δ(ε)·(1 + :data:`SAFETY`) <= δ on the bound's curve (the test :func:`central_epsilon`'s answer passes by
    construction), for m > 1 :func:`composed_epsilon` <= ε. A stated guarantee below it is not certified."""
    eps0, k, dlt = _check_common(epsilon0, domain_size, delta)
    target = check_real(central_epsilon, "central_epsilon", low=0.0)
    rounds = check_int(reports_per_device, "reports_per_device", 1, 10**6)
    return _certifies(eps0, k, _check_n(n), target, dlt, check_choice(bound, "bound", BOUNDS), rounds)


def local_epsilon_for(central_epsilon: float, domain_size: int, n: int, delta: float, *,
                      reports_per_device: int = 1, bound: str = "blanket") -> float:
    """The largest local ε0 whose central ε at ``n`` reports per round is at most ``central_epsilon``,
    each device sending ``reports_per_device`` = m reports (``composed_epsilon``; m = 1: ``central_epsilon``).

    Rounded down to a relative :data:`RTOL` (the returned ε0 is checked to certify the target). At
    least ``central_epsilon / m`` (basic composition of the local guarantee needs no amplification), at
    most :data:`MAX_EPSILON0`.
    """
    target = check_real(central_epsilon, "central_epsilon", low=0.0, high=MAX_EPSILON0, low_open=True)
    k = check_int(domain_size, "domain_size", 2)
    n = _check_n(n)
    dlt = check_probability(delta, "delta")
    rounds = check_int(reports_per_device, "reports_per_device", 1, 10**6)
    bound = check_choice(bound, "bound", BOUNDS)
    lo = target / rounds
    hi = min(2.0 * lo + 1.0, MAX_EPSILON0)
    while _certifies(hi, k, n, target, dlt, bound, rounds):
        if hi >= MAX_EPSILON0:
            return MAX_EPSILON0
        lo, hi = hi, min(2.0 * hi + 1.0, MAX_EPSILON0)
    while hi - lo > RTOL * hi:
        mid = (lo + hi) / 2.0
        if _certifies(mid, k, n, target, dlt, bound, rounds):
            lo = mid
        else:
            hi = mid
    return lo


def reports_needed(epsilon0: float, domain_size: int, central_epsilon: float, delta: float, *,
                   bound: str = "blanket") -> int:
    """The smallest number of shuffled reports n whose bound at ``epsilon0`` is at most ``central_epsilon``.

    Raises :class:`~ldpsynth.shared.errors.ValidationError` (field ``central_epsilon``) when more
    than :data:`MAX_REPORTS` would be needed.
    """
    eps0, k, dlt = _check_common(epsilon0, domain_size, delta)
    target = check_real(central_epsilon, "central_epsilon", low=0.0, low_open=True)
    bound = check_choice(bound, "bound", BOUNDS)
    if _certifies(eps0, k, 1, target, dlt, bound):
        return 1
    lo, hi = 1, 2  # lo never certifies, hi is searched for
    while not _certifies(eps0, k, hi, target, dlt, bound):
        if hi >= MAX_REPORTS:
            raise ValidationError("central_epsilon", f"a target reachable with at most {MAX_REPORTS} reports "
                                  f"at epsilon0 = {eps0!r}", f"got {target!r}")
        lo, hi = hi, min(hi * 2, MAX_REPORTS)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _certifies(eps0, k, mid, target, dlt, bound):
            hi = mid
        else:
            lo = mid
    return hi


# --------------------------------------------------------------------------- several reports per device


def _rr_composition_delta(eps1: float, rounds: int, eps: float) -> float:
    """Hockey-stick at e^eps of the ``rounds``-fold product of binary RR at eps1 (the pair that
    dominates every (eps1, 0)-DP mechanism, KOV15): with i ~ Bin(rounds, 1/(1 + e^eps1)) flipped
    rounds the privacy loss is eps1 (rounds − 2 i), and δ = E[max(0, 1 − e^{eps − loss})]."""
    q = 1.0 / (1.0 + math.exp(eps1))
    i = np.arange(rounds + 1, dtype=np.float64)
    loss = eps1 * (rounds - 2.0 * i)
    keep = loss > eps
    if not keep.any():
        return 0.0
    pmf = stats.binom.pmf(i[keep], rounds, q)
    return float(np.dot(pmf, -np.expm1(eps - loss[keep])))


def _kov_composed(eps1: float, delta1: float, rounds: int, delta: float) -> float:
    """Smallest ε (rounded up) with 1 − (1 − δ1)^rounds (1 − δ_RR(ε)) <= δ (KOV15 Thm 3.3: the
    ``rounds``-fold composition of (eps1, δ1)-DP mechanisms); inf when δ1 leaves no room."""
    room = -math.expm1(math.log1p(-delta) - rounds * math.log1p(-delta1))  # what δ_RR(ε) may reach
    if room <= 0.0:
        return math.inf
    return _smallest_epsilon(lambda e: _rr_composition_delta(eps1, rounds, e), room, rounds * eps1)


def composed_epsilon(epsilon0: float, domain_size: int, n: int, delta: float, reports_per_device: int, *,
                     bound: str = "blanket", candidates: int = 24) -> float:
    """Central ε when every device sends ``reports_per_device`` = m reports, all shuffled together.

    Assign each device's j-th report to round j: each round is a shuffle of n reports, one per
    device, and shuffling all m·n reports at once is a post-processing of the m round-wise
    shuffles. Replacing one device's data changes one report per round, so the release is the
    m-fold composition of the per-round guarantee. Per round the bound gives a curve of
    (ε1, δ1(ε1)) points; each is composed with the optimal composition theorem for (ε1, δ1)-DP
    mechanisms (KOV15 Thm 3.3, tighter than advanced composition, DRV10 Thm III.3, and basic
    composition), and the smallest result over ``candidates`` points is returned, capped at
    m·ε0 (basic composition of the local guarantee, δ = 0).

    ``n`` is the number of devices in every round (a lower bound is safe). Rounded up.
    """
    eps0, k, dlt = _check_common(epsilon0, domain_size, delta)
    n = _check_n(n)
    rounds = check_int(reports_per_device, "reports_per_device", 1, 10**6)
    bound = check_choice(bound, "bound", BOUNDS)
    candidates = check_int(candidates, "candidates", 2, 1000)
    if rounds == 1:
        return _central(eps0, k, n, dlt, bound)
    best = rounds * eps0
    for eps1, delta1 in _round_points(eps0, k, n, dlt / rounds, bound, candidates):
        if eps1 < eps0:
            basic = rounds * eps1 if rounds * delta1 <= dlt else math.inf  # DR14 Thm 3.16, implied by KOV15
            best = min(best, basic, _kov_composed(eps1, delta1, rounds, dlt))
    return best


def _round_points(eps0: float, k: int, n: int, budget: float, bound: str, count: int) -> list[tuple[float, float]]:
    """Points (ε1, δ1) of the per-round guarantee with δ1 < ``budget`` (the whole δ spent on rounds)."""
    if bound == "fmt21-closed-form":
        fractions = np.geomspace(1e-4, 0.999, count)
        return [(_fmt21_closed_form(eps0, n, budget * f), budget * f) for f in fractions]
    curve = _delta_curve(bound, eps0, k, n, budget * 1e-4)
    first = _smallest_epsilon(curve, budget, eps0, _guess(bound, eps0, k, n, budget))  # δ1 <= budget on
    points = []
    for eps1 in np.linspace(first, min(eps0, 3.0 * first + 1e-12), count):
        delta1 = curve(float(eps1)) * (1.0 + SAFETY)
        if delta1 < budget:
            points.append((float(eps1), delta1))
    return points
