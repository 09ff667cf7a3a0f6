"""Numeric attributes: exact samplers on [−1, 1] (Duchi et al., PM, HM, SW) and their estimators.

:mod:`.scale` maps a declared range onto [−1, 1], :mod:`.grid` is the exact grid and its privacy check,
:mod:`.samplers` the device samplers, :mod:`.closed_form` the papers' variances, :mod:`.estimators`
the means, sums, intervals and SW's EMS distribution, :mod:`.levels` a declared ``step`` and SW's EM on its
levels. See docs/numeric.md.
"""

from .grid import GridLaw, satisfies_epsilon_dp, worst_case_ratio
from .samplers import Duchi, HybridMechanism, PiecewiseMechanism, SquareWave
from .scale import NumericRange

__all__ = ["Duchi", "GridLaw", "HybridMechanism", "NumericRange", "PiecewiseMechanism", "SquareWave",
           "satisfies_epsilon_dp", "worst_case_ratio"]
