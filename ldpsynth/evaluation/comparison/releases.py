"""What a comparison mechanism returns: answers, a synthetic distribution, and its privacy guarantee.

Every mechanism of this package is a frozen value with validated parameters, a
:class:`~..primitives.guarantee.PrivacyGuarantee` (ε, δ, the neighbouring relation) and
``release(data, workload, rng)`` returning a :class:`CentralRelease`. The guarantee holds for the
whole release (answers, distribution and any rows sampled from it are post-processing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldpsynth.evaluation.primitives.guarantee import PrivacyGuarantee


@dataclass(frozen=True, eq=False)
class CentralRelease:
    """The output of a central mechanism on one histogram and workload.

    Attributes
    ----------
    mechanism:
        Name of the mechanism (with its main parameters).
    answers:
        ``(m,)`` normalised answers to the workload, in workload order.
    distribution:
        ``(G, k)`` synthetic distribution over the joint domain (sums to 1), or None for a
        mechanism that releases answers only (Laplace on the workload answers).
    n:
        Number of rows of the data (public).
    guarantee:
        The privacy guarantee of the release.
    details:
        Mechanism-specific public diagnostics (rounds, noise scales, selected queries, ...).
    """

    mechanism: str
    answers: np.ndarray
    distribution: np.ndarray | None
    n: int
    guarantee: PrivacyGuarantee
    details: dict[str, Any] = field(default_factory=dict)


def normalized_distribution(table: np.ndarray) -> np.ndarray:
    """A non-negative table scaled to sum 1 (read-only copy)."""
    t = np.asarray(table, dtype=np.float64)
    out = t / t.sum()
    out.setflags(write=False)
    return out
