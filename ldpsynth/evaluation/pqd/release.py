"""An ldpsynth release (mechanism E, WYZ eq. 16) as a synthetic table: the deciders then certify our own answers.

A release is the perturbed rows Y plus the mechanism card. The companion estimator (WYZ
eq. 17) of any statistical query is linear in the unbiased histogram estimate

.. math::  \\hat h_g(v) = \\frac{N[g, v] - q\\,n_g}{r}, \\qquad r = p - q,

(:mod:`ldpsynth.shared.estimators.formulas`: :math:`p, q` the card's keep and lie probabilities,
:math:`N[g, v]` the released counts per public key g and private value v). :func:`release_table`
decodes every cell (g, v) into attribute values and gives it the weight :math:`\\hat h_g(v)`;
then :meth:`~.query.Query.answer` on that weighted table *is* eq. 17 for COUNT
(:math:`\\varphi = 1\\{\\text{WHERE}\\}`) and SUM (:math:`\\varphi = A \\cdot 1\\{\\text{WHERE}\\}`), and a
post-processing of it for quantiles (negative cell estimates count as 0). Continuous attributes
are represented by their bucket lower edges, as in the export (WYZ §V-A discretisation).
The release is ε-DP already, so the synthetic answer costs no further privacy.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ldpsynth.evaluation.pqd.table import Table
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators.formulas import Debias
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.release import Release


def _column(values: np.ndarray) -> np.ndarray:
    """Decoded attribute values as float64 when they are all numbers, else text."""
    if values.dtype.kind in "iuf":
        return values.astype(np.float64)
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values.tolist()):
        return values.astype(np.float64)
    return np.array([str(v) for v in values.tolist()], dtype=object)


def release_table(stats: SufficientStatistics, card: MechanismCard) -> Table:
    """One row per released cell (public key, private value), weighted by :math:`\\hat h_g(v)` (eq. 17)."""
    debias = Debias.of(card.mechanism_e)
    k = stats.domain_size
    estimate = (stats.table - debias.q * stats.group_sizes[:, None]) / debias.r
    keys = np.repeat(stats.present_keys, k)
    codes = np.tile(np.arange(k, dtype=np.int64), len(stats.present_keys))
    columns = {**card.schema.decode_public(keys), **card.schema.decode_private(codes)}
    return Table({name: _column(np.asarray(col)) for name, col in columns.items()}, weights=estimate.reshape(-1),
                 name="release")


def load_release(synthetic: str | Path, card: str | Path) -> Table:
    """:func:`release_table` of an exported release: its CSV (as ``ldpsynth estimate`` reads it) and card."""
    release = Release.read(synthetic, card=MechanismCard.load(card), field="--synthetic")
    stats = SufficientStatistics.from_schema(release.card.schema, release.public_keys(), release.private_codes())
    return release_table(stats, release.card)
