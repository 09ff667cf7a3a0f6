"""Planning a numeric collection behind a shuffler (docs/planning.md, "Behind a shuffler"): :func:`plan_mean_shuffled`.

Per mechanism of :func:`~ldpsynth.shared.planning.numeric.plan_mean` (HM, PM, Duchi, E over k levels), with the
accountant's bound for it (:func:`~ldpsynth.shared.mechanisms.registry.shuffle_bound`: E is k-RR, BBGN19's
blanket bound at its k levels; HM, and PM and Duchi, which are ε0-LDP randomizers other than k-RR like it, get
FMT21's clones, which do not depend on the report domain):

* the central (ε, δ) against each party at the planned ε0, at the pool floor ``min_batch − assume_injected``
  (:func:`ldpsynth.shared.guarantees.compute` on the card terms: mechanism, ε0, report domain, shuffle spec);
* the ε0 that reaches a target central ε there (:func:`ldpsynth.shared.amplification.local_epsilon_for` with
  that bound, capped at :data:`~ldpsynth.shared.planning.inverse.MAX_EPSILON`) and the central ε it gets;
* the mean's SE, bias and worst-case SE at that ε0 beside plain LDP at local ε = target (the same central ε,
  δ = 0, trusting no shuffler): the closed forms of :mod:`~ldpsynth.shared.planning.numeric` at the two ε;
* the one to choose: :func:`~ldpsynth.shared.planning.numeric.recommend_mean` over the shuffled rows.

One value per device (m = 1). Needs the accountant (scipy).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy.typing as npt

from ldpsynth.shared import amplification, guarantees
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanisms.registry import shuffle_bound
from ldpsynth.shared.numeric.collection.mechanism import numeric_mechanism
from ldpsynth.shared.planning.declared_levels import plan_levels
from ldpsynth.shared.planning.inverse import MAX_EPSILON
from ldpsynth.shared.planning.numeric import (
    MeanChoice,
    NumericPlan,
    level_centres,
    mean_error,
    plan_mean,
    recommend_mean,
)
from ldpsynth.shared.planning.shuffled import planned_groups, shuffle_spec
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.shuffle_spec import ShuffleSpec
from ldpsynth.shared.validation import check_epsilon, check_int

__all__ = ["ShuffledMean", "ShuffledNumericPlan", "card_mechanism", "plan_mean_shuffled"]


def card_mechanism(name: str) -> str:
    """The collection mechanism whose accountant bound row ``name`` of :func:`plan_mean` gets: ``"E"`` for E over
    levels (``"E/k"``), else ``"HM"`` (HM itself; PM and Duchi are no collection's mechanism, and like HM are
    ε0-LDP randomizers other than k-RR: FMT21's clones, module docstring)."""
    return "E" if name.startswith("E/") else "HM"


@dataclass(frozen=True)
class ShuffledMean:
    """One mechanism behind the shuffler (module docstring): the card mechanism and report domain the accountant
    is given, its bound, the guarantees at the planned ε0, the ε0 for the target and the central ε there, its
    error at that ε0 (``shuffled``) and at local ε = target (``plain``)."""

    mechanism: str
    card_mechanism: str
    domain_size: int
    bound: str
    at_planned: guarantees.Guarantees
    epsilon0: float
    central_at_epsilon0: float
    shuffled: MeanChoice
    plain: MeanChoice


@dataclass(frozen=True)
class ShuffledNumericPlan:
    """A numeric collection's mean behind a shuffler: the spec, the planned groups, one :class:`ShuffledMean` per
    mechanism, the recommendation among them and why."""

    planned: NumericPlan
    spec: ShuffleSpec
    labels: list[str]
    planned_reports: list[int]
    below_min_batch: list[bool]
    target: float
    rows: tuple[ShuffledMean, ...]
    recommended: str
    recommendation: str
    with_prior: bool

    def row(self, mechanism: str) -> ShuffledMean:
        return next(r for r in self.rows if r.mechanism == mechanism)


def plan_mean_shuffled(schema: Schema, devices: int, *, epsilon: float | None = None,
                       prior: npt.ArrayLike | None = None, levels: npt.ArrayLike | int | None = None,
                       delta: float | None = None, min_batch: int | None = None, shuffler: str | None = None,
                       assume_injected: int | None = None,
                       target_central_epsilon: float | None = None) -> ShuffledNumericPlan:
    """The mean of ``schema``'s numeric attribute behind a shuffler (module docstring), ``devices`` values at the
    planned ``epsilon`` (default the schema's); ``prior`` and ``levels`` as for :func:`plan_mean`, read with the
    attribute's declared step (:func:`~ldpsynth.shared.planning.declared_levels.plan_levels`: E over the declared
    levels, else ``levels`` or 16 equal buckets); the shuffle
    arguments as for :func:`~ldpsynth.shared.planning.shuffled.plan_shuffle` (default: the schema's block); the
    target central ε defaults to the planned ε."""
    attribute = schema.numeric
    if attribute is None:
        raise ValidationError("collection", "a schema with a numeric attribute", "it has none")
    eps = check_epsilon(schema.epsilon if epsilon is None else epsilon)
    n = check_int(devices, "devices", 1)
    target = eps if target_central_epsilon is None else check_epsilon(target_central_epsilon,
                                                                      "target_central_epsilon")
    spec = shuffle_spec(schema, 1, delta=delta, min_batch=min_batch, shuffler=shuffler,
                        assume_injected=assume_injected)
    labels, counts = planned_groups(schema, None, n)
    below = counts < spec.min_batch
    withheld = guarantees.withhold(spec.min_batch, counts)
    kept = [x for x, b in zip(labels, below) if not b]
    chosen = plan_levels(attribute, prior, levels)
    prior, levels = chosen.prior, chosen.levels
    domains = {"HM": numeric_mechanism("HM", eps).domain_size, "E": len(level_centres(attribute.range, levels))}
    floor = spec.honest_per_pool
    planned = plan_mean(eps, n, attribute.range, prior=prior, levels=levels)
    plain = plan_mean(target, n, attribute.range, prior=prior, levels=levels)
    accounts = {}
    for card, k in domains.items():  # the floor is at least one honest report (F <= min_batch - 1, m = 1)
        bound = shuffle_bound(card)
        at_planned = guarantees.compute(guarantees.RELEASE, eps, k, spec, kept, counts[~below], withheld=withheld,
                                        mechanism=card)
        epsilon0 = min(MAX_EPSILON, amplification.local_epsilon_for(target, k, floor, spec.delta, bound=bound))
        central = guarantees.central_at(epsilon0, k, floor, spec.delta, 1, bound=bound)
        at = plan_mean(epsilon0, n, attribute.range, prior=prior, levels=levels)
        accounts[card] = (k, bound, at_planned, epsilon0, central, at)
    rows = []
    for j, choice in enumerate(planned.choices):
        card = card_mechanism(choice.mechanism)
        k, bound, at_planned, epsilon0, central, at = accounts[card]
        rows.append(ShuffledMean(choice.mechanism, card, k, bound, at_planned, epsilon0, central, at.choices[j],
                                 plain.choices[j]))
    with_prior = prior is not None
    pick = recommend_mean([r.shuffled for r in rows], with_prior)
    best = next(r for r in rows if r.mechanism == pick)
    plain_best = next(c for c in plain.choices if c.mechanism == plain.recommended)
    what = "RMSE" if with_prior else "worst-case SE"
    why = (f"{pick} behind the shuffler at ε0 = {best.epsilon0:.4g} ({best.bound} bound): {what} of the mean "
           f"{mean_error(best.shuffled, with_prior):.4g}, where plain LDP at ε = {target:g} has "
           f"{mean_error(plain_best, with_prior):.4g} ({plain.recommended})")
    return ShuffledNumericPlan(planned, spec, labels, counts.tolist(), below.tolist(), target, tuple(rows), pick,
                               why, with_prior)
