"""A numeric attribute as a collection's private attribute: its mechanism (report = output index) and the
answers (mean, sum) computed from the stored counts per (public key, report). See docs/numeric.md,
"The collection mode"."""

from .mechanism import NumericMechanism, numeric_mechanism

__all__ = ["NumericMechanism", "numeric_mechanism"]
