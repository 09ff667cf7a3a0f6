"""Histograms and query workloads over a finite joint domain.

A central mechanism sees the data as a **histogram** ``counts[g, v]``: the number of rows with
public label ``g`` (e.g. the movie, :math:`G` labels, one label when there is none) and private
value ``v`` (:math:`k` values). The joint domain :math:`X = G \\times D` has :math:`d = Gk` cells,
flattened in C order (``x = g k + v``).

A **workload** is ``m`` statistical queries whose row functions depend on a row only through its
label (WYZ Def. 3 with :math:`\\varphi_i = W[g(i), \\cdot]`): query ``j`` has a weight table
``weights[j, g, v]`` and its answer on a histogram ``B`` is

.. math::  q_j(B) = \\frac{1}{Z_j} \\sum_{g, v} W_j[g, v]\\, B[g, v],

a linear query on the joint domain. The normaliser :math:`Z_j` is one of (as
:mod:`ldpsynth.shared.queries.model`):

* ``"range"``: :math:`Z_j = \\sum_i c_i = \\sum_g n_g (\\max_v W_j[g,v] - \\min_v W_j[g,v])` (WYZ
  eq. 10); it depends on the data only through the group sizes :math:`n_g`, public when the
  labels are public;
* ``"mean"``: :math:`Z_j = n`; ``"sum"``: :math:`Z_j = 1`.

With :math:`h` distinct row functions per query (the *heterogeneity* of WYZ §VI-A-1), :math:`G > 1`;
a linear query has :math:`G = 1` (or the same table for every ``g``).

Memory: ``weights`` is dense, :math:`8 m G k` bytes (2^20 linear queries over 5 ratings: 42 MB).
Answers are computed in chunks of :data:`CHUNK_CELLS` weights, so evaluating a workload never
materialises more than that besides the weights themselves.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.queries.batch import QueryBatch, TableBlock
from ldpsynth.shared.queries.model import NORMALIZATIONS, normalization_name
from ldpsynth.shared.queries.packed import grouped_batch
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.validation import check_codes

#: Weights per chunk when contracting a workload with one or more histograms.
CHUNK_CELLS = 1 << 22


class JointDomain(ABC):
    """The sizes of the ``(G, k)`` joint domain (public label ``g``, private value ``v``) an array is over."""

    @property
    @abstractmethod
    def domain_shape(self) -> tuple[int, int]:
        """``(G, k)``: the last two axes of the array."""

    @property
    def groups(self) -> int:
        """:math:`G`."""
        return self.domain_shape[0]

    @property
    def k(self) -> int:
        """:math:`k = |D|`."""
        return self.domain_shape[1]

    @property
    def cells(self) -> int:
        """:math:`d = G k`."""
        return self.groups * self.k


@dataclass(frozen=True, eq=False)
class Histogram(JointDomain):
    """Counts of rows per (public label, private value): ``counts[g, v]``, shape ``(G, k)``.

    ``n`` and the group sizes ``n_g`` are public (replace-one neighbours keep them; WYZ §II, JWHZW §2
    and DPSCO App. C.2 use replace-one).
    """

    counts: np.ndarray

    def __post_init__(self) -> None:
        c = np.asarray(self.counts)
        if c.ndim == 1:
            c = c[None, :]
        if c.ndim != 2 or c.shape[1] < 2 or c.shape[0] < 1:
            raise ValidationError("counts", "an array of shape (G >= 1, k >= 2) of counts", f"got shape {c.shape}")
        if c.dtype.kind not in "iu":
            if c.dtype.kind != "f" or not np.all(np.isfinite(c)) or np.any(c != np.rint(c)):
                raise ValidationError("counts", "non-negative integer counts", "not integers")
        c = c.astype(np.int64)
        if (c < 0).any():
            raise ValidationError("counts", "non-negative integer counts", "negative",
                                  int(np.flatnonzero((c < 0).ravel())[0]))
        if c.sum() == 0:
            raise ValidationError("counts", "a histogram with at least one row", "no rows")
        c.setflags(write=False)
        object.__setattr__(self, "counts", c)

    @classmethod
    def from_rows(cls, labels: npt.ArrayLike | None, values: npt.ArrayLike, groups: int, k: int) -> Histogram:
        """Count rows with 0-based ``labels`` in ``[0, groups)`` (None: one group) and ``values`` in ``[0, k)``."""
        v = check_codes(values, "values", k, ndim=1)
        g = np.zeros(len(v), np.int64) if labels is None else check_codes(labels, "labels", groups, ndim=1)
        if len(g) != len(v):
            raise ValidationError("labels", f"one label per row ({len(v)} rows)", f"got {len(g)}")
        return cls(np.bincount(g * k + v, minlength=groups * k).reshape(groups, k))

    @property
    def domain_shape(self) -> tuple[int, int]:
        return int(self.counts.shape[0]), int(self.counts.shape[1])

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    @property
    def group_sizes(self) -> np.ndarray:
        """:math:`n_g`, ``(G,)`` int64."""
        return self.counts.sum(axis=1)

    def distribution(self) -> np.ndarray:
        """The empirical distribution :math:`\\hat p = B / n` over the joint domain, ``(G, k)``."""
        return self.counts / self.n

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """``(labels, values)`` of the rows, grouped by cell (one row per unit of count)."""
        cells = np.repeat(np.arange(self.cells), self.counts.ravel())
        return np.divmod(cells, self.k)


@dataclass(frozen=True, eq=False)
class Workload(JointDomain):
    """``m`` statistical queries over a ``(G, k)`` joint domain (see the module docstring).

    Attributes
    ----------
    weights:
        ``(m, G, k)`` finite float64; ``weights[j, g]`` is query ``j``'s row function on label ``g``.
    normalization:
        ``"range"``, ``"mean"`` or ``"sum"`` (``"eq10"``, the former name of ``"range"``, is read as it).
    """

    weights: np.ndarray
    normalization: str = "range"

    def __post_init__(self) -> None:
        w = np.asarray(self.weights, dtype=np.float64)
        if w.ndim == 2:
            w = w[:, None, :]
        if w.ndim != 3 or w.shape[0] < 1 or w.shape[1] < 1 or w.shape[2] < 2:
            raise ValidationError("weights", "an array of shape (m >= 1, G >= 1, k >= 2) or (m, k)",
                                  f"got shape {np.shape(self.weights)}")
        step = max(1, CHUNK_CELLS // (w.shape[1] * w.shape[2]))
        for start in range(0, len(w), step):
            bad = ~np.isfinite(w[start:start + step]).all(axis=(1, 2))
            if bad.any():
                raise ValidationError("weights", "finite numbers", "not finite", start + int(np.flatnonzero(bad)[0]))
        object.__setattr__(self, "normalization", normalization_name(self.normalization))
        w.setflags(write=False)
        object.__setattr__(self, "weights", w)

    # ----- shape ---------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """m."""
        return int(self.weights.shape[0])

    def __len__(self) -> int:
        return self.size

    @property
    def domain_shape(self) -> tuple[int, int]:
        return int(self.weights.shape[1]), int(self.weights.shape[2])

    @property
    def nbytes(self) -> int:
        """Bytes held by the dense weights."""
        return int(self.weights.nbytes)

    def chunks(self) -> range:
        """Start indices of query chunks of at most :data:`CHUNK_CELLS` weights."""
        return range(0, self.size, self.chunk_size)

    @property
    def chunk_size(self) -> int:
        return max(1, CHUNK_CELLS // self.cells)

    def check_histogram(self, data: Histogram | npt.ArrayLike, name: str = "data") -> Histogram:
        """``data`` as a :class:`Histogram` over this workload's ``(G, k)`` domain."""
        hist = data if isinstance(data, Histogram) else Histogram(np.asarray(data))
        if hist.counts.shape != (self.groups, self.k):
            raise ValidationError(name, f"a histogram of shape ({self.groups}, {self.k}) (the workload's domain)",
                                  f"got shape {hist.counts.shape}")
        return hist

    # ----- per-(query, group) ranges -----------------------------------------------------------
    @cached_property
    def group_min(self) -> np.ndarray:
        """:math:`a_{j,g} = \\min_v W_j[g, v]`, ``(m, G)``."""
        return self.weights.min(axis=2)

    @cached_property
    def group_range(self) -> np.ndarray:
        """:math:`c_{j,g} = \\max_v W_j[g, v] - \\min_v W_j[g, v]`, ``(m, G)``."""
        return self.weights.max(axis=2) - self.group_min

    @cached_property
    def cell_min(self) -> np.ndarray:
        """:math:`\\min_{g,v} W_j[g, v]`, ``(m,)``."""
        return self.weights.min(axis=(1, 2))

    @cached_property
    def cell_range(self) -> np.ndarray:
        """:math:`\\max_{g,v} W_j - \\min_{g,v} W_j`: the range of query ``j`` over the joint domain, ``(m,)``."""
        return self.weights.max(axis=(1, 2)) - self.cell_min

    def normalizers(self, group_sizes: npt.ArrayLike) -> np.ndarray:
        """:math:`Z_j` for the (public) group sizes :math:`n_g`; raises if some :math:`Z_j = 0`."""
        sizes = np.asarray(group_sizes, dtype=np.float64)
        if self.normalization == "range":
            z = self.group_range @ sizes
        elif self.normalization == "mean":
            z = np.full(self.size, sizes.sum())
        else:
            z = np.ones(self.size)
        bad = np.flatnonzero(~(z > 0))
        if bad.size:
            raise ValidationError("normalization", "'sum' or 'mean' for a query that is constant on every row",
                                  "the 'range' normaliser sum_i c_i (WYZ eq. 10) is 0", int(bad[0]))
        return z

    # ----- answers -----------------------------------------------------------------------------
    def raw_answers(self, tables: npt.ArrayLike) -> np.ndarray:
        """:math:`\\sum_{g,v} W_j[g,v] T[g,v]` for one table ``(G, k)`` (-> ``(m,)``) or several
        ``(P, G, k)`` (-> ``(P, m)``)."""
        t = np.asarray(tables, dtype=np.float64)
        flat = t.reshape(-1, self.cells)
        out = np.empty((len(flat), self.size))
        w2 = self.weights.reshape(self.size, self.cells)
        for s in self.chunks():
            out[:, s:s + self.chunk_size] = flat @ w2[s:s + self.chunk_size].T
        return out[0] if t.ndim == 2 else out

    def answers(self, table: npt.ArrayLike, group_sizes: npt.ArrayLike | None = None) -> np.ndarray:
        """Normalised answers :math:`q_j(T)` of a count-scale table ``(G, k)``.

        ``group_sizes`` (for :math:`Z_j`) default to the table's own row sums; pass the true
        :math:`n_g` to evaluate a synthetic table on the same scale as the data.
        """
        t = np.asarray(table, dtype=np.float64)
        sizes = t.sum(axis=1) if group_sizes is None else group_sizes
        return self.raw_answers(t) / self.normalizers(sizes)

    def distribution_answers(self, distribution: npt.ArrayLike, hist: Histogram) -> np.ndarray:
        """Answers of a synthetic distribution ``(G, k)`` scaled to ``hist.n`` rows, with ``hist``'s :math:`Z_j`."""
        return self.raw_answers(np.asarray(distribution) * hist.n) / self.normalizers(hist.group_sizes)

    # ----- conversions ---------------------------------------------------------------------------
    def to_batch(self, schema: Schema, attribute: str | None) -> QueryBatch:
        """The same queries as a :class:`~ldpsynth.shared.queries.batch.QueryBatch` for mechanism E's estimators.

        ``attribute`` is the public attribute whose codes ``0..G-1`` are the labels (None: G = 1,
        and the queries apply to every row).
        """
        if attribute is None:
            if self.groups != 1:
                raise ValidationError("attribute", "a public attribute name (the workload has G > 1 groups)", "None")
            w = self.weights
            block = TableBlock(None, np.zeros(0, np.int64), w, np.zeros((self.size, self.k)),
                               np.full(self.size, NORMALIZATIONS.index(self.normalization), np.int8),
                               np.arange(self.size, dtype=np.int64))
            return QueryBatch(schema, (block,), self.size, np.arange(self.size, dtype=np.int64))
        return grouped_batch(schema, attribute, self.weights, normalization=self.normalization)

    @classmethod
    def from_batch(cls, batch: QueryBatch) -> tuple[Workload, str | None]:
        """A workload from a batch of table queries (linear, predicate, marginal, grouped on one attribute).

        Returns the workload and the grouping attribute (None when every query is the same on
        every row). All queries must share one normalisation; the groups are the attribute's
        codes ``0..size-1``.
        """
        blocks = [b for b in batch.blocks if isinstance(b, TableBlock)]
        if not blocks or len(blocks) != len(batch.blocks):
            raise ValidationError("batch", "table queries only (linear, predicate, marginal, grouped)",
                                  "cut or dense queries are not linear on a (label, value) domain")
        attrs = {b.attribute for b in blocks if b.attribute is not None}
        if len(attrs) > 1:
            raise ValidationError("batch", "grouped queries on at most one public attribute", f"got {sorted(attrs)}")
        norms = np.unique(np.concatenate([b.normalization for b in blocks]))
        if len(norms) != 1:
            raise ValidationError("batch", "queries with one normalisation", "mixed normalisations")
        attribute = next(iter(attrs)) if attrs else None
        groups = 1 if attribute is None else batch.schema.attribute(attribute).size
        k = batch.schema.private_domain_size
        weights = np.empty((batch.size, groups, k))
        for b in blocks:
            if b.attribute is None:
                weights[b.positions] = b.weights[:, :1, :]
            else:
                weights[b.positions] = b.default[:, None, :]
                weights[b.positions[:, None], b.values[None, :]] = b.weights
        return cls(weights, NORMALIZATIONS[int(norms[0])]), attribute
