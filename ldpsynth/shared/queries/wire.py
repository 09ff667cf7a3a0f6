"""Conversions between query batches / answers and the messages of ``proto/ldpsynth/v1/query.proto``.

Both sides use this module: the analyst's client cuts a batch into :class:`EstimateRequest`
chunks of whole queries, each message within a byte budget and the server's message limit
(:func:`estimate_requests`), and reassembles the answer pages (:class:`AnswerTable`); the server
reads the chunks back into one :class:`~ldpsynth.shared.queries.batch.QueryBatch` (:class:`BatchReader`,
validating every query and naming the first bad one by its index in the whole batch) and pages
the answers, each page within its own message limit (:func:`answer_pages`). Sizes are counted on
the wire: payload bytes plus a bound of :data:`FIELD_HEADER_BYTES` per length-delimited field.
Packed arrays (:class:`LinearQueries`, :class:`GroupedQueries`) carry large batches without
per-query objects: 2^20 linear queries over ``|D| = 5`` are 40 MiB of float64, sent as ten
4 MiB chunks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ldpsynth.shared.errors import Status, ValidationError
from ldpsynth.shared.estimators.formulas import AnswerColumns
from ldpsynth.shared.guarantees import BLANKET, Guarantees
from ldpsynth.shared.mechanisms.registry import SHUFFLE_BOUNDS
from ldpsynth.shared.numeric.answering import NumericBatch, compile_numeric, concat_numeric
from ldpsynth.shared.protocol import FIELD_HEADER_BYTES
from ldpsynth.shared.queries.batch import QueryBatch, concat_batches
from ldpsynth.shared.queries.compiler import compile_queries
from ldpsynth.shared.queries.json_form import queries_from_json
from ldpsynth.shared.queries.model import normalization_name
from ldpsynth.shared.queries.packed import grouped_batch, linear_batch
from ldpsynth.shared.schema import Schema, ShuffleSpec
from ldpsynth.shared.validation import check_choice, check_int
from ldpsynth.shared.wire import query_pb2 as pb

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "PAGE_ENVELOPE_BYTES",
    "EstimateRequests",
    "estimate_requests",
    "BatchReader",
    "BatchTooLarge",
    "answer_pages",
    "AnswerTable",
]

#: Default byte budget of one request chunk (well under the server's message limit).
DEFAULT_CHUNK_BYTES = 4 << 20
#: Most answers in one response page (about 5 MiB of fields); the message limit may make pages smaller.
DEFAULT_PAGE_ANSWERS = 1 << 16
_F64 = np.dtype("<f8")
_COLUMNS = ("estimate", "proper_estimate", "std_error", "ci_low", "ci_high", "bound", "bound_proper")
_U64 = np.dtype("<u8")
#: Wire bytes of one answer's columns: seven float64 values and the ``proper_exact`` byte.
ANSWER_BYTES = 8 * len(_COLUMNS) + 1
#: Wire bytes of an ``EstimateResponse`` besides its answers: the scalar fields at their largest
#: and a header for each packed column.
PAGE_ENVELOPE_BYTES = pb.EstimateResponse(offset=2**64 - 1, level=-1.0, n=2**64 - 1, epsilon=-1.0,
                                          total=2**64 - 1).ByteSize() + (len(_COLUMNS) + 2) * FIELD_HEADER_BYTES
#: Wire bytes of one answer's ``rows`` entry (when the answers state them).
ROW_BYTES = _U64.itemsize


# ----- client side: a batch -> request chunks ------------------------------------------------
def _json_chunks(queries: Sequence[Mapping[str, Any]], envelope: int, chunk_bytes: int, limit: int) -> list[str]:
    """JSON arrays of consecutive whole queries, each making a message of at most ``chunk_bytes``
    with the ``envelope`` (bytes besides the array); a longer single query travels alone if its
    message fits ``limit``, else a :class:`ValidationError` names it (``queries[j]``). JSON is
    written as ASCII, so characters are bytes."""
    chunks: list[str] = []
    parts: list[str] = []
    size = envelope + 2
    for j, query in enumerate(queries):
        text = json.dumps(query, separators=(",", ":"), allow_nan=True)
        if envelope + 2 + len(text) > limit:
            raise ValidationError(f"queries[{j}]", f"a query of at most {limit - envelope - 2} bytes as JSON, so "
                                  f"that its request fits the message limit of {limit} bytes",
                                  f"it is {len(text)} bytes")
        if parts and size + len(text) + 1 > chunk_bytes:
            chunks.append("[" + ",".join(parts) + "]")
            parts, size = [], envelope + 2
        parts.append(text)
        size += len(text) + 1
    if parts:
        chunks.append("[" + ",".join(parts) + "]")
    return chunks


@dataclass(frozen=True, eq=False)
class EstimateRequests:
    """The request stream of one batch, checked and cut when built (:func:`estimate_requests`).

    Iterating it yields the :class:`EstimateRequest` messages, the first naming the collection
    and the level; it can be iterated again (a retried call sends the same stream).
    """

    collection: str
    level: float
    json_chunks: tuple[str, ...]
    linear: np.ndarray | None
    linear_rows: int
    normalization: str

    def __iter__(self) -> Iterator[pb.EstimateRequest]:
        head: dict[str, Any] = {"collection": self.collection, "level": self.level}
        for text in self.json_chunks:
            yield pb.EstimateRequest(**head, queries_json=text)
            head = {}
        if self.linear is not None:
            for start in range(0, len(self.linear), self.linear_rows):
                weights = self.linear[start:start + self.linear_rows].tobytes()
                yield pb.EstimateRequest(**head, linear=pb.LinearQueries(weights=weights,
                                                                         normalization=self.normalization))
                head = {}


def estimate_requests(collection: str, *, level: float = 0.95, queries: Sequence[Mapping[str, Any]] | None = None,
                      linear: np.ndarray | None = None, normalization: str = "range",
                      chunk_bytes: int = DEFAULT_CHUNK_BYTES, max_message_bytes: int | None = None
                      ) -> EstimateRequests:
    """The request stream of one batch: JSON ``queries`` (objects of :mod:`ldpsynth.shared.queries.model`)
    and/or a ``(Q, |D|)`` array of ``linear`` weight lists, in that order.

    Every message serializes to at most ``chunk_bytes`` bytes (the collection, the level and the
    field headers included), except that a single JSON query longer than that travels alone in a
    message of at most ``max_message_bytes`` (default ``chunk_bytes``): the receiver's message
    limit. JSON queries are never split; a query or a weight row that cannot fit the limit raises
    :class:`ValidationError` naming it (``queries[j]``, ``linear``) before anything is sent.
    No queries at all is the empty batch: one message carrying ``queries_json = "[]"`` (the server
    answers it with no answers).
    """
    limit = chunk_bytes if max_message_bytes is None else max_message_bytes
    check_int(chunk_bytes, "chunk_bytes", 1024, limit, legal=f"an integer in [1024, max_message_bytes = {limit}]")
    envelope = pb.EstimateRequest(collection=collection, level=level).ByteSize() + FIELD_HEADER_BYTES
    if envelope + 2 > limit:
        raise ValidationError("collection", f"a name that leaves room for queries in {limit} bytes",
                              f"{len(collection)} characters")
    json_chunks = _json_chunks(list(queries or ()), envelope, chunk_bytes, limit)
    w, rows = None, 0
    if linear is not None:
        w = np.ascontiguousarray(linear, dtype=_F64)
        if w.ndim != 2 or w.shape[0] == 0:
            raise ValidationError("linear", "an array of shape (Q >= 1, |D|)", f"got shape {w.shape}")
        packed = envelope + pb.LinearQueries(normalization=normalization).ByteSize() + FIELD_HEADER_BYTES
        if packed + 8 * w.shape[1] > limit:
            raise ValidationError("linear", f"weight rows of at most {(limit - packed) // 8} values, so that a "
                                  f"request fits the message limit of {limit} bytes", f"|D| = {w.shape[1]}")
        rows = max(1, (chunk_bytes - packed) // (8 * w.shape[1]))
    elif not json_chunks:
        json_chunks = ["[]"]
    return EstimateRequests(collection, level, tuple(json_chunks), w, rows, normalization)


# ----- server side: request chunks -> one batch ----------------------------------------------
def _floats(raw: bytes, field: str, shape: tuple[int, ...]) -> np.ndarray:
    count = int(np.prod(shape))
    if len(raw) != 8 * count:
        raise ValidationError(field, f"{count} float64 values ({8 * count} bytes) for shape {shape}",
                              f"got {len(raw)} bytes")
    return np.frombuffer(raw, _F64).reshape(shape)


def _normalization(value: str, field: str) -> str:
    """A packed array's normalisation: empty is ``"range"`` (proto3's default string)."""
    return normalization_name(value or "range", field)


class BatchReader:
    """Reads the chunks of one ``Estimate`` call into a :class:`QueryBatch` over ``schema``.

    At most ``max_queries`` compiled queries and ``max_weights`` weights in all; beyond that
    :meth:`add` raises :class:`BatchTooLarge`. Every chunk is compiled as it arrives, so the
    first bad query raises a :class:`ValidationError` naming ``queries[j]``, ``j`` its index in
    the whole batch.
    """

    def __init__(self, schema: Schema, *, max_queries: int, max_weights: int):
        self.schema = schema
        self._max_queries, self._max_weights = max_queries, max_weights
        self._parts: list[QueryBatch] = []
        self._numeric: list[NumericBatch] = []
        self._inputs: list[int] = []
        self._queries = self._weights = 0

    @property
    def input_queries(self) -> int:
        """Queries read so far (as sent: a marginal counts once)."""
        return sum(self._inputs)

    def _account(self, queries: int, weights: int) -> None:
        self._queries += queries
        self._weights += weights
        if self._queries > self._max_queries or self._weights > self._max_weights:
            raise BatchTooLarge(f"a batch of at most {self._max_queries} queries and {self._max_weights} weights "
                                f"(got {self._queries} queries, {self._weights} weights so far); split it")

    def add(self, request: pb.EstimateRequest) -> None:
        """Compile the queries of one request chunk."""
        first = self.input_queries
        kind = request.WhichOneof("queries")
        k = self.schema.private_domain_size
        if self.schema.numeric is not None:
            self._add_numeric(request, kind, first)
            return
        if kind == "queries_json":
            queries = queries_from_json(request.queries_json, first_index=first)
            part = compile_queries(queries, self.schema, first_index=first)
            count = len(queries)
        elif kind == "linear":
            msg = request.linear
            if len(msg.weights) % (8 * k) or not msg.weights:
                raise ValidationError(f"queries[{first}:].linear.weights", f"Q >= 1 rows of |D| = {k} float64 values",
                                      f"got {len(msg.weights)} bytes")
            count = len(msg.weights) // (8 * k)
            self._account(count, count * k)
            part = _at(first, lambda: linear_batch(self.schema, _floats(msg.weights, "linear.weights", (count, k)),
                                                   normalization=_normalization(msg.normalization, "normalization")))
        elif kind == "grouped":
            msg = request.grouped
            codes = np.frombuffer(msg.value_codes, _U64).astype(np.int64) if msg.value_codes else None
            attr = _at(first, lambda: self.schema.attribute(msg.attribute))
            groups = attr.size if codes is None else len(codes)
            if len(msg.value_codes) % 8 or not msg.weights or len(msg.weights) % (8 * groups * k):
                raise ValidationError(f"queries[{first}:].grouped.weights",
                                      f"Q >= 1 blocks of {groups} x {k} float64 values",
                                      f"got {len(msg.weights)} bytes")
            count = len(msg.weights) // (8 * groups * k)
            self._account(count, count * groups * k)
            values = None if codes is None else attr.decode(_at(first, lambda: attr.check_codes(codes)))
            default = _floats(msg.default_weights, "grouped.default_weights", (count, k)) if msg.default_weights \
                else None
            part = _at(first, lambda: grouped_batch(
                self.schema, msg.attribute, _floats(msg.weights, "grouped.weights", (count, groups, k)),
                values=None if values is None else list(values.tolist()), default=default,
                normalization=_normalization(msg.normalization, "normalization")))
        else:
            raise ValidationError("queries", "queries_json, linear or grouped in every request chunk", "empty chunk")
        if kind == "queries_json":
            self._account(part.size, sum(b.weights.size for b in part.blocks if hasattr(b, "weights")))
        self._parts.append(part)
        self._inputs.append(count)

    def _add_numeric(self, request: pb.EstimateRequest, kind: str | None, first: int) -> None:
        """A numeric collection's chunk: JSON numeric queries only."""
        if kind != "queries_json":
            raise ValidationError("mechanism", "E or a frequency oracle for packed weight arrays (they weigh "
                                  "categories); a numeric collection takes JSON queries of the kinds mean, sum, "
                                  "variance, quantiles and histogram", f"got {self.schema.mechanism!r}")
        queries = queries_from_json(request.queries_json, first_index=first)
        part = compile_numeric(queries, self.schema, first_index=first)
        self._account(part.size, part.size)
        self._numeric.append(part)
        self._inputs.append(len(queries))

    def batch(self) -> QueryBatch | NumericBatch:
        """The whole batch (raises if no query was sent): a numeric collection's is a
        :class:`~ldpsynth.shared.numeric.answering.NumericBatch`."""
        if self._numeric:
            return concat_numeric(self._numeric, self._inputs)
        if not self._parts:
            raise ValidationError("queries", "at least one query", "the batch is empty")
        return concat_batches(self._parts, self._inputs)


class BatchTooLarge(ValidationError):
    """A query batch over the server's limits (RESOURCE_EXHAUSTED, not INVALID_ARGUMENT)."""

    refused_as: ClassVar[Status | None] = Status.RESOURCE_EXHAUSTED

    def __init__(self, message: str):
        super().__init__("queries", message, "too large")


def _at(first: int, build: Any) -> Any:
    """Run ``build()``, naming a packed chunk's error ``queries[first + position]``."""
    try:
        return build()
    except BatchTooLarge:
        raise
    except ValidationError as exc:
        index = first + (exc.position or 0)
        raise ValidationError(f"queries[{index}].{exc.field}", exc.legal, exc.problem) from None


# ----- guarantees <-> message ------------------------------------------------------------------
def guarantees_to_proto(g: Guarantees) -> pb.Guarantees:
    """The :class:`~ldpsynth.shared.guarantees.Guarantees` as a message (per-group columns packed)."""
    msg = pb.Guarantees(scope=g.scope, local_epsilon=g.local_epsilon, rows_per_device=g.rows_per_device,
                        domain_size=g.domain_size, note=g.note, withheld_groups=g.withheld_groups,
                        withheld_reports=g.withheld_reports)
    msg.group_labels.extend(g.labels)
    if g.counts is not None:
        msg.group_reports = np.ascontiguousarray(g.counts, _U64).tobytes()
    if g.shuffle is not None:
        msg.shuffled = True
        msg.target_delta, msg.min_batch, msg.shuffler = g.shuffle.delta, g.shuffle.min_batch, g.shuffle.shuffler
        msg.assume_injected = g.shuffle.injected
        msg.operator_covered = g.shuffle.independent
        msg.central_bound = g.bound
    if g.central is not None:
        msg.computed = True
        msg.central_epsilon, msg.central_delta = g.central
        msg.central_evaluated_at = g.evaluated_at
    return msg


def guarantees_from_proto(msg: pb.Guarantees) -> Guarantees:
    """The inverse of :func:`guarantees_to_proto` (the counts checked to have one entry per group)."""
    spec = None
    if msg.shuffled:
        try:
            spec = ShuffleSpec(msg.target_delta, msg.min_batch, msg.rows_per_device or 1, msg.shuffler,
                               int(msg.assume_injected))
        except ValidationError as exc:
            raise ValidationError(f"guarantees.{exc.field}", exc.legal, exc.problem) from None
    groups = len(msg.group_labels)
    if len(msg.group_reports) != 8 * groups:
        raise ValidationError("guarantees.group_reports", f"{groups} values of 8 bytes",
                              f"got {len(msg.group_reports)} bytes")
    kwargs: dict[str, Any] = {}
    if msg.shuffled:
        kwargs["bound"] = check_choice(msg.central_bound or BLANKET, "guarantees.central_bound", SHUFFLE_BOUNDS)
    if msg.computed:
        kwargs.update(central=(msg.central_epsilon, msg.central_delta), evaluated_at=int(msg.central_evaluated_at))
    return Guarantees(msg.scope, msg.local_epsilon, int(msg.domain_size), int(msg.rows_per_device or 1), spec,
                      tuple(msg.group_labels), np.frombuffer(msg.group_reports, _U64).astype(np.int64),
                      withheld_groups=int(msg.withheld_groups), withheld_reports=int(msg.withheld_reports),
                      note=msg.note, **kwargs)


# ----- answers -> pages -> answers -----------------------------------------------------------
def _page_bounds(cost: np.ndarray, budget: int, page: int) -> list[tuple[int, int]]:
    """Consecutive ``(start, stop)`` ranges of answers, each as long as it can be with at most
    ``page`` answers whose ``cost`` sums to at most ``budget`` (every cost is <= budget)."""
    ends = np.cumsum(cost)
    bounds: list[tuple[int, int]] = []
    start = 0
    while start < len(cost):
        spent = int(ends[start - 1]) if start else 0
        stop = min(int(np.searchsorted(ends, spent + budget, side="right")), start + page)
        bounds.append((start, stop))
        start = stop
    return bounds or [(0, 0)]


def answer_pages(answers: AnswerColumns, *, max_bytes: int, page: int = DEFAULT_PAGE_ANSWERS
                 ) -> Iterator[pb.EstimateResponse]:
    """The answers in pages, in batch order (columns packed as bytes): each page holds at most
    ``page`` answers and serializes to at most ``max_bytes`` bytes (the sender's message limit).

    Answer ``j`` costs :data:`ANSWER_BYTES`, plus its UTF-8 label and a field header when the
    batch is labelled, and its method and a header when the answers state them (a wide parent's);
    and :data:`ROW_BYTES` when they state the rows each reads (a numeric collection's); a page costs
    :data:`PAGE_ENVELOPE_BYTES` besides. An empty batch is one page with ``total = 0``
    (it still carries the level, ``n`` and ε). If one answer alone cannot fit a page,
    :class:`BatchTooLarge` is raised before any page is made.
    """
    page = check_int(page, "page", 1)
    total = len(answers)
    labels, methods, rows = answers.labels_sent(), answers.methods_sent(), answers.rows_sent()
    cost = np.full(total, ANSWER_BYTES + (ROW_BYTES if rows is not None else 0), np.int64)
    for texts in (labels, methods):
        if texts is not None:
            cost += np.fromiter((len(text.encode()) for text in texts), np.int64, total) + FIELD_HEADER_BYTES
    budget = max_bytes - PAGE_ENVELOPE_BYTES
    stated = guarantees_to_proto(answers.guarantees) if answers.guarantees is not None else None
    extra = stated.ByteSize() + FIELD_HEADER_BYTES if stated is not None else 0
    if stated is not None and extra > budget - (int(cost[0]) if total else 0):
        raise BatchTooLarge(f"answers whose guarantees ({extra} bytes: {len(stated.group_labels)} groups) fit one "
                            f"page of at most {max_bytes} bytes with its first answer; query fewer groups at once")
    if total:
        cost[0] += extra  # the first page carries the guarantees
    over = np.flatnonzero(cost > budget)
    if over.size:
        j = int(over[0])
        raise BatchTooLarge(f"answers of at most {budget} bytes each, so that a page fits the message limit of "
                            f"{max_bytes} bytes (answer {j}, of queries[{answers.origin(j)}], needs {cost[j]} "
                            f"bytes with its label)")
    for start, stop in _page_bounds(cost, budget, page):
        cut = slice(start, stop)
        columns = {name: np.ascontiguousarray(getattr(answers, name)[cut], _F64).tobytes() for name in _COLUMNS}
        yield pb.EstimateResponse(
            offset=start, labels=labels[cut] if labels is not None else (),
            methods=methods[cut] if methods is not None else (),
            rows=np.ascontiguousarray(rows[cut], _U64).tobytes() if rows is not None else b"",
            proper_exact=answers.exact[cut].astype(np.uint8).tobytes(), level=answers.level, n=answers.n,
            epsilon=answers.epsilon, total=total, guarantees=stated if start == 0 else None, **columns)


@dataclass(frozen=True, eq=False)
class AnswerTable(AnswerColumns):
    """Answers received from the query service, as columns in batch order.

    The columns are those of :class:`~ldpsynth.shared.estimators.formulas.AnswerColumns`, one
    entry per compiled query.

    Attributes
    ----------
    estimate : numpy.ndarray
        WYZ eq. 17's unbiased estimate.
    proper_estimate : numpy.ndarray
        Eq. 21's proper estimate: a feasible answer.
    exact : numpy.ndarray
        bool: whether ``proper_estimate`` is the exact nearest feasible answer (else the
        estimate clipped to the feasible range).
    std_error : numpy.ndarray
        The estimate's standard error.
    ci_low, ci_high : numpy.ndarray
        The normal interval at ``level``.
    bound, bound_proper : numpy.ndarray
        The RMS bounds of eq. 20 (estimate) and eq. 22 (proper estimate).
    level : float
        The intervals' confidence level.
    n : int
        Rows of the synthetic database the answers read.
    epsilon : float
        The ε E delivered.
    given_labels : tuple of str or None
        The answers' labels as the server sent them; ``None``: ``q<j>`` (queries sent packed).
    given_methods : tuple of str or None, default None
        A wide collection's parent: each answer's method as the server sent it (:attr:`methods`).
    given_rows : numpy.ndarray or None, default None
        The rows each answer reads as the server sent them (a numeric collection's: a group's
        :math:`n_g`); ``None``: every answer reads ``n``.
    guarantees : Guarantees or None, default None
        The local ε0 and, for a shuffled collection, the central (ε, δ) the server stated.
    """

    given_labels: tuple[str, ...] | None
    given_methods: tuple[str, ...] | None = None
    given_rows: np.ndarray | None = None

    def methods_sent(self) -> tuple[str, ...] | None:
        return self.given_methods

    def rows_sent(self) -> np.ndarray | None:
        return self.given_rows

    @property
    def methods(self) -> tuple[str, ...] | None:
        """Each answer's method, in batch order: ``"analytic"`` or ``"model"`` (a wide parent's; else ``None``).

        A ``"model"`` answer's interval carries the views' noise, not the model's bias: on Adult it covered 0.64, not
        its level (docs/wide.md, "Coverage on Adult: missed")."""
        return self.given_methods

    def label(self, j: int) -> str:
        """The label of answer ``j`` (``q<j>`` for queries sent as packed arrays).

        Parameters
        ----------
        j : int
            The answer's index in batch order.

        Returns
        -------
        str

        Raises
        ------
        IndexError
            ``j`` outside the labels the server sent (without them every ``j`` is ``q<j>``).
        """
        return self.given_labels[j] if self.given_labels is not None else super().label(j)

    @property
    def labels(self) -> tuple[str, ...]:
        """Every label, in batch order."""
        return tuple(self.label(j) for j in range(len(self)))

    @classmethod
    def from_pages(cls, pages: Iterable[pb.EstimateResponse]) -> AnswerTable:
        """Reassemble pages (checked to be contiguous and complete).

        Parameters
        ----------
        pages : iterable of EstimateResponse
            The ``Estimate`` call's reply messages, in order.

        Returns
        -------
        AnswerTable

        Raises
        ------
        ValidationError
            Naming ``answers`` (no page, pages out of order or incomplete), ``answers.<column>``
            (a column of another length, ``answers.methods`` / ``answers.rows``: methods or rows missing on a
            page) or ``guarantees.*``
            (malformed guarantees).
        """
        pages = list(pages)
        if not pages:
            raise ValidationError("answers", "at least one page", "the server sent none")
        total = pages[0].total
        columns: dict[str, list[np.ndarray]] = {name: [] for name in (*_COLUMNS, "exact")}
        labels: list[str] = []
        methods: list[str] = []
        rows: list[np.ndarray] = []
        labelled = any(page.labels for page in pages)
        with_methods = any(page.methods for page in pages)
        with_rows = any(page.rows for page in pages)
        expected = 0
        for page in pages:
            if page.offset != expected or page.total != total:
                raise ValidationError("answers", f"pages in order from offset {expected}", f"got offset {page.offset}")
            size = len(page.proper_exact)
            for name in _COLUMNS:
                raw = getattr(page, name)
                if len(raw) != 8 * size:
                    raise ValidationError(f"answers.{name}", f"{size} float64 values", f"got {len(raw)} bytes")
                columns[name].append(np.frombuffer(raw, _F64))
            columns["exact"].append(np.frombuffer(page.proper_exact, np.uint8).astype(bool))
            if labelled:
                labels += list(page.labels) if page.labels else [f"q{expected + j}" for j in range(size)]
            if with_methods:
                if len(page.methods) != size:
                    raise ValidationError("answers.methods", f"{size} methods on the page at offset {expected}",
                                          f"got {len(page.methods)}")
                methods += list(page.methods)
            if with_rows:
                if len(page.rows) != _U64.itemsize * size:
                    raise ValidationError("answers.rows", f"{size} uint64 counts on the page at offset {expected}",
                                          f"got {len(page.rows)} bytes")
                rows.append(np.frombuffer(page.rows, _U64).astype(np.int64))
            expected += size
        if expected != total:
            raise ValidationError("answers", f"{total} answers", f"got {expected}")
        arrays = {name: np.concatenate(parts) for name, parts in columns.items()}
        last = pages[-1]
        first = pages[0]
        guarantees = guarantees_from_proto(first.guarantees) if first.HasField("guarantees") else None
        return cls(given_labels=tuple(labels) if labelled else None, level=last.level, n=int(last.n),
                   epsilon=last.epsilon, guarantees=guarantees,
                   given_methods=tuple(methods) if with_methods else None,
                   given_rows=np.concatenate(rows) if with_rows else None, **arrays)
