"""MWEM (HLM12): the one implementation of the algorithm, for P histograms at once.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.evaluation.primitives.mwem``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from scipy.special import logsumexp

from ldpsynth.evaluation.primitives.selection import (
    exponential_mechanism,
    exponential_mechanism_draws,
    report_noisy_max,
)

#: Largest number of rounds T accepted.
MAX_ROUNDS = 100_000
#: Largest number of multiplicative-weights replay passes per round.
MAX_REPLAYS = 1_000
#: ``"last"`` (Hardt's code) or ``"average"`` (HLM12's theorem) iterate.
ITERATES = ("last", "average")

#: One private selection per histogram: ``(scores (P, m), round epsilon, rng) -> (P,)`` query indices,
#: ε_t-DP for scores of sensitivity 1.
Selection = Callable[[np.ndarray, float, np.random.Generator], np.ndarray]


def gumbel_selection(scores: np.ndarray, round_epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """EM(ε_t, |error|, 1) per row, sampled by Gumbel-max (:func:`.selection.exponential_mechanism`)."""
    return exponential_mechanism(scores, round_epsilon, 1.0, rng)


def noisy_max_selection(scores: np.ndarray, round_epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """Report-noisy-max with :math:`\\mathrm{Lap}(2/\\epsilon_t)` per row (:func:`.selection.report_noisy_max`)."""
    return report_noisy_max(scores, round_epsilon, 1.0, rng)


def inverse_cdf_selection(scores: np.ndarray, round_epsilon: float, rng: np.random.Generator) -> np.ndarray:
    """EM(ε_t, |error|, 1) per row, sampled by inverse CDF (:func:`.selection.exponential_mechanism_draws`)."""
    return np.array([exponential_mechanism_draws(row, round_epsilon, 1.0, rng, 1)[0] for row in scores],
                    dtype=np.int64)


#: The selections a comparison MWEM is configured with, by name.
SELECTIONS: dict[str, Selection] = {"em": gumbel_selection, "rnm": noisy_max_selection}


class SyntheticHistograms(Protocol):
    """P synthetic histograms :math:`A_p` under multiplicative weights, and the queries they answer."""

    def answers(self) -> np.ndarray:
        """:math:`q_{p,j}(A_p)` on the count scale, ``(P, m)``."""

    def row(self, j: np.ndarray) -> Any:
        """What :meth:`reweight` needs of query :math:`j_p` of every histogram (kept for the replays)."""

    def reweight(self, row: Any, measurement: np.ndarray) -> None:
        """One multiplicative-weights step toward the measurements ``(P,)`` of ``row``, then renormalise
        to :math:`n_p`."""

    def tables(self) -> np.ndarray:
        """The histograms :math:`A_p`, ``(P, d)`` (a copy or a fresh array)."""


@dataclass(eq=False)
class DenseQueryHistograms:
    """Log-space MWEM weights for linear queries given by dense weights, mapped affinely into [0, 1].

    ``weights`` is ``(P, m, d)`` or ``(1, m, d)`` (shared by all histograms); the MWEM query of
    histogram ``p`` is :math:`q_{p,j} = (W_{p,j} - a_{p,j})/c_{p,j}` with ``offset`` :math:`a` and
    ``scale`` :math:`c` (zero where :math:`c_{p,j} = 0`: a query constant on every cell is
    answered exactly and scores 0); since :math:`\\sum A_p = n_p`,
    :math:`\\langle W_j, A\\rangle = c_j q_j(A) + a_j n_p`. ``sizes`` are the :math:`n_p > 0`.
    The queries are never copied into a shifted/scaled matrix: :math:`q_j(A)` is computed from the
    weights (in chunks of ``chunk_cells`` weights when they are shared) and mapped affinely.
    """

    weights: np.ndarray   # (P or 1, m, d)
    offset: np.ndarray    # (P or 1, m)  a
    scale: np.ndarray     # (P or 1, m)  c
    sizes: np.ndarray     # (P,) n_p > 0
    chunk_cells: int

    def __post_init__(self) -> None:
        d = self.weights.shape[2]
        self._log_sizes = np.log(self.sizes)[:, None]
        self._log_a = np.broadcast_to(np.log(self.sizes / d)[:, None], (len(self.sizes), d)).copy()   # A_0 = (n/d) 1

    @property
    def inverse_scale(self) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.where(self.scale > 0, 1.0 / np.where(self.scale > 0, self.scale, 1.0), 0.0)

    def raw(self, tables: np.ndarray) -> np.ndarray:
        """:math:`\\langle W_{p,j}, T_p\\rangle`, ``(P, m)``, in chunks of queries when the weights are shared."""
        w = self.weights
        if w.shape[0] == len(tables):
            return np.matmul(w, tables[:, :, None])[..., 0]
        out = np.empty((len(tables), w.shape[1]))
        step = max(1, self.chunk_cells // w.shape[2])
        for s in range(0, w.shape[1], step):
            out[:, s:s + step] = tables @ w[0, s:s + step].T
        return out

    def query_answers(self, tables: np.ndarray) -> np.ndarray:
        """:math:`q_{p,j}(T_p)` on the count scale, ``(P, m)`` (tables with row sums :attr:`sizes`)."""
        return (self.raw(tables) - self.offset * self.sizes[:, None]) * self.inverse_scale

    def answers(self) -> np.ndarray:
        return self.query_answers(np.exp(self._log_a))

    def row(self, j: np.ndarray) -> np.ndarray:
        """The vectors :math:`q_{p, j_p}` over the cells, ``(P, d)``."""
        p = np.arange(len(j)) if self.weights.shape[0] > 1 else np.zeros(len(j), np.int64)
        rows = self.weights[p, j]
        inv = self.inverse_scale[p, j]
        return (rows - self.offset[p, j][:, None]) * inv[:, None]

    def reweight(self, row: np.ndarray, measurement: np.ndarray) -> None:
        estimate = (row * np.exp(self._log_a)).sum(axis=1)
        self._log_a += row * ((measurement - estimate) / (2.0 * self.sizes))[:, None]
        self._log_a -= logsumexp(self._log_a, axis=1, keepdims=True) - self._log_sizes

    def tables(self) -> np.ndarray:
        return np.exp(self._log_a)


def run_mwem(histograms: SyntheticHistograms, truth: np.ndarray, rounds: int, epsilon: float, replays: int,
             select: Selection, iterate: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """MWEM on every histogram at once: the synthetic tables ``(P, d)`` and the selected queries ``(T, P)``.

    ``truth`` is :math:`q_{p,j}(B_p)`, ``(P, m)``: the only data access, through ``select`` (ε_t)
    and the Laplace measurement (ε_t) in every round. The caller validates ``rounds``
    (:data:`MAX_ROUNDS`), ``replays`` (:data:`MAX_REPLAYS`), ``iterate`` (:data:`ITERATES`) and ε.
    """
    count = len(truth)
    eps_t = epsilon / (2.0 * rounds)
    chosen: list[np.ndarray] = []
    measured: list[tuple[np.ndarray, np.ndarray]] = []
    total: np.ndarray | None = None
    rows_idx = np.arange(count)
    for _ in range(rounds):
        score = np.abs(histograms.answers() - truth)          # sensitivity 1 (queries in [0,1])
        j = select(score, eps_t, rng)
        measurement = truth[rows_idx, j] + rng.laplace(scale=1.0 / eps_t, size=count)
        chosen.append(j)
        measured.append((histograms.row(j), measurement))
        for _ in range(replays):
            for row, value in measured:
                histograms.reweight(row, value)
        if iterate == "average":
            total = histograms.tables() if total is None else total + histograms.tables()
    final = total / rounds if total is not None else histograms.tables()
    return final, np.asarray(chosen)
