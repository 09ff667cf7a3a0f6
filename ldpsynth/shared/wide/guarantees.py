"""The guarantees of a wide collection's parent answers: the worst over the views and groups read (issue 39).

**The argument (parallel composition over disjoint devices, McSherry09).** Each device reports in exactly one
view: its view is a function of its device key and the public salt only (:mod:`.assignment`), never of its row,
and its report goes to that view's sub-collection, where the shuffler pools it with the reports of the same
sub-collection and public key. Take two inputs that differ in one device's row. That device's view V is the same
in both, so the reports of every other view have the same distribution in both, and they are independent of V's
reports (each device randomizes with its own coins). The parent's answers are post-processing of the views'
reports: any answer, or the whole batch, is a function of the joint output, so for every event S,

.. math::  P[A \\in S \\mid x] \\le e^{\\varepsilon_V} P[A \\in S \\mid x'] + \\delta_V,

where :math:`(\\varepsilon_V, \\delta_V)` is what V's sub-collection guarantees that party for its reports
(local: :math:`m\\varepsilon_0`; shuffled: the central guarantee at its pool floor, docs/shuffle-accountant.md
§6). Integrating out the independent other views keeps the inequality. Since any device may be the one that
differs, the batch is :math:`(\\max_V \\varepsilon_V, \\max_V \\delta_V)`-DP per device against that party, the
maxima over the views it reads (a view it does not read contributes nothing); within a view the guarantee is
already stated per device at the pool floor of any public-key group, so the groups add no term. The
sub-collections share one ε and one shuffle spec (the wide schema's), but each view has its own cells |D|, so
their central ε differ.

:func:`combine` states that: the per-view statements' largest central (ε, δ) (or the local guarantee if any view
read is not amplified), the groups read labelled ``"<sub-collection>: <group>"`` with their reports, the withheld
(view, group) pairs and reports summed. :func:`parent_guarantees` builds the per-view statements from the views'
statistics, as the server does for any collection (:func:`~ldpsynth.shared.guarantees.of_card`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from ..errors import ValidationError
from ..estimators.eligible import by_group
from ..estimators.engine import Statistics
from ..guarantees import ANSWERS, Guarantees, key_names, of_card, withhold
from .collection import WideCard
from .parent import WideAnswers

__all__ = ["combine", "parent_guarantees", "views_read"]


def combine(parts: Sequence[tuple[str, Guarantees]]) -> Guarantees:
    """One statement for answers reading the views of ``parts`` (sub-collection name, its statement): per party
    the largest (ε, δ) over them (module docstring). The statements must share scope, shuffle spec and rows per
    device (a ValidationError naming ``guarantees`` otherwise: the argument needs one spec)."""
    if not parts:
        raise ValidationError("guarantees", "the statement of at least one view", "got none")
    first = parts[0][1]
    for name, g in parts:
        if (g.scope, g.shuffle, g.rows_per_device) != (first.scope, first.shuffle, first.rows_per_device):
            raise ValidationError("guarantees", "the views' statements under one scope, shuffle spec and rows per "
                                  "device (one wide schema)", f"{name!r} differs from {parts[0][0]!r}")
    local = max(g.local_epsilon for _, g in parts)
    worst = max((g for _, g in parts), key=lambda g: (g.central or (0.0, 0.0), g.local_epsilon))
    labels = tuple(f"{name}: {label}" for name, g in parts for label in g.labels)
    counts = np.concatenate([np.asarray(g.counts if g.counts is not None else np.zeros(len(g.labels)), np.int64)
                             for _, g in parts])
    stated = replace(first, local_epsilon=local, domain_size=worst.domain_size, labels=labels, counts=counts,
                     withheld_groups=sum(g.withheld_groups for _, g in parts),
                     withheld_reports=sum(g.withheld_reports for _, g in parts), central=None, evaluated_at=0,
                     note="")
    missing = [g for _, g in parts if g.shuffle is not None and g.central is None]
    if first.shuffle is None:
        return stated
    if missing:                                      # not computed in some view: nothing stronger than local
        return replace(stated, note=missing[0].note)
    if any(not g.evaluated_at for _, g in parts):    # a view too small to amplify: the local guarantee
        return replace(stated, central=(first.rows_per_device * local, 0.0))
    assert all(g.central is not None for _, g in parts)
    epsilon = max(g.central[0] for _, g in parts if g.central is not None)
    delta = max(g.central[1] for _, g in parts if g.central is not None)
    return replace(stated, central=(epsilon, delta), evaluated_at=min(g.evaluated_at for _, g in parts))


def parent_guarantees(card: WideCard, statistics: Sequence[Statistics], read: Sequence[int]) -> Guarantees | None:
    """The statement of answers reading the views ``read`` (indices into the card's views) from each view
    sub-collection's ``statistics`` (all its reports): per view the groups at or above the minimum batch with
    their reports and the ones withheld, combined (:func:`combine`). ``None`` when the collection states none
    (not shuffled and nothing withheld: as any collection, :func:`~ldpsynth.shared.estimators.eligible.by_group`)."""
    parts = []
    for i in sorted(set(read)):
        sub, stats = card.cards[i], statistics[i]
        if not by_group(sub.schema):
            return None
        rule = withhold(sub.schema.minimum_batch[0], stats.group_sizes)
        labels = key_names(sub.schema, stats.present_keys[rule.kept])
        parts.append((sub.schema.name, of_card(sub, ANSWERS, labels, stats.group_sizes[rule.kept], withheld=rule)))
    stated = combine(parts)
    return stated if stated.shuffle is not None or stated.withheld_groups else None


def views_read(card: WideCard, answers: WideAnswers) -> list[int]:
    """The card's views ``answers`` read: the views its analytic answers combine, and every view when an
    answer comes from the model (fitted to all) or none names a view (constant answers still scale by N)."""
    if answers.modelled or not answers.views:
        return list(range(len(card.cards)))
    read = {frozenset(v) for v in answers.views}
    return [i for i, sub in enumerate(card.cards) if frozenset(a.name for a in sub.schema.private_attributes) in read]
