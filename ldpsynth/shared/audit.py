"""An LDP audit by a distinguishing game (LDP-Auditor, AG24 §4), and the exact check behind it on small domains.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.audit``.

:func:`audit` plays AG24's game against a mechanism's device sampler (``perturb_secure``, the OS CSPRNG):
N reports of v1 and N of v2, the event S = "v1 in the report's support, v2 not" (:func:`distinguishing_event`),
Clopper-Pearson (CP34) bounds one-sided at α/2 each (:func:`clopper_pearson`), and
:math:`\\hat\\epsilon_{\\mathrm{lower}} = \\ln(\\underline{\\mathrm{TPR}}/\\overline{\\mathrm{FPR}})`, which is
below the real ε with probability >= 1 − α; a violation is :math:`\\hat\\epsilon_{\\mathrm{lower}}` above the
claimed ε. :func:`audit_power` is the exact probability of finding one. :func:`output_law`,
:func:`worst_case_ratio`, :func:`satisfies_exactly` and :func:`event_probabilities` are the exact laws on
domains of k <= 16 (the event's TPR/FPR is every mechanism's worst-case ratio, e^ε).

Imports scipy (the CP bounds): ``import ldpsynth`` does not import this module.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt
from scipy import stats

from .errors import ValidationError
from .mechanism import MechanismE
from .mechanisms import exact
from .mechanisms.bits import parity
from .mechanisms.hadamard import HadamardResponse
from .mechanisms.olh import OLH
from .mechanisms.oracle import BitSetOracle
from .mechanisms.registry import Mechanism, categorical, name_of
from .privacy import ratio_within_epsilon
from .validation import check_epsilon, check_int, check_probability, check_real

__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_DRAWS",
    "AuditResult",
    "clopper_pearson",
    "supports",
    "distinguishing_event",
    "audit",
    "audit_power",
    "event_probabilities",
    "event_epsilon",
    "output_law",
    "worst_case_ratio",
    "satisfies_exactly",
    "audit_table",
    "markdown_table",
]

#: AG24's level: the audit's false-alarm probability (each CP bound one-sided at α/2).
DEFAULT_ALPHA = 0.01
#: AG24's number of trials per input.
DEFAULT_DRAWS = 1_000_000
#: Largest domain of the exact laws (:data:`ldpsynth.shared.mechanisms.exact.MAX_DOMAIN`).
MAX_EXACT_DOMAIN = exact.MAX_DOMAIN
#: Probability mass left out of each binomial by :func:`audit_power`.
_TAIL = 1e-16


# ----- Clopper-Pearson ------------------------------------------------------------------------------
def clopper_pearson(successes: int, trials: int, alpha: float) -> tuple[float, float]:
    """One-sided Clopper-Pearson (CP34) bounds of a binomial proportion, each at level ``alpha``.

    Parameters
    ----------
    successes : int
        The count x, in ``[0, trials]``.
    trials : int
        The number of trials n >= 1.
    alpha : float
        The level of each bound, in (0, 1).

    Returns
    -------
    tuple of float
        ``(lower, upper)``: :math:`P_p[X \\ge x] = \\alpha` at ``lower`` (the ``alpha`` quantile of
        Beta(x, n − x + 1); 0 when x = 0) and :math:`P_p[X \\le x] = \\alpha` at ``upper`` (the
        1 − ``alpha`` quantile of Beta(x + 1, n − x); 1 when x = n). ``lower`` is below the true
        proportion, and ``upper`` above it, each with probability at least 1 − ``alpha``.

    >>> lo, hi = clopper_pearson(0, 100, 0.05)
    >>> lo, round(hi, 6)       # 1 - 0.05^(1/100)
    (0.0, 0.029513)
    """
    n = check_int(trials, "trials", 1)
    x = check_int(successes, "successes", 0, n)
    level = check_probability(alpha, "alpha")
    lower = 0.0 if x == 0 else float(stats.beta.ppf(level, x, n - x + 1))
    upper = 1.0 if x == n else float(stats.beta.ppf(1.0 - level, x + 1, n - x))
    return lower, upper


# ----- the event ------------------------------------------------------------------------------------
def supports(mechanism: Mechanism, reports: npt.ArrayLike, value: int) -> np.ndarray:
    """Whether ``value`` is in each report's support (docs/internals.md), computed from the report alone.

    Parameters
    ----------
    mechanism : MechanismE or FrequencyOracle
        The mechanism that made the reports.
    reports : array_like
        Reports as ``perturb_secure`` returns them: E's codes, OUE's and SS's bitmaps ``(n, ⌈k/8⌉)``,
        OLH's words ``seed << s | bucket``, HR's indices ``2j + b``.
    value : int
        A value of the domain, in ``[0, k)``.

    Returns
    -------
    numpy.ndarray
        One bool per report.
    """
    v = check_int(value, "value", 0, mechanism.domain_size - 1)
    if isinstance(mechanism, MechanismE):
        return np.asarray(reports).reshape(-1) == v
    if isinstance(mechanism, BitSetOracle):
        bitmaps = np.asarray(reports, dtype=np.uint8)
        return ((bitmaps[:, v >> 3] >> np.uint8(v & 7)) & np.uint8(1)).astype(bool)
    if isinstance(mechanism, OLH):
        words = np.asarray(reports, dtype=np.uint64)
        seeds = words >> np.uint64(mechanism.hash_bits)
        buckets = (words & np.uint64(mechanism.hash_range - 1)).astype(np.int64)
        return mechanism.hash_values(seeds, np.full(words.shape, v, np.uint64)) == buckets
    if isinstance(mechanism, HadamardResponse):
        index = np.asarray(reports, dtype=np.int64)
        rows, bits = (index >> 1).astype(np.uint64), (index & 1).astype(np.uint64)
        return parity(rows & np.uint64(v)) == bits
    raise ValidationError("mechanism", "mechanism E or one of the oracles OUE, OLH, HR, SS",
                          f"got a {type(mechanism).__name__}")


def distinguishing_event(mechanism: Mechanism, reports: npt.ArrayLike, v1: int, v2: int) -> np.ndarray:
    """The audit's event S: ``v1`` in the report's support and ``v2`` not (docs/internals.md).

    Parameters
    ----------
    mechanism : MechanismE or FrequencyOracle
        The mechanism that made the reports.
    reports : array_like
        Its reports (:func:`supports`).
    v1, v2 : int
        The two neighbouring inputs of the game, distinct values in ``[0, k)``.

    Returns
    -------
    numpy.ndarray
        One bool per report: whether it is in S.
    """
    return supports(mechanism, reports, v1) & ~supports(mechanism, reports, v2)


def _randomize(mechanism: Mechanism, code: int, draws: int, rng: np.random.Generator | None) -> np.ndarray:
    """``draws`` reports of ``code``: the device path (``perturb_secure``, the OS CSPRNG), or the seeded
    simulation path (``perturb``) when ``rng`` is given."""
    codes = np.full(draws, code, np.int64)
    return mechanism.perturb_secure(codes) if rng is None else mechanism.perturb(codes, rng)


# ----- the audit ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AuditResult:
    """One cell of the audit: the counts of the distinguishing game and what they bound.

    Attributes
    ----------
    mechanism : str
        ``"E"`` or the oracle's name.
    domain_size : int
        k.
    claimed_epsilon : float
        The ε the mechanism claims (its card's: the delivered ε).
    draws : int
        N, the reports drawn on each of the two inputs.
    alpha : float
        The audit's level: each CP bound one-sided at ``alpha / 2``.
    v1, v2 : int
        The two inputs.
    true_positives, false_positives : int
        Reports of ``v1``, resp. ``v2``, in the event.
    """

    mechanism: str
    domain_size: int
    claimed_epsilon: float
    draws: int
    alpha: float
    v1: int
    v2: int
    true_positives: int
    false_positives: int

    @property
    def tpr(self) -> float:
        """TP / N."""
        return self.true_positives / self.draws

    @property
    def fpr(self) -> float:
        """FP / N."""
        return self.false_positives / self.draws

    @property
    def tpr_lower(self) -> float:
        """The CP lower bound of TPR (one-sided, α/2)."""
        return clopper_pearson(self.true_positives, self.draws, self.alpha / 2)[0]

    @property
    def fpr_upper(self) -> float:
        """The CP upper bound of FPR (one-sided, α/2)."""
        return clopper_pearson(self.false_positives, self.draws, self.alpha / 2)[1]

    @property
    def epsilon_hat(self) -> float:
        """The point estimate :math:`\\ln(\\mathrm{TP}/\\mathrm{FP})` (inf when FP = 0 < TP, nan when both are 0)."""
        return _log_ratio(self.true_positives, self.false_positives)

    @property
    def epsilon_lower(self) -> float:
        """:math:`\\ln(\\underline{\\mathrm{TPR}}/\\overline{\\mathrm{FPR}})`: the real ε is at least this with
        probability >= 1 − α (−inf when TP = 0)."""
        return _log_ratio(self.tpr_lower, self.fpr_upper)

    @property
    def violation(self) -> bool:
        """Whether the audit found a violation: ``epsilon_lower > claimed_epsilon``."""
        return self.epsilon_lower > self.claimed_epsilon


def _log_ratio(top: float, bottom: float) -> float:
    if top == 0:
        return math.nan if bottom == 0 else -math.inf
    return math.inf if bottom == 0 else math.log(top) - math.log(bottom)


def audit(mechanism: Mechanism, draws: int = DEFAULT_DRAWS, *, v1: int = 0, v2: int | None = None,
          alpha: float = DEFAULT_ALPHA, claimed_epsilon: float | None = None,
          rng: np.random.Generator | None = None) -> AuditResult:
    """Play the distinguishing game against ``mechanism``'s shipped randomizer (AG24 §4; docs/internals.md).

    Parameters
    ----------
    mechanism : MechanismE or FrequencyOracle
        The mechanism, as a card builds it (:func:`~ldpsynth.shared.mechanisms.registry.make_mechanism`).
    draws : int, default 1,000,000
        N: reports drawn on each input.
    v1 : int, default 0
        The input whose reports should land in the event.
    v2 : int, optional
        The other input; default ``k - 1`` (AG24's pair).
    alpha : float, default 0.01
        The false-alarm level: each CP bound is one-sided at ``alpha / 2``.
    claimed_epsilon : float, optional
        The ε to audit against; default ``mechanism.epsilon`` (the card's).
    rng : numpy.random.Generator, optional
        None (default): the device path, ``perturb_secure`` on the OS CSPRNG (cannot be seeded). A
        Generator: the simulation path ``perturb`` (reproducible; not what a device runs).

    Returns
    -------
    AuditResult
        The counts, with ε̂, ε̂_lower and whether a violation was found.

    Raises
    ------
    ValidationError
        Naming the argument out of its range (``v1 == v2`` included).
    """
    k = mechanism.domain_size
    n = check_int(draws, "draws", 1)
    first = check_int(v1, "v1", 0, k - 1)
    second = check_int(k - 1 if v2 is None else v2, "v2", 0, k - 1)
    if first == second:
        raise ValidationError("v2", f"a value of [0, {k - 1}] other than v1", f"got {second}")
    level = check_probability(alpha, "alpha")
    claim = mechanism.epsilon if claimed_epsilon is None else check_epsilon(claimed_epsilon, "claimed_epsilon")
    tp = int(distinguishing_event(mechanism, _randomize(mechanism, first, n, rng), first, second).sum())
    fp = int(distinguishing_event(mechanism, _randomize(mechanism, second, n, rng), first, second).sum())
    return AuditResult(name_of(mechanism), k, float(claim), n, level, first, second, tp, fp)


def audit_power(tpr: float, fpr: float, draws: int, claimed_epsilon: float, alpha: float = DEFAULT_ALPHA) -> float:
    """The probability that :func:`audit` finds a violation of ``claimed_epsilon`` when its event has
    probability ``tpr`` on v1 and ``fpr`` on v2.

    Exact up to :math:`2 \\cdot 10^{-16}` (the binomial tails left out): the sum over the false-positive
    count Y of :math:`P[Y = y] \\cdot P[X \\ge x^*(y)]`, X ~ Bin(N, ``tpr``), :math:`x^*(y)` the least
    count whose CP lower bound exceeds :math:`e^{\\epsilon}` times the CP upper bound of y. For a
    mechanism that keeps its claim (``tpr <= e^ε fpr``) it is the false-alarm probability, at most
    ``alpha``; for one that does not, the power of the audit.

    Parameters
    ----------
    tpr, fpr : float
        The event's probabilities on v1 and on v2, in [0, 1].
    draws : int
        N per input.
    claimed_epsilon : float
        The ε audited against.
    alpha : float, default 0.01
        The audit's level (each bound at ``alpha / 2``).

    Returns
    -------
    float
        P[ε̂_lower > ``claimed_epsilon``].
    """
    n = check_int(draws, "draws", 1)
    p1, p2 = (check_real(p, name, low=0.0, high=1.0) for p, name in ((tpr, "tpr"), (fpr, "fpr")))
    claim = check_epsilon(claimed_epsilon, "claimed_epsilon")
    half = check_probability(alpha, "alpha") / 2

    def counts(p: float) -> np.ndarray:
        low = int(stats.binom.ppf(_TAIL, n, p)) if 0 < p < 1 else round(p * n)
        high = int(stats.binom.isf(_TAIL, n, p)) if 0 < p < 1 else round(p * n)
        return np.arange(max(low - 1, 0), min(high + 1, n) + 1)

    xs, ys = counts(p1), counts(p2)
    lower = np.where(xs > 0, stats.beta.ppf(half, np.maximum(xs, 1), n - xs + 1), 0.0)
    upper = np.where(ys < n, stats.beta.ppf(1 - half, ys + 1, np.maximum(n - ys, 1)), 1.0)
    at_least = stats.binom.sf(xs - 1, n, p1)            # P[X >= x] for each x of the grid
    first = np.searchsorted(lower, math.exp(claim) * upper, side="right")   # least x with lower > e^ε upper
    found = np.where(first < len(xs), at_least[np.minimum(first, len(xs) - 1)], 0.0)
    return float(np.clip(np.dot(stats.binom.pmf(ys, n, p2), found), 0.0, 1.0))


# ----- exact laws on small domains ------------------------------------------------------------------
def _e_output_law(mechanism: MechanismE, code: int) -> dict[bytes, Fraction]:
    """E's law from its shipped exact sampler: ``_perturb_exact`` (the code of ``perturb_secure``) fed the
    draws R at both ends of each interval of [0, N); R is uniform on [0, N) (rejection sampling)."""
    a, l, n, k = mechanism.keep_weight, mechanism.lie_weight, mechanism.total_weight, mechanism.domain_size
    starts = [0, *(a + j * l for j in range(k - 1))]
    ends = [*(s - 1 for s in starts[1:]), n - 1]
    probes = np.array([r for pair in zip(starts, ends) for r in pair], dtype="<u8")
    stream = iter([probes.tobytes()])
    out = mechanism._perturb_exact(np.full(len(probes), code, np.int64), lambda size: next(stream))
    law: dict[bytes, Fraction] = {}
    for i, (start, end) in enumerate(zip(starts, ends)):
        y_start, y_end = out[2 * i], out[2 * i + 1]
        if y_start != y_end:
            raise ValidationError("mechanism", "an E sampler constant on each interval of [0, N)",
                                  f"R = {start} and R = {end} give {y_start} and {y_end}")
        key = np.int64(y_start).tobytes()
        law[key] = law.get(key, Fraction(0)) + Fraction(end - start + 1, n)
    return law


def output_law(mechanism: Mechanism, code: int) -> dict[bytes, Fraction]:
    """:math:`P[y \\mid \\mathrm{code}]` of every possible report y, exactly (docs/internals.md); k <= 16.

    Parameters
    ----------
    mechanism : MechanismE or FrequencyOracle
        The mechanism.
    code : int
        The input, in ``[0, k)``.

    Returns
    -------
    dict
        ``report.tobytes()`` of each possible report (one row of ``perturb_secure``'s output) to its
        probability; the probabilities add up to 1.
    """
    check_int(mechanism.domain_size, "mechanism.domain_size", 2, MAX_EXACT_DOMAIN)
    x = check_int(code, "code", 0, mechanism.domain_size - 1)
    oracle = categorical(mechanism)
    if isinstance(oracle, MechanismE):
        return _e_output_law(oracle, x)
    law = exact.output_distribution(oracle, x)
    return {key: Fraction(weight, law.denominator) for key, weight in law.weights.items()}


def _reports_of(mechanism: Mechanism, keys: Sequence[bytes]) -> np.ndarray:
    """The reports whose ``tobytes()`` are ``keys`` (inverse of :func:`output_law`'s keys)."""
    raw = b"".join(keys)
    if isinstance(mechanism, BitSetOracle):
        return np.frombuffer(raw, np.uint8).reshape(len(keys), mechanism.report_bytes)
    return np.frombuffer(raw, np.uint64 if isinstance(mechanism, OLH) else np.int64)


def worst_case_ratio(mechanism: Mechanism, laws: Sequence[dict[bytes, Fraction]] | None = None) -> Fraction | None:
    """:math:`\\max_{y, x, x'} P[y \\mid x]/P[y \\mid x']` over every report and every pair of inputs, exactly.

    Parameters
    ----------
    mechanism : MechanismE or FrequencyOracle
        The mechanism (k <= 16).
    laws : sequence of dict, optional
        Its :func:`output_law` for every input, if already computed.

    Returns
    -------
    Fraction or None
        The ratio (>= 1); None (unbounded) when some report is possible under one input and not under
        another.
    """
    laws = laws if laws is not None else [output_law(mechanism, x) for x in range(mechanism.domain_size)]
    worst = Fraction(1)
    for report in set().union(*laws):
        values = [law.get(report, Fraction(0)) for law in laws]
        low, high = min(values), max(values)
        if low == 0:
            return None
        worst = max(worst, high / low)
    return worst


def satisfies_exactly(mechanism: Mechanism, epsilon: float) -> bool:
    """Whether :math:`\\ln` :func:`worst_case_ratio` :math:`\\le` ``epsilon`` (the float's exact value), decided
    exactly by :func:`~ldpsynth.shared.privacy.log_ratio_exceeds`.

    Parameters
    ----------
    mechanism : MechanismE or FrequencyOracle
        The mechanism (k <= 16).
    epsilon : float
        The claimed ε, > 0.

    Returns
    -------
    bool
        True iff every output ratio of every pair of inputs is at most :math:`e^\\epsilon`.
    """
    return ratio_within_epsilon(worst_case_ratio(mechanism), epsilon)


def event_probabilities(mechanism: Mechanism, v1: int, v2: int) -> tuple[Fraction, Fraction]:
    """The exact :math:`(P[S \\mid v_1], P[S \\mid v_2])` of the audit's event.

    E from its weights (any k: :math:`(A/N, L/N)`); an oracle by summing its :func:`output_law`
    over the reports in S (k <= 16).

    Parameters
    ----------
    mechanism : MechanismE or FrequencyOracle
        The mechanism.
    v1, v2 : int
        The two inputs, distinct.

    Returns
    -------
    tuple of Fraction
        The true- and the false-positive rate the audit estimates.
    """
    k = mechanism.domain_size
    first, second = check_int(v1, "v1", 0, k - 1), check_int(v2, "v2", 0, k - 1)
    if first == second:
        raise ValidationError("v2", f"a value of [0, {k - 1}] other than v1", f"got {second}")
    if isinstance(mechanism, MechanismE):
        return mechanism.keep_fraction, mechanism.lie_fraction
    rates = []
    for code in (first, second):
        law = output_law(mechanism, code)
        keys = list(law)
        inside = distinguishing_event(mechanism, _reports_of(mechanism, keys), first, second)
        rates.append(sum((law[key] for key, hit in zip(keys, inside.tolist()) if hit), Fraction(0)))
    return rates[0], rates[1]


# ----- the table ------------------------------------------------------------------------------------
def event_epsilon(mechanism: Mechanism, v1: int, v2: int) -> float | None:
    """:math:`\\ln(P[S \\mid v_1]/P[S \\mid v_2])` of the audit's event, exactly computed then rounded; None
    where :func:`event_probabilities` cannot enumerate (an oracle with k > 16).

    Parameters
    ----------
    mechanism : MechanismE or FrequencyOracle
        The mechanism.
    v1, v2 : int
        The two inputs, distinct.

    Returns
    -------
    float or None
        What ε̂ estimates.
    """
    if not isinstance(mechanism, MechanismE) and mechanism.domain_size > MAX_EXACT_DOMAIN:
        return None
    tpr, fpr = event_probabilities(mechanism, v1, v2)
    return math.log(tpr / fpr) if tpr and fpr else _log_ratio(float(tpr), float(fpr))


def audit_table(mechanisms: Iterable[Mechanism], draws: int = DEFAULT_DRAWS, alpha: float = DEFAULT_ALPHA,
                progress: Callable[[AuditResult], None] | None = None) -> list[tuple[AuditResult, float | None]]:
    """Audit each mechanism on the device path (:func:`audit`, AG24's inputs 0 and k − 1).

    Parameters
    ----------
    mechanisms : iterable of MechanismE or FrequencyOracle
        The mechanisms, each audited against its own ``epsilon``.
    draws : int, default 1,000,000
        N per input.
    alpha : float, default 0.01
        The audit's level.
    progress : callable, optional
        Called with each result as it is computed.

    Returns
    -------
    list of tuple
        ``(result, event's exact ε)`` per mechanism, in order (:func:`event_epsilon`).
    """
    rows = []
    for mechanism in mechanisms:
        result = audit(mechanism, draws, alpha=alpha)
        if progress is not None:
            progress(result)
        rows.append((result, event_epsilon(mechanism, result.v1, result.v2)))
    return rows


def markdown_table(rows: Iterable[tuple[AuditResult, float | None]]) -> str:
    """Audit results as a Markdown table: mechanism, k, claimed ε, the event's exact ε, ε̂, ε̂_lower, N per
    input, and whether a violation was found.

    Parameters
    ----------
    rows : iterable of tuple
        ``(result, event's exact ε or None)``, as :func:`audit_table` returns them.

    Returns
    -------
    str
        The table, one line per row, ending with a newline.
    """
    lines = ["| mechanism | k | claimed ε | event's exact ε | ε̂ | ε̂_lower | N per input | violation |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r, exact_eps in rows:
        shown = "–" if exact_eps is None else f"{exact_eps:.4f}"
        lines.append(f"| {r.mechanism} | {r.domain_size} | {r.claimed_epsilon:.4g} | {shown} | {r.epsilon_hat:.4f} | "
                     f"{r.epsilon_lower:.4f} | {r.draws:,} | {'**yes**' if r.violation else 'no'} |")
    return "\n".join(lines) + "\n"
