"""MWEM (HLM12) on the joint domain and WYZ's sub-database adaptation (WYZ §VI-A-1).

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.evaluation.comparison.mwem``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ldpsynth.evaluation.comparison.releases import CentralRelease, normalized_distribution
from ldpsynth.evaluation.comparison.workloads import CHUNK_CELLS, Histogram, Workload
from ldpsynth.evaluation.primitives.guarantee import Neighbours, PrivacyGuarantee
from ldpsynth.evaluation.primitives.mwem import (
    ITERATES,
    MAX_REPLAYS,
    MAX_ROUNDS,
    SELECTIONS,
    DenseQueryHistograms,
    run_mwem,
)
from ldpsynth.shared.validation import check_choice, check_epsilon, check_int

#: Sub-database partitions of :class:`SubDatabaseMWEM`: the coarsest valid one, or one per label.
PARTITIONS = ("coarsest", "label")
#: How :class:`SubDatabaseMWEM` shares ε among its sub-databases.
SPLITS = ("parallel", "sequential")


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
        check_choice(self.selection, "selection", SELECTIONS)
        check_choice(self.iterate, "iterate", ITERATES)

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

    def _run(self, histograms: DenseQueryHistograms, counts: np.ndarray, epsilon: float,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """:func:`~..primitives.mwem.run_mwem` at ``epsilon`` on the data ``counts`` ``(P, d)``."""
        return run_mwem(histograms, histograms.query_answers(counts), self.rounds, epsilon, self.replays,
                        SELECTIONS[self.selection], self.iterate, rng)

    def _details(self, chosen: np.ndarray) -> dict[str, Any]:
        return {"rounds": self.rounds, "replays": self.replays, "selection": self.selection, "iterate": self.iterate,
                "round_epsilon": self.round_epsilon, "selected": chosen}


@dataclass(frozen=True)
class MWEM(_MWEMParameters):
    """Plain MWEM on the joint ``(label, value)`` domain (HLM12). ε-DP, replace-one rows.

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
        histograms = DenseQueryHistograms(w, workload.cell_min[None, :], workload.cell_range[None, :],
                                          np.array([float(hist.n)]), CHUNK_CELLS)
        table, chosen = self._run(histograms, hist.counts.reshape(1, -1).astype(np.float64), self.epsilon, rng)
        dist = normalized_distribution(table.reshape(hist.counts.shape))
        return CentralRelease(self.name, workload.distribution_answers(dist, hist), dist, hist.n, self.guarantee,
                              self._details(chosen[:, 0]))


@dataclass(frozen=True)
class SubDatabaseMWEM(_MWEMParameters):
    """WYZ's MWEM adaptation to heterogeneous statistical queries (WYZ §VI-A-1).

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
        check_choice(self.partition, "partition", PARTITIONS)
        check_choice(self.split, "split", SPLITS)

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
        histograms = DenseQueryHistograms(weights, workload.group_min[:, rep].T, workload.group_range[:, rep].T,
                                          sizes[live], CHUNK_CELLS)
        part_epsilon = self.part_epsilon(len(live))
        tables, chosen = self._run(histograms, counts[live], part_epsilon, rng)
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
