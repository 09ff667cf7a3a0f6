"""Planning a collection: the error of every query of mechanism E and of the frequency oracles, known before a
single device reports, and the mechanism to choose.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.planning.planner``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from statistics import NormalDist
from typing import Any

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.formulas import Debias, rms_bound
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms.oracle import FrequencyOracle
from ldpsynth.shared.mechanisms.registry import Mechanism, make_mechanism, max_domain_size, private_wire
from ldpsynth.shared.planning.row_distribution import RowDistribution, UniformRows
from ldpsynth.shared.planning.schema_changes import COARSER, SchemaChange
from ldpsynth.shared.queries.batch import CutBlock, QueryBatch, RowBlock, TableBlock
from ldpsynth.shared.queries.compiler import compile_queries
from ldpsynth.shared.queries.model import MEAN, NORMALIZATIONS, RANGE, SUM, Query
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.validation import check_epsilon, check_int, check_probability

__all__ = [
    "EPSILON_STEP",
    "MAX_EPSILON",
    "OK",
    "HOPELESS",
    "CONSTANT",
    "UNDEFINED",
    "Moments",
    "moments",
    "e_coefficients",
    "e_coefficients_at",
    "normalisers",
    "variances",
    "Figures",
    "ORACLE_NAMES",
    "CLOSE",
    "Choice",
    "recommend",
    "Inverse",
    "Alternative",
    "Plan",
    "plan",
]

#: Weights per chunk of queries (2 MiB of float64): the temporaries of one chunk stay in cache.
CHUNK_WEIGHTS = 1 << 18
#: The ε answered by the inverse question is a multiple of this, rounded up.
EPSILON_STEP = 0.01
#: Largest ε the inverse question tries (E's exact sampler delivers at most about 43).
MAX_EPSILON = 40.0
#: Status of a query in a plan.
OK, HOPELESS, CONSTANT, UNDEFINED = "ok", "hopeless", "constant", "undefined"
#: The frequency oracles a plan sets beside E (:mod:`ldpsynth.shared.mechanisms`).
ORACLE_NAMES = ("OUE", "OLH", "HR", "SS")
#: Mechanisms whose typical standard error is within this factor of the best one's are told apart by the
#: bytes of a report, then by the cost of decoding.
CLOSE = 1.05


# ----- ε-free sums of a batch -----------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Moments:
    """Per query, the ε-free sums of the module docstring per row of the data set (shares f_g, not counts).

    ``spread`` :math:`\\sum_g f_g\\sum_v D_g(v)`; ``worst_high`` / ``worst_low`` :math:`\\sum_g f_g \\max_v`
    / :math:`\\min_v D_g(v)`; ``prior`` :math:`\\sum_{g,v}\\pi(g,v)D_g(v)`; ``width`` :math:`\\sum_g f_g c_g`;
    ``varying``, ``a``, ``b``, ``c``: eq. 20's :math:`n'/n, a, b, c` over the groups with :math:`c_g > 0`;
    ``bias_high``, ``bias_low``, ``bias_prior``: the same sums of a coarser schema's weight change
    :math:`\\beta` (zeros otherwise); ``fixed``: dense queries, whose n is their table's.
    """

    spread: np.ndarray
    worst_high: np.ndarray
    worst_low: np.ndarray
    prior: np.ndarray
    width: np.ndarray
    varying: np.ndarray
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    bias_high: np.ndarray
    bias_low: np.ndarray
    bias_prior: np.ndarray
    fixed: np.ndarray

    @classmethod
    def empty(cls, size: int) -> Moments:
        return cls(**{f.name: np.zeros(size) for f in fields(cls) if f.name != "fixed"}, fixed=np.zeros(size, bool))


@dataclass(frozen=True, eq=False)
class _Groups:
    """A block as weight tables over groups of rows and those groups' shares of the rows.

    ``tables(start, stop)`` gives the tables ``(q, G, |D|)`` of queries ``[start, stop)``; ``joint`` the
    shares ``(G, |D|)``. With ``scale`` (cut queries) every query has the one table ``tables(0, 1)`` over
    the rows of its own S x T, whose share is ``scale[j]``. ``fixed``: dense queries (n is their table's).
    """

    size: int
    positions: np.ndarray
    joint: np.ndarray
    tables: Callable[[int, int], np.ndarray]
    scale: np.ndarray | None = None
    fixed: bool = False


def _table_groups(block: TableBlock, rows: RowDistribution) -> _Groups:
    """The listed values of the block's attribute that hold rows, and the other rows when some query's
    ``default`` is not constant (a constant row function adds nothing to any sum)."""
    listed, other = rows.by_group(block)
    present = np.flatnonzero(listed.sum(axis=1) > 0)
    with_default = other.sum() > 0 and bool(np.ptp(block.default, axis=1).any())
    joint = np.concatenate([listed[present], other[None, :]]) if with_default else listed[present]
    every = len(present) == len(listed)

    def tables(start: int, stop: int) -> np.ndarray:
        w = block.weights[start:stop] if every else block.weights[start:stop][:, present]
        return np.concatenate([w, block.default[start:stop, None, :]], axis=1) if with_default else w

    return _Groups(len(block.positions), block.positions, joint, tables)


def _row_groups(block: RowBlock, rows: RowDistribution) -> _Groups:
    """Dense queries: each stored row is its own group (:meth:`RowDistribution.stored_rows`)."""
    count = block.weights.shape[1]
    joint = rows.stored_rows(count)
    return _Groups(len(block.positions), block.positions, joint, lambda start, stop: block.weights[start:stop],
                   fixed=True)


def _cut_groups(block: CutBlock, rows: RowDistribution, schema: Schema) -> _Groups:
    """Cut queries: the edge bit's indicator on the rows of S x T (its D_g is 1/4 at every value, so the
    private shares within S x T do not matter; the overall ones stand in for them)."""
    k = schema.private_domain_size
    edge = (schema.private_digits(np.arange(k))[block.edge] == 1).astype(np.float64)
    return _Groups(len(block.positions), block.positions, rows.private()[None, :],
                   lambda start, stop: edge[None, None, :], scale=rows.cut_share(block))


def _groups(batch: QueryBatch, rows: RowDistribution) -> list[_Groups]:
    out = []
    for block in batch.blocks:
        if isinstance(block, TableBlock):
            out.append(_table_groups(block, rows))
        elif isinstance(block, RowBlock):
            out.append(_row_groups(block, rows))
        else:
            out.append(_cut_groups(block, rows, batch.schema))
    return out


def _fill(out: Moments, where: np.ndarray, w: np.ndarray, joint: np.ndarray, beta: np.ndarray | None,
          fine_joint: np.ndarray, scale: np.ndarray | float) -> None:
    """The sums of the tables ``w`` (q, G, k') over rows with shares ``joint``, times ``scale``; ``beta`` is
    a coarser schema's weight change ``(q, G, k)`` over the original rows' shares ``fine_joint``.

    Value-major copies (k', q, G): every reduction over the values is then a pass of elementwise
    operations over contiguous (q, G) slabs, about ten times faster than reducing the short last axis."""
    f = joint.sum(axis=1)
    d = np.array(w.transpose(2, 0, 1), order="C")  # a copy: d is changed in place below
    low, high = np.minimum.reduce(d, axis=0), np.maximum.reduce(d, axis=0)
    d -= np.add.reduce(d, axis=0) / len(d)
    np.square(d, out=d)
    spread = high - low
    live = (spread > 0) & (f > 0)
    out.spread[where] = scale * (np.add.reduce(d, axis=0) @ f)
    out.worst_high[where] = scale * (np.maximum.reduce(d, axis=0) @ f)
    out.worst_low[where] = scale * (np.minimum.reduce(d, axis=0) @ f)
    out.prior[where] = scale * np.einsum("vqg,vg->q", d, joint.T)
    out.width[where] = scale * (spread @ f)
    out.varying[where] = scale * (live @ f)
    out.a[where] = np.where(live, low, np.inf).min(axis=1, initial=np.inf)
    out.b[where] = np.where(live, high, -np.inf).max(axis=1, initial=-np.inf)
    out.c[where] = np.where(live, spread, np.inf).min(axis=1, initial=np.inf)
    if beta is not None:
        f_fine = fine_joint.sum(axis=1)
        bt = np.ascontiguousarray(beta.transpose(2, 0, 1))
        out.bias_high[where] = scale * (np.maximum.reduce(bt, axis=0) @ f_fine)
        out.bias_low[where] = scale * (np.minimum.reduce(bt, axis=0) @ f_fine)
        out.bias_prior[where] = scale * np.einsum("vqg,vg->q", bt, fine_joint.T)


def moments(batch: QueryBatch, rows: RowDistribution, change: SchemaChange | None = None) -> Moments:
    """The :class:`Moments` of every compiled query of ``batch`` under ``rows`` (of ``change``'s schema if given)."""
    out = Moments.empty(batch.size)
    for groups in _groups(batch, rows):
        joint = groups.joint if change is None else change.joint(groups.joint)
        coarser = change is not None and change.kind == COARSER
        count = 1 if groups.scale is not None else groups.size
        chunk = max(1, CHUNK_WEIGHTS // max(1, groups.joint.size))
        for start in range(0, count, chunk):
            stop = min(start + chunk, count)
            fine = groups.tables(start, stop)
            w = fine if change is None else change.weights(fine)
            beta = change.coarse_at_fine(w) - fine if coarser else None  # type: ignore[union-attr]
            if groups.scale is None:
                _fill(out, groups.positions[start:stop], w, joint, beta, groups.joint, 1.0)
            else:  # one table for every cut query, over its own share of the rows
                _fill(out, groups.positions, w, joint, beta, groups.joint, groups.scale)
        out.fixed[groups.positions] = groups.fixed
    return out


# ----- variances -----------------------------------------------------------------------------
def e_coefficients(mechanism: MechanismE) -> tuple[float, float]:
    """:math:`A = q/r^2` and :math:`B = s/r` of E's eq. 17 estimator, from the mechanism's exact probabilities."""
    d = Debias.of(mechanism)
    return d.q / d.r**2, d.s / d.r


def e_coefficients_at(epsilon: np.ndarray, domain_size: int) -> tuple[np.ndarray, np.ndarray]:
    """:math:`A = (e^\\epsilon + k - 1)/(e^\\epsilon - 1)^2`, :math:`B = k/(e^\\epsilon - 1)` at ideal
    probabilities (vectorised over ε; the inverse question's search)."""
    grown = np.expm1(epsilon)
    return (grown + domain_size) / grown**2, domain_size / grown


def normalisers(m: Moments, norms: np.ndarray, n: int) -> np.ndarray:
    """Z per query at n rows: :math:`n\\sum_g f_g c_g` (eq. 10), 1 (sum) or n (mean)."""
    return np.where(norms == RANGE, n * m.width, np.where(norms == MEAN, float(n), 1.0))


def variances(m: Moments, a: float | np.ndarray, b: float | np.ndarray, n: int, z: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """Worst-case and prior variance at n rows for coefficients A, B: :math:`n(A\\cdot\\mathrm{spread} + B x)/Z^2`."""
    worst_term = np.where(np.asarray(b) >= 0, m.worst_high, m.worst_low)
    with np.errstate(divide="ignore", invalid="ignore"):
        worst = n * (a * m.spread + b * worst_term) / z**2
        prior = n * (a * m.spread + b * m.prior) / z**2
    return worst, prior


# ----- the plan ------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Figures:
    """Standard errors of one estimator per query: worst case over the private values, and under the
    prior (None without one)."""

    se_worst: np.ndarray
    se_prior: np.ndarray | None

    @classmethod
    def of(cls, worst: np.ndarray, prior: np.ndarray, with_prior: bool) -> Figures:
        return cls(np.sqrt(worst), np.sqrt(prior) if with_prior else None)

    @property
    def headline(self) -> np.ndarray:
        """The prior's figure when there is one, else the worst case."""
        return self.se_worst if self.se_prior is None else self.se_prior


@dataclass(frozen=True, eq=False)
class Choice:
    """One mechanism for the planned collection: its predicted errors, the size of a report, its decoding.

    ``error_ratio``: the geometric mean, over the queries with a non-zero error, of its headline standard
    error over E's (1 for E; below 1: better). ``report_bytes``: the wire bytes of a report's private part.
    ``tally_operations``: work per report when a shard counts it (E, HR: one increment; OLH: g signed
    increments; OUE, SS: |D| bits). ``transform``: additions per public key a query batch adds (OLH, HR: a
    Walsh-Hadamard transform of 2^t integers, t 2^t; 0 otherwise). ``available``: False, with ``why``, when the
    mechanism cannot serve the schema (|D| over its largest domain).
    """

    mechanism: str
    epsilon: float
    figures: Figures | None
    report_bytes: int
    tally_operations: int
    transform: int
    error_ratio: float
    available: bool = True
    why: str = ""


def _costs(mechanism: Mechanism) -> tuple[int, int, int]:
    """``(report bytes, tally operations per report, transform additions per key)`` of ``mechanism``."""
    wire = private_wire(mechanism)[0]
    if not isinstance(mechanism, FrequencyOracle):
        return wire, 1, 0
    name, size = mechanism.name, mechanism.tally_size
    transform = size * max(1, size.bit_length() - 1) if name in ("OLH", "HR") else 0
    per_report = {"OLH": int(getattr(mechanism, "hash_range", 1)), "HR": 1}.get(name, mechanism.domain_size)
    return wire, per_report, transform


def _ratio(figures: Figures, e: Figures) -> float:
    """Geometric mean of ``figures``' headline standard errors over E's, where both are positive and finite."""
    mine, theirs = figures.headline, e.headline
    live = (mine > 0) & (theirs > 0) & np.isfinite(mine) & np.isfinite(theirs)
    return float(np.exp(np.mean(np.log(mine[live] / theirs[live])))) if live.any() else 1.0


def recommend(choices: Sequence[Choice]) -> tuple[str, str]:
    """The mechanism to choose and why: E (the default) while its typical error (``error_ratio``) is within
    :data:`CLOSE` of the smallest; otherwise, of the oracles within :data:`CLOSE` of the smallest, the one with
    the smallest report, then the cheapest decoding (``tally_operations``, ``transform``)."""
    usable = [c for c in choices if c.available]
    best = min(c.error_ratio for c in usable)
    close = [c for c in usable if c.error_ratio <= best * CLOSE]
    pick = min(close, key=lambda c: (c.mechanism != "E", c.report_bytes, c.tally_operations, c.transform,
                                     c.error_ratio))
    others = ", ".join(f"{c.mechanism} {c.error_ratio:.3g}" for c in usable if c is not pick)
    why = (f"{pick.mechanism}: standard errors {pick.error_ratio:.3g} x E's (geometric mean over the queries; "
           f"{others}), {pick.report_bytes} bytes per report")
    if len(close) > 1:
        why += (f"; of those within {CLOSE - 1:.0%} of the best error ({', '.join(c.mechanism for c in close)}) "
                + ("the default" if pick.mechanism == "E" else "the smallest report and decoding"))
    return pick.mechanism, why


def _oracle_choices(m: Moments, eps: float, k: int, n: int, z: np.ndarray, with_prior: bool,
                    e: Figures) -> list[Choice]:
    """Each frequency oracle of :data:`ORACLE_NAMES` at ``eps`` (its exact probabilities): the variance of the
    estimator of its collections (weights centred per group: :math:`a\\,n S_2 + b H_2`), or unavailable."""
    out = []
    for name in ORACLE_NAMES:
        largest = max_domain_size(name)
        if k > largest:
            out.append(Choice(name, eps, None, 0, 0, 0, float("inf"), False, f"|D| = {k:,} > {largest:,}"))
            continue
        oracle = make_mechanism(name, eps, k)
        assert isinstance(oracle, FrequencyOracle)
        a, b = oracle.protocol.centred_coefficients()
        figures = Figures.of(*variances(m, a, b, n, z), with_prior)
        out.append(Choice(name, oracle.epsilon, figures, *_costs(oracle), _ratio(figures, e)))
    return out


@dataclass(frozen=True, eq=False)
class Inverse:
    """Answers to a target half-width: devices needed at the plan's ε, ε needed at the plan's devices.

    ``devices_*`` are NaN for queries whose half-width does not fall with more devices (sums, dense);
    ``epsilon_*`` are multiples of :data:`EPSILON_STEP`, ``inf`` beyond :data:`MAX_EPSILON`.
    """

    target_halfwidth: float
    devices_worst: np.ndarray
    devices_prior: np.ndarray | None
    epsilon_worst: np.ndarray
    epsilon_prior: np.ndarray | None


@dataclass(frozen=True, eq=False)
class Alternative:
    """E's error on the same queries under a changed schema (at the collection's ε); the bias of a
    coarser schema's answer (zeros for a public attribute)."""

    change: SchemaChange
    e: Figures
    bias_worst: np.ndarray
    bias_prior: np.ndarray | None


@dataclass(frozen=True, eq=False)
class ShufflePlan:
    """The planned collection behind a shuffler (module docstring, :func:`plan_shuffle`).

    ``at_planned``: the guarantees of a release at the plan's ε0, per public-key group of the planned
    rows (``group_reports``, floor of n times the group's share); ``below_min_batch`` marks groups a
    release would be refused for. ``target`` is the central ε asked for; ``epsilon0`` the ε0 that
    reaches it at the weakest non-empty group (None when no group has a report); ``shuffled`` E's
    errors at ``epsilon0``, ``plain`` E's at local ε = ``target`` (plain LDP, the same central promise);
    ``oracles`` the frequency oracles' at local ε = ``target`` (they are not run behind a shuffler: the
    accountant is k-RR's), and ``recommended`` / ``recommendation`` the choice among E behind the shuffler
    and those (:func:`recommend`, every ratio taken against E behind the shuffler).
    """

    delta: float
    min_batch: int
    shuffler: str
    against: str
    at_planned: Any
    below_min_batch: np.ndarray
    target: float
    epsilon0: float | None
    central_at_epsilon0: float | None
    shuffled: Figures | None
    plain: Figures
    oracles: tuple[Choice, ...] = ()
    recommended: str = "E"
    recommendation: str = ""


@dataclass(frozen=True, eq=False)
class Plan:
    """The predicted error of every compiled query of ``batch``, in batch order (see the module docstring).

    ``epsilon`` is the ε E delivers (its exact rational probabilities), ``z`` the normal quantile of
    ``level``, ``composition`` what was assumed about the rows; per query: ``range`` (the width of the
    feasible answers), E's standard errors ``e``, ``bound`` (eq. 20, RMS), ``status`` (:data:`OK`,
    :data:`HOPELESS`: half-width >= range, :data:`CONSTANT`: the answer is known, :data:`UNDEFINED`: eq.
    10's Z is 0 for these rows); the inverse answers for a target half-width and E's error under each
    schema change. ``choices``: E and each frequency oracle (:class:`Choice`: its errors at the same ε,
    its report and decoding costs); ``recommended`` and ``recommendation``: the one to choose and why
    (:func:`recommend`).
    """

    batch: QueryBatch
    normalization: np.ndarray
    devices: int
    rows_per_device: int
    epsilon: float
    domain_size: int
    level: float
    z: float
    composition: str
    range: np.ndarray
    e: Figures
    bound: np.ndarray
    status: np.ndarray
    inverse: Inverse | None
    alternatives: tuple[Alternative, ...]
    choices: tuple[Choice, ...]
    recommended: str
    recommendation: str
    shuffle: ShufflePlan | None = None

    def __len__(self) -> int:
        return self.batch.size

    def choice(self, mechanism: str) -> Choice:
        """The :class:`Choice` of ``mechanism`` (``"E"``, ``"OUE"``, ...)."""
        return next(c for c in self.choices if c.mechanism == mechanism)

    def oracle(self, mechanism: str) -> Figures:
        """The figures of a frequency oracle; :class:`ValidationError` naming it when |D| is over its domain."""
        found = self.choice(mechanism)
        if found.figures is None:
            raise ValidationError("mechanism", f"a mechanism that serves this schema ({found.why})", mechanism)
        return found.figures

    def label(self, j: int) -> str:
        """The label of compiled query ``j``."""
        return self.batch.label(j)

    @property
    def n(self) -> int:
        """Rows (reports) planned: devices times rows per device."""
        return self.devices * self.rows_per_device

    @property
    def has_prior(self) -> bool:
        return self.e.se_prior is not None

    def halfwidth(self, se: np.ndarray) -> np.ndarray:
        """Half-width of the normal interval at the plan's level."""
        return self.z * se


def _e_figures(m: Moments, mechanism: MechanismE | None, n: int, z: np.ndarray, with_prior: bool) -> Figures:
    """E's standard errors; no mechanism (no private attribute left): no noise."""
    if mechanism is None:
        zero = np.zeros(len(z))
        return Figures(zero, zero.copy() if with_prior else None)
    a, b = e_coefficients(mechanism)
    return Figures.of(*variances(m, a, b, n, z), with_prior)


def _bounds(m: Moments, norms: np.ndarray, n: int, mechanism: MechanismE) -> np.ndarray:
    """Eq. 20 (RMS) at the planned public part."""
    bound = np.zeros(len(norms))
    for code, name in enumerate(NORMALIZATIONS):
        sel = norms == code
        if sel.any():
            bound[sel] = rms_bound(n * m.varying[sel], m.a[sel], m.b[sel], m.c[sel], name, n, mechanism)
    return bound


def _status(range_: np.ndarray, halfwidth: np.ndarray, z_norm: np.ndarray) -> np.ndarray:
    status = np.full(len(range_), OK, dtype=object)
    status[halfwidth >= range_] = HOPELESS
    status[range_ == 0] = CONSTANT
    status[~(z_norm > 0)] = UNDEFINED
    return status


def _devices_needed(variance: np.ndarray, m: Moments, norms: np.ndarray, n: int, rows_per_device: int,
                    target_variance: float) -> np.ndarray:
    """:math:`\\lceil\\lceil n\\mathrm{Var}(n)/(H/z)^2\\rceil / R\\rceil` where Var falls like 1/n; NaN elsewhere."""
    scales = (norms != SUM) & ~m.fixed & np.isfinite(variance)
    rows = np.maximum(1.0, np.ceil(n * variance / target_variance))
    return np.where(scales, np.ceil(rows / rows_per_device), np.nan)


def _epsilon_needed(m: Moments, which: np.ndarray, n: int, z_norm: np.ndarray, k: int, target_variance: float
                    ) -> np.ndarray:
    """The smallest multiple of :data:`EPSILON_STEP` up to :data:`MAX_EPSILON` at which the variance (h-term
    ``which``) is at most the target, else inf: a binary search over that grid per query (the variance falls
    with ε) with the ideal A(ε), B(ε), then checked with E's exact probabilities at each answer (and
    raised a step where they differ in the last bits)."""
    per_unit = round(1.0 / EPSILON_STEP)
    grid = np.arange(1, round(MAX_EPSILON * per_unit) + 1)
    a_grid, b_grid = e_coefficients_at(grid / per_unit, k)
    with np.errstate(divide="ignore", invalid="ignore"):
        budget = target_variance * z_norm**2 / n         # A(ε) spread + B(ε) which <= budget
    lo, hi = np.zeros(len(z_norm), np.int64), np.full(len(z_norm), len(grid) - 1)
    reachable = (a_grid[-1] * m.spread + b_grid[-1] * which <= budget) & (z_norm > 0)
    while (lo < hi).any():
        mid = (lo + hi) // 2
        good = a_grid[mid] * m.spread + b_grid[mid] * which <= budget
        hi, lo = np.where(good, mid, hi), np.where(good, lo, mid + 1)
    steps = np.where(reachable, grid[lo], np.inf)
    for value in np.unique(steps[reachable]):  # a few distinct answers: E's exact probabilities at each
        sel = np.flatnonzero(steps == value)
        while value <= grid[-1]:
            a, b = e_coefficients(MechanismE(value / per_unit, k))
            over = a * m.spread[sel] + b * which[sel] > budget[sel]
            if not over.any():
                break
            sel = sel[over]
            value += 1
            steps[sel] = value if value <= grid[-1] else np.inf
    return steps / per_unit


def _inverse(target: float, m: Moments, norms: np.ndarray, n: int, rows_per_device: int, z_norm: np.ndarray,
             z_level: float, k: int, worst: np.ndarray, prior: np.ndarray, with_prior: bool) -> Inverse:
    target = check_epsilon(target, "target_halfwidth")  # a finite number > 0
    target_variance = (target / z_level) ** 2
    return Inverse(
        target,
        _devices_needed(worst, m, norms, n, rows_per_device, target_variance),
        _devices_needed(prior, m, norms, n, rows_per_device, target_variance) if with_prior else None,
        _epsilon_needed(m, m.worst_high, n, z_norm, k, target_variance),  # E's B = s/r > 0: max_v D_g
        _epsilon_needed(m, m.prior, n, z_norm, k, target_variance) if with_prior else None)


def _check_dense_rows(batch: QueryBatch, n: int) -> None:
    for block in batch.blocks:
        if isinstance(block, RowBlock) and block.weights.shape[1] != n:
            raise ValidationError("devices", f"devices x rows_per_device = {block.weights.shape[1]} (the rows of "
                                  f"dense query {batch.origins[block.positions[0]]})", f"got {n} rows")


def plan(schema: Schema, queries: QueryBatch | Sequence[Query], devices: int, *, rows_per_device: int = 1,
         prior: RowDistribution | None = None, epsilon: float | None = None, level: float = 0.95,
         target_halfwidth: float | None = None, changes: Sequence[SchemaChange] = ()) -> Plan:
    """The predicted error of every query of ``queries`` on a collection of ``schema``, before any data.

    ``devices`` x ``rows_per_device`` rows released by E at ``epsilon``. Worst case over the private
    values of every row, with the public part of ``prior``; with a ``prior``, also the error for
    rows in its proportions. E's eq. 17 estimator (standard error, half-width at ``level``, eq. 20
    bound), each frequency oracle beside it and the mechanism to choose; the inverse answers for
    ``target_halfwidth``; E's error under each of ``changes``. Exact closed forms, vectorised over
    the queries (module docstring).

    Parameters
    ----------
    schema : Schema
        The planned collection's schema.
    queries : QueryBatch or sequence of Query
        Query objects (:mod:`ldpsynth.shared.queries.builders`), or a batch already compiled for
        ``schema``.
    devices : int
        Devices reporting: an integer >= 1.
    rows_per_device : int, default 1
        Rows each device reports: an integer >= 1 (``devices x rows_per_device`` must equal the
        rows of a dense query).
    prior : RowDistribution or None, default None
        The rows' distribution over ``schema`` (:mod:`ldpsynth.shared.planning.row_distribution`);
        ``None``: public part uniform over the public domain, worst case only.
    epsilon : float or None, default None
        The ε to plan for: a finite number > 0; ``None``: the schema's.
    level : float, default 0.95
        Confidence level of the half-widths: a number in (0, 1).
    target_halfwidth : float or None, default None
        A half-width to reach: a finite number > 0; the plan then says the devices and the ε each
        query needs for it. ``None``: no inverse question.
    changes : sequence of SchemaChange, default ()
        Schema changes to compare
        (:func:`~ldpsynth.shared.planning.schema_changes.schema_changes`).

    Returns
    -------
    Plan
        Per query: the feasible range, E's figures, the eq. 20 bound, each oracle's figures, a
        status; the inverse answers and the alternatives (:class:`Plan`).

    Raises
    ------
    ValidationError
        Naming ``devices``, ``rows_per_device``, ``level``, ``epsilon``, ``target_halfwidth``,
        ``prior`` (a distribution over another schema), ``queries`` (a batch compiled for another
        schema) or ``queries[j]...`` (a query that does not compile for ``schema``).
    """
    devices = check_int(devices, "devices", 1)
    rows_per_device = check_int(rows_per_device, "rows_per_device", 1)
    level = check_probability(level, "level")
    eps = schema.epsilon if epsilon is None else check_epsilon(epsilon)
    batch = queries if isinstance(queries, QueryBatch) else compile_queries(list(queries), schema)
    if batch.schema != schema:
        raise ValidationError("queries", "a batch compiled for the planned schema", "compiled for another schema")
    if prior is not None and prior.schema != schema:
        raise ValidationError("prior", "rows of the planned schema", "a distribution over another schema")
    n = devices * rows_per_device
    _check_dense_rows(batch, n)
    k = schema.private_domain_size
    mechanism = MechanismE(eps, k)
    rows = prior if prior is not None else UniformRows(schema)
    with_prior = prior is not None
    norms = np.empty(batch.size, np.int8)
    for block in batch.blocks:
        norms[block.positions] = block.normalization
    m = moments(batch, rows)
    z_norm = normalisers(m, norms, n)
    z_level = NormalDist().inv_cdf(0.5 + level / 2.0)
    a, b = e_coefficients(mechanism)
    worst, prior_var = variances(m, a, b, n, z_norm)
    e = Figures.of(worst, prior_var, with_prior)
    with np.errstate(divide="ignore", invalid="ignore"):
        range_ = n * m.width / z_norm
    inverse = None if target_halfwidth is None else _inverse(
        target_halfwidth, m, norms, n, rows_per_device, z_norm, z_level, k, worst, prior_var, with_prior)
    choices = [Choice("E", mechanism.epsilon, e, *_costs(mechanism), 1.0),
               *_oracle_choices(m, eps, k, n, z_norm, with_prior, e)]
    recommended, why = recommend(choices)
    alternatives = []
    for change in changes:
        cm = moments(batch, rows, change)
        changed = MechanismE(eps, change.domain_size) if change.domain_size >= 2 else None
        with np.errstate(divide="ignore", invalid="ignore"):
            bias_worst = n * np.maximum(cm.bias_high, -cm.bias_low) / z_norm + 0.0  # no -0.0
            bias_prior = n * cm.bias_prior / z_norm
        alternatives.append(Alternative(change, _e_figures(cm, changed, n, z_norm, with_prior), bias_worst,
                                        bias_prior if with_prior else None))
    return Plan(
        batch=batch, normalization=norms, devices=devices,
        rows_per_device=rows_per_device, epsilon=mechanism.epsilon, domain_size=k, level=level, z=z_level,
        composition=f"public part and prior: {rows.description}" if with_prior else
        "public part uniform over the public domain (no prior)",
        range=range_, e=e, bound=_bounds(m, norms, n, mechanism),
        status=_status(range_, z_level * e.headline, z_norm),
        inverse=inverse, alternatives=tuple(alternatives), choices=tuple(choices), recommended=recommended,
        recommendation=why)


def planned_groups(schema: Schema, rows: RowDistribution, n: int) -> tuple[list[str], np.ndarray]:
    """The public-key groups of ``n`` planned rows and their planned counts (floor of n x share): the
    prior's keys, or every key of the public domain at n / (its size) (one line for them all)."""
    from ldpsynth.shared.guarantees import key_names
    from ldpsynth.shared.planning.row_distribution import SampleRows

    if isinstance(rows, SampleRows) and schema.public_attributes:
        shares = rows.stats.group_sizes / float(rows.stats.n)
        return key_names(schema, rows.stats.present_keys), np.floor(n * shares).astype(np.int64)
    size = schema.public_domain_size
    label = "all rows" if size == 1 else f"each of the {size:,} public keys (uniform)"
    return [label], np.array([n // size], np.int64)


def plan_shuffle(p: Plan, schema: Schema, queries: QueryBatch, *, prior: RowDistribution | None = None,
                 delta: float | None = None, min_batch: int | None = None, shuffler: str | None = None,
                 target_central_epsilon: float | None = None) -> Plan:
    """``p`` with its :class:`ShufflePlan`: the collection behind a shuffler (module docstring).

    ``delta``, ``min_batch`` and ``shuffler`` default to the schema's shuffle block (δ = 1e-9, a minimum
    batch of 1 and "aggregator-operator" without one); the target central ε defaults to the plan's ε
    (the same promise, made centrally). Needs the accountant (scipy).
    """
    from ldpsynth.shared import guarantees
    from ldpsynth.shared.schema import ShuffleSpec

    base = schema.shuffle
    spec = ShuffleSpec(delta if delta is not None else (base.delta if base else 1e-9),
                       min_batch if min_batch is not None else (base.min_batch if base else 1),
                       p.rows_per_device, shuffler if shuffler is not None else
                       (base.shuffler if base else "aggregator-operator"))
    target = p.epsilon if target_central_epsilon is None else check_epsilon(target_central_epsilon,
                                                                            "target_central_epsilon")
    rows = prior if prior is not None else UniformRows(schema)
    labels, counts = planned_groups(schema, rows, p.n)
    k = p.domain_size
    at_planned = guarantees.compute(guarantees.RELEASE, p.epsilon, k, spec, labels, counts)
    live = counts[counts >= p.rows_per_device]
    epsilon0 = central = shuffled = None
    if live.size:
        weakest = int(live.min())
        epsilon0 = min(MAX_EPSILON, guarantees.local_epsilon_for(target, k, weakest, spec.delta, p.rows_per_device))
        central = guarantees.central_at(epsilon0, k, weakest // p.rows_per_device, spec.delta, p.rows_per_device)
        shuffled = plan(schema, queries, p.devices, rows_per_device=p.rows_per_device, prior=prior,
                        epsilon=epsilon0, level=p.level).e
    at_target = plan(schema, queries, p.devices, rows_per_device=p.rows_per_device, prior=prior, epsilon=target,
                     level=p.level)
    oracles = tuple(c for c in at_target.choices if c.mechanism != "E")
    recommended, why = "E", "no group has a report: nothing to compare"
    if shuffled is not None and epsilon0 is not None:  # E behind the shuffler against the oracles without one
        behind = replace(at_target.choice("E"), epsilon=epsilon0, figures=shuffled, error_ratio=1.0)
        oracles = tuple(c if c.figures is None else replace(c, error_ratio=_ratio(c.figures, shuffled))
                        for c in oracles)
        ranked = list(oracles)
        recommended, why = recommend([behind, *ranked])
        ratios = ", ".join(f"{c.mechanism} {c.error_ratio:.3g}" for c in ranked if c.available)
        why = (f"E behind the shuffler at ε0 = {epsilon0:.4g}: the oracles without a shuffler at local ε = {target:g} "
               f"have standard errors {ratios} times its (geometric mean over the queries)" if recommended == "E" else
               why.replace("x E's", "x those of E behind the shuffler") + " (no shuffler)")
    return replace(p, shuffle=ShufflePlan(spec.delta, spec.min_batch, spec.shuffler, spec.against, at_planned,
                                          counts < spec.min_batch, target, epsilon0, central, shuffled, at_target.e,
                                          oracles, recommended, why))
