"""The shuffler's permutation and threshold (ldpsynth.shuffler.permutation, .threshold), without a server.

The permutation is checked with a seeded word source (deterministic: the algorithm, the rejection) and
once with the OS CSPRNG itself. χ² tests: Pearson's statistic against its χ² distribution, at α stated
per test, every bin with at least 5 expected counts.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from ldpsynth.shuffler.permutation import os_words, uniform_below, uniform_permutation
from ldpsynth.shuffler.threshold import NOISE_DIVISOR, draw_threshold

ALPHA = 1e-3


def seeded_words(seed: int):
    rng = np.random.default_rng(seed)
    return lambda k: rng.integers(0, 2**64, size=k, dtype=np.uint64, endpoint=False)


def positions_of_tags(permutations: np.ndarray) -> np.ndarray:
    """``counts[item, position]``: how often each input item ended at each output position."""
    n = permutations.shape[1]
    counts = np.zeros((n, n), np.int64)
    for perm in permutations:
        counts[perm, np.arange(n)] += 1
    return counts


@pytest.mark.parametrize("n", [2, 7, 16])
def test_every_item_lands_at_every_position_equally_often(n: int) -> None:
    """α = 1e-3 per item: 40·n permutations, 40 expected per (item, position) cell."""
    words = seeded_words(20261126 + n)
    perms = np.array([uniform_permutation(n, words) for _ in range(40 * n)])
    assert all(sorted(p) == list(range(n)) for p in perms)
    counts = positions_of_tags(perms)
    for item in range(n):
        assert stats.chisquare(counts[item]).pvalue > ALPHA, (item, counts[item])


def test_all_six_orders_of_three_items_are_equally_likely() -> None:
    """The whole permutation, not only positions: 6000 draws over the 3! orders, α = 1e-3."""
    words = seeded_words(3)
    index = {p: i for i, p in enumerate(itertools.permutations(range(3)))}
    counts = np.zeros(6, np.int64)
    for _ in range(6000):
        counts[index[tuple(uniform_permutation(3, words).tolist())]] += 1
    assert stats.chisquare(counts).pvalue > ALPHA, counts


def test_the_os_csprng_permutation_moves_tagged_items_uniformly() -> None:
    """The permutation as the shuffler draws it (os.urandom, not seedable): position of the item that
    arrived first among 20, over 400 permutations (20 expected per position), α = 1e-6 so that this
    unseeded test fails by chance once in a million runs; an unshuffled or reversed order fails it."""
    first = np.array([int(np.flatnonzero(uniform_permutation(20) == 0)[0]) for _ in range(400)])
    assert stats.chisquare(np.bincount(first, minlength=20)).pvalue > 1e-6
    identity = np.zeros(20, np.int64)
    identity[0] = 400
    assert stats.chisquare(identity).pvalue < 1e-6  # the test can fail


def test_the_statistic_sees_a_biased_shuffle() -> None:
    """The check can fail: a Fisher-Yates with the classic off-by-one (j uniform on [0, n) at every
    step) is not uniform, and the same test at the same α refuses it."""
    rng = np.random.default_rng(5)
    n = 3
    index = {p: i for i, p in enumerate(itertools.permutations(range(n)))}
    counts = np.zeros(6, np.int64)
    for _ in range(6000):
        order = list(range(n))
        for i in range(n - 1, 0, -1):
            j = int(rng.integers(0, n))
            order[i], order[j] = order[j], order[i]
        counts[index[tuple(order)]] += 1
    assert stats.chisquare(counts).pvalue < ALPHA


def test_words_below_the_rejection_floor_are_drawn_again() -> None:
    """For a bound b, a word w < 2^64 mod b is rejected (else small residues would be favoured)."""
    bound = np.uint64(3)  # 2^64 mod 3 = 1: the word 0 is rejected, the word 1 gives 1 % 3 = 1
    supplied = iter([np.array([0], np.uint64), np.array([1], np.uint64)])
    assert uniform_below(np.array([bound]), lambda k: next(supplied)).tolist() == [1]
    assert uniform_below(np.array([np.uint64(2**63 + 1)]),
                         lambda k: np.array([2**64 - 1], np.uint64)).tolist() == [2**63 - 2]


def test_the_os_word_source_gives_fresh_uint64_words() -> None:
    a, b = os_words(4), os_words(4)
    assert a.dtype == np.uint64 and a.shape == (4,) and not np.array_equal(a, b)
    assert os_words(0).shape == (0,)


@pytest.mark.parametrize("n", [0, 1])
def test_no_items_or_one(n: int) -> None:
    assert uniform_permutation(n).tolist() == list(range(n))


def test_the_threshold_is_at_least_t_and_min_batch_and_its_noise_covers_its_range() -> None:
    """OS CSPRNG: 2000 draws over a range of 3 values (T = 8: {8, 9, 10}); each end is missed with
    probability (2/3)^2000."""
    draws = [draw_threshold(8, 1) for _ in range(2000)]
    assert min(draws) == 8 and max(draws) == 8 + 8 // NOISE_DIVISOR
    assert all(1000 <= draw_threshold(8, 1000) <= 1000 + 1000 // NOISE_DIVISOR for _ in range(200))
    assert {draw_threshold(1, 1) for _ in range(100)} == {1}
