"""MWEM (Hardt, Ligett, McSherry, NIPS 2012) and the seed-000 sub-database adaptation (spec §3).

Core algorithm (spec §3.1, [HLM12]) on a histogram :math:`B` with :math:`\\sum B = n` (public) and
linear queries :math:`q_j \\in [0,1]^d` on the count scale (:math:`q(B) = \\langle q, B\\rangle`,
replace-one sensitivity 1), ``T`` rounds, budget ε, :math:`\\epsilon_t = \\epsilon/(2T)`:

.. code-block:: text

    A_0 = (n/d) 1
    for t = 1..T:
        j_t ~ EM:  P(j) ∝ exp(ε_t |q_j(A_{t-1}) - q_j(B)| / 2)            (selection, ε_t-DP)
              or RNM: argmax_j |q_j(A_{t-1}) - q_j(B)| + Lap(2/ε_t)         (ε_t-DP, non-monotone scores)
        m_t = q_{j_t}(B) + Lap(1/ε_t)                                         (measurement, ε_t-DP)
        repeat R times, for every (j, m_j) measured so far:                   (multiplicative weights)
            A(x) <- A(x) exp(q_j(x) (m_j - q_j(A)) / (2n));  A <- n A / sum(A)
        A_t = A
    output A_T (last iterate, as Hardt's code) or (1/T) sum_t A_t (HLM12's theorem)

By basic composition over 2T steps of ε_t it is ε-DP. The weights are kept in log space (the
update adds :math:`q_j(x)(m_j - q_j(A))/(2n)` to :math:`\\log A(x)`, then renormalises with a
log-sum-exp), and selection uses :mod:`..primitives.selection` (Gumbel-max in log space).

A workload's statistical query :math:`W_j` (any real weights) becomes such a query by an exact
affine map: :math:`q_j = (W_j - a_j)/c_j` with :math:`a_j` its minimum and :math:`c_j > 0` its range
over the cells; since :math:`\\sum A = \\sum B = n`, :math:`\\langle W_j, A\\rangle = c_j q_j(A) + a_j n`
and the error is shift-invariant (spec §3.1, "Handling seed-000 queries"). A query constant on
every cell (:math:`c_j = 0`) is answered exactly and carries score 0.

Two mechanisms:

* :class:`MWEM` — plain MWEM on the joint domain ``(label, value)`` (:math:`d = Gk`); a
  heterogeneous query is a linear query there whose range :math:`c_j` spans all labels
  (spec §3.2, "Alternative with no partitioning"). ε-DP under replace-one rows.
* :class:`SubDatabaseMWEM` — WYZ's adaptation (WYZ §VI-A-1, spec §3.2): the labels
  are split into sub-databases on whose parts every query's row function is constant — by
  default the **coarsest partition** (:func:`coarsest_partition`), or one sub-database per
  label (:func:`label_partition`; WYZ §VI-A-1: "same row functions for ratings of the same
  movie"); on each part every query is linear on the private values, MWEM runs there, and the
  answers are recombined: :math:`q_j = Z_j^{-1} \\sum_S \\langle \\varphi_{j,S}, A_S\\rangle`.
  WYZ do not say how ε is shared among the parts; two ε-DP choices (replace-one private
  values, public labels):

  - ``split="parallel"`` (default): every part gets the **full ε**; parallel composition,
    valid because the parts hold disjoint rows (every row has one public label, every label
    is in exactly one part, and a row cannot change part because its label is public);
  - ``split="sequential"``: each of the :math:`P` non-empty parts gets :math:`\\epsilon/P`;
    basic composition, :math:`P \\cdot \\epsilon/P = \\epsilon` (disjointness not needed;
    :math:`P` is public since the group sizes :math:`n_g` are).

  All parts run in one vectorised pass.

Memory: the queries are never copied into a shifted/scaled matrix; :math:`q_j(A)` is computed
from the workload's weights in chunks and mapped affinely (plain MWEM on :math:`2^{20}` queries
over 5 values holds the 42 MB weight array and a few :math:`O(m)` vectors).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import logsumexp

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_epsilon, check_int

from ..primitives.guarantee import Neighbours, PrivacyGuarantee
from ..primitives.selection import exponential_mechanism, report_noisy_max
from .releases import CentralRelease, normalized_distribution
from .workloads import CHUNK_CELLS, Histogram, Workload

SELECTIONS = ("em", "rnm")
ITERATES = ("last", "average")
#: Sub-database partitions of :class:`SubDatabaseMWEM`: the coarsest valid one, or one per label.
PARTITIONS = ("coarsest", "label")
#: How :class:`SubDatabaseMWEM` shares ε among its sub-databases.
SPLITS = ("parallel", "sequential")
#: Largest number of rounds accepted.
MAX_ROUNDS = 100_000
#: Largest number of multiplicative-weights replay passes per round.
MAX_REPLAYS = 1_000


def coarsest_partition(workload: Workload) -> np.ndarray:
    """Part index of every label: the coarsest partition on whose parts every query is one linear query.

    Labels ``g`` and ``g'`` must share a part iff :math:`W_j[g, \\cdot] = W_j[g', \\cdot]` for every
    query ``j`` (a part where some query has two different row functions is not a linear query
    there). "Identical for every query" is an equivalence relation, so its classes are the
    coarsest valid partition; parts are numbered by their first label. Computed by refining over
    query chunks with ``np.unique`` (exact equality of the float weights).
    """
    groups = workload.groups
    labels = np.zeros(groups, np.int64)
    step = max(1, CHUNK_CELLS // workload.cells)
    for s in range(0, workload.size, step):
        keys = workload.weights[s:s + step].transpose(1, 0, 2).reshape(groups, -1)
        table = np.concatenate([labels[:, None].astype(np.float64), keys], axis=1)
        _, labels = np.unique(table, axis=0, return_inverse=True)
        labels = labels.reshape(-1)
    first = np.full(labels.max() + 1, groups)
    np.minimum.at(first, labels, np.arange(groups))
    rank = np.empty_like(first)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[labels]


def label_partition(workload: Workload) -> np.ndarray:
    """Part index of every label: one part per label (the finest partition; valid for any workload,
    since a query has one row function per label)."""
    return np.arange(workload.groups, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class _Parts:
    """Batched MWEM input: ``P`` independent histograms over ``d`` cells with their own queries.

    ``weights`` is ``(P, m, d)`` or ``(1, m, d)`` (shared by all parts); the MWEM query of part
    ``p`` is :math:`q_{p,j} = (W_{p,j} - a_{p,j})/c_{p,j}` (zero where :math:`c_{p,j} = 0`).
    """

    weights: np.ndarray   # (P or 1, m, d)
    offset: np.ndarray    # (P or 1, m)  a
    scale: np.ndarray     # (P or 1, m)  c
    counts: np.ndarray    # (P, d) float64
    sizes: np.ndarray     # (P,) n_p > 0

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
        step = max(1, CHUNK_CELLS // w.shape[2])
        for s in range(0, w.shape[1], step):
            out[:, s:s + step] = tables @ w[0, s:s + step].T
        return out

    def query_answers(self, tables: np.ndarray) -> np.ndarray:
        """:math:`q_{p,j}(T_p)` on the count scale, ``(P, m)`` (tables with row sums :attr:`sizes`)."""
        return (self.raw(tables) - self.offset * self.sizes[:, None]) * self.inverse_scale

    def query_rows(self, j: np.ndarray) -> np.ndarray:
        """The vectors :math:`q_{p, j_p}` over the cells, ``(P, d)``."""
        p = np.arange(len(j)) if self.weights.shape[0] > 1 else np.zeros(len(j), np.int64)
        rows = self.weights[p, j]
        inv = self.inverse_scale[p, j]
        return (rows - self.offset[p, j][:, None]) * inv[:, None]


def _mwem(parts: _Parts, rounds: int, epsilon: float, replays: int, selection: str, iterate: str,
          rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Run MWEM on every part at once; returns the synthetic tables ``(P, d)`` and the selected queries ``(T, P)``."""
    count, d = parts.counts.shape
    sizes = parts.sizes
    eps_t = epsilon / (2.0 * rounds)
    truth = parts.query_answers(parts.counts)                     # q_j(B), count scale, (P, m)
    log_a = np.broadcast_to(np.log(sizes / d)[:, None], (count, d)).copy()   # A_0 = (n/d) 1
    log_sizes = np.log(sizes)[:, None]
    chosen, measured_rows, measured_values = [], [], []
    total = np.zeros((count, d))
    rows_idx = np.arange(count)
    for _ in range(rounds):
        synth = np.exp(log_a)
        score = np.abs(parts.query_answers(synth) - truth)        # sensitivity 1 (queries in [0,1])
        if selection == "em":
            j = exponential_mechanism(score, eps_t, 1.0, rng)
        else:
            j = report_noisy_max(score, eps_t, 1.0, rng)
        measurement = truth[rows_idx, j] + rng.laplace(scale=1.0 / eps_t, size=count)
        chosen.append(j)
        measured_rows.append(parts.query_rows(j))
        measured_values.append(measurement)
        for _ in range(replays):
            for q, m in zip(measured_rows, measured_values):
                estimate = (q * np.exp(log_a)).sum(axis=1)
                log_a += q * ((m - estimate) / (2.0 * sizes))[:, None]
                log_a -= logsumexp(log_a, axis=1, keepdims=True) - log_sizes
        if iterate == "average":
            total += np.exp(log_a)
    final = total / rounds if iterate == "average" else np.exp(log_a)
    return final, np.asarray(chosen)


def _check_choice(value: object, name: str, legal: tuple[str, ...]) -> str:
    if value not in legal:
        raise ValidationError(name, "one of " + ", ".join(repr(v) for v in legal), f"got {value!r}")
    return value  # type: ignore[return-value]


@dataclass(frozen=True)
class _MWEMParameters:
    """Parameters shared by both MWEM variants (validated on construction)."""

    epsilon: float
    rounds: int = 10
    replays: int = 5
    selection: str = "em"
    iterate: str = "last"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, "epsilon"))
        object.__setattr__(self, "rounds", check_int(self.rounds, "rounds", 1, MAX_ROUNDS))
        object.__setattr__(self, "replays", check_int(self.replays, "replays", 1, MAX_REPLAYS))
        _check_choice(self.selection, "selection", SELECTIONS)
        _check_choice(self.iterate, "iterate", ITERATES)

    @property
    def round_epsilon(self) -> float:
        """:math:`\\epsilon_t = \\epsilon/(2T)`, spent on each selection and on each measurement."""
        return self.epsilon / (2.0 * self.rounds)

    def _accounting(self, formula: str = "eps/(2T)", round_epsilon: float | None = None) -> str:
        """The composition of one MWEM run whose per-round ε is ``formula`` (= ``round_epsilon`` when known)."""
        sel = "exponential mechanism" if self.selection == "em" else "report-noisy-max with Lap(2/eps_t)"
        value = "" if round_epsilon is None else f" = {round_epsilon:g}"
        return (f"basic composition of T = {self.rounds} rounds x ({sel} + Laplace measurement Lap(1/eps_t)), "
                f"eps_t = {formula}{value}")

    def _details(self, chosen: np.ndarray) -> dict[str, Any]:
        return {"rounds": self.rounds, "replays": self.replays, "selection": self.selection, "iterate": self.iterate,
                "round_epsilon": self.round_epsilon, "selected": chosen}


@dataclass(frozen=True)
class MWEM(_MWEMParameters):
    """Plain MWEM on the joint ``(label, value)`` domain (HLM12; spec §3.1). ε-DP, replace-one rows.

    Parameters
    ----------
    epsilon:
        Total budget ε > 0 (:math:`\\epsilon_t = \\epsilon/(2T)` per selection and per measurement).
    rounds:
        T in [1, 100000] (default 10, Hardt's code).
    replays:
        Multiplicative-weights passes over all measurements per round, in [1, 1000] (1 = HLM12's
        theoretical algorithm; default 5, Hardt's ``repetitions``).
    selection:
        ``"em"`` (exponential mechanism, as HLM12 prove) or ``"rnm"`` (report-noisy-max with
        :math:`\\mathrm{Lap}(2/\\epsilon_t)`, the noise ε-DP needs for non-monotone scores).
    iterate:
        ``"last"`` (Hardt's code) or ``"average"`` (HLM12's theorem).
    """

    @property
    def name(self) -> str:
        return f"MWEM (T={self.rounds}, {self.selection})"

    @property
    def guarantee(self) -> PrivacyGuarantee:
        return PrivacyGuarantee(self.epsilon, 0.0, Neighbours.REPLACE_ONE_ROW,
                                self._accounting(round_epsilon=self.round_epsilon))

    def release(self, data: Histogram | npt.ArrayLike, workload: Workload, rng: np.random.Generator) -> CentralRelease:
        hist = workload.check_histogram(data)
        w = workload.weights.reshape(1, workload.size, workload.cells)
        parts = _Parts(w, workload.cell_min[None, :], workload.cell_range[None, :],
                       hist.counts.reshape(1, -1).astype(np.float64), np.array([float(hist.n)]))
        table, chosen = _mwem(parts, self.rounds, self.epsilon, self.replays, self.selection, self.iterate, rng)
        dist = normalized_distribution(table.reshape(hist.counts.shape))
        return CentralRelease(self.name, workload.distribution_answers(dist, hist), dist, hist.n, self.guarantee,
                              self._details(chosen[:, 0]))


@dataclass(frozen=True)
class SubDatabaseMWEM(_MWEMParameters):
    """WYZ's MWEM adaptation to heterogeneous statistical queries (WYZ §VI-A-1; spec §3.2).

    ε-DP under replace-one private values with public labels (see the module docstring for
    the two ways of sharing ε). Parameters as :class:`MWEM`, and:

    partition:
        ``"coarsest"`` (default; :func:`coarsest_partition`: one sub-database per distinct
        row-function pattern) or ``"label"`` (:func:`label_partition`: one per label).
    split:
        ``"parallel"`` (default: each sub-database's MWEM gets the full ε; parallel composition
        over sub-databases disjoint in rows) or ``"sequential"`` (each of the :math:`P` non-empty
        sub-databases gets :math:`\\epsilon/P`; basic composition).

    The synthetic distribution spreads each part's synthetic histogram over the part's labels
    in proportion to their public sizes :math:`n_g` (every query is the same on all labels of a
    part, so the answers do not depend on this split).
    """

    partition: str = "coarsest"
    split: str = "parallel"

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_choice(self.partition, "partition", PARTITIONS)
        _check_choice(self.split, "split", SPLITS)

    @property
    def name(self) -> str:
        return f"MWEM sub-database (T={self.rounds}, {self.selection}, {self.partition} partition, {self.split} ε)"

    def part_of_label(self, workload: Workload) -> np.ndarray:
        """The sub-database of every label, ``(G,)``: a function of the labels, so the parts are disjoint in rows."""
        return coarsest_partition(workload) if self.partition == "coarsest" else label_partition(workload)

    def part_epsilon(self, parts: int) -> float:
        """ε of each sub-database's MWEM when ``parts`` sub-databases hold rows: ε, or ε/P (sequential)."""
        parts = check_int(parts, "parts", 1)
        return self.epsilon if self.split == "parallel" else self.epsilon / parts

    def _guarantee(self, parts: int | None) -> PrivacyGuarantee:
        """The guarantee, with the number ``parts`` of non-empty sub-databases when known."""
        where = ("one sub-database per label" if self.partition == "label"
                 else "the coarsest partition of the labels")
        if self.split == "parallel":
            accounting = (f"parallel composition over sub-databases disjoint in rows ({where}; each row has one "
                          "public label, each label one sub-database), each MWEM at the full eps: "
                          + self._accounting(round_epsilon=self.round_epsilon))
        else:
            p = "P" if parts is None else f"P = {parts}"
            per_round = None if parts is None else self.part_epsilon(parts) / (2.0 * self.rounds)
            accounting = (f"basic composition over the {p} non-empty sub-databases ({where}; P public since the "
                          "n_g are), each MWEM at eps/P: " + self._accounting("eps/(2TP)", per_round))
        return PrivacyGuarantee(self.epsilon, 0.0, Neighbours.REPLACE_ONE_VALUE, accounting)

    @property
    def guarantee(self) -> PrivacyGuarantee:
        return self._guarantee(None)

    def release(self, data: Histogram | npt.ArrayLike, workload: Workload, rng: np.random.Generator) -> CentralRelease:
        hist = workload.check_histogram(data)
        part_of = self.part_of_label(workload)
        parts_count = int(part_of.max()) + 1
        counts = np.zeros((parts_count, workload.k))
        np.add.at(counts, part_of, hist.counts)
        sizes = counts.sum(axis=1)
        live = np.flatnonzero(sizes > 0)                       # public: a part without rows has nothing to release
        first = np.full(parts_count, workload.groups)
        np.minimum.at(first, part_of, np.arange(workload.groups))
        rep = first[live]                                      # one label per part: its row functions
        weights = np.ascontiguousarray(workload.weights[:, rep, :].transpose(1, 0, 2))   # (P, m, k)
        parts = _Parts(weights, workload.group_min[:, rep].T, workload.group_range[:, rep].T, counts[live],
                       sizes[live])
        part_epsilon = self.part_epsilon(len(live))
        tables, chosen = _mwem(parts, self.rounds, part_epsilon, self.replays, self.selection, self.iterate, rng)
        per_part = np.zeros((parts_count, workload.k))
        per_part[live] = tables / sizes[live][:, None]          # per-part synthetic distribution over values
        group_sizes = hist.group_sizes.astype(np.float64)
        synthetic = per_part[part_of] * group_sizes[:, None]    # spread over labels by public n_g
        dist = normalized_distribution(synthetic)
        details = self._details(chosen)
        details.update(parts=parts_count, live_parts=len(live), part_of_label=part_of, part_epsilon=part_epsilon,
                       round_epsilon=part_epsilon / (2.0 * self.rounds))
        return CentralRelease(self.name, workload.distribution_answers(dist, hist), dist, hist.n,
                              self._guarantee(len(live)), details)
