"""When to retry a gRPC call, and how long to wait first (exponential backoff with jitter).

Retrying is always safe for ``SubmitReports``: a retry resends the unacknowledged batches with the
same report ids, and the server stores each id once (docs/contract.md). Only statuses that say
"try again" are retried; the ones that say "this is wrong" are final (docs/contract.md §9).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_int, check_real, check_seconds

__all__ = [
    "RETRYABLE_STATUSES",
    "is_retryable",
    "RetryPolicy",
]

#: Statuses worth another attempt: the server is (re)starting or shutting down, the connection
#: dropped (CANCELLED), the deadline passed, or a transient conflict.
RETRYABLE_STATUSES = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "ABORTED", "CANCELLED"})


def is_retryable(status: str) -> bool:
    """Whether a call that ended with the gRPC status ``status`` (its name) may be retried.

    INVALID_ARGUMENT, FAILED_PRECONDITION, RESOURCE_EXHAUSTED (quota or size), UNAUTHENTICATED,
    PERMISSION_DENIED and every other status are final: the same request would fail again.
    """
    return status in RETRYABLE_STATUSES


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with "equal jitter".

    After the k-th failed attempt in a row the client waits a uniform time in
    :math:`[c_k/2, c_k]` with :math:`c_k = \\min(\\text{max\\_backoff},\\ \\text{initial\\_backoff}\\cdot
    \\text{multiplier}^{k-1})`, so many clients that failed together do not retry together.

    Attributes
    ----------
    max_attempts : int, default 8
        Attempts in a row that make no progress before the call fails for good (1: no retry), an
        integer in [1, 1000]. A ``SubmitReports`` attempt that gets a new batch acknowledged
        resets the count, so a long upload over a flaky link keeps going as long as it advances.
    initial_backoff, max_backoff : float, default 0.1 and 10.0
        Seconds: finite numbers of seconds > 0 with ``initial_backoff <= max_backoff``.
    multiplier : float, default 2.0
        Growth of the backoff per failed attempt, a finite number ``>= 1``.

    Raises
    ------
    ValidationError
        Naming ``max_attempts``, ``initial_backoff``, ``max_backoff`` or ``multiplier``: out of its
        legal range.
    """

    max_attempts: int = 8
    initial_backoff: float = 0.1
    max_backoff: float = 10.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        check_int(self.max_attempts, "max_attempts", 1, 1000)
        initial = check_seconds(self.initial_backoff, "initial_backoff")
        ceiling = check_seconds(self.max_backoff, "max_backoff")
        if ceiling < initial:
            raise ValidationError("max_backoff", f"a number of seconds >= initial_backoff ({initial})",
                                  f"got {ceiling!r}")
        check_real(self.multiplier, "multiplier", low=1.0)

    def backoff(self, failures: int, rng: random.Random) -> float:
        """Seconds to wait after ``failures`` failed attempts in a row.

        Parameters
        ----------
        failures : int
            Failed attempts in a row, an integer >= 1 (not checked).
        rng : random.Random
            Draws the jitter.

        Returns
        -------
        float
            A uniform time in :math:`[c_k/2, c_k]` with ``k = failures`` (class docstring).
        """
        growth = self.multiplier ** min(failures - 1, self._steps_to_ceiling())
        cap = min(self.max_backoff, self.initial_backoff * growth)
        return cap / 2 + rng.uniform(0.0, cap / 2)

    def _steps_to_ceiling(self) -> int:
        if self.multiplier == 1.0:
            return 0
        return math.ceil(math.log(self.max_backoff / self.initial_backoff) / math.log(self.multiplier))
