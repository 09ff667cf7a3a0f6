"""A black-box synthetic table for the DP-PQD experiments: MWEM (Hardt, Ligett, McSherry 2012) on binned attributes.

DP-PQD certifies *any* synthetic table; seed 004 used PrivBayes. Our experiment needs a
central-DP generator whose samples look like a real SDG's output, so this module fits MWEM
(``docs/central-mechanisms.md`` §3.1, the HLM12 form) on the joint histogram of a few public
binnings and samples rows from it:

* domain: the product of the attributes' public bins (categorical values, or numeric bins
  ``[e_k, e_{k+1})`` of public edges); the workload is every cell of every 1- and 2-way marginal
  (counting queries, sensitivity 1);
* T rounds, :math:`\\epsilon_t = \\epsilon/(2T)`: the exponential mechanism picks the query with
  score :math:`|q(A_{t-1}) - q(B)|` (:math:`\\Pr \\propto \\exp(\\epsilon_t \\cdot score / 2)`), then
  measures it with :math:`Lap(1/\\epsilon_t)`; multiplicative weights
  :math:`A(x) \\leftarrow A(x)\\exp(q(x)(m - q(A))/(2n))` replayed over all measurements
  ``replays`` times (HLM12 §3.1; Hardt's code uses 5);
* n (the number of rows) is public, as in HLM12 (replace-one neighbours): ε-DP overall;
* sampling: n rows from :math:`A/n`; a numeric value is drawn uniformly among the integers of its bin.

The SDG's ε is separate from the deciders' ε (seed 004 §2.3).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_epsilon, check_int

from .noise import exponential_mechanism, laplace
from .table import Table


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
            raise ValidationError(f"binning.{self.attribute}.edges", "at least two ascending edges", f"got {self.edges}")

    @property
    def size(self) -> int:
        return len(self.values) if self.values is not None else len(self.edges) - 1  # type: ignore[arg-type]

    def index(self, column: np.ndarray) -> np.ndarray:
        """Bin index of every value; values outside the public bins are an error naming the attribute."""
        if self.values is not None:
            lookup = {v: i for i, v in enumerate(self.values)}
            out = np.array([lookup.get(v, -1) for v in column.tolist()], dtype=np.int64)
        else:
            out = np.searchsorted(np.asarray(self.edges), column, side="right") - 1
            out[(column < self.edges[0]) | (column >= self.edges[-1])] = -1
        if (out < 0).any():
            legal = f"one of {list(self.values)}" if self.values is not None else f"in [{self.edges[0]}, {self.edges[-1]})"
            raise ValidationError(self.attribute, legal, "a value outside the public bins", int(np.flatnonzero(out < 0)[0]))
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


def mwem_histogram(data: np.ndarray, epsilon: float, rounds: int, rng: np.random.Generator,
                   replays: int = 5) -> np.ndarray:
    """MWEM on the histogram ``data`` (an n-d array of counts) with the 1- and 2-way marginal workload."""
    eps = check_epsilon(epsilon)
    rounds = check_int(rounds, "rounds", 1)
    n = float(data.sum())
    marginals = _marginals(data.shape)
    truth = _answers(data, marginals)
    synthetic = np.full(data.shape, n / data.size)
    eps_t = eps / (2 * rounds)
    measured: list[tuple[tuple, float]] = []
    for _ in range(rounds):
        scores = np.abs(_answers(synthetic, marginals) - truth)
        chosen = int(exponential_mechanism(rng, scores, eps_t, 1.0, 1)[0])
        measured.append((_cell(data.shape, marginals, chosen), truth[chosen] + float(laplace(rng, 1.0 / eps_t, 1)[0])))
        for _ in range(replays):
            for index, value in measured:
                estimate = synthetic[index].sum()
                synthetic[index] *= math.exp((value - estimate) / (2.0 * n))
                synthetic *= n / synthetic.sum()
    return synthetic


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
