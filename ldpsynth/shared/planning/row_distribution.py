"""What a plan assumes about the rows: how they spread over public groups and private values.

The error of a query of mechanism E depends on the data only through the share of rows in each
group of rows that share a row function (their public part) and, within a group, the share of each
private value (:mod:`ldpsynth.shared.planning`). A :class:`RowDistribution` gives these shares,
as joint probabilities :math:`\\pi(g, v)` over one row:

* :class:`UniformRows`: every public key and every private value equally likely (independent);
* :class:`SampleRows`: the empirical distribution of a sample of plausible rows (e.g. last year's
  data, a pilot, a public stand-in). With the real rows themselves it gives the exact error of a
  release of exactly those rows (for dense queries, whose row functions follow the stored order,
  when the sample is the stored rows in order).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.engine import cut_pair_totals, group_counts
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.queries.batch import CutBlock, TableBlock
from ldpsynth.shared.schema import Schema

__all__ = [
    "RowDistribution",
    "UniformRows",
    "SampleRows",
]


class RowDistribution(ABC):
    """Joint shares of (public group, private value) of one row of ``schema``'s collection."""

    def __init__(self, schema: Schema):
        self.schema = schema

    @property
    @abstractmethod
    def description(self) -> str:
        """One line for reports."""

    @abstractmethod
    def private(self) -> np.ndarray:
        """:math:`\\pi(v)`, the share of each private value over all rows, ``(|D|,)``."""

    @abstractmethod
    def by_group(self, block: TableBlock) -> tuple[np.ndarray, np.ndarray]:
        """Joint shares of a table block's groups: ``(L, |D|)`` for rows whose ``block.attribute``
        has code ``block.values[l]`` and ``(|D|,)`` for all other rows (with no attribute: every row
        is in the one group, ``(1, |D|)`` and zeros)."""

    @abstractmethod
    def cut_share(self, block: CutBlock) -> np.ndarray:
        """Per cut query, the share of rows whose (source, target) lies in S x T, ``(Q,)``."""

    def stored_rows(self, count: int) -> np.ndarray:
        """Joint shares of ``count`` stored rows (the groups of a dense query) and the private values,
        ``(count, |D|)``: each row 1/count of the data, its value drawn from :meth:`private`."""
        return np.tile(self.private() / count, (count, 1))


class UniformRows(RowDistribution):
    """Public keys uniform over the public domain, private values uniform over D, independent."""

    @property
    def description(self) -> str:
        return "uniform over the public and the private domain"

    def private(self) -> np.ndarray:
        k = self.schema.private_domain_size
        return np.full(k, 1.0 / k)

    def by_group(self, block: TableBlock) -> tuple[np.ndarray, np.ndarray]:
        private = self.private()
        if block.attribute is None:
            return private[None, :], np.zeros_like(private)
        size = self.schema.attribute(block.attribute).size
        listed = len(block.values) / size
        return np.tile(private / size, (len(block.values), 1)), private * (1.0 - listed)

    def cut_share(self, block: CutBlock) -> np.ndarray:
        vertices = block.sources.shape[1]
        return block.sources.sum(axis=1) * block.targets.sum(axis=1) / float(vertices * vertices)


class SampleRows(RowDistribution):
    """The empirical distribution of a sample of rows (encoded public keys and private codes)."""

    def __init__(self, schema: Schema, public_keys: npt.ArrayLike, codes: npt.ArrayLike, name: str = "a sample"):
        super().__init__(schema)
        self.codes = schema.check_private_codes(np.asarray(codes).reshape(-1), "prior codes")
        self.stats = SufficientStatistics.from_schema(schema, public_keys, self.codes)
        if self.stats.n == 0:
            raise ValidationError("prior", "a sample of at least one row", "no rows")
        self.name = name

    @classmethod
    def from_columns(cls, schema: Schema, columns: Mapping[str, npt.ArrayLike], name: str = "a sample") -> SampleRows:
        """From raw columns (attribute name -> raw values; other columns are ignored)."""
        missing = [a.name for a in schema.attributes if a.name not in columns]
        if missing:
            raise ValidationError(f"prior.{missing[0]}", f"a column for every attribute of {schema.name!r}",
                                  "missing column")
        return cls(schema, schema.encode_public(columns), schema.encode_private(columns), name)

    @property
    def description(self) -> str:
        return f"{self.name} ({self.stats.n} rows)"

    def private(self) -> np.ndarray:
        return self.stats.histogram() / float(self.stats.n)

    def by_group(self, block: TableBlock) -> tuple[np.ndarray, np.ndarray]:
        listed, other = group_counts(block, self.stats, self.schema)
        return listed / float(self.stats.n), other / float(self.stats.n)

    def cut_share(self, block: CutBlock) -> np.ndarray:
        return cut_pair_totals(block, self.stats, self.schema)[0] / float(self.stats.n)

    def stored_rows(self, count: int) -> np.ndarray:
        """A sample of exactly ``count`` rows is taken as the stored rows themselves, in its order (the
        exact error of a dense query on those rows); otherwise each row's value is drawn from the sample's
        private shares."""
        if len(self.codes) != count:
            return super().stored_rows(count)
        shares = np.zeros((count, self.schema.private_domain_size))
        shares[np.arange(count), self.codes] = 1.0 / count
        return shares
