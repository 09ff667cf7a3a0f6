"""The randomized release threshold of a pool (Prochlo's randomized thresholding, Bittau et al. SOSP
2017, key ``Prochlo`` in docs/references.md).

A pool of one collection is released only once it holds at least ``t`` reports, with ``t`` drawn
afresh for every pool::

    floor = max(T, min_batch)          T: --threshold, min_batch: the collection's shuffle.min_batch (1 if none)
    t     = floor + U,  U uniform on {0, 1, ..., floor // 4}      (secrets.randbelow: the OS CSPRNG)

The noise is one-sided, so no pool is ever released below ``T`` or below the collection's minimum
batch (both are guarantees the accountant relies on, docs/shuffle-accountant.md), and bounded (at
most 1.25 x floor), so a collection with that much traffic always gets through. What it hides: the
release of a pool tells an observer of the forwarded traffic that the pool held at least ``t``
reports, not how many devices were waiting when it crossed ``floor``. Prochlo's own noise
distribution is not reproduced here (docs/references.md: the paper's details were not verified);
this uniform draw is ldpsynth's choice.
"""

from __future__ import annotations

import secrets

#: The noise's range as a fraction of the floor: U is uniform on {0, ..., floor // NOISE_DIVISOR}.
NOISE_DIVISOR = 4


def draw_threshold(threshold: int, min_batch: int) -> int:
    """A pool's release threshold ``max(threshold, min_batch) + U`` (module docstring).

    Parameters
    ----------
    threshold : int
        The shuffler's ``--threshold`` T, >= 1.
    min_batch : int
        The collection's ``shuffle.min_batch`` (1 for a collection without a shuffle block), >= 1.

    Returns
    -------
    int
        The fewest reports the pool may be released with.
    """
    floor = max(threshold, min_batch)
    return floor + secrets.randbelow(floor // NOISE_DIVISOR + 1)
