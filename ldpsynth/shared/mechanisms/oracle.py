"""What every frequency oracle shares: argument checks, chunked sampling, sufficient statistics, estimates.

A :class:`FrequencyOracle` is a pure protocol (:mod:`~ldpsynth.shared.mechanisms.pure`) with

* one sampler, ``_sample(codes, coins)``, written against exact draws
  (:mod:`~ldpsynth.shared.mechanisms.coins`): :meth:`~FrequencyOracle.perturb_secure` runs it on the
  OS CSPRNG (devices), :meth:`~FrequencyOracle.perturb` on a seeded numpy Generator (simulations),
  :mod:`~ldpsynth.shared.mechanisms.exact` on coins that enumerate every outcome (privacy checks);
* a *tally*, the oracle's sufficient statistic: an int64 vector that the reports of a group add
  into, so that shards merge by adding (:class:`OracleStatistics`);
* a decoder from the tally to the support counts :math:`S(v)`, from which the pure protocol's
  unbiased counts and variances follow.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..validation import check_codes, check_epsilon, check_int
from .bits import column_counts, grouped_column_counts
from .coins import CoinFlips, secure_coins, seeded_coins
from .pure import PureProtocol, check_weights

__all__ = [
    "FrequencyOracle",
    "BitSetOracle",
    "OracleStatistics",
]

#: Cells (rows times the per-row width of the sampler's work) sampled per chunk.
CHUNK_CELLS = 1 << 22


class FrequencyOracle(ABC):
    """A pure LDP frequency oracle over the codes ``0 .. domain_size-1`` (module docstring).

    Attributes
    ----------
    epsilon_requested:
        The ε asked for.
    epsilon:
        The ε delivered: the log of the worst-case ratio of the exact output probabilities,
        rounded up to the next float; never above ``epsilon_requested``.
    protocol:
        The exact :class:`~ldpsynth.shared.mechanisms.pure.PureProtocol`.
    report_bytes:
        Bytes of one report in its compact form.
    """

    name: ClassVar[str]
    #: Largest domain the oracle accepts.
    max_domain_size: ClassVar[int]

    def __init__(self, epsilon: float, domain_size: int):
        self.epsilon_requested = check_epsilon(epsilon, "epsilon")
        self.domain_size = check_int(domain_size, "domain_size", 2, self.max_domain_size)

    # ----- the parameters --------------------------------------------------------------------
    epsilon: float
    protocol: PureProtocol

    @property
    @abstractmethod
    def parameters(self) -> tuple[int, ...]:
        """The exact integers that fix the output law (compared by ``==`` and :meth:`OracleStatistics.merge`)."""

    @property
    @abstractmethod
    def report_bytes(self) -> int:
        """Bytes of one report in its compact form."""

    @property
    @abstractmethod
    def tally_size(self) -> int:
        """Length of the tally vector."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FrequencyOracle) and type(other) is type(self) and other.parameters == self.parameters

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.parameters))

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(epsilon={self.epsilon_requested!r}, domain_size={self.domain_size}; "
                f"delivered epsilon={self.epsilon!r})")

    # ----- sampling ----------------------------------------------------------------------------
    def _row_width(self) -> int:
        """Cells of work per row (sets the chunk size): 1 unless a report is a bitmap."""
        return 1

    @abstractmethod
    def _sample(self, codes: np.ndarray, coins: CoinFlips) -> np.ndarray:
        """Reports of the 1-d int64 ``codes`` (already checked), drawn from ``coins``."""

    def _sample_chunks(self, codes: npt.ArrayLike, coins: CoinFlips) -> np.ndarray:
        x = check_codes(codes, "codes", self.domain_size, ndim=1)
        rows = max(1, CHUNK_CELLS // self._row_width())
        if x.size <= rows:
            return self._sample(x, coins)
        return np.concatenate([self._sample(x[start:start + rows], coins) for start in range(0, x.size, rows)])

    def perturb(self, codes: npt.ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """Reports of the 1-d ``codes`` from a seeded numpy Generator: the exact sampler on the
        Generator's raw words (reproducible simulations; not for devices)."""
        return self._sample_chunks(codes, seeded_coins(rng))

    def perturb_secure(self, codes: npt.ArrayLike) -> np.ndarray:
        """Reports of the 1-d ``codes`` from the operating system's CSPRNG (``os.urandom``): the device path.
        Out-of-domain codes are rejected before any randomness is drawn."""
        return self._sample_chunks(codes, secure_coins())

    # ----- reports, tally, support counts --------------------------------------------------------
    @abstractmethod
    def check_reports(self, reports: npt.ArrayLike) -> np.ndarray:
        """``reports`` as this oracle's report array, raising on a malformed report (naming its row)."""

    @abstractmethod
    def _tally(self, reports: np.ndarray) -> np.ndarray:
        """The int64 tally of checked reports (length :attr:`tally_size`)."""

    @abstractmethod
    def _group_tally(self, reports: np.ndarray, groups: np.ndarray, count: int) -> np.ndarray:
        """The tallies ``(count, tally_size)`` of checked reports by group (``groups`` int64 in ``[0, count)``)."""

    @abstractmethod
    def _support(self, tally: np.ndarray, n: int | np.ndarray) -> np.ndarray:
        """The support counts :math:`S(v)`, int64 of length k (along the last axis), from a tally of n reports
        (tallies ``(G, tally_size)`` with n ``(G, 1)``: one row of support counts per group)."""

    @abstractmethod
    def _support_rows(self, reports: np.ndarray) -> np.ndarray:
        """``(n, k)`` booleans of checked reports: whether value v is in report i's support."""

    def support_rows(self, reports: npt.ArrayLike) -> np.ndarray:
        """The support of each report (checked by :meth:`check_reports`) as a row of k 0/1 int64: its
        :meth:`support_counts <OracleStatistics.support_counts>` of one report (dense per-row queries)."""
        arr = self.check_reports(reports)
        if not len(arr):
            return np.zeros((0, self.domain_size), np.int64)
        return self._support_rows(arr).astype(np.int64)

    def group_tallies(self, reports: npt.ArrayLike, groups: npt.ArrayLike, count: int) -> np.ndarray:
        """The tallies of ``reports`` (checked by :meth:`check_reports`) per group: ``(count, tally_size)`` int64,
        row g the tally of the reports i with ``groups[i] == g``; the rows add up to :meth:`statistics`' tally."""
        arr = self.check_reports(reports)
        labels = np.asarray(groups, dtype=np.int64)
        if labels.shape != (len(arr),) or (labels.size and (labels.min() < 0 or labels.max() >= count)):
            raise ValidationError("groups", f"one group in [0, {count - 1}] per report", f"got shape {labels.shape}")
        if len(arr) == 0:
            return np.zeros((count, self.tally_size), np.int64)
        if count == 1:
            return self._tally(arr)[None, :]
        return self._group_tally(arr, labels, count)

    def statistics(self, reports: npt.ArrayLike) -> OracleStatistics:
        """The sufficient statistics of ``reports`` (:meth:`OracleStatistics.from_reports`)."""
        return OracleStatistics.from_reports(self, reports)

    def _check_reports_array(self, reports: npt.ArrayLike, dtype: type, trailing: tuple[int, ...]) -> np.ndarray:
        arr = np.asarray(reports)
        if arr.ndim != 1 + len(trailing) or arr.shape[1:] != trailing:
            shape = f"an array of shape (n, {', '.join(map(str, trailing))})" if trailing else "a 1-d array"
            raise ValidationError("reports", f"{self.name} reports: {shape}", f"got shape {arr.shape}")
        if not arr.size:
            return arr.astype(dtype)
        if arr.dtype.kind not in "iu":
            raise ValidationError("reports", f"{self.name} reports: integers", f"got dtype {arr.dtype}")
        if arr.dtype != np.dtype(dtype):
            info = np.iinfo(dtype)
            bad = (arr < info.min) | (arr > info.max) if arr.dtype.kind == "i" else arr > info.max
            if bad.any():
                raise ValidationError("reports", f"{self.name} reports: integers in [{info.min}, {info.max}]",
                                      "out of range", int(np.flatnonzero(bad.reshape(len(arr), -1).any(axis=1))[0]))
        return arr.astype(dtype, copy=False)


class BitSetOracle(FrequencyOracle):
    """An oracle whose report is a bit set over D (OUE, SS): ``report_bytes`` = ⌈k/8⌉ bytes, value v
    bit ``v % 8`` of byte ``v // 8``; the tally counts each value's set bits, which are its support
    counts :math:`S(v)` as they are."""

    @property
    def report_bytes(self) -> int:
        return -(-self.domain_size // 8)

    @property
    def tally_size(self) -> int:
        return self.domain_size

    def _spare_bits(self, reports: np.ndarray) -> np.ndarray:
        """Per report, the bits set beyond value k − 1 in its last byte (a valid report has none)."""
        spare = 8 * self.report_bytes - self.domain_size
        return reports[:, -1] >> (8 - spare) if spare else np.zeros(len(reports), np.uint8)

    def _tally(self, reports: np.ndarray) -> np.ndarray:
        return column_counts(reports, self.domain_size)

    def _group_tally(self, reports: np.ndarray, groups: np.ndarray, count: int) -> np.ndarray:
        return grouped_column_counts(reports, groups, count, self.domain_size)

    def _support_rows(self, reports: np.ndarray) -> np.ndarray:
        return np.unpackbits(reports, axis=1, count=self.domain_size, bitorder="little").astype(bool)

    def _support(self, tally: np.ndarray, n: int | np.ndarray) -> np.ndarray:
        return tally.copy()


@dataclass(frozen=True, eq=False)
class OracleStatistics:
    """What a storage shard keeps for a group of reports of one oracle: their number and their tally.

    Mergeable across shards by adding (:meth:`merge`): the statistics of two disjoint sets of
    reports merge into those of their union, exactly as if computed from the concatenation.
    """

    oracle: FrequencyOracle
    n: int
    tally: np.ndarray

    @classmethod
    def empty(cls, oracle: FrequencyOracle) -> OracleStatistics:
        """The statistics of no report (the identity of :meth:`merge`)."""
        return cls(oracle, 0, np.zeros(oracle.tally_size, np.int64))

    @classmethod
    def from_reports(cls, oracle: FrequencyOracle, reports: npt.ArrayLike) -> OracleStatistics:
        """Count ``reports`` (checked by :meth:`FrequencyOracle.check_reports`) into a tally."""
        arr = oracle.check_reports(reports)
        if len(arr) == 0:
            return cls.empty(oracle)
        return cls(oracle, len(arr), oracle._tally(arr))

    def merge(self, other: OracleStatistics) -> OracleStatistics:
        """The statistics of the union of two disjoint sets of reports of the same oracle."""
        if not isinstance(other, OracleStatistics) or other.oracle != self.oracle:
            raise ValidationError("other", f"statistics of the same oracle ({self.oracle!r})",
                                  f"got {getattr(other, 'oracle', other)!r}")
        return OracleStatistics(self.oracle, self.n + other.n, self.tally + other.tally)

    def support_counts(self) -> np.ndarray:
        """:math:`S(v)`: how many reports have v in their support, int64 of length k."""
        return self.oracle._support(self.tally, self.n)

    def count_estimates(self) -> np.ndarray:
        """The unbiased counts :math:`\\hat c(v) = (S(v) - n q^*)/(p^* - q^*)` (WBLJ17 §3)."""
        return self.oracle.protocol.count_estimates(self.support_counts(), self.n)

    def linear_estimates(self, weights: npt.ArrayLike) -> np.ndarray:
        """:math:`\\sum_v w(v)\\hat c(v)` for each row of ``weights`` ``(queries, k)``."""
        return check_weights(weights, self.oracle.domain_size) @ self.count_estimates()

    def linear_variance_estimate(self, weights: npt.ArrayLike) -> np.ndarray:
        """The unbiased estimate of the variance of each :meth:`linear_estimates`
        (:meth:`~ldpsynth.shared.mechanisms.pure.PureProtocol.linear_variance_estimate`)."""
        return self.oracle.protocol.linear_variance_estimate(weights, self.count_estimates(), self.n)
