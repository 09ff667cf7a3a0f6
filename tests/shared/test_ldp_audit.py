"""The LDP audit (LDP-Auditor, AG24 §4; ``ldpsynth.shared.audit``): every mechanism passes, mis-labelled ones fail.

**Statistical part.** The audit runs each mechanism's shipped randomizer, ``perturb_secure`` on the OS
CSPRNG (``os.urandom``): it cannot be seeded, so each audit is a statistical test at a stated level
and is never retried. AG24's level α = 0.01 would make a correct mechanism at ε = 4 fail about 0.4 % of
the time (its TPR/FPR ratio is exactly e^ε, at the boundary; :func:`audit_power` computes it), so
18 cells would fail a run in about 2 %: here each cell runs at ALPHA = 1e-6, and
``test_the_module_fails_spuriously_with_probability_below_1e_5`` computes the module's spurious-failure
probability exactly (6.2e-7). Each mis-labelled mechanism (its probabilities those of 1.5·ε, or
OUE's true bit that of SUE, while it claims ε) is caught with a computed power above 1 − 1e-9 (its miss
probability is below the float resolution, 1e-15).
A seeded run (the simulation path, ``perturb``) is checked for reproducibility.

**Exact part.** Every mechanism, k = 2..8, ε ∈ {0.5, 1, 4}: every report's exact probability under
every input (the oracles' own samplers enumerated: every seed of OLH's hash family, every row of HR;
E's shipped sampler at the ends of its intervals), the worst ratio over reports and input pairs
compared with e^ε exactly (``log_ratio_exceeds``): passes at the claimed ε, fails at the float below
it, and the audit's event attains it. The mis-labelled mechanisms fail it.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from ldpsynth.shared import audit as A
from ldpsynth.shared import privacy
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms import OLH, OUE, HadamardResponse, SubsetSelection, exact
from ldpsynth.shared.mechanisms.bits import pack_rows
from ldpsynth.shared.mechanisms.coins import CoinFlips
from ldpsynth.shared.mechanisms.pure import DYADIC, dyadic_split
from ldpsynth.shared.mechanisms.registry import MECHANISMS, Mechanism, make_mechanism

#: Level of each statistical cell (each CP bound one-sided at ALPHA / 2).
ALPHA = 1e-6
EPSILONS = (0.5, 1.0, 4.0)
SMALL_K, LARGE_K = 5, 100
DRAWS, LARGE_DRAWS = 200_000, 1_000_000
CLASSES = {"E": MechanismE, "OUE": OUE, "OLH": OLH, "HR": HadamardResponse, "SS": SubsetSelection}
#: (mechanism, ε, k, N): every mechanism at a small k, E also at a larger one.
CELLS = [(name, eps, SMALL_K, DRAWS) for name in MECHANISMS for eps in EPSILONS] + [
    ("E", eps, LARGE_K, LARGE_DRAWS) for eps in EPSILONS]


def cell_id(cell: tuple) -> str:
    return f"{cell[0]}-eps{cell[1]}-k{cell[2]}"


def mislabelled(name: str, epsilon: float, domain_size: int, factor: float = 1.5) -> Mechanism:
    """Mechanism ``name`` whose probabilities are those of ``factor * epsilon`` while it claims ``epsilon``."""
    mechanism: Mechanism = CLASSES[name](factor * epsilon, domain_size)
    mechanism.epsilon = epsilon
    return mechanism


class OUEWithSUEBit(OUE):
    """OUE whose true bit is 1 with SUE's (RAPPOR's) p = e^(ε/2)/(e^(ε/2) + 1) instead of 1/2, the other bits
    right: a plausible mix-up of two unary encodings. Its real ε is ln(p(1-q)/(q(1-p))) = 1.5 ε."""

    def _sample(self, codes: np.ndarray, coins: CoinFlips) -> np.ndarray:
        n = codes.size
        bits = coins.bernoulli(self.small, DYADIC, (n, self.domain_size))
        bits[np.arange(n), codes] = coins.bernoulli(dyadic_split(self.epsilon_requested / 2)[0], DYADIC, n)
        return pack_rows(bits)


WRONG = [(name, eps) for name in MECHANISMS for eps in EPSILONS]


def wrong_mechanism(name: str, eps: float) -> Mechanism:
    return OUEWithSUEBit(eps, SMALL_K) if name == "OUE-SUE" else mislabelled(name, eps, SMALL_K)


# ----- the statistical audit ------------------------------------------------------------------------
@pytest.mark.parametrize("cell", CELLS, ids=cell_id)
def test_every_mechanism_passes_the_audit_on_the_device_path(cell):
    """ε̂_lower <= the claimed ε (no violation); ε̂ is within its Monte Carlo error of the event's exact ε,
    which is the claimed ε itself (the event is the worst case)."""
    name, eps, k, draws = cell
    mechanism = make_mechanism(name, eps, k)
    result = A.audit(mechanism, draws, alpha=ALPHA)
    assert (result.v1, result.v2, result.claimed_epsilon, result.draws) == (0, k - 1, mechanism.epsilon, draws)
    assert not result.violation, (result.epsilon_hat, result.epsilon_lower, mechanism.epsilon)
    assert result.epsilon_lower <= result.epsilon_hat
    assert A.event_epsilon(mechanism, 0, k - 1) == pytest.approx(mechanism.epsilon, rel=1e-12)
    # ε̂'s delta-method standard deviation, sqrt((1-TPR)/(N TPR) + (1-FPR)/(N FPR)); 6 of them (1e-9).
    tpr, fpr = (float(p) for p in A.event_probabilities(mechanism, 0, k - 1))
    sd = math.sqrt((1 - tpr) / (draws * tpr) + (1 - fpr) / (draws * fpr))
    assert abs(result.epsilon_hat - mechanism.epsilon) < 6 * sd


@pytest.mark.parametrize(("name", "eps"), [*WRONG, ("OUE-SUE", 0.5), ("OUE-SUE", 1.0), ("OUE-SUE", 4.0)],
                         ids=lambda v: str(v))
def test_a_mislabelled_mechanism_is_caught(name, eps):
    """Probabilities of 1.5·ε (or OUE with SUE's true bit) while claiming ε: ε̂_lower > ε. The power at
    N = 200,000 and ALPHA, computed exactly from the mechanism's law, is above 1 - 1e-9."""
    mechanism = wrong_mechanism(name, eps)
    assert mechanism.epsilon == eps
    tpr, fpr = A.event_probabilities(mechanism, 0, SMALL_K - 1)
    assert math.log(tpr / fpr) == pytest.approx(1.5 * eps, rel=1e-12)
    assert A.audit_power(float(tpr), float(fpr), DRAWS, eps, ALPHA) > 1 - 1e-9
    result = A.audit(mechanism, DRAWS, alpha=ALPHA)
    assert result.violation and result.epsilon_lower > eps, (result.epsilon_hat, result.epsilon_lower)


def test_a_mislabelled_e_on_a_larger_domain_is_caught():
    mechanism = mislabelled("E", 0.5, LARGE_K)
    tpr, fpr = A.event_probabilities(mechanism, 0, LARGE_K - 1)
    assert A.audit_power(float(tpr), float(fpr), LARGE_DRAWS, 0.5, ALPHA) > 1 - 1e-9
    assert A.audit(mechanism, LARGE_DRAWS, alpha=ALPHA).violation


def test_the_module_fails_spuriously_with_probability_below_1e_5():
    """The exact false-alarm probability of every passing cell (audit_power at the cell's exact TPR, FPR):
    each at most ALPHA, their sum (a union bound for the module) 6.2e-7; with the mis-labelled cells'
    miss probabilities (each below 1e-9) below 1e-5."""
    total = 0.0
    for name, eps, k, draws in CELLS:
        mechanism = make_mechanism(name, eps, k)
        tpr, fpr = A.event_probabilities(mechanism, 0, k - 1)
        false_alarm = A.audit_power(float(tpr), float(fpr), draws, mechanism.epsilon, ALPHA)
        assert false_alarm <= ALPHA
        total += false_alarm
    assert total < 1e-6
    assert total + 19 * 1e-9 < 1e-5


def test_the_seeded_simulation_path_is_reproducible_and_passes():
    """With a Generator the audit runs ``perturb`` (simulations): the same seed, the same counts."""
    for name in MECHANISMS:
        mechanism = make_mechanism(name, 1.0, SMALL_K)
        runs = [A.audit(mechanism, 50_000, alpha=ALPHA, rng=np.random.default_rng(2024)) for _ in range(2)]
        assert runs[0] == runs[1]
        assert not runs[0].violation


def test_the_audit_draws_from_the_os_csprng(monkeypatch):
    """The default path reads os.urandom (through perturb_secure), for E and for the oracles."""
    import os

    calls = []
    real = os.urandom

    def counting(n: int) -> bytes:
        calls.append(n)
        return real(n)

    monkeypatch.setattr(os, "urandom", counting)
    for name in MECHANISMS:
        calls.clear()
        A.audit(make_mechanism(name, 1.0, SMALL_K), 1000)
        assert calls, name


# ----- the pieces -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("x", "n", "level"), [(0, 100, 0.05), (1, 100, 0.005), (37, 100, 0.005),
                                               (100, 100, 0.005), (12_345, 1_000_000, 5e-7)])
def test_clopper_pearson_is_the_exact_binomial_interval(x, n, level):
    """Each bound is one-sided at ``level``: the binomial tail at the bound is ``level`` (the defining
    equation), and the bounds are the ends of scipy's exact two-sided interval at confidence 1 - 2 level."""
    lo, hi = A.clopper_pearson(x, n, level)
    ci = stats.binomtest(x, n).proportion_ci(confidence_level=1 - 2 * level, method="exact")
    # scipy's interval solves by root finding (about 1e-9 relative); the beta quantile is closer
    assert lo == pytest.approx(ci.low, rel=1e-7, abs=1e-15) and hi == pytest.approx(ci.high, rel=1e-7)
    if x > 0:
        assert stats.binom.sf(x - 1, n, lo) == pytest.approx(level, rel=1e-9)
    if x < n:
        assert stats.binom.cdf(x, n, hi) == pytest.approx(level, rel=1e-9)


def test_audit_power_agrees_with_simulated_counts():
    """The exact power against 20,000 seeded binomial pairs, at a point where it is about one half, and the
    false alarm at the boundary is at most alpha."""
    draws, alpha, claim = 20_000, 0.01, 1.0
    fpr = 0.2
    tpr = fpr * math.exp(1.055)
    power = A.audit_power(tpr, fpr, draws, claim, alpha)
    assert 0.2 < power < 0.8
    rng = np.random.default_rng(11)
    tp, fp = rng.binomial(draws, tpr, 20_000), rng.binomial(draws, fpr, 20_000)
    lo = stats.beta.ppf(alpha / 2, np.maximum(tp, 1), draws - tp + 1)
    hi = stats.beta.ppf(1 - alpha / 2, fp + 1, draws - fp)
    simulated = np.mean(np.log(lo) - np.log(hi) > claim)
    assert abs(simulated - power) < 5 * math.sqrt(power * (1 - power) / 20_000)
    assert A.audit_power(fpr * math.exp(claim), fpr, draws, claim, alpha) <= alpha


@pytest.mark.parametrize("name", MECHANISMS)
def test_the_event_reads_the_support_the_oracle_decodes(name):
    """``supports`` (from the report alone) equals the oracle's own decoder ``support_rows``, column by column."""
    mechanism = make_mechanism(name, 1.0, 6)
    reports = mechanism.perturb(np.arange(3000) % 6, np.random.default_rng(5))
    rows = (np.eye(6, dtype=bool)[reports] if name == "E" else mechanism.support_rows(reports).astype(bool))
    for v in range(6):
        np.testing.assert_array_equal(A.supports(mechanism, reports, v), rows[:, v])
    event = A.distinguishing_event(mechanism, reports, 1, 4)
    np.testing.assert_array_equal(event, rows[:, 1] & ~rows[:, 4])


def test_bad_arguments_are_refused():
    mechanism = make_mechanism("E", 1.0, 4)
    for kwargs, field in [({"v1": 2, "v2": 2}, "v2"), ({"v1": 4}, "v1"), ({"alpha": 0.0}, "alpha"),
                          ({"claimed_epsilon": -1.0}, "claimed_epsilon")]:
        with pytest.raises(ValidationError, match=field):
            A.audit(mechanism, 10, **kwargs)
    with pytest.raises(ValidationError, match="draws"):
        A.audit(mechanism, 0)
    with pytest.raises(ValidationError, match="domain_size"):
        A.output_law(make_mechanism("OUE", 1.0, 17), 0)


# ----- exact enumeration, k <= 8 --------------------------------------------------------------------
EXACT = [(name, k, eps) for name in MECHANISMS for k in range(2, 9) for eps in EPSILONS]


@pytest.mark.parametrize(("name", "k", "eps"), EXACT, ids=[f"{n}-k{k}-eps{e}" for n, k, e in EXACT])
def test_every_output_ratio_is_at_most_e_to_the_epsilon_exactly(name, k, eps):
    """max over reports y and inputs x, x' of P[y|x]/P[y|x'] <= e^ε at the claimed ε, exactly; not at the float
    below it (the bound is attained); the audit's event attains it too (TPR/FPR = the worst ratio), for
    every pair of inputs."""
    mechanism = make_mechanism(name, eps, k)
    laws = [A.output_law(mechanism, x) for x in range(k)]
    assert all(sum(law.values()) == 1 for law in laws)
    ratio = A.worst_case_ratio(mechanism, laws)
    assert ratio is not None
    assert not privacy.log_ratio_exceeds(ratio.numerator, ratio.denominator, mechanism.epsilon)
    assert privacy.log_ratio_exceeds(ratio.numerator, ratio.denominator, math.nextafter(mechanism.epsilon, 0.0))
    assert A.satisfies_exactly(mechanism, mechanism.epsilon) and mechanism.epsilon <= eps
    if isinstance(mechanism, MechanismE):
        assert ratio == Fraction(mechanism.keep_weight, mechanism.lie_weight)
        assert privacy.satisfies_epsilon_dp(mechanism, mechanism.epsilon)
        assert all(law[np.int64(y).tobytes()] == (mechanism.keep_fraction if y == x else mechanism.lie_fraction)
                   for x, law in enumerate(laws) for y in range(k))
    else:
        assert ratio == exact.worst_case_ratio(mechanism)
    pairs = [(0, k - 1), (k - 1, 0)] if k > 4 else [(a, b) for a in range(k) for b in range(k) if a != b]
    for v1, v2 in pairs:
        tpr, fpr = A.event_probabilities(mechanism, v1, v2)
        assert tpr / fpr == ratio


@pytest.mark.parametrize(("name", "eps"), [*WRONG, ("OUE-SUE", 1.0)], ids=lambda v: str(v))
def test_the_exact_check_fails_a_mislabelled_mechanism(name, eps):
    mechanism = wrong_mechanism(name, eps)
    assert not A.satisfies_exactly(mechanism, mechanism.epsilon)
    ratio = A.worst_case_ratio(mechanism)
    assert ratio is not None and math.log(ratio) == pytest.approx(1.5 * eps, rel=1e-12)


def test_e_law_is_read_from_its_shipped_sampler():
    """E's law comes from its shipped map R -> report at the ends of its intervals; a sampler whose map does
    not fit the weights (L one smaller than N = A + (k-1) L states) is refused."""
    mechanism = MechanismE(1.0, 3)
    law = A.output_law(mechanism, 1)
    assert law == {np.int64(1).tobytes(): mechanism.keep_fraction, np.int64(0).tobytes(): mechanism.lie_fraction,
                   np.int64(2).tobytes(): mechanism.lie_fraction}
    off = MechanismE(1.0, 3)
    off.lie_weight -= 1
    with pytest.raises(ValidationError, match="constant on each interval"):
        A.output_law(off, 1)
