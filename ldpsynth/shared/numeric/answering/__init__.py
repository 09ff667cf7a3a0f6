"""A numeric collection's queries answered from its stored counts per (public key, report): the mean and sum (HM),
the quantiles and histogram (SW), overall or per value of a public attribute. The query service and the offline
estimator both answer through :func:`answer_numeric`. See docs/numeric.md, "The collection mode"."""

from .answers import REPLICATES, NumericAnswers, answer_numeric, group_counts
from .batch import MAX_BOOTSTRAP_GROUPS, NumericBatch, compile_numeric, concat_numeric

__all__ = ["MAX_BOOTSTRAP_GROUPS", "REPLICATES", "NumericAnswers", "NumericBatch", "answer_numeric", "compile_numeric",
           "concat_numeric", "group_counts"]
