"""Mechanism E behind a shuffler as a contestant of the comparison harness, at a *central* ε.

The central mechanisms promise central (ε, δ)-DP; plain E promises ε-LDP per row, a different (and
stronger) promise at the same number. Behind a shuffler (docs/shuffle-accountant.md §1) E at local ε0 is central
(ε, δ)-DP with ε far below ε0 (:mod:`ldpsynth.shared.amplification`), so E can be set beside the
central mechanisms at the *same* central ε: for the figure's ε, ε0 = ``local_epsilon_for(ε, |D|, n, δ)``,
then E at ε0 and the companion estimator (eq. 17). Two ways to hold the label:

* :class:`ShuffledE` (``e-shuffled``): the label (the movie) is public and travels in clear, so a
  report hides only among the reports of its label: n is the **smallest label group** (every group
  then gets at most ε). Central (ε, δ)-DP under replace-one private value (labels public, as the
  central mechanisms' guarantees here), and ε0-LDP per row against everyone.
* :class:`ShuffledE` with ``private_label`` (``e-shuffled-private-label``): the label is private too,
  randomised with the value over the joint domain (|D| = G·k); every report hides among all n, so ε0
  is much larger, at the price of a larger domain. The answers' normaliser (WYZ eq. 10, which needs
  the group sizes) uses the group sizes estimated from the same release. Central (ε, δ)-DP under
  replace-one row (a row may change its label and its value).

Each release is E at ε0 with a seeded numpy Generator (a simulation); ε0 is cached per (ε, |D|, n, δ).
Needs scipy (the accountant).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ldpsynth.evaluation.comparison.local_e import LocalE, joint_schema
from ldpsynth.evaluation.comparison.releases import CentralRelease
from ldpsynth.evaluation.comparison.workloads import Histogram, Workload
from ldpsynth.evaluation.primitives.guarantee import Neighbours, PrivacyGuarantee
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.validation import check_epsilon, check_probability

#: δ of the central guarantee unless told otherwise.
DEFAULT_DELTA = 1e-9


@functools.lru_cache(maxsize=256)
def local_epsilon(central: float, k: int, n: int, delta: float) -> float:
    """ε0 for central ε at n reports over a domain of k values (the accountant's inverse, cached)."""
    from ldpsynth.shared.amplification import local_epsilon_for

    return local_epsilon_for(central, k, n, delta)


@dataclass(frozen=True)
class ShuffledE:
    """E at the local ε0 that a shuffler amplifies to central (``epsilon``, ``delta``) (module docstring)."""

    epsilon: float
    delta: float = DEFAULT_DELTA
    private_label: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "delta", check_probability(self.delta, "delta"))

    @property
    def name(self) -> str:
        where = ", label private" if self.private_label else ""
        return f"E behind a shuffler{where} (central ({self.epsilon:g}, {self.delta:g})-DP)"

    def release(self, data: Histogram | npt.ArrayLike, workload: Workload, rng: np.random.Generator) -> CentralRelease:
        hist = workload.check_histogram(data)
        if self.private_label and hist.groups > 1:
            return self._joint(hist, workload, rng)
        sizes = hist.group_sizes[hist.group_sizes > 0]
        n = int(sizes.min())
        epsilon0 = local_epsilon(self.epsilon, hist.k, n, self.delta)
        inner = LocalE(epsilon0).release(hist, workload, rng)
        delivered = inner.guarantee.epsilon
        statement = (f"E at local ε0 = {delivered:.6g} per row (ε0-LDP against everyone) behind a shuffler; labels "
                     f"public, so a report hides among its label's reports: the accountant's blanket bound at the "
                     f"smallest label group (n = {n:,}, |D| = {hist.k}) gives central ({self.epsilon:g}, "
                     f"{self.delta:g}) for every group")
        guarantee = PrivacyGuarantee(self.epsilon, self.delta, Neighbours.REPLACE_ONE_VALUE, statement)
        return CentralRelease(self.name, inner.answers, None, hist.n, guarantee,
                              {**inner.details, "epsilon0": delivered})

    def _joint(self, hist: Histogram, workload: Workload, rng: np.random.Generator) -> CentralRelease:
        k = hist.groups * hist.k
        epsilon0 = local_epsilon(self.epsilon, k, hist.n, self.delta)
        mechanism = MechanismCard.for_schema(joint_schema(1, k, epsilon0)).mechanism_e
        started = time.perf_counter()
        labels, values = hist.rows()
        perturbed = mechanism.perturb(labels * hist.k + values, rng)        # eq. 16 over label x value
        counts = np.bincount(perturbed, minlength=k).astype(np.float64)
        p, q = mechanism.keep_probability, mechanism.lie_probability
        table = ((counts - q * hist.n) / (p - q)).reshape(hist.groups, hist.k)  # eq. 17's histogram estimate
        sizes = np.maximum(table.sum(axis=1), 0.0)                            # the group sizes, estimated
        answers = workload.answers(table, sizes)
        statement = (f"E at local ε0 = {mechanism.epsilon:.6g} per row over label x value (|D| = {k:,}; ε0-LDP "
                     f"against everyone) behind a shuffler; every report hides among all n = {hist.n:,}: the "
                     f"accountant's blanket bound gives central ({self.epsilon:g}, {self.delta:g})")
        guarantee = PrivacyGuarantee(self.epsilon, self.delta, Neighbours.REPLACE_ONE_ROW, statement)
        return CentralRelease(self.name, answers, None, hist.n, guarantee,
                              {"epsilon0": mechanism.epsilon, "seconds": time.perf_counter() - started})
