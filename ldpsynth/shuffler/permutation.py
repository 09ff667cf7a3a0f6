"""A uniformly random permutation from the OS CSPRNG: Durstenfeld's Fisher-Yates (Knuth, TAOCP vol. 2,
Algorithm 3.4.2P) on indices drawn exactly uniformly by rejection from ``os.urandom``.

Why uniform: for i = n-1, ..., 1 swap positions i and j_i, j_i uniform on {0, ..., i} and independent.
The n! sequences (j_{n-1}, ..., j_1) map one to one onto the permutations of n items, so each
permutation has probability 1/n! exactly when every j_i is exactly uniform. Each j_i comes from a
64-bit word w uniform on [0, 2^64) (8 bytes of ``os.urandom``): w is kept when w >= 2^64 mod (i+1),
and then j_i = w mod (i+1). The kept words are 2^64 - (2^64 mod (i+1)) values, a multiple of i+1,
each residue the same number of times: j_i is exactly uniform; a word is redrawn with probability
below (i+1)/2^64. No seeded generator stands between the OS CSPRNG and the permutation, so every
permutation of any n is reachable (a generator seeded with s bits reaches at most 2^s of the n!).

The words are drawn and checked for all i at once (numpy); only the n-1 swaps run in a loop.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

#: A source of uniform 64-bit words: ``words(k)`` gives ``k`` of them as uint64.
WordSource = Callable[[int], np.ndarray]


def os_words(count: int) -> np.ndarray:
    """``count`` uniform 64-bit words from the OS CSPRNG (``os.urandom``).

    Parameters
    ----------
    count : int
        Words to draw, >= 0.

    Returns
    -------
    numpy.ndarray
        ``(count,)`` uint64.
    """
    return np.frombuffer(os.urandom(8 * count), np.uint64).copy()


def uniform_below(bounds: np.ndarray, words: WordSource = os_words) -> np.ndarray:
    """One integer uniform on ``[0, b)`` for every ``b`` of ``bounds``, by rejection (module docstring).

    Parameters
    ----------
    bounds : numpy.ndarray
        ``(k,)`` uint64, each >= 1.
    words : WordSource, default os_words
        Where the uniform 64-bit words come from (tests pass a seeded one).

    Returns
    -------
    numpy.ndarray
        ``(k,)`` int64, entry i uniform on ``[0, bounds[i])``.
    """
    bounds = np.asarray(bounds, np.uint64)
    floor = (np.iinfo(np.uint64).max - bounds + np.uint64(1)) % bounds  # 2^64 mod b, without overflow
    drawn = words(len(bounds))
    rejected = np.flatnonzero(drawn < floor)
    while len(rejected):
        drawn[rejected] = words(len(rejected))
        rejected = rejected[drawn[rejected] < floor[rejected]]
    return (drawn % bounds).astype(np.int64)


def uniform_permutation(n: int, words: WordSource = os_words) -> np.ndarray:
    """A permutation of ``range(n)``, each of the n! with probability 1/n! (module docstring).

    Parameters
    ----------
    n : int
        Items, >= 0.
    words : WordSource, default os_words
        Where the uniform 64-bit words come from: the OS CSPRNG (tests pass a seeded one).

    Returns
    -------
    numpy.ndarray
        ``(n,)`` int64: position k of the output takes item ``perm[k]``.
    """
    order = list(range(n))
    if n < 2:
        return np.array(order, np.int64)
    positions = range(n - 1, 0, -1)
    swaps = uniform_below(np.arange(n, 1, -1, dtype=np.uint64), words).tolist()
    for i, j in zip(positions, swaps):
        order[i], order[j] = order[j], order[i]
    return np.array(order, np.int64)
