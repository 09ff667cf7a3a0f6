"""A numeric attribute as a collection's private attribute: its mechanism (report = output index) and the
answers (mean, sum) computed from the stored counts per (public key, report). See docs/numeric.md,
"The collection mode"."""

from .answers import GroupMean, numeric_means, release_means
from .mechanism import NumericMechanism, numeric_mechanism

__all__ = ["GroupMean", "NumericMechanism", "numeric_means", "numeric_mechanism", "release_means"]
