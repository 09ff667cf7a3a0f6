"""Mechanism E (WYZ eqs. 14-16): exact output distribution of both samplers, argument checks.

Statistical tests use Pearson's chi-square (``scipy.stats.chisquare``) at a stated
``ALPHA = 1e-6`` per test, with every expected count >= 5 (asserted), and are never retried.
The numpy sampler :meth:`MechanismE.perturb` is seeded (fixed seeds below), so its tests are
deterministic. The device sampler :meth:`MechanismE.perturb_secure` draws from ``os.urandom``
(the OS CSPRNG) and cannot be seeded, by design: each of its chi-square tests has a false-alarm
probability of at most ``ALPHA``; the file runs 147 of them (one per input value and
configuration), so a spurious failure of the whole file has probability below 1.5e-4.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from ldpsynth.shared import mechanism as mechanism_module
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanism import MAX_SAMPLER_DOMAIN_SIZE, MechanismE

#: Significance level of every chi-square test in this file.
ALPHA = 1e-6
#: Draws per input value.
SIMULATION_DRAWS = 1_000_000
SECURE_DRAWS = 200_000
#: (domain size, ε) pairs whose output distribution is checked for *every* input value.
CONFIGS = [(2, 0.5), (2, 3.0), (5, 0.1), (5, 1.0), (64, 1.0), (64, 4.0)]
#: A value that must never appear in an error message (it stands for a private value).
SECRET = 987654321


def eq16_pmf(m: MechanismE, true_code: int) -> np.ndarray:
    """Eq. 16 with the mechanism's exact keep/lie probabilities A/N and L/N (as floats)."""
    pmf = np.full(m.domain_size, float(m.lie_fraction))
    pmf[true_code] = float(m.keep_fraction)
    return pmf


def chi_square_pvalue(outputs: np.ndarray, pmf: np.ndarray) -> float:
    """Pearson chi-square p-value of ``outputs`` against ``pmf``; asserts expected counts >= 5."""
    counts = np.bincount(outputs, minlength=len(pmf))
    assert len(counts) == len(pmf), "an output outside the domain"
    expected = outputs.size * pmf
    assert expected.min() >= 5, "chi-square needs an expected count >= 5 in every bin"
    return float(stats.chisquare(counts, expected).pvalue)


# ----- the pmf itself -----------------------------------------------------------------------------


@pytest.mark.parametrize("k, eps", CONFIGS + [(1000, 2.0), (2**20, 0.5)])
def test_probabilities_are_eq16_at_the_delivered_epsilon(k, eps):
    """keep = 1/g(ε), lie = e^-ε/g(ε), g(ε) = 1 + (k-1)e^-ε at the delivered ε; they sum to 1 exactly."""
    m = MechanismE(eps, k)
    assert m.keep_fraction + (k - 1) * m.lie_fraction == 1
    g = 1.0 + (k - 1) * math.exp(-m.epsilon)
    assert m.keep_probability == pytest.approx(1.0 / g, rel=1e-12)
    assert m.lie_probability == pytest.approx(math.exp(-m.epsilon) / g, rel=1e-12)
    assert m.keep_probability == float(m.keep_fraction) and m.lie_probability == float(m.lie_fraction)
    pmf = m.output_probabilities(k - 1) if k <= 1000 else None
    if pmf is not None:
        assert np.array_equal(pmf, eq16_pmf(m, k - 1))
    assert m.signal == pytest.approx((1 - math.exp(-m.epsilon)) / g, rel=1e-12)


# ----- chi-square exactness of both samplers, every input value -----------------------------------


@pytest.mark.parametrize("k, eps", CONFIGS)
def test_perturb_matches_eq16_for_every_input(k, eps):
    """perturb (numpy Generator, seed 20261122 + k): 10^6 draws per input value, chi-square, α = 1e-6."""
    m = MechanismE(eps, k)
    rng = np.random.default_rng(20261122 + k)
    pvalues = {x: chi_square_pvalue(m.perturb(np.full(SIMULATION_DRAWS, x), rng), eq16_pmf(m, x)) for x in range(k)}
    failed = {x: p for x, p in pvalues.items() if p < ALPHA}
    assert not failed, f"perturb deviates from eq. 16 for inputs {failed}"


@pytest.mark.parametrize("k, eps", CONFIGS)
def test_perturb_secure_matches_eq16_for_every_input(k, eps):
    """perturb_secure (os.urandom, not seedable): 2*10^5 draws per input value, chi-square, α = 1e-6."""
    m = MechanismE(eps, k)
    pvalues = {x: chi_square_pvalue(m.perturb_secure(np.full(SECURE_DRAWS, x)), eq16_pmf(m, x)) for x in range(k)}
    failed = {x: p for x, p in pvalues.items() if p < ALPHA}
    assert not failed, f"perturb_secure deviates from eq. 16 for inputs {failed}"


def test_perturb_secure_mixed_inputs_keep_their_shape():
    """All inputs in one 2-D call: shape kept, and the report of each row follows eq. 16 for its own input.

    Pooled over the rows of each input (2*10^5 per input, k = 5, ε = 1), chi-square at α = 1e-6.
    """
    m = MechanismE(1.0, 5)
    codes = np.tile(np.arange(5), (SECURE_DRAWS, 1))  # shape (200000, 5): column j holds input j
    out = m.perturb_secure(codes)
    assert out.shape == codes.shape and out.dtype.kind == "i"
    for x in range(5):
        assert chi_square_pvalue(out[:, x], eq16_pmf(m, x)) >= ALPHA


def test_perturb_is_reproducible_with_a_seed():
    """Same seed (7), same output; a different seed (8), a different output."""
    m = MechanismE(1.0, 64)
    codes = np.arange(64).repeat(100)
    a = m.perturb(codes, np.random.default_rng(7))
    b = m.perturb(codes, np.random.default_rng(7))
    c = m.perturb(codes, np.random.default_rng(8))
    assert np.array_equal(a, b) and not np.array_equal(a, c)


# ----- the chi-square tests have power: wrong samplers are caught ----------------------------------


def test_chi_square_rejects_the_pmf_of_a_different_epsilon():
    """Samples of E(ε = 1, k = 5) tested against the eq. 16 pmf of E(1.1 ε): rejected at α = 1e-6.

    perturb with seed 11 (10^6 draws), perturb_secure (2*10^5 draws, unseeded, power ~ 1).
    """
    m, wrong = MechanismE(1.0, 5), MechanismE(1.1, 5)
    y = m.perturb(np.full(SIMULATION_DRAWS, 2), np.random.default_rng(11))
    assert chi_square_pvalue(y, eq16_pmf(wrong, 2)) < ALPHA
    assert chi_square_pvalue(y, eq16_pmf(m, 2)) >= ALPHA  # the same sample does fit its own pmf
    assert chi_square_pvalue(m.perturb_secure(np.full(SECURE_DRAWS, 2)), eq16_pmf(wrong, 2)) < ALPHA


def test_chi_square_rejects_an_off_by_one_lie(monkeypatch):
    """A sampler whose lie can repeat the truth (``index + (index > code)``) fails the chi-square test.

    k = 5, ε = 1, input 2; perturb with seed 12 (10^6 draws) and perturb_secure (2*10^5), α = 1e-6.
    """
    m = MechanismE(1.0, 5)
    monkeypatch.setattr(MechanismE, "_lie", lambda self, codes, index: index + (index > codes))
    assert chi_square_pvalue(m.perturb(np.full(SIMULATION_DRAWS, 2), np.random.default_rng(12)), eq16_pmf(m, 2)) < ALPHA
    assert chi_square_pvalue(m.perturb_secure(np.full(SECURE_DRAWS, 2)), eq16_pmf(m, 2)) < ALPHA


def test_chi_square_rejects_a_secure_sampler_without_rejection_step(monkeypatch):
    """Taking 64-bit words mod N without rejection biases R toward small values, so toward "keep".

    N ≈ 0.87 * 2^62 here, so 2^64 mod N ≈ 0.6 N: a large bias; 2*10^5 draws, α = 1e-6.
    """
    m = MechanismE(1.0, 5)
    assert (1 << 64) % m.total_weight > m.total_weight // 4
    monkeypatch.setattr(m, "_accept_below", 1 << 64)
    assert chi_square_pvalue(m.perturb_secure(np.full(SECURE_DRAWS, 0)), eq16_pmf(m, 0)) < ALPHA


# ----- argument validation -------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [float("nan"), float("inf"), -float("inf"), 0.0, 0, -1.0, -1e-300, "1.0", None, True,
                                 False, [1.0], 1j])
def test_bad_epsilon_is_rejected_naming_field_and_range(eps):
    with pytest.raises(ValidationError) as info:
        MechanismE(eps, 5)
    assert info.value.field == "epsilon"
    assert "epsilon" in str(info.value) and "a finite number > 0" in str(info.value)


@pytest.mark.parametrize("k", [2, 2**20, 2**30, 2**40])
def test_epsilon_below_the_sampler_resolution_states_a_true_legal_range(k):
    """Too small an ε for the exact sampler is rejected, and the minimum the message states is accepted."""
    with pytest.raises(ValidationError) as info:
        MechanismE(1e-18, k)
    assert info.value.field == "epsilon"
    stated = float(re.search(r">= ([0-9.e+-]+)", info.value.legal).group(1))
    assert stated > 1e-18
    m = MechanismE(stated, k)
    assert 0 < m.epsilon <= stated


@pytest.mark.parametrize("k", [1, 0, -3, MAX_SAMPLER_DOMAIN_SIZE + 1, 2.0, 5.5, "5", None, True, np.float64(3)])
def test_bad_domain_size_is_rejected_naming_field_and_range(k):
    with pytest.raises(ValidationError) as info:
        MechanismE(1.0, k)
    assert info.value.field == "domain_size"
    assert f"an integer in [2, {MAX_SAMPLER_DOMAIN_SIZE}]" in str(info.value)


def test_numpy_integer_domain_size_is_accepted():
    assert MechanismE(1.0, np.int64(5)) == MechanismE(1.0, 5)


BAD_CODES = [
    pytest.param([0, 1, -SECRET], 2, id="negative"),
    pytest.param([0, 1, SECRET], 2, id="too-large"),
    pytest.param([0, 5], 1, id="equal-to-k"),
    pytest.param(np.array([0, SECRET], dtype=np.uint64) + np.uint64(2**63), 0, id="uint64-above-int64"),
    pytest.param([0.0, 1.0], None, id="floats"),
    pytest.param([0, 1.5], None, id="float-mixed"),
    pytest.param([True, False], None, id="bools"),
    pytest.param(np.array([0, SECRET], dtype=object), None, id="objects"),
    pytest.param(["0", "1"], None, id="strings"),
]


@pytest.mark.parametrize("codes, position", BAD_CODES)
def test_perturb_rejects_out_of_domain_codes_before_drawing(codes, position):
    """No randomness is consumed (the Generator's state is unchanged) and the value is not echoed."""
    m = MechanismE(1.0, 5)
    rng = np.random.default_rng(3)
    before = rng.bit_generator.state
    with pytest.raises(ValidationError) as info:
        m.perturb(codes, rng)
    assert rng.bit_generator.state == before
    assert info.value.field == "codes" and "[0, 4]" in info.value.legal
    assert info.value.position == position
    assert str(SECRET) not in str(info.value) and str(SECRET) not in repr(info.value.args)


@pytest.mark.parametrize("codes, position", BAD_CODES)
def test_perturb_secure_rejects_out_of_domain_codes_before_drawing(codes, position, monkeypatch):
    """``os.urandom`` is never called for a bad batch, and the value is not echoed."""
    m = MechanismE(1.0, 5)
    calls = []
    monkeypatch.setattr(mechanism_module.os, "urandom", lambda n: calls.append(n) or bytes(n))
    with pytest.raises(ValidationError) as info:
        m.perturb_secure(codes)
    assert calls == []
    assert info.value.field == "codes" and info.value.position == position
    assert str(SECRET) not in str(info.value)


def test_perturb_secure_draws_only_from_os_urandom(monkeypatch):
    """The device sampler's randomness comes from os.urandom (here replaced by a spy)."""
    m = MechanismE(1.0, 5)
    calls = []
    real = mechanism_module.os.urandom
    monkeypatch.setattr(mechanism_module.os, "urandom", lambda n: calls.append(n) or real(n))
    out = m.perturb_secure(np.arange(5).repeat(10))
    assert calls and calls[0] == 8 * 50 and out.shape == (50,)


def test_outputs_stay_in_the_domain_at_extreme_epsilons():
    """Tiny and huge ε (space-capped weights, N = 2^62) still give codes in [0, k)."""
    for eps, k in [(1e-6, 2**20), (60.0, 3), (42.0, 2), (1e-3, 2)]:
        m = MechanismE(eps, k)
        codes = np.arange(2000) % k
        for out in (m.perturb(codes, np.random.default_rng(5)), m.perturb_secure(codes)):
            assert out.min() >= 0 and out.max() < k


def test_equality_and_repr():
    m = MechanismE(1.0, 5)
    assert m == MechanismE(1.0, 5) and hash(m) == hash(MechanismE(1.0, 5))
    assert m != MechanismE(1.0, 6) and m != MechanismE(0.5, 5)
    assert "delivered epsilon" in repr(m) and str(m.keep_weight) in repr(m)
    assert Fraction(m.keep_weight, m.total_weight) == m.keep_fraction
