"""A numeric attribute as a collection's private attribute: its mechanism (report = output index) and the
answers (HM: mean, sum; SW: quantiles) computed from the stored counts per (public key, report). See docs/numeric.md,
"The collection mode"."""

from .answers import GroupMean, GroupQuantiles, numeric_means, numeric_quantiles, release_means, release_quantiles
from .mechanism import NumericMechanism, numeric_mechanism

__all__ = ["GroupMean", "GroupQuantiles", "NumericMechanism", "numeric_means", "numeric_mechanism", "numeric_quantiles",
           "release_means", "release_quantiles"]
