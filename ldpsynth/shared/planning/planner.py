"""Planning a collection: :func:`plan`, the error of every query of mechanism E and of the frequency oracles,
known before a single device reports, and the mechanism to choose.

WYZ eqs. 17-20 at a planned population: the ε-free sums (:mod:`~ldpsynth.shared.planning.moments`), E's
and the oracles' variances (:mod:`~ldpsynth.shared.planning.variances`, :mod:`~ldpsynth.shared.planning.choice`),
the feasible range and eq. 20's bound, the inverse questions (:mod:`~ldpsynth.shared.planning.inverse`) and
E's error under changed schemas; behind a shuffler: :mod:`~ldpsynth.shared.planning.shuffled`.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.planning.planner``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.formulas import rms_bound
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.planning.choice import CLOSE, ORACLE_NAMES, Choice, costs, oracle_choices, recommend
from ldpsynth.shared.planning.inverse import EPSILON_STEP, MAX_EPSILON, Inverse, inverse_answers
from ldpsynth.shared.planning.moments import Moments, moments
from ldpsynth.shared.planning.row_distribution import RowDistribution, UniformRows
from ldpsynth.shared.planning.schema_changes import SchemaChange
from ldpsynth.shared.planning.variances import Figures, e_coefficients, e_coefficients_at, normalisers, variances
from ldpsynth.shared.planning.views import ViewsPlan
from ldpsynth.shared.queries.batch import QueryBatch, RowBlock
from ldpsynth.shared.queries.compiler import compile_queries
from ldpsynth.shared.queries.model import NORMALIZATIONS, Query
from ldpsynth.shared.queries.numeric import NumericQuery
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.validation import check_epsilon, check_int, check_probability

# The names of moments, variances, choice and inverse stay public names of this module, as they were
# before those modules were split off.
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
    "ShuffledChoice",
    "Plan",
    "plan",
]

#: Status of a query in a plan.
OK, HOPELESS, CONSTANT, UNDEFINED = "ok", "hopeless", "constant", "undefined"


@dataclass(frozen=True, eq=False)
class Alternative:
    """E's error on the same queries under a changed schema (at the collection's ε); the bias of a
    coarser schema's answer (zeros for a public attribute)."""

    change: SchemaChange
    e: Figures
    bias_worst: np.ndarray
    bias_prior: np.ndarray | None


@dataclass(frozen=True, eq=False)
class ShuffledChoice:
    """A frequency oracle behind a shuffler: ``choice`` at the ε0 its ``bound`` gives for the target central ε
    (``choice.epsilon``, the ε0 it delivers; its figures there, ``error_ratio`` against E behind the shuffler),
    and ``central``, the central ε at that ε0 at the pool floor (None: unavailable for the schema)."""

    choice: Choice
    bound: str
    central: float | None


@dataclass(frozen=True, eq=False)
class ShufflePlan:
    """The planned collection behind a shuffler (:func:`~ldpsynth.shared.planning.shuffled.plan_shuffle`).

    ``at_planned``: the guarantees per party of a release at the plan's ε0 (the central one at the pool
    floor, ``min_batch - assume_injected`` honest reports); ``labels``/``planned_reports``: the public-key
    groups of the planned rows (floor of n times the group's share), ``below_min_batch`` marks those a
    release would withhold. ``target`` is the central ε asked for; ``epsilon0`` the ε0 that reaches it at
    the pool floor (None when the floor is below one report per round); ``shuffled`` E's
    errors at ``epsilon0``, ``plain`` E's at local ε = ``target`` (plain LDP, the same central promise);
    ``oracles`` the frequency oracles' at local ε = ``target`` (plain LDP), ``behind`` each oracle behind the
    shuffler at the ε0 FMT21's clone bound gives for the target (:class:`ShuffledChoice`), and ``recommended`` /
    ``recommendation`` the choice among the mechanisms behind the shuffler, E and ``behind`` (:func:`recommend`,
    every ratio taken against E behind the shuffler).
    """

    delta: float
    min_batch: int
    shuffler: str
    against: str
    at_planned: Any
    labels: list[str]
    planned_reports: np.ndarray
    below_min_batch: np.ndarray
    target: float
    epsilon0: float | None
    central_at_epsilon0: float | None
    shuffled: Figures | None
    plain: Figures
    oracles: tuple[Choice, ...] = ()
    recommended: str = "E"
    recommendation: str = ""
    assume_injected: int = 0
    behind: tuple[ShuffledChoice, ...] = ()


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
    (:func:`recommend`). ``views``: the views mode beside them (:mod:`~ldpsynth.shared.planning.views`), when asked.
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
    views: ViewsPlan | None = None

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


def _check_dense_rows(batch: QueryBatch, n: int) -> None:
    for block in batch.blocks:
        if isinstance(block, RowBlock) and block.weights.shape[1] != n:
            raise ValidationError("devices", f"devices x rows_per_device = {block.weights.shape[1]} (the rows of "
                                  f"dense query {batch.origins[block.positions[0]]})", f"got {n} rows")


def plan(schema: Schema, queries: QueryBatch | Sequence[Query | NumericQuery], devices: int, *,
         rows_per_device: int = 1, prior: RowDistribution | None = None, epsilon: float | None = None,
         level: float = 0.95, target_halfwidth: float | None = None, changes: Sequence[SchemaChange] = ()) -> Plan:
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
    inverse = None if target_halfwidth is None else inverse_answers(
        target_halfwidth, m, norms, n, rows_per_device, z_norm, z_level, k, worst, prior_var, with_prior)
    choices = [Choice("E", mechanism.epsilon, e, *costs(mechanism), 1.0),
               *oracle_choices(m, eps, k, n, z_norm, with_prior, e)]
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
