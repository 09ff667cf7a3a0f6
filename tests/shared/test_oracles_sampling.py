"""The oracles' samplers against their exact laws; the exact coins; argument checks.

Chi-square tests (``scipy.stats.chisquare``) at ``ALPHA = 1e-6`` each, every expected count >= 5
(asserted), never retried. The exact law of each input is enumerated from the sampler itself
(:mod:`ldpsynth.shared.mechanisms.exact`, which ``test_oracles_exact.py`` checks against the
definitions). ``perturb`` is seeded (fixed seeds, deterministic); ``perturb_secure`` draws from
``os.urandom`` and cannot be: this file runs 40 of its chi-square tests, a spurious failure has
probability below 4e-5.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanisms import OLH, OUE, HadamardResponse, SubsetSelection, exact
from ldpsynth.shared.mechanisms.coins import Coins, seeded_coins

ALPHA = 1e-6
DRAWS = 100_000
#: (class, k, epsilon): each input value of each is tested.
CASES = [(OUE, 5, 1.0), (OLH, 4, 1.0), (HadamardResponse, 5, 0.5), (SubsetSelection, 6, 1.0),
         (OUE, 3, 3.0), (OLH, 8, 2.0), (HadamardResponse, 8, 2.0), (SubsetSelection, 7, 2.0)]


def pvalue(oracle, x: int, reports: np.ndarray) -> float:
    law = exact.output_distribution(oracle, x)
    keys = list(law.weights)
    index = {key: i for i, key in enumerate(keys)}
    rows = reports.reshape(len(reports), -1)
    observed = np.zeros(len(keys), np.int64)
    uniques, counts = np.unique(rows, axis=0, return_counts=True)
    for row, count in zip(uniques, counts):
        observed[index[row.tobytes()]] += count   # KeyError: a report the law says is impossible
    expected = np.array([float(law.probability(key)) for key in keys]) * len(reports)
    assert expected.min() >= 5, "chi-square needs an expected count >= 5 in every bin"
    return float(stats.chisquare(observed, expected * observed.sum() / expected.sum()).pvalue)


@pytest.mark.parametrize("cls, k, eps", CASES, ids=lambda c: getattr(c, "name", str(c)))
def test_perturb_follows_the_exact_law_for_every_input(cls, k, eps):
    """perturb with seed 7000 + k: 10^5 reports per input, chi-square, alpha = 1e-6."""
    oracle = cls(eps, k)
    rng = np.random.default_rng(7000 + k)
    failed = {x: p for x in range(k) if (p := pvalue(oracle, x, oracle.perturb(np.full(DRAWS, x), rng))) < ALPHA}
    assert not failed


@pytest.mark.parametrize("cls, k, eps", CASES[:4], ids=lambda c: getattr(c, "name", str(c)))
def test_perturb_secure_follows_the_exact_law_for_every_input(cls, k, eps):
    """perturb_secure (os.urandom, unseeded): 10^5 reports per input, chi-square, alpha = 1e-6."""
    oracle = cls(eps, k)
    failed = {x: p for x in range(k) if (p := pvalue(oracle, x, oracle.perturb_secure(np.full(DRAWS, x)))) < ALPHA}
    assert not failed


@pytest.mark.parametrize("cls", [OUE, OLH, HadamardResponse, SubsetSelection])
def test_mixed_inputs_in_one_call_each_follow_their_own_law(cls):
    """All inputs of k = 5 interleaved in one perturb_secure call (2*10^4 rows each); pooled per input,
    chi-square at alpha = 1e-6 (4 x 5 tests)."""
    oracle = cls(1.0, 5)
    codes = np.tile(np.arange(5), 20_000)
    reports = oracle.perturb_secure(codes)
    assert len(reports) == len(codes)
    for x in range(5):
        assert pvalue(oracle, x, reports[codes == x]) >= ALPHA


@pytest.mark.parametrize("cls", [OUE, SubsetSelection])
def test_chunked_sampling_keeps_each_row_with_its_code(cls, monkeypatch):
    """Bitmap oracles sample in chunks of rows. With chunks of 3 rows and epsilon = 40 (a bit other than
    the code's is set with probability below 1e-15), every report's bits lie within its own code's."""
    from ldpsynth.shared.mechanisms import oracle as oracle_module
    monkeypatch.setattr(oracle_module, "CHUNK_CELLS", 3 * 40)
    oracle, codes = cls(40.0, 40), np.random.default_rng(1).integers(0, 40, 50)
    reports = oracle.perturb(codes, np.random.default_rng(5))
    bits = np.unpackbits(reports, axis=1, bitorder="little")[:, :40].astype(bool)
    own = np.eye(40, dtype=bool)[codes]
    assert reports.shape == (50, 5) and not (bits & ~own).any()
    if cls is SubsetSelection:
        assert (bits == own).all()


def test_perturb_is_reproducible_with_a_seed():
    oracle = OLH(2.0, 100)
    codes = np.arange(100).repeat(10)
    a, b = oracle.perturb(codes, np.random.default_rng(3)), oracle.perturb(codes, np.random.default_rng(3))
    assert np.array_equal(a, b) and not np.array_equal(a, oracle.perturb(codes, np.random.default_rng(4)))


# ----- the coins ----------------------------------------------------------------------------------------


def scripted(words: list[int]):
    """A word source that hands out ``words`` in order (and fails when they run out)."""
    queue = list(words)

    def source(count: int) -> np.ndarray:
        out = np.array(queue[:count], dtype=np.uint64)
        assert len(out) == count, "the sampler asked for more words than scripted"
        del queue[:count]
        return out

    return source


def test_below_rejects_the_words_above_the_last_whole_multiple():
    """bound = 3 * 2^61: words >= 2^64 - (2^64 mod bound) = 3 * 2^62 are redrawn; the rest are reduced mod bound."""
    bound = 3 << 61
    limit = (1 << 64) - (1 << 64) % bound
    coins = Coins(scripted([limit, (1 << 64) - 1, bound + 5]))
    assert coins.below(bound, 1).tolist() == [5]
    coins = Coins(scripted([(limit - 1) | 0]))
    assert coins.below(bound, 1).tolist() == [(limit - 1) % bound]


def test_below_small_bounds_use_32_bit_halves():
    """bound 3 draws 32-bit halves of words: 2^32 - 1 (>= 2^32 - 2^32 mod 3) is redrawn, from the next word."""
    coins = Coins(scripted([((1 << 32) - 1) | 7 << 32, 11 | 10 << 32]))
    assert coins.below(3, 2).tolist() == [11 % 3, 7 % 3]


def test_dyadic_bernoulli_is_exact_over_every_12_bit_outcome():
    """Numerator a over 2^12: over the 4,096 equally likely 12-bit values (top byte from a first word, on a tie
    the low 4 bits from the top of a second word) exactly a come out True."""
    numerator = 0x9A5
    trues = 0
    for top in range(256):
        for low in range(16):
            trues += bool(Coins(scripted([top, low << 60])).bernoulli(numerator, 1 << 12, 1)[0])
    assert trues == numerator


def test_bernoulli_with_another_denominator_is_below_then_compare():
    """2/7: uniform below 7 (32-bit halves 0, 6, 7, 100 reduce to 0, 6, 0, 2), then < 2."""
    coins = Coins(scripted([0 | 6 << 32, 7 | 100 << 32]))
    assert coins.bernoulli(2, 7, 4).tolist() == [True, False, True, False]


def test_seeded_coins_need_a_generator():
    with pytest.raises(ValidationError, match="rng"):
        seeded_coins(1)


# ----- argument checks ------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [OUE, OLH, HadamardResponse, SubsetSelection])
def test_bad_arguments_name_the_field_and_the_range(cls):
    for eps in (float("nan"), 0.0, -1.0, float("inf"), "1"):
        with pytest.raises(ValidationError, match="epsilon"):
            cls(eps, 8)
    for k in (1, 0, 2.5, cls.max_domain_size + 1):
        with pytest.raises(ValidationError, match="domain_size"):
            cls(1.0, k)
    oracle = cls(1.0, 8)
    for codes in ([0, 8], [-1], [[1, 2]], [0.5]):
        with pytest.raises(ValidationError, match="codes"):
            oracle.perturb_secure(codes)
    with pytest.raises(ValidationError, match="codes") as info:
        oracle.perturb(np.array([3, 987654321]), np.random.default_rng(0))
    assert "987654321" not in str(info.value)     # a private value never enters a message
