"""What a central mechanism returns: answers, a synthetic distribution, and its privacy guarantee.

Every mechanism of this package is a frozen value with validated parameters, a
:class:`PrivacyGuarantee` (ε, δ, the neighbour notion) and ``release(data, workload, rng)``
returning a :class:`CentralRelease`. The guarantee holds for the whole release (answers,
distribution and any rows sampled from it are post-processing).

Neighbour notions used here (spec §1.1):

* :data:`REPLACE_ONE`: replace one row by any other row of the joint domain ``(label, value)``
  (bounded DP, n public) — seeds 000, 002, 003;
* :data:`REPLACE_ONE_VALUE`: replace one row's private value, its public label fixed (the
  group sizes :math:`n_g` are public) — the seed-000 sub-database adaptation needs it: a row
  moving between sub-databases would touch two of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_int

REPLACE_ONE = "replace-one row (bounded DP: n public; a row may change its label and its value)"
REPLACE_ONE_VALUE = "replace-one private value (bounded DP: n and the public labels' group sizes n_g are public)"


@dataclass(frozen=True)
class PrivacyGuarantee:
    """A stated guarantee: ``(epsilon, delta)``-DP (δ = 0: pure ε-DP) under ``neighbours``.

    ``accounting`` says how it was obtained (e.g. "basic composition of 2T pure-DP steps").
    """

    epsilon: float
    delta: float
    neighbours: str
    accounting: str

    def __str__(self) -> str:
        kind = f"{self.epsilon:g}-DP" if self.delta == 0 else f"({self.epsilon:g}, {self.delta:g})-DP"
        return f"{kind} under {self.neighbours}; {self.accounting}"


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

    def sample(self, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``size`` iid synthetic rows ``(labels, values)`` drawn from :attr:`distribution`."""
        size = check_int(size, "size", 0)
        if self.distribution is None:
            raise ValidationError("distribution", "a mechanism that releases a synthetic distribution",
                                  f"{self.mechanism} releases answers only")
        p = self.distribution.ravel()
        cells = rng.choice(p.size, size=size, p=p / p.sum())
        return np.divmod(cells, self.distribution.shape[1])

    def synthetic_histogram(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """Counts ``(G, k)`` of ``size`` sampled synthetic rows (a multinomial draw)."""
        size = check_int(size, "size", 0)
        if self.distribution is None:
            raise ValidationError("distribution", "a mechanism that releases a synthetic distribution",
                                  f"{self.mechanism} releases answers only")
        p = self.distribution.ravel()
        return rng.multinomial(size, p / p.sum()).reshape(self.distribution.shape)


def normalized_distribution(table: np.ndarray) -> np.ndarray:
    """A non-negative table scaled to sum 1 (read-only copy)."""
    t = np.asarray(table, dtype=np.float64)
    out = t / t.sum()
    out.setflags(write=False)
    return out
