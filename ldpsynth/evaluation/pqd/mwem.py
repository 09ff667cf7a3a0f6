"""A black-box synthetic table for the DP-PQD experiments: MWEM (Hardt, Ligett, McSherry 2012) on binned attributes.

DP-PQD certifies *any* synthetic table; DP-PQD §7.1 used PrivBayes (ZCPSX17). Our experiment needs a
central-DP generator whose samples look like a real SDG's output, so this module fits MWEM
(HLM12) on the joint histogram of a few public
binnings and samples rows from it:

* domain: the product of the attributes' public bins (categorical values, or numeric bins
  ``[e_k, e_{k+1})`` of public edges); the workload is every cell of every 1- and 2-way marginal
  (counting queries, sensitivity 1);
* T rounds, :math:`\\epsilon_t = \\epsilon/(2T)`: the exponential mechanism picks the query with
  score :math:`|q(A_{t-1}) - q(B)|` (:math:`\\Pr \\propto \\exp(\\epsilon_t \\cdot score / 2)`, sampled
  by inverse CDF), then measures it with :math:`Lap(1/\\epsilon_t)`; multiplicative weights
  :math:`A(x) \\leftarrow A(x)\\exp(q(x)(m - q(A))/(2n))` replayed over all measurements
  ``replays`` times (Hardt's code uses 5). The loop is :func:`~..primitives.mwem.run_mwem`;
  :class:`MarginalHistogram` answers the marginals by sums over axes and updates the measured
  marginal cell in place (the domain of the experiment has 476,280 cells);
* n (the number of rows) is public, as in HLM12 (replace-one neighbours): ε-DP overall;
* sampling: n rows from :math:`A/n`; a numeric value is drawn uniformly among the integers of its bin.

The SDG's ε is separate from the deciders' ε (DP-PQD §2.3).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ldpsynth.evaluation.pqd.table import Table
from ldpsynth.evaluation.primitives.mwem import MAX_REPLAYS, MAX_ROUNDS, inverse_cdf_selection, run_mwem
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_epsilon, check_int


@dataclass(frozen=True)
class Binning:
    """Public bins of one attribute: listed categorical ``values``, or numeric ``edges`` (integers, ascending)."""

    attribute: str
    values: tuple[str, ...] | None = None
    edges: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if (self.values is None) == (self.edges is None):
            raise ValidationError(f"binning.{self.attribute}", "either values or edges", "both or neither")
        if self.edges is not None and (len(self.edges) < 2 or np.any(np.diff(self.edges) <= 0)):
            raise ValidationError(f"binning.{self.attribute}.edges", "at least two ascending edges",
                                  f"got {self.edges}")

    @property
    def size(self) -> int:
        return len(self.values) if self.values is not None else len(self.edges) - 1  # type: ignore[arg-type]

    def _legal(self) -> str:
        """The values this attribute's bins hold, as an error message states them."""
        if self.values is not None:
            return f"one of {list(self.values)}"
        assert self.edges is not None  # values or edges: one of them (__post_init__)
        return f"in [{self.edges[0]}, {self.edges[-1]})"

    def index(self, column: np.ndarray) -> np.ndarray:
        """Bin index of every value; values outside the public bins are an error naming the attribute."""
        if self.values is not None:
            lookup = {v: i for i, v in enumerate(self.values)}
            out = np.array([lookup.get(v, -1) for v in column.tolist()], dtype=np.int64)
        else:
            assert self.edges is not None  # values or edges: one of them (__post_init__)
            out = np.searchsorted(np.asarray(self.edges), column, side="right") - 1
            out[(column < self.edges[0]) | (column >= self.edges[-1])] = -1
        if (out < 0).any():
            raise ValidationError(self.attribute, self._legal(), "a value outside the public bins",
                                  int(np.flatnonzero(out < 0)[0]))
        return out

    def sample(self, bins: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A value per bin index: the category, or a uniform integer of ``[e_k, e_{k+1})``."""
        if self.values is not None:
            return np.asarray(self.values, dtype=object)[bins]
        lo = np.ceil(np.asarray(self.edges)[bins])
        hi = np.ceil(np.asarray(self.edges)[bins + 1])
        return np.floor(lo + rng.random(len(bins)) * (hi - lo)).astype(np.float64)


def _marginals(shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    return [(a,) for a in range(len(shape))] + list(itertools.combinations(range(len(shape)), 2))


def _answers(histogram: np.ndarray, marginals: list[tuple[int, ...]]) -> np.ndarray:
    """All workload answers: the cells of every marginal, concatenated."""
    axes = range(histogram.ndim)
    return np.concatenate([histogram.sum(axis=tuple(a for a in axes if a not in m)).reshape(-1) for m in marginals])


def _cell(shape: tuple[int, ...], marginals: list[tuple[int, ...]], query: int) -> tuple:
    """The index expression selecting the cells of workload query ``query``."""
    for m in marginals:
        size = math.prod(shape[a] for a in m)
        if query < size:
            digits = np.unravel_index(query, tuple(shape[a] for a in m))
            index: list = [slice(None)] * len(shape)
            for a, d in zip(m, digits):
                index[a] = int(d)
            return tuple(index)
        query -= size
    raise IndexError(query)


class MarginalHistogram:
    """One synthetic histogram over ``shape`` under multiplicative weights for its 1- and 2-way marginal cells.

    Query ``j`` is the indicator of one cell of one marginal (:func:`_marginals` order, cells in C
    order), a counting query with values in {0, 1}; its update multiplies that cell's entries by
    :math:`\\exp((m_j - q_j(A))/(2n))` and rescales the histogram to sum ``n``.
    """

    def __init__(self, shape: tuple[int, ...], n: float):
        self.shape, self.n = shape, n
        self.marginals = _marginals(shape)
        self.table = np.full(shape, n / math.prod(shape))      # A_0 = (n/d) 1

    def query_answers(self, table: np.ndarray) -> np.ndarray:
        """Every marginal cell's count in ``table``, ``(1, m)``."""
        return _answers(table, self.marginals)[None, :]

    def answers(self) -> np.ndarray:
        return self.query_answers(self.table)

    def row(self, j: np.ndarray) -> tuple:
        """The index expression of the cells of query ``j[0]``."""
        return _cell(self.shape, self.marginals, int(j[0]))

    def reweight(self, row: tuple, measurement: np.ndarray) -> None:
        estimate = self.table[row].sum()
        self.table[row] *= math.exp((measurement[0] - estimate) / (2.0 * self.n))
        self.table *= self.n / self.table.sum()

    def tables(self) -> np.ndarray:
        return self.table.reshape(1, -1).copy()


def mwem_histogram(data: np.ndarray, epsilon: float, rounds: int, rng: np.random.Generator,
                   replays: int = 5) -> np.ndarray:
    """MWEM on the histogram ``data`` (an n-d array of counts) with the 1- and 2-way marginal workload."""
    eps = check_epsilon(epsilon)
    rounds = check_int(rounds, "rounds", 1, MAX_ROUNDS)
    replays = check_int(replays, "replays", 1, MAX_REPLAYS)
    synthetic = MarginalHistogram(data.shape, float(data.sum()))
    table, _ = run_mwem(synthetic, synthetic.query_answers(data), rounds, eps, replays, inverse_cdf_selection, "last",
                        rng)
    return table.reshape(data.shape)


def mwem_synthetic_table(table: Table, binnings: list[Binning], epsilon: float, rounds: int,
                         rng: np.random.Generator, replays: int = 5) -> Table:
    """Fit MWEM on ``table``'s binned attributes (ε-DP) and sample as many rows as ``table`` has."""
    shape = tuple(b.size for b in binnings)
    flat = np.ravel_multi_index(tuple(b.index(table.column(b.attribute)) for b in binnings), shape)
    data = np.bincount(flat, minlength=math.prod(shape)).reshape(shape).astype(np.float64)
    synthetic = mwem_histogram(data, epsilon, rounds, rng, replays)
    probabilities = synthetic.reshape(-1) / synthetic.sum()
    cells = np.unravel_index(rng.choice(probabilities.size, size=len(table), p=probabilities), shape)
    return Table({b.attribute: b.sample(cells[k], rng) for k, b in enumerate(binnings)}, name="mwem")
