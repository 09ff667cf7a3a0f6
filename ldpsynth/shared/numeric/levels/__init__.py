"""A numeric attribute's declared levels (``step``) and SW's distribution fitted on them. See docs/numeric.md,
"Declared levels"."""

from .declared import MAX_INTERVALS, NumericLevels
from .fit import FOLDS, PLAIN_ABOVE, LevelModel
from .intervals import QuantileIntervals, invert_cdf, quantile_intervals

__all__ = ["MAX_INTERVALS", "FOLDS", "PLAIN_ABOVE", "LevelModel", "NumericLevels", "QuantileIntervals", "invert_cdf",
           "quantile_intervals"]
