"""The variance of a numeric attribute (issue 42): the second moment of HM/PM reports and the unbiased variance
with its delta-method SE, and the variance of SW's EMS histogram. docs/numeric.md, "The variance"."""

from .estimate import (
    VarianceEstimate,
    check_answerable,
    estimate_variance,
    estimate_variance_from_counts,
    histogram_variance,
)
from .second_moment import SecondMoment, closed_form_second_moment, second_moment

__all__ = ["SecondMoment", "VarianceEstimate", "check_answerable", "closed_form_second_moment", "estimate_variance",
           "estimate_variance_from_counts", "histogram_variance", "second_moment"]
