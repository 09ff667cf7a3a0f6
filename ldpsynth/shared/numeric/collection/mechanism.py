"""A numeric collection's mechanism: HM or SW as a collection mechanism whose report is an output index.

A numeric attribute's device perturbs its value with an exact grid sampler
(:mod:`~ldpsynth.shared.numeric.samplers`): the report is the **index** of the sampler's output in its
finite output set, an integer in :math:`[0, K)`. So it travels in ``ReportBatch.private_codes`` exactly as
mechanism E's perturbed code does, the shards count reports per (public key, code) unchanged, and the
collection's report domain (the schema's ``private_domain_size``) is :math:`K`:

* **HM** (Wang2019ICDE §III-C): :math:`K = K_{PM} + 2`, PM's cells :math:`0 \\dots K_{PM} - 1`, then
  Duchi's :math:`-B, +B`; for means and sums.
* **SW** (Li2020SIGMOD): :math:`K` = its output cells; for distributions and quantiles (EMS).

The input code is the attribute's fixed point :math:`c` (:class:`~ldpsynth.shared.attributes.NumericAttribute`),
the value on [-1, 1] being :math:`x = c/2^{52} - 1`.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import numpy.typing as npt

from ...attributes import NUMERIC_CODE_BITS, NUMERIC_MECHANISMS
from ...validation import check_choice, check_codes
from ..samplers import ALPHA_BITS, HybridMechanism, SlidingWindow, SquareWave

__all__ = ["NumericMechanism", "numeric_mechanism"]

_CODES = (2 << NUMERIC_CODE_BITS) + 1


class NumericMechanism:
    """HM or SW (``name``) at ``epsilon``, reading the attribute's fixed-point codes (module docstring)."""

    def __init__(self, name: str, epsilon: float):
        self.name = check_choice(name, "mechanism", NUMERIC_MECHANISMS)
        self.sampler: HybridMechanism | SquareWave = HybridMechanism(epsilon) if name == "HM" else SquareWave(epsilon)
        self.epsilon_requested = self.sampler.epsilon_requested
        self.epsilon = self.sampler.epsilon
        self.domain_size = self.sampler.reports
        self.version = f"{self.name}/1"

    def unit(self, codes: npt.ArrayLike) -> np.ndarray:
        """The values on [-1, 1] of the attribute's fixed-point codes (checked: ``codes`` names an error)."""
        return check_codes(np.asarray(codes).reshape(-1), "codes", _CODES) / float(1 << NUMERIC_CODE_BITS) - 1.0

    def perturb_secure(self, codes: npt.ArrayLike) -> np.ndarray:
        """Output indices in ``[0, domain_size)`` of the values, from the OS CSPRNG (the device path)."""
        return self.sampler.perturb_secure(self.unit(codes))

    def perturb(self, codes: npt.ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """The same exact sampler on a seeded Generator's words (simulations and tests, not devices)."""
        return self.sampler.perturb(self.unit(codes), rng)

    def card_fields(self) -> dict[str, Any]:
        """The card's numbers, all recomputable from the schema: ε asked and delivered, the report domain and the
        sampler's grid and integer weights (``"sampler"``)."""
        s = self.sampler
        if isinstance(s, HybridMechanism):
            sampler = {"input_points": s.steps + 1, "alpha": f"{s.alpha_weight}/{1 << ALPHA_BITS}",
                       "pm": _window(s.pm),
                       "duchi": {"reports": 2, "keep_weight": str(s.duchi.keep), "lie_weight": str(s.duchi.lie),
                                 "denominator": str(s.duchi.denominator), "epsilon": s.duchi.epsilon}}
        else:
            sampler = {"buckets": s.buckets, **_window(s)}
        return {"epsilon_requested": self.epsilon_requested, "epsilon": self.epsilon, "domain_size": self.domain_size,
                "sampler": sampler}


def _window(s: SlidingWindow) -> dict[str, Any]:
    return {"reports": s.reports, "window": s.window, "keep_weight": str(s.keep), "lie_weight": str(s.lie),
            "denominator": str(s.denominator), "epsilon": s.epsilon}


@functools.lru_cache(maxsize=64)
def numeric_mechanism(name: str, epsilon: float) -> NumericMechanism:
    """:class:`NumericMechanism` ``name`` at ``epsilon``, built once per arguments (it is immutable once made);
    its ``domain_size`` is the collection's report domain."""
    return NumericMechanism(name, epsilon)
