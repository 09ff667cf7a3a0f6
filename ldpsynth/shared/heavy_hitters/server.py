"""The server of the prefix-extension protocol: decode a round, choose the next candidates, the final estimates.

A round's :math:`n_r` reports decode (vectorized: one tally, one transform for OLH/HR; a bincount for E) into
the oracle's unbiased counts :math:`\\hat c_v = (S_v - n_r q^*)/(p^* - q^*)` (WBLJ17 §3) of every cell v, with
the exact variance of a pure protocol's count (the one-hot case of
:meth:`~ldpsynth.shared.mechanisms.pure.PureProtocol.linear_variance`)

.. math::  \\mathrm{Var}\\,\\hat c_v = a\\, n_r + b\\, c_v
           \\quad (:meth:`~ldpsynth.shared.mechanisms.pure.PureProtocol.point_coefficients`),

estimated with :math:`\\hat c_v` in place of :math:`c_v` (unbiased). The round's devices are a uniform sample
(by their keys' HMAC, :mod:`~ldpsynth.shared.heavy_hitters.rounds`) of the N devices, so the population's
count is :math:`\\hat N_v = (N/n_r)\\,\\hat c_v` with

.. math::  \\mathrm{Var}\\,\\hat N_v = (N/n_r)^2\\,\\mathrm{Var}\\,\\hat c_v
           + N^2 \\frac{f_v (1 - f_v)}{n_r} \\frac{N - n_r}{N - 1}, \\qquad f_v = \\hat c_v / n_r \\in [0, 1]

(the second term: sampling without replacement). The final round's cells are whole codes; their 95% CIs
are :math:`\\hat N_v \\pm z_{0.975}\\,\\widehat{\\mathrm{se}}_v`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..estimators.statistics import SufficientStatistics
from ..estimators.tallies import KeyedTallies
from ..mechanism import MechanismE
from ..mechanisms.oracle import FrequencyOracle, OracleStatistics
from ..mechanisms.pure import PureProtocol
from ..mechanisms.registry import protocol_of
from ..validation import check_epsilon, check_int, check_real
from .candidates import extend_prefixes, select_cells
from .device import MAX_DOMAIN, RoundSpec
from .encoding import StringEncoding
from .rounds import RoundSchedule

__all__ = ["cell_variances", "support_counts", "stored_support", "RoundEstimate", "decode_round", "decode_support",
           "round_estimate", "HeavyHitters", "HeavyHitterServer"]


def cell_variances(protocol: PureProtocol, counts: npt.ArrayLike, n: int) -> np.ndarray:
    """:math:`a n + b c_v` per cell, ``(a, b)`` the protocol's
    :meth:`~ldpsynth.shared.mechanisms.pure.PureProtocol.point_coefficients`: the exact variance of each count
    estimate when the cells' true counts are ``counts`` (or its unbiased estimate given the estimates)."""
    a, b = protocol.point_coefficients()
    return n * a + b * np.asarray(counts, np.float64)


def support_counts(spec: RoundSpec, reports: npt.ArrayLike) -> tuple[np.ndarray, int]:
    """:math:`S_v` of every cell and :math:`n_r`: E's reports counted, an oracle's tallied and transformed."""
    mechanism = spec.mechanism
    if isinstance(mechanism, MechanismE):
        codes = mechanism.check_codes(np.asarray(reports).ravel(), "reports")
        return np.bincount(codes, minlength=mechanism.domain_size), len(codes)
    assert isinstance(mechanism, FrequencyOracle)
    stats = mechanism.statistics(reports)
    return stats.support_counts(), stats.n


def stored_support(spec: RoundSpec, stats: SufficientStatistics | KeyedTallies) -> tuple[np.ndarray, int]:
    """:func:`support_counts` of a round from what the storage shards keep of its reports (merged over shards
    and public keys): E's counts per cell summed over the keys, an oracle's tallies summed over the keys
    and transformed. Equal to :func:`support_counts` of the same reports (tallies add)."""
    mechanism = spec.mechanism
    if isinstance(mechanism, MechanismE):
        if not isinstance(stats, SufficientStatistics) or stats.domain_size != mechanism.domain_size:
            raise ValidationError("stats", f"E's counts over the round's {mechanism.domain_size} cells",
                                  f"got {type(stats).__name__}")
        support = np.bincount(stats.codes, weights=stats.counts, minlength=mechanism.domain_size)
        return support.astype(np.int64), int(stats.counts.sum())
    assert isinstance(mechanism, FrequencyOracle)
    if not isinstance(stats, KeyedTallies) or stats.oracle != mechanism:
        raise ValidationError("stats", f"tallies of the round's oracle ({mechanism!r})", f"got {type(stats).__name__}")
    total = OracleStatistics(mechanism, stats.n, stats.table.sum(axis=0, dtype=np.int64))
    return total.support_counts(), total.n


@dataclass(frozen=True, eq=False)
class RoundEstimate:
    """A decoded round: its spec, its reports' number, and per cell the population count estimates and
    their standard errors (the "other" cell last when the round has one)."""

    spec: RoundSpec
    n: int
    population: int
    counts: np.ndarray
    std_errors: np.ndarray


def decode_round(spec: RoundSpec, reports: npt.ArrayLike, population: int) -> RoundEstimate:
    """The population estimates of every cell of a round from its reports (module docstring)."""
    return decode_support(spec, *support_counts(spec, reports), population)


def decode_support(spec: RoundSpec, support: npt.ArrayLike, n: int, population: int) -> RoundEstimate:
    """The population estimates of every cell of a round from its support counts :math:`S_v` (one per value
    of the round mechanism's domain, :func:`support_counts`) and its number of reports :math:`n_r`."""
    check_int(n, "n", 0)
    support = np.asarray(support, np.float64)
    if support.shape != (spec.mechanism.domain_size,):
        raise ValidationError("support", f"{spec.mechanism.domain_size} support counts (the round's domain)",
                              f"got shape {support.shape}")
    check_int(population, "population", max(n, 1))
    if n == 0:
        return RoundEstimate(spec, 0, population, np.zeros(spec.domain_size), np.full(spec.domain_size, math.inf))
    return round_estimate(spec, protocol_of(spec.mechanism).count_estimates(support, n)[:spec.domain_size], n,
                          population)


def round_estimate(spec: RoundSpec, c: np.ndarray, n: int, population: int) -> RoundEstimate:
    """The population estimates and standard errors of every cell from the unbiased counts ``c`` (``ĉ_v``) of
    the round's ``n`` > 0 reports (module docstring)."""
    protocol = protocol_of(spec.mechanism)
    scale = population / n
    ratio = (population - n) / (population - 1) if population > 1 else 0.0
    from . import estimate_kernel  # on first use: ``import ldpsynth`` loads no numba

    kernel = estimate_kernel.KERNEL
    if kernel is not None:                          # one pass, the same operations in the same order
        c = np.ascontiguousarray(c, np.float64)
        counts, std_errors = np.empty_like(c), np.empty_like(c)
        a, b = protocol.point_coefficients()
        kernel(c, float(n), a, b, float(population**2), ratio, scale, scale**2, counts, std_errors)
        return RoundEstimate(spec, n, population, counts, std_errors)
    ldp = np.maximum(cell_variances(protocol, c, n), 0.0)
    f = np.clip(c / n, 0.0, 1.0)
    sampling = population**2 * f * (1 - f) / n * ratio
    return RoundEstimate(spec, n, population, scale * c, np.sqrt(scale**2 * ldp + sampling))


@dataclass(frozen=True, eq=False)
class HeavyHitters:
    """The protocol's answer: the discovered strings, largest estimate first, with their population count
    estimates, standard errors and CIs at ``confidence``."""

    values: list[str]
    codes: np.ndarray
    counts: np.ndarray
    std_errors: np.ndarray
    confidence: float

    @property
    def ci_low(self) -> np.ndarray:
        return self.counts - NormalDist().inv_cdf(0.5 + self.confidence / 2) * self.std_errors

    @property
    def ci_high(self) -> np.ndarray:
        return self.counts + NormalDist().inv_cdf(0.5 + self.confidence / 2) * self.std_errors


@dataclass(eq=False)
class HeavyHitterServer:
    """The rounds of one discovery (module docstring): :meth:`spec` publishes the current round,
    :meth:`receive` decodes its reports and chooses the next candidates, :meth:`result` answers.

    ``top_k`` (the k largest) or ``threshold`` (a share φ of ``population``, kept when its lower bound at
    ``prune_z`` clears φN) chooses; ``cap`` bounds the candidates (default 2k, or 256 with a threshold);
    ``mechanism`` fixes every round's (:class:`~ldpsynth.shared.heavy_hitters.device.RoundSpec`).
    """

    encoding: StringEncoding
    schedule: RoundSchedule
    epsilon: float
    population: int
    top_k: int | None = None
    threshold: float | None = None
    cap: int | None = None
    prune_z: float = 1.959963984540054
    confidence: float = 0.95
    mechanism: str | None = None
    estimates: list[RoundEstimate] = field(default_factory=list)
    _candidates: np.ndarray = field(default_factory=lambda: np.zeros((1, 0), np.uint8))

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon)
        check_int(self.population, "population", 1)
        if self.schedule.total_bits != self.encoding.bits:
            raise ValidationError("schedule", f"total_bits = {self.encoding.bits} (the encoding's)",
                                  f"got {self.schedule.total_bits}")
        if (self.top_k is None) == (self.threshold is None):
            raise ValidationError("top_k", "exactly one of top_k and threshold", "got both or neither")
        if self.top_k is not None:
            check_int(self.top_k, "top_k", 1)
        if self.threshold is not None:
            check_real(self.threshold, "threshold", low=0.0, high=1.0, low_open=True)
        default = 2 * self.top_k if self.top_k is not None else 256
        self.cap = check_int(default if self.cap is None else self.cap, "cap", self.top_k or 1)
        check_real(self.prune_z, "prune_z", low=0.0)
        check_real(self.confidence, "confidence", low=0.0, high=1.0, low_open=True, high_open=True)

    @property
    def round(self) -> int:
        """The current round (``schedule.rounds`` when done)."""
        return len(self.estimates)

    @property
    def finished(self) -> bool:
        """All rounds decoded, or no candidate left."""
        return self.round >= self.schedule.rounds or len(self._candidates) == 0

    def spec(self) -> RoundSpec:
        """The current round's spec, for the devices."""
        if self.finished:
            raise ValidationError("round", f"a round in [0, {self.schedule.rounds - 1}] with candidates",
                                  "the discovery is finished")
        r = self.round
        return RoundSpec(r, self.schedule.start_bits(r), self.schedule.width(r), self._candidates, self.epsilon,
                         self.mechanism)

    def receive(self, reports: npt.ArrayLike) -> RoundEstimate:
        """Decode the current round's reports, choose the next candidates, advance."""
        return self.accept(decode_round(self.spec(), reports, self.population))

    def receive_support(self, support: npt.ArrayLike, n: int) -> RoundEstimate:
        """As :meth:`receive`, from the round's support counts and number of reports (:func:`decode_support`)."""
        return self.accept(decode_support(self.spec(), support, n, self.population))

    def accept(self, estimate: RoundEstimate) -> RoundEstimate:
        """Take the current round's decoded ``estimate`` (of :meth:`spec`'s round), choose the next candidates,
        advance."""
        spec = self.spec()
        if estimate.spec.index != spec.index or estimate.population != self.population:
            raise ValidationError("estimate", f"an estimate of round {spec.index} over {self.population} devices",
                                  f"got round {estimate.spec.index} over {estimate.population}")
        self.estimates.append(estimate)
        if not self.finished:
            assert self.cap is not None
            room = max(1, (MAX_DOMAIN - 1) >> self.schedule.width(self.round))
            kept = self._select(min(self.cap, room))[0]
            self._candidates = extend_prefixes(spec.candidates, spec.start_bits, spec.width_bits, kept)
        return estimate

    def _select(self, cap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The last decoded round's kept cells (:func:`select_cells` among the prefixes a code can begin with, on
        the :meth:`combined` estimates), as ``(cells, their prefixes as whole codes, counts, std_errors)``."""
        last = self.estimates[-1]
        spec = last.spec
        cells = np.arange(spec.other, dtype=np.int64)
        cells = cells[self.encoding.valid_extensions(spec.candidates, spec.start_bits, spec.width_bits, cells)]
        parents = np.zeros((len(spec.candidates), self.encoding.code_bytes), np.uint8)
        parents[:, :spec.candidates.shape[1]] = spec.candidates
        counts, std_errors = self._combine(parents, cells >> spec.width_bits, last.counts[cells],
                                           last.std_errors[cells])
        threshold = None if self.threshold is None else self.threshold * self.population
        kept = select_cells(counts, std_errors, np.ones(len(cells), bool), cap=cap, threshold_count=threshold,
                            z=self.prune_z)
        prefixes = extend_prefixes(spec.candidates, spec.start_bits, spec.width_bits, cells[kept], sort=False)
        codes = np.zeros((len(prefixes), self.encoding.code_bytes), np.uint8)
        codes[:, :prefixes.shape[1]] = prefixes
        return cells[kept], codes, counts[kept], std_errors[kept]

    def result(self) -> HeavyHitters:
        """The heavy hitters: the last round's top k, or its cells whose lower bound at ``prune_z`` clears φN
        (on the :meth:`combined` estimates)."""
        if self.round < self.schedule.rounds:
            empty = np.zeros((0, self.encoding.code_bytes), np.uint8)
            if len(self._candidates) == 0:
                return HeavyHitters([], empty, np.zeros(0), np.zeros(0), self.confidence)
            raise ValidationError("round", f"all {self.schedule.rounds} rounds decoded", f"got {self.round}")
        _, codes, counts, std_errors = self._select(self.top_k or self.estimates[-1].spec.other)
        return HeavyHitters(self.encoding.decode(codes), codes, counts, std_errors, self.confidence)

    def combined(self, codes: np.ndarray, counts: np.ndarray, std_errors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The last decoded round's estimates of ``codes`` (its cells' prefixes, zero-padded to whole codes)
        combined with every earlier round r that estimated the same count: where the code's prefix of
        :math:`b_r` bits is complete (holds a padding symbol,
        :meth:`~ldpsynth.shared.heavy_hitters.encoding.StringEncoding.complete`) and its parent was a candidate.
        Weights :math:`n_r` (fixed, so the mean stays unbiased):
        :math:`\\hat N = \\sum_r n_r \\hat N_r / \\sum_r n_r`,
        :math:`\\widehat{\\mathrm{se}}^2 = \\sum_r n_r^2 \\widehat{\\mathrm{se}}_r^2 / (\\sum_r n_r)^2` (rounds'
        devices are disjoint: their LDP noise is independent, their sampling errors slightly negatively
        correlated, so this errs on the wide side)."""
        return self._combine(codes, np.arange(len(codes)), counts, std_errors)

    def _combine(self, parents: np.ndarray, index: np.ndarray, counts: np.ndarray,
                 std_errors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`combined` of codes whose first :math:`b_{R-1}` bits (the last round's start) are those of
        ``parents[index]``: every earlier round's cell and completeness depend on those bits only, so they are
        found once per parent, and so are the terms a round adds (then spread to the codes: the same products,
        added in the same order); a round that estimated none of them adds nothing."""
        n_last = float(self.estimates[-1].n)
        weight = np.full(len(index), n_last)
        total = n_last * counts
        variance = n_last**2 * std_errors**2
        for r, estimate in enumerate(self.estimates[:-1]):
            if estimate.n == 0:
                continue
            cell = estimate.spec.cells_of(parents)
            use = self.encoding.complete(parents, self.schedule.end_bits(r))
            if estimate.spec.has_other:
                use &= cell != estimate.spec.other
            if not use.any():
                continue
            w = np.where(use, float(estimate.n), 0.0)
            weight += w[index]
            total += (w * estimate.counts[cell])[index]
            variance += (w**2 * estimate.std_errors[cell] ** 2)[index]
        return total / weight, np.sqrt(variance) / weight
