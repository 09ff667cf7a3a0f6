"""Evaluation of compiled query blocks over the sufficient statistics: the per-query sums
(:class:`~ldpsynth.shared.estimators.formulas.BlockSums`) of each block, and :func:`estimate`.

The math (WYZ eqs. 17-22) is in :mod:`ldpsynth.shared.estimators.formulas`; this module computes
the sums it needs, fast:

* table blocks (linear, predicate, marginal, grouped) contract their weights ``(Q, L, |D|)`` with
  the counts :math:`N[g, v]`: with numba installed, one fused pass per query
  (:mod:`ldpsynth.shared.estimators.table_kernel`), otherwise numpy over cache-sized chunks of queries
  (:data:`CHUNK_WEIGHTS`) in buffers reused per worker; batches of at least
  :data:`PARALLEL_WEIGHTS` weights are split over worker threads;
* dense (per-row) blocks are table blocks with one group per row: the one-hot counts of the
  perturbed codes;
* cut blocks total the rows of the pairs in :math:`S \\times T`
  (:class:`~ldpsynth.shared.estimators.pairs.PairTotals`), then
  :func:`~ldpsynth.shared.estimators.formulas.cut_block_sums` (eq. 34).

Sums over disjoint row sets merge (:meth:`~ldpsynth.shared.estimators.formulas.BlockSums.merge`), so a
distributed evaluator (the aggregator) computes them shard by shard (:func:`row_block_sums`) or
over merged statistics (:func:`table_block_sums`) and answers once with
:func:`~ldpsynth.shared.estimators.formulas.answers_from_sums`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.formulas import Answers, BlockSums, Debias, answers_from_sums, cut_block_sums
from ldpsynth.shared.estimators.pairs import PairTotals, edge_pair_totals
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.estimators.tallies import KeyedTallies, count_estimates
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms.oracle import FrequencyOracle
from ldpsynth.shared.mechanisms.pure import PureProtocol
from ldpsynth.shared.mechanisms.registry import Mechanism, categorical, layout_of
from ldpsynth.shared.queries.batch import CutBlock, QueryBatch, RowBlock, TableBlock
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.validation import check_int, check_probability

__all__ = [
    "CHUNK_WEIGHTS",
    "PARALLEL_WEIGHTS",
    "group_counts",
    "row_block_sums",
    "cut_pair_totals",
    "cut_oracle_sums",
    "table_block_sums",
    "estimate",
]

#: Weights per chunk of a batch (2 MiB of float64): one chunk's working set stays in cache.
CHUNK_WEIGHTS = 1 << 18
#: Batches with at least this many weights are split over threads.
PARALLEL_WEIGHTS = 1 << 22
#: Largest |D| handled in the transposed (value-major) layout.
_SMALL_DOMAIN = 16
#: Row length from which :func:`_matvec` uses row-wise dot products instead of a BLAS GEMV.
_LONG_ROW = 32
#: Row-wise dot products (numpy >= 2).
_rowdot = np.vecdot
#: The statistics the engine reads: E's counts, or a frequency oracle's tallies per public key.
Statistics = SufficientStatistics | KeyedTallies


@dataclass(frozen=True)
class _Counts:
    """The data side of a table contraction: counts ``N[g, v]`` of the groups of a block (E), or a frequency
    oracle's estimates (:meth:`of_oracle`, with ``worst`` set)."""

    hhat: np.ndarray      # (G k,) unbiased histogram estimate (N - q n_g)/r, flattened
    u: np.ndarray         # (G, k) N + r n_g / k
    u_by_value: np.ndarray  # (k, G) the same, value-major
    sizes: np.ndarray     # (G,) n_g
    #: An oracle's (a2 n_g, max(b2, 0)): v_worst = sum_g a2 n_g S2_g + b2+ n_g max_v (w - m_g)^2. None for E.
    worst: tuple[np.ndarray, float] | None = None

    @classmethod
    def of(cls, counts: np.ndarray, debias: Debias) -> _Counts:
        n_g = counts.sum(axis=1)
        hhat = (counts - debias.q * n_g[:, None]) / debias.r
        u = counts + (debias.r / debias.k) * n_g[:, None]
        return cls(hhat.ravel(), u, np.ascontiguousarray(u.T), n_g)

    @classmethod
    def of_oracle(cls, estimates: np.ndarray, sizes: np.ndarray, protocol: PureProtocol) -> _Counts:
        """An oracle's groups with count estimates :math:`\\hat c_g` ``(G, k)`` and sizes :math:`n_g`: the
        projected :math:`\\hat c'_g = \\hat c_g + (n_g - \\sum_v \\hat c_g(v))/k` (so that
        :math:`\\sum_v w\\hat c'_g = m_g n_g + \\sum_v (w - m_g)\\hat c_g`) and
        :math:`u = a_2 n_g + b_2 \\hat c_g` (the plug-in variance of centred weights; docs/internals.md,
        ``ldpsynth.shared.estimators.tallies``)."""
        a2, b2 = protocol.centred_coefficients()
        n_g = sizes.astype(np.float64)
        k = estimates.shape[1]
        hhat = estimates + ((n_g - estimates.sum(axis=1)) / k)[:, None]
        u = a2 * n_g[:, None] + b2 * estimates
        return cls(hhat.ravel(), u, np.ascontiguousarray(u.T), n_g, (a2 * n_g, max(b2, 0.0)))


def _matvec(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``a @ x`` for a chunk. Long rows use row-wise dot products: OpenBLAS runs a mid-sized GEMV on
    several threads, which stalls (10x and more) when the cores are busy, e.g. under our own workers."""
    if a.shape[-1] >= _LONG_ROW:
        return _rowdot(a, x)
    return a @ x


def _lattice_steps(w3: np.ndarray, low: np.ndarray, spread: np.ndarray) -> np.ndarray:
    """Common step of queries whose groups' value sets are full integer progressions, else NaN.

    Indicator queries (every weight 0 or 1: predicates, marginal cells) are decided directly: each
    group's value set is {0}, {1} or {0, 1}, a full progression, so the step is 1 if some group
    takes both values and 0 otherwise. The others are checked by sorting each group's weights."""
    steps = np.full(len(w3), np.nan)
    indicator = ((w3 == 0.0) | (w3 == 1.0)).all(axis=(1, 2))
    steps[indicator] = (spread[indicator] > 0).any(axis=1)
    ok = ~indicator & (w3 == np.rint(w3)).all(axis=(1, 2)) & (np.abs(w3) <= 2.0**52).all(axis=(1, 2))
    idx = np.flatnonzero(ok)
    if idx.size == 0:
        return steps
    w = w3[idx]
    offsets = (w - low[idx][:, :, None]).astype(np.int64)
    d = np.gcd.reduce(offsets.reshape(len(idx), -1), axis=1)
    distinct = 1 + (np.diff(np.sort(w, axis=2), axis=2) != 0).sum(axis=2)
    full = (distinct == spread[idx] / np.maximum(d, 1)[:, None] + 1).all(axis=1)
    steps[idx[full]] = d[full]
    return steps


class _Workspace:
    """Buffers of one worker, reused for every chunk: fresh arrays of this size per chunk would be
    mapped and page-faulted by the allocator each time, which costs more than the arithmetic."""

    def __init__(self, rows: int, groups: int, k: int):
        self.weights = np.empty(rows * groups * k)
        self.per_group = np.empty((4, rows, groups))

    def take(self, rows: int) -> tuple[np.ndarray, ...]:
        """The weight buffer (flat) and four ``(rows, G)`` arrays: centre, low, high, spread."""
        return (self.weights, *(a[:rows] for a in self.per_group))


def _chunk(w3: np.ndarray, counts: _Counts, out: BlockSums, rows: slice, work: _Workspace) -> None:
    """Fill ``out[rows]`` for the weight chunk ``w3`` (Qc, G, k): two contractions + per-group reductions."""
    qc, groups, k = w3.shape
    w2 = w3.reshape(qc, groups * k)
    buf, centre, low, high, spread = work.take(qc)
    out.t_hat[rows] = _matvec(w2, counts.hhat)                           # eq. 17 (times Z)
    if k <= _SMALL_DOMAIN:  # value-major copy: every reduction below runs over contiguous rows
        wt = buf[: k * qc * groups].reshape(k, qc, groups)
        np.copyto(wt, w3.transpose(2, 0, 1))
        np.add.reduce(wt, axis=0, out=centre)
        np.minimum.reduce(wt, axis=0, out=low)
        np.maximum.reduce(wt, axis=0, out=high)
        centre *= 1.0 / k
        np.subtract(wt, centre, out=wt)
        np.square(wt, out=wt)
        v_hat = _matvec(wt[0], counts.u_by_value[0])
        for j in range(1, k):
            v_hat += _matvec(wt[j], counts.u_by_value[j])
        squares = wt.sum(axis=0) if counts.worst is not None else None
    else:
        np.minimum.reduce(w3, axis=2, out=low)
        np.maximum.reduce(w3, axis=2, out=high)
        np.add.reduce(w3, axis=2, out=centre)
        centre *= 1.0 / k
        wc = buf[: qc * groups * k].reshape(qc, groups, k)
        np.subtract(w3, centre[:, :, None], out=wc)
        np.square(wc, out=wc)
        v_hat = _matvec(wc.reshape(qc, groups * k), counts.u.ravel())
        squares = wc.sum(axis=2) if counts.worst is not None else None
    out.v_hat[rows] = v_hat
    if counts.worst is not None and squares is not None:  # an oracle's worst case (docs/internals.md, tallies)
        a2n, b2 = counts.worst
        spread_max = np.maximum(high - centre, centre - low)
        out.v_worst[rows] = squares @ a2n + b2 * (np.square(spread_max) @ counts.sizes)
    sizes = counts.sizes
    out.low[rows], out.high[rows] = _matvec(low, sizes), _matvec(high, sizes)
    np.subtract(high, low, out=spread)
    out.spread[rows] = _matvec(spread, sizes)
    # fmin/fmax: the weights are finite, and these reductions are faster than min/max (no NaN checks)
    out.a_min[rows], out.b_max[rows] = np.fmin.reduce(low, axis=1), np.fmax.reduce(high, axis=1)
    c_min = np.fmin.reduce(spread, axis=1)
    out.c_min[rows] = c_min
    out.varying[rows] = sizes.sum()
    const = np.flatnonzero(c_min <= 0)
    if const.size:  # some group has a constant row function: restrict a, b, c, n' to the others
        live = spread[const] > 0
        out.varying[rows][const] = live @ sizes
        out.a_min[rows][const] = np.where(live, low[const], np.inf).min(axis=1)
        out.b_max[rows][const] = np.where(live, high[const], -np.inf).max(axis=1)
        out.c_min[rows][const] = np.where(live, spread[const], np.inf).min(axis=1)
    first = w2[:, 0]
    maybe = np.flatnonzero(first == np.rint(first))  # cheap filter: a lattice needs integer weights
    if maybe.size:
        out.step[rows][maybe] = _lattice_steps(w3[maybe], low[maybe], spread[maybe])


def _workers(requested: int | None) -> int:
    if requested is not None:
        return check_int(requested, "workers", 1, 256)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _run_chunks(total: int, chunk: int, parallel: bool, workers: int, run: Callable[[int, int], None]) -> None:
    """Call ``run(start, stop)`` over ``[0, total)`` in ranges of whole chunks, on threads if asked."""
    if not parallel or workers == 1 or total <= 2 * chunk:
        run(0, total)
        return
    per_task = chunk * max(1, -(-total // (chunk * 4 * workers)))
    ranges = [(s, min(s + per_task, total)) for s in range(0, total, per_task)]
    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(lambda r: run(*r), ranges))


def _table_parts(weights: np.ndarray, data: _Counts, workers: int,
                 select: np.ndarray | None = None) -> BlockSums:
    """Sums of :class:`BlockSums` for weights (Q, L, k) over groups with ``data`` (G groups), G = L or len(select).

    With numba installed, one fused pass per query (:mod:`ldpsynth.shared.estimators.table_kernel`; for all groups
    and a small domain, the kernel compiled for that k) on the worker threads; otherwise, and for a frequency
    oracle's data (which needs the worst case too), :func:`_chunk` over cache-sized chunks of queries."""
    from ldpsynth.shared.estimators import table_kernel

    size, k = len(weights), weights.shape[2]
    out = BlockSums.empty(size)
    groups = weights.shape[1] if select is None else len(select)
    if groups == 0:
        out.step[:] = 0.0
        return out
    chunk = max(1, CHUNK_WEIGHTS // (groups * k))
    kernel = table_kernel.KERNEL if data.worst is None else None
    if kernel is None:
        def run(start: int, stop: int) -> None:
            work = _Workspace(min(chunk, stop - start), groups, k)
            with np.errstate(over="ignore", invalid="ignore"):  # non-finite sums: _check_finite_sums
                _chunks(start, stop, work)

        def _chunks(start: int, stop: int, work: _Workspace) -> None:
            for s in range(start, stop, chunk):
                e = min(s + chunk, stop)
                w3 = weights[s:e] if select is None else weights[s:e][:, select]
                _chunk(w3, data, out, slice(s, e), work)
    else:
        w = np.ascontiguousarray(weights, dtype=np.float64)
        columns = np.arange(groups, dtype=np.int64) if select is None else np.ascontiguousarray(select, np.int64)
        hhat = np.ascontiguousarray(data.hhat.reshape(groups, k))
        u, sizes = np.ascontiguousarray(data.u), data.sizes.astype(np.float64)
        u_sums = u.sum(axis=1)
        outputs = (out.t_hat, out.v_hat, out.low, out.high, out.spread, out.a_min, out.b_max, out.c_min, out.varying,
                   out.step)
        check = np.zeros(size, np.uint8)
        small = table_kernel.small_domain_kernel(k) if select is None else None
        if small is not None:  # all groups, small k: the kernel vectorised over groups
            flat, hhat_t = w.reshape(-1), np.ascontiguousarray(hhat.T).reshape(-1)
            u_t = data.u_by_value.reshape(-1)

            def sums(start: int, stop: int) -> None:
                small(flat, start, stop, hhat_t, u_t, u_sums, sizes, *outputs, check)
        else:
            def sums(start: int, stop: int) -> None:
                kernel(w, columns, start, stop, hhat, u, u_sums, sizes, *outputs, check)

        def run(start: int, stop: int) -> None:
            sums(start, stop)
            _steps(w, columns, out, start + np.flatnonzero(check[start:stop]), chunk)

    _run_chunks(size, chunk, size * groups * k >= PARALLEL_WEIGHTS, workers, run)
    constant = np.flatnonzero(out.varying == 0)  # every group's row function constant (each group has rows)
    if constant.size:
        values = (weights[constant] if select is None else weights[constant][:, select])[:, :, 0]
        out.a_min[constant], out.b_max[constant] = values.min(axis=1), values.max(axis=1)
    if data.worst is not None:  # an oracle's answers are clipped, never put on a lattice
        out.step[:] = np.nan
    return out


def _steps(weights: np.ndarray, columns: np.ndarray, out: BlockSums, queries: np.ndarray, chunk: int) -> None:
    """The lattice steps (eq. 21) of ``queries``: integer-weight queries the kernel could not decide."""
    for s in range(0, len(queries), chunk):
        part = queries[s:s + chunk]
        w3 = weights[part][:, columns]
        low = w3.min(axis=2)
        out.step[part] = _lattice_steps(w3, low, w3.max(axis=2) - low)


def _group_rows(block: TableBlock, present_keys: np.ndarray, rows: np.ndarray,
                schema: Schema) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` (one per present key) summed per listed value of the block's attribute ``(L, ...)`` and over
    all other keys."""
    if block.attribute is None:
        return rows.sum(axis=0)[None], np.zeros(rows.shape[1:], rows.dtype)
    digits = schema.public_digits(present_keys)[block.attribute]
    order = np.argsort(block.values)
    at = np.minimum(np.searchsorted(block.values[order], digits), len(order) - 1)
    listed = block.values[order][at] == digits
    slot = np.where(listed, order[at], len(order))
    grouped = np.zeros((len(order) + 1, *rows.shape[1:]), rows.dtype)
    np.add.at(grouped, slot, rows)
    return grouped[:-1], grouped[-1]


def group_counts(block: TableBlock, stats: SufficientStatistics, schema: Schema) -> tuple[np.ndarray, np.ndarray]:
    """Counts per listed value of the block's attribute ``(L, k)`` and of all other rows ``(k,)``."""
    if block.attribute is None:
        return stats.histogram()[None, :], np.zeros(stats.domain_size, np.int64)
    return _group_rows(block, stats.present_keys, stats.table, schema)


def _oracle_data(oracle: FrequencyOracle, tallies: np.ndarray, sizes: np.ndarray) -> _Counts:
    return _Counts.of_oracle(count_estimates(oracle, tallies, sizes), sizes, oracle.protocol)


def _block_parts_table(block: TableBlock, stats: Statistics, schema: Schema, debias: Debias | None,
                       workers: int, origins: np.ndarray | None = None) -> BlockSums:
    if isinstance(stats, KeyedTallies):  # an oracle: tallies and sizes per group, then its estimates
        rows = np.concatenate([stats.table, stats.group_sizes[:, None]], axis=1)
        grouped, rest = _group_rows(block, stats.present_keys, rows, schema)
        sizes, other_size = grouped[:, -1], int(rest[-1])
        present = np.flatnonzero(sizes > 0)
        data = _oracle_data(stats.oracle, grouped[present, :-1], sizes[present])
        other = _oracle_data(stats.oracle, rest[None, :-1], rest[None, -1:].ravel()) if other_size else None
    else:
        assert debias is not None
        listed, remainder = group_counts(block, stats, schema)
        present = np.flatnonzero(listed.sum(axis=1) > 0)
        data = _Counts.of(listed[present].astype(np.float64), debias)
        other = _Counts.of(remainder[None, :].astype(np.float64), debias) if remainder.sum() > 0 else None
    select = None if len(present) == block.weights.shape[1] else present
    parts = _table_parts(block.weights, data, workers, select)
    if other is not None and block.default.any():
        parts = parts.merge(_table_parts(block.default[:, None, :], other, workers))
    _check_finite_sums(parts, block, origins)
    return parts


def _check_finite_sums(parts: BlockSums, block: TableBlock, origins: np.ndarray | None) -> None:
    """Every weight that reaches the estimator is finite, whoever built the batch: a NaN or an
    infinity in query j's weights makes its sums non-finite (NaN * 0 and inf - inf are NaN), so
    the sums are checked (Q numbers) instead of the weights (Q x L x |D|) and only the first
    offending query's weights are inspected, to tell a non-finite weight from an overflow."""
    finite = np.isfinite(parts.t_hat) & np.isfinite(parts.v_hat) & np.isfinite(parts.spread)
    if finite.all():
        return
    j = int(np.flatnonzero(~finite)[0])
    index = int(block.positions[j] if origins is None else origins[block.positions[j]])
    if not (np.isfinite(block.weights[j]).all() and np.isfinite(block.default[j]).all()):
        raise ValidationError(f"queries[{index}].weights", "finite numbers", "not finite")
    raise ValidationError(f"queries[{index}].weights", "weights whose sums over the rows stay finite", "overflow")


def _block_parts_rows(block: RowBlock, codes: np.ndarray | None, mechanism: Mechanism, workers: int,
                      origins: np.ndarray) -> BlockSums:
    """Dense queries: every row is its own group, with counts the one-hot vector of :math:`Y_i`."""
    n = block.weights.shape[1]
    if codes is None:
        raise ValidationError("codes", "the perturbed codes of the rows in stored order (dense queries need them)",
                              "missing")
    if len(codes) != n:
        raise ValidationError(f"queries[{origins[block.positions[0]]}].table",
                              f"{len(codes)} weight lists, one per row of the synthetic database", f"got {n}")
    return _row_sums(block.weights, codes, mechanism, workers)


def _row_sums(weights: np.ndarray, reports: np.ndarray, mechanism: Mechanism, workers: int) -> BlockSums:
    """Every row its own group: E's one-hot counts of the perturbed code, an oracle's estimates of one report."""
    if isinstance(mechanism, MechanismE):
        onehot = np.zeros((len(reports), mechanism.domain_size), np.int64)
        onehot[np.arange(len(reports)), reports] = 1
        return _table_parts(weights, _Counts.of(onehot.astype(np.float64), Debias.of(mechanism)), workers)
    oracle = categorical(mechanism)
    assert isinstance(oracle, FrequencyOracle)
    supports = oracle.support_rows(reports)
    ones = np.ones(len(reports))
    estimates = oracle.protocol.count_estimates(supports, ones[:, None])
    return _table_parts(weights, _Counts.of_oracle(estimates, ones, oracle.protocol), workers)


def _check_rows(reports: npt.ArrayLike, mechanism: Mechanism, field: str) -> np.ndarray:
    """The stored reports of every row: E's perturbed codes, an oracle's reports (checked, a row each)."""
    if isinstance(mechanism, MechanismE):
        return mechanism.check_codes(np.asarray(reports).reshape(-1), field)
    return layout_of(mechanism).check(reports, field)


def row_block_sums(weights: np.ndarray, codes: np.ndarray, mechanism: Mechanism,
                   workers: int | None = None) -> BlockSums:
    """:class:`BlockSums` of dense per-row queries over a subset of the rows.

    ``weights`` is ``(Q, m, |D|)``: the weight lists of the ``m`` rows whose perturbed codes (a frequency
    oracle: whose reports) are ``codes``. Sums over disjoint row subsets (e.g. shards)
    :meth:`~BlockSums.merge` into the sums over their union, so a per-row scan can run where the rows are.
    """
    rows = _check_rows(codes, mechanism, "codes")
    if weights.ndim != 3 or weights.shape[1:] != (len(rows), mechanism.domain_size):
        raise ValidationError("weights", f"an array of shape (Q, {len(rows)}, {mechanism.domain_size})",
                              f"got shape {weights.shape}")
    return _row_sums(weights, rows, mechanism, _workers(workers))


def cut_pair_totals(block: CutBlock, stats: SufficientStatistics, schema: Schema) -> tuple[np.ndarray, np.ndarray]:
    """The data side of cut queries: per query, :math:`m` = rows in :math:`S \\times T` and
    :math:`y_1` = those whose perturbed edge bit is 1 (:func:`~ldpsynth.shared.estimators.pairs.edge_pair_totals`).
    Both are sums over rows, so totals over disjoint row subsets (shards) add up."""
    m, y1 = edge_pair_totals(schema, stats, block.source, block.target, block.edge).totals(block.sources,
                                                                                         block.targets).T
    return m, y1


def cut_oracle_sums(block: CutBlock, stats: KeyedTallies, schema: Schema) -> BlockSums:
    """Cut queries (WYZ eq. 33) of a frequency oracle's collection: per present key (vertex pair) g its rows
    :math:`n_g`, its estimate :math:`e_g = \\sum_v \\varphi(v)\\hat c'_g(v)` of the edges, its plug-in variance
    and its worst case (``_Counts.of_oracle`` with :math:`\\varphi` the edge indicator), summed over the pairs
    of :math:`S \\times T` (groups are independent, so every sum adds)."""
    oracle = stats.oracle
    data = _oracle_data(oracle, stats.table, stats.group_sizes)
    edge_on = (schema.private_digits(np.arange(stats.domain_size))[block.edge] == 1).astype(np.float64)
    centred = edge_on - edge_on.mean()
    k = stats.domain_size
    hhat = data.hhat.reshape(-1, k)
    assert data.worst is not None
    a2n, b2 = data.worst
    values = np.stack([data.sizes, hhat @ edge_on, data.u @ np.square(centred),
                       a2n * float(np.square(centred).sum()) + b2 * float(np.square(centred).max()) * data.sizes],
                      axis=1)
    digits = schema.public_digits(stats.present_keys)
    pairs = PairTotals(schema.attribute(block.source).size, schema.attribute(block.target).size,
                       digits[block.source], digits[block.target], values)
    m, t_hat, v_hat, v_worst = pairs.totals(block.sources, block.targets).T
    live = m > 0
    return BlockSums(t_hat=t_hat, v_hat=v_hat, low=np.zeros(len(m)), high=m, spread=m.copy(),
                     a_min=np.where(live, 0.0, np.inf), b_max=np.where(live, 1.0, -np.inf),
                     c_min=np.where(live, 1.0, np.inf), varying=m.copy(), step=np.full(len(m), np.nan),
                     v_worst=v_worst)


def table_block_sums(block: TableBlock, stats: Statistics, schema: Schema, mechanism: Mechanism,
                     workers: int | None = None) -> BlockSums:
    """:class:`BlockSums` of a table block (linear, predicate, marginal, grouped) over ``stats`` (E's counts
    or an oracle's :class:`~ldpsynth.shared.estimators.tallies.KeyedTallies`)."""
    debias = Debias.of(mechanism) if isinstance(mechanism, MechanismE) else None
    return _block_parts_table(block, stats, schema, debias, _workers(workers))


def estimate(batch: QueryBatch, stats: Statistics, mechanism: Mechanism, *, level: float = 0.95,
             codes: npt.ArrayLike | None = None, workers: int | None = None) -> Answers:
    """Answer every query of ``batch`` from the synthetic database summarised by ``stats``.

    ``stats``: E's counts (:class:`SufficientStatistics`), or a frequency oracle's tallies per public key
    (:class:`~ldpsynth.shared.estimators.tallies.KeyedTallies`). ``codes`` (the perturbed private codes in
    stored row order; an oracle's reports) is needed only by dense queries. Each block is evaluated as
    matrix products over ``stats`` in cache-sized chunks (split over ``workers`` threads for large batches;
    default: the usable CPUs).
    """
    level = check_probability(level, "level")
    schema = batch.schema
    categorical(mechanism)
    k = schema.private_domain_size
    oracle = not isinstance(mechanism, MechanismE)
    if mechanism.domain_size != k or stats.domain_size != k or oracle != isinstance(stats, KeyedTallies):
        raise ValidationError("mechanism", f"the schema's mechanism ({schema.mechanism}) and its statistics over "
                              f"|D| = {k}", f"got |D| = {mechanism.domain_size} and {stats.domain_size}")
    if stats.public_domain_size != schema.public_domain_size:
        raise ValidationError("statistics", f"{schema.public_domain_size} public keys (the schema's)",
                              f"got {stats.public_domain_size}")
    n = stats.n
    if n == 0:
        raise ValidationError("synthetic", "a synthetic database with at least one row", "no rows")
    rows = None if codes is None else _check_rows(codes, mechanism, "codes")
    if rows is not None and len(rows) != n:
        raise ValidationError("codes", f"one code per row ({n} rows)", f"got {len(rows)}")
    debias = Debias.of(mechanism) if isinstance(mechanism, MechanismE) else None
    threads = _workers(workers)
    sums = []
    for block in batch.blocks:
        if isinstance(block, TableBlock):
            sums.append(_block_parts_table(block, stats, schema, debias, threads, batch.origins))
        elif isinstance(block, RowBlock):
            sums.append(_block_parts_rows(block, rows, mechanism, threads, batch.origins))
        elif isinstance(stats, KeyedTallies):
            sums.append(cut_oracle_sums(block, stats, schema))
        else:
            assert isinstance(mechanism, MechanismE)
            sums.append(cut_block_sums(*cut_pair_totals(block, stats, schema), mechanism))
    return answers_from_sums(batch, sums, n, mechanism, level=level)
