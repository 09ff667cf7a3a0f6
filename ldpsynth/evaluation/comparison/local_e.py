"""Mechanism E as a contestant of the comparison harness: local randomized response + companion estimators.

Every row's private value goes through mechanism E on its own device (WYZ eq. 16 with the
delivered ε of :class:`~ldpsynth.shared.mechanism.MechanismE`); the public label travels in clear.
The workload is answered from the perturbed rows by the unbiased companion estimator (eq. 17,
:func:`ldpsynth.shared.estimators.engine.estimate`), the same code the aggregator runs. The release is a
synthetic *database* (the perturbed rows), not a distribution that answers queries directly, so
:attr:`CentralRelease.distribution` is None and the estimates are the answers.

Guarantee: each row is ε-LDP on its own (the likelihood ratio of any two values is at most
:math:`e^\\epsilon`), which implies central ε-DP under the replace-one-value neighbour notion.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ldpsynth.evaluation.comparison.releases import CentralRelease
from ldpsynth.evaluation.comparison.workloads import Histogram, Workload
from ldpsynth.evaluation.primitives.guarantee import Neighbours, PrivacyGuarantee
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators.engine import estimate
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.validation import check_epsilon

LABEL = "label"
VALUE = "value"


def joint_schema(groups: int, k: int, epsilon: float) -> Schema:
    """A collection with public ``label`` in [0, G) (none when G = 1) and private ``value`` in [0, k)."""
    attributes = [{"name": VALUE, "type": "integer", "min": 0, "max": k - 1}]
    if groups > 1:
        attributes.insert(0, {"name": LABEL, "type": "integer", "min": 0, "max": groups - 1, "public": True})
    return Schema.from_json({"name": "comparison", "epsilon": epsilon, "attributes": attributes})


@dataclass(frozen=True)
class LocalE:
    """Mechanism E on every row + the companion estimator (see the module docstring)."""

    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))

    @property
    def name(self) -> str:
        return f"E (local, ε={self.epsilon:g})"

    def release(self, data: Histogram | npt.ArrayLike, workload: Workload, rng: np.random.Generator) -> CentralRelease:
        hist = workload.check_histogram(data)
        schema = joint_schema(hist.groups, hist.k, self.epsilon)
        mechanism = MechanismCard.for_schema(schema).mechanism
        started = time.perf_counter()
        labels, values = hist.rows()
        perturbed = mechanism.perturb(values, rng)                       # eq. 16, one draw per row
        stats = SufficientStatistics.from_schema(schema, labels if hist.groups > 1 else None, perturbed)
        batch = workload.to_batch(schema, LABEL if hist.groups > 1 else None)
        answers = estimate(batch, stats, mechanism)                      # eq. 17
        guarantee = PrivacyGuarantee(mechanism.epsilon, 0.0, Neighbours.LOCAL, "mechanism E per row (delivered ε)")
        return CentralRelease(self.name, answers.estimate, None, hist.n, guarantee,
                              {"std_error": answers.std_error, "bound_eq20": answers.bound,
                               "seconds": time.perf_counter() - started})
