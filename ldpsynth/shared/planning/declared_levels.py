"""The prior and E's levels of a numeric attribute's plan, read with its declared ``step``: :func:`plan_levels`.

With ``step`` declared (:class:`~ldpsynth.shared.numeric.levels.NumericLevels`) the attribute's values are its L
levels :math:`v_k = lo + k(hi - lo)/N`, so E over exactly those levels has no bucketing bias
(:mod:`~ldpsynth.shared.planning.numeric`, the bias :math:`\\frac1n\\sum_i (u_{j(i)} - x_i) = 0`):

* E is planned over the L levels; E's levels given otherwise (K equal buckets, or other values) are refused: the
  levels are declared (a plan over coarser buckets is one of a collection without ``step``);
* a prior is read as the device reads a value: :meth:`~ldpsynth.shared.attributes.Attribute.encode`, the
  device's own check (a value off the levels by more than
  :data:`~ldpsynth.shared.numeric.levels.declared.LEVEL_TOLERANCE` step, outside the range or not a number is
  refused naming the field and its position, never the value), each value then replaced by its level
  :math:`v_k` exactly, as the device encodes it.

Without ``step``: the prior as numbers, E's levels as given (default :data:`DEFAULT_BUCKETS` equal buckets).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..attributes import NumericAttribute
from ..errors import ValidationError

__all__ = ["DEFAULT_BUCKETS", "PlanLevels", "plan_levels"]

#: E's equal buckets when the attribute declares no step and no levels are given.
DEFAULT_BUCKETS = 16


@dataclass(frozen=True, eq=False)
class PlanLevels:
    """The prior (values on the value scale, on the levels when declared) and E's levels (a number of equal buckets
    or the values) for :func:`~ldpsynth.shared.planning.numeric.plan_mean`; ``step``: the declared step or None."""

    prior: np.ndarray | None
    levels: np.ndarray | int
    step: float | None

    @property
    def count(self) -> int:
        """E's number of levels."""
        return self.levels if isinstance(self.levels, int) else int(np.unique(self.levels).size)


def plan_levels(attribute: NumericAttribute, prior: npt.ArrayLike | None = None,
                levels: npt.ArrayLike | int | None = None, *, prior_field: str = "prior",
                levels_field: str = "levels") -> PlanLevels:
    """The prior and E's levels of ``attribute``'s plan (module docstring). With a declared step, ``levels`` must be
    None or the declared levels themselves; errors name ``levels_field``, and ``prior_field: <attribute>`` for a
    value of the prior (at its position)."""
    declared = attribute.levels
    if declared is None:
        values = None if prior is None else np.asarray(prior, np.float64).reshape(-1)
        chosen = DEFAULT_BUCKETS if levels is None else levels
        return PlanLevels(values, int(chosen) if isinstance(chosen, (int, np.integer)) else np.asarray(chosen), None)
    grid = declared.values()
    if levels is not None and (isinstance(levels, (int, np.integer))
                               or not np.array_equal(np.unique(np.asarray(levels, np.float64)), grid)):
        raise ValidationError(levels_field, f"absent ({attribute.name!r} declares step {declared.step:g}: E is "
                              f"planned over its {declared.count} levels; for E over other levels, plan a "
                              "collection without step)", "given")
    if prior is None:
        return PlanLevels(None, grid, declared.step)
    try:
        codes = attribute.encode(prior)                  # the device's check and encoding
    except ValidationError as exc:
        raise ValidationError(f"{prior_field}: {attribute.name}", exc.legal, exc.problem, exc.position) from None
    return PlanLevels(grid[declared.index(attribute.decode(codes))], grid, declared.step)
