"""Planning a shuffled collection: the collection behind a shuffler (docs/planning.md), :func:`plan_shuffle`.

The guarantees per party at the planned ε0 (the shuffle accountant, :mod:`ldpsynth.shared.guarantees`: the
central (ε, δ) at the pool floor, ``min_batch`` less the ``assume_injected`` reports, against analysts and,
with an independent shuffler, the aggregator's operator), the planned public-key groups and those a release
would withhold (below the minimum batch); for a target central ε, the ε0 that reaches it at the pool floor
and every query's error at that ε0; each frequency oracle behind the shuffler at the ε0 its own bound (FMT21's
clones, :func:`~ldpsynth.shared.mechanisms.registry.shuffle_bound`) gives for the target, and its error there;
beside them plain LDP at the target (E and each frequency oracle): the same closed forms at each ε, and which
to choose among the mechanisms behind the shuffler. Needs the accountant (scipy).

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.planning.shuffled``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ldpsynth.shared import amplification, guarantees
from ldpsynth.shared.mechanisms.registry import shuffle_bound
from ldpsynth.shared.planning.choice import ORACLE_NAMES, error_ratio, recommend
from ldpsynth.shared.planning.inverse import MAX_EPSILON
from ldpsynth.shared.planning.planner import Plan, ShuffledChoice, ShufflePlan, plan
from ldpsynth.shared.planning.row_distribution import RowDistribution, SampleRows, UniformRows
from ldpsynth.shared.planning.variances import Figures
from ldpsynth.shared.queries.batch import QueryBatch
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.shuffle_spec import ShuffleSpec
from ldpsynth.shared.validation import check_epsilon

__all__ = ["planned_groups", "shuffle_spec", "plan_shuffle"]


def shuffle_spec(schema: Schema, rows_per_device: int, *, delta: float | None = None, min_batch: int | None = None,
                 shuffler: str | None = None, assume_injected: int | None = None) -> ShuffleSpec:
    """The planned shuffle: each argument given, else the schema's shuffle block's, else δ = 1e-9, a minimum
    batch of 1, "aggregator-operator" and one device's quota injected (the block's F only with its own batch)."""
    base = schema.shuffle
    return ShuffleSpec(delta if delta is not None else (base.delta if base else 1e-9),
                       min_batch if min_batch is not None else (base.min_batch if base else 1),
                       rows_per_device, shuffler if shuffler is not None else
                       (base.shuffler if base else "aggregator-operator"),
                       assume_injected if assume_injected is not None else
                       (base.assume_injected if base and min_batch is None else None))


def planned_groups(schema: Schema, rows: RowDistribution | None, n: int) -> tuple[list[str], np.ndarray]:
    """The public-key groups of ``n`` planned rows and their planned counts (floor of n x share): the
    prior's keys (a :class:`SampleRows`), or every key of the public domain at n / (its size) (one line for
    them all)."""
    if isinstance(rows, SampleRows) and schema.public_attributes:
        shares = rows.stats.group_sizes / float(rows.stats.n)
        return guarantees.key_names(schema, rows.stats.present_keys), np.floor(n * shares).astype(np.int64)
    size = schema.public_domain_size
    label = "all rows" if size == 1 else f"each of the {size:,} public keys (uniform)"
    return [label], np.array([n // size], np.int64)


def plan_shuffle(p: Plan, schema: Schema, queries: QueryBatch, *, prior: RowDistribution | None = None,
                 delta: float | None = None, min_batch: int | None = None, shuffler: str | None = None,
                 assume_injected: int | None = None, target_central_epsilon: float | None = None) -> Plan:
    """``p`` with its :class:`ShufflePlan`: the collection behind a shuffler (module docstring).

    ``delta``, ``min_batch``, ``shuffler`` and ``assume_injected`` default to the schema's shuffle block (δ =
    1e-9, a minimum batch of 1, "aggregator-operator" and one device's quota without one); the target central
    ε defaults to the plan's ε (the same promise, made centrally). Needs the accountant (scipy).
    """
    spec = shuffle_spec(schema, p.rows_per_device, delta=delta, min_batch=min_batch, shuffler=shuffler,
                        assume_injected=assume_injected)
    target = p.epsilon if target_central_epsilon is None else check_epsilon(target_central_epsilon,
                                                                            "target_central_epsilon")
    rows = prior if prior is not None else UniformRows(schema)
    labels, counts = planned_groups(schema, rows, p.n)
    k = p.domain_size
    below = counts < spec.min_batch
    at_planned = guarantees.compute(guarantees.RELEASE, p.epsilon, k, spec, [x for x, b in zip(labels, below) if not b],
                                    counts[~below], withheld=guarantees.withhold(spec.min_batch, counts),
                                    mechanism=schema.mechanism)  # the collection's own bound
    m = p.rows_per_device
    per_round = spec.honest_per_pool // m
    epsilon0 = central = shuffled = None
    behind: list[ShuffledChoice] = []
    if per_round >= 1:
        epsilon0 = min(MAX_EPSILON, amplification.local_epsilon_for(target, k, per_round, spec.delta,
                                                                    reports_per_device=m))
        central = guarantees.central_at(epsilon0, k, per_round, spec.delta, m)
        shuffled = plan(schema, queries, p.devices, rows_per_device=m, prior=prior, epsilon=epsilon0,
                        level=p.level).e
        behind = _oracles_behind(schema, queries, p, prior, target, per_round, spec.delta, shuffled)
    at_target = plan(schema, queries, p.devices, rows_per_device=m, prior=prior, epsilon=target, level=p.level)
    oracles = tuple(c for c in at_target.choices if c.mechanism != "E")
    recommended, why = "E", "no group has a report: nothing to compare"
    if shuffled is not None and epsilon0 is not None:  # every mechanism behind the shuffler, against E's errors
        e_behind = replace(at_target.choice("E"), epsilon=epsilon0, figures=shuffled, error_ratio=1.0)
        oracles = tuple(c if c.figures is None else replace(c, error_ratio=error_ratio(c.figures, shuffled))
                        for c in oracles)
        recommended, why = recommend([e_behind, *(b.choice for b in behind)])
        at: dict[str, list[str]] = {}
        for b in behind:
            if b.choice.available:
                at.setdefault(f"{b.choice.epsilon:.4g}", []).append(b.choice.mechanism)
        epsilons = "; ".join(f"{', '.join(names)} at ε0 = {e}" for e, names in at.items())
        why = (why.replace("x E's", "x E's behind the shuffler") + f" (every mechanism behind the shuffler at the "
               f"ε0 for central ε = {target:g}: E at ε0 = {epsilon0:.4g} by the blanket bound; {epsilons} by "
               "FMT21's clones)")
    return replace(p, shuffle=ShufflePlan(spec.delta, spec.min_batch, spec.shuffler, spec.against, at_planned,
                                          labels, counts, below, target, epsilon0, central, shuffled, at_target.e,
                                          oracles, recommended, why, spec.injected, tuple(behind)))


def _oracles_behind(schema: Schema, queries: QueryBatch, p: Plan, prior: RowDistribution | None, target: float,
                    per_round: int, delta: float, e_shuffled: Figures) -> list[ShuffledChoice]:
    """Each frequency oracle behind the shuffler: at the ε0 its bound (:func:`shuffle_bound`, FMT21's clones)
    gives for central ε ``target`` at ``per_round`` reports per round, its figures there (``error_ratio``
    against E behind the shuffler, ``e_shuffled``), and the central ε at the ε0 it delivers (its card's)."""
    k, m = p.domain_size, p.rows_per_device
    at_bound: dict[str, Plan] = {}
    out = []
    for name in ORACLE_NAMES:
        bound = shuffle_bound(name)
        if bound not in at_bound:
            epsilon0 = min(MAX_EPSILON, amplification.local_epsilon_for(target, k, per_round, delta,
                                                                        reports_per_device=m, bound=bound))
            at_bound[bound] = plan(schema, queries, p.devices, rows_per_device=m, prior=prior, epsilon=epsilon0,
                                   level=p.level)
        c = at_bound[bound].choice(name)
        if c.figures is None:
            out.append(ShuffledChoice(c, bound, None))
            continue
        out.append(ShuffledChoice(replace(c, error_ratio=error_ratio(c.figures, e_shuffled)), bound,
                                  guarantees.central_at(c.epsilon, k, per_round, delta, m, bound=bound)))
    return out
