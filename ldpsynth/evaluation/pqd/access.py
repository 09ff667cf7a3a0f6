"""Accounted access to the private table: every read happens inside a privacy-accounted step.

A DP-PQD decider sees the private table D only through a :class:`PrivateView` of
one query. The view answers exact statistics of the selected tuples (their count, their
(truncated) sum, counts above/below thresholds, ranks), but only while a step of its
:class:`PrivacyAccountant` is open; a read outside a step raises :class:`UnaccountedRead`.
Each step states what it releases and the ε it spends (sequential composition, DP-PQD
Prop. 2.6(1)); the accountant refuses a step that would exceed the decider's budget. The
accountant's record is what the tests check: the steps, their ε, and which reads each one made.

Neighbours are add/remove-one-tuple (DP-PQD §2.2). For SUM the aggregated values are clamped
into the public domain ``[lo, hi]``, so that :math:`GS_q = \\max(|lo|, |hi|)` bounds the change of
any sum on any data (DP-PQD §5 assumes such a bound, GS_q).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ldpsynth.evaluation.pqd.query import Query
from ldpsynth.evaluation.pqd.table import NumericDomain, Table
from ldpsynth.evaluation.primitives.composition import within_budget
from ldpsynth.evaluation.primitives.guarantee import Neighbours, PrivacyGuarantee
from ldpsynth.shared.errors import LdpsynthError, PrivacyBudgetExceeded, ValidationError
from ldpsynth.shared.validation import check_epsilon


class UnaccountedRead(LdpsynthError):
    """The private table was read outside a privacy-accounted step."""


@dataclass
class Step:
    """One accounted release: what it is, the ε it spends, the private reads it made."""

    label: str
    epsilon: float
    reads: list[str] = field(default_factory=list)


class PrivacyAccountant:
    """Pure ε-DP accountant of one decider run (sequential composition of its steps, DP-PQD Prop. 2.6(1))."""

    def __init__(self, budget: float):
        self.budget = check_epsilon(budget, "epsilon")
        self.steps: list[Step] = []
        self._open: Step | None = None

    @property
    def spent(self) -> float:
        return float(sum(s.epsilon for s in self.steps))

    @property
    def open_step(self) -> Step | None:
        """The step currently open (reads are allowed), if any."""
        return self._open

    @contextmanager
    def step(self, label: str, epsilon: float) -> Iterator[Step]:
        """Open a step spending ``epsilon``; reads of the private view are allowed inside it."""
        eps = check_epsilon(epsilon, f"{label}.epsilon")
        if self._open is not None:
            raise UnaccountedRead(f"step {label!r} opened inside step {self._open.label!r}")
        if not within_budget(self.spent + eps, self.budget):
            raise PrivacyBudgetExceeded(f"step {label!r} needs epsilon {eps:g} but only "
                                        f"{self.budget - self.spent:g} of {self.budget:g} is left")
        current = Step(label, eps)
        self.steps.append(current)
        self._open = current
        try:
            yield current
        finally:
            self._open = None

    @property
    def guarantee(self) -> PrivacyGuarantee:
        """What the steps so far guarantee: :math:`\\sum_i \\epsilon_i`-DP under add/remove-one-row neighbours."""
        steps = "; ".join(f"{s.label} ({s.epsilon:g})" for s in self.steps)
        return PrivacyGuarantee(self.spent, 0.0, Neighbours.ADD_REMOVE_ONE_ROW,
                                f"basic composition of {len(self.steps)} steps: {steps}")

    def record_read(self, what: str) -> None:
        if self._open is None:
            raise UnaccountedRead(f"private read {what!r} outside an accounted step")
        self._open.reads.append(what)


class PrivateView:
    """Exact statistics of the tuples of D selected by ``query``'s WHERE, readable only in accounted steps.

    ``domain`` is the public domain of the aggregated attribute (required for SUM and
    quantiles): the values are clamped into it.
    """

    def __init__(self, table: Table, query: Query, accountant: PrivacyAccountant,
                 domain: NumericDomain | None = None):
        if table.weights is not None:
            raise ValidationError("private", "an unweighted table (one row per tuple)", "the table has row weights")
        if query.aggregate != "count" and domain is None:
            raise ValidationError("domain", f"the public domain of {query.attribute!r} (required for "
                                  f"{query.aggregate.upper()})", "missing")
        self._table = table
        self._query = query
        self._domain = domain
        self.accountant = accountant
        self._sorted: np.ndarray | None = None
        self._prefix: np.ndarray | None = None
        self._count: int | None = None

    @property
    def query(self) -> Query:
        return self._query

    # The private data are touched only here, and only from the read methods below.
    def _selected(self) -> tuple[int, np.ndarray]:
        if self._count is None:
            mask = self._query.mask(self._table)
            self._count = int(mask.sum())
            if self._query.attribute is not None:
                assert self._domain is not None
                values = self._domain.clamp(self._query.values(self._table)[mask])
                self._sorted = np.sort(values)
                self._prefix = np.concatenate([[0.0], np.cumsum(self._sorted)])
        return self._count, (self._sorted if self._sorted is not None else np.empty(0))

    def _read(self, what: str) -> None:
        self.accountant.record_read(what)

    def _ranks(self, what: str, thresholds: np.ndarray, side: Literal["left", "right"]) -> tuple[int, np.ndarray]:
        """Record the read ``what``; :math:`n'` and ``np.searchsorted`` of ``thresholds`` in the sorted values."""
        self._read(what)
        n, values = self._selected()
        return n, np.searchsorted(values, np.asarray(thresholds, dtype=np.float64), side=side)

    def count(self) -> int:
        """:math:`n' = |\\{t \\in D : \\varphi(t)\\}|` (sensitivity 1)."""
        self._read("count")
        return self._selected()[0]

    def total(self) -> float:
        """:math:`q(D)` for COUNT (= n') or SUM (of the clamped values)."""
        self._read("total")
        n, values = self._selected()
        return float(n) if self._query.aggregate == "count" else float(self._prefix[-1])  # type: ignore[index]

    def count_at_most(self, thresholds: np.ndarray) -> np.ndarray:
        """:math:`|\\{\\varphi \\wedge A \\le t\\}|` for every threshold (vectorised)."""
        return self._ranks("count_at_most", thresholds, "right")[1].astype(np.float64)

    def count_at_least(self, thresholds: np.ndarray) -> np.ndarray:
        """:math:`|\\{\\varphi \\wedge A \\ge t\\}|` for every threshold."""
        n, below = self._ranks("count_at_least", thresholds, "left")
        return (n - below).astype(np.float64)

    def count_below(self, thresholds: np.ndarray) -> np.ndarray:
        """:math:`rank(e) = |\\{\\varphi \\wedge A < e\\}|` for every candidate ``e`` (DP-PQD §6.1)."""
        return self._ranks("count_below", thresholds, "left")[1].astype(np.float64)

    def truncated_sums(self, thresholds: np.ndarray) -> np.ndarray:
        """:math:`q(D, t) = \\sum \\{A : \\varphi \\wedge A \\le t\\}` (tuples above t dropped, DP-PQD §5.2)."""
        _, index = self._ranks("truncated_sums", thresholds, "right")  # builds self._prefix on first use
        return self._prefix[index]  # type: ignore[index]
