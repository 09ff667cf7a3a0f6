"""Statistical queries (WYZ Def. 3, eqs. 9-10): the public names of the query modules.

One import for users; each part lives in its own module:

* :mod:`~ldpsynth.shared.queries.model`: the query kinds, their conditions and normalisations;
* :mod:`~ldpsynth.shared.queries.numeric`: a numeric collection's kinds (mean, sum, quantiles, histogram);
* :mod:`~ldpsynth.shared.queries.builders`: the builders (:func:`linear`, :func:`predicate`, ...);
* :mod:`~ldpsynth.shared.queries.json_form`: the JSON form (documented there), parsing and serialisation;
* :mod:`~ldpsynth.shared.queries.batch`: compiled batches (:class:`QueryBatch` and its blocks);
* :mod:`~ldpsynth.shared.queries.compiler`: :func:`compile_queries`, checking queries against a schema;
* :mod:`~ldpsynth.shared.queries.packed`: :func:`linear_batch` and :func:`grouped_batch` from weight arrays.
"""

from ldpsynth.shared.queries.batch import (
    Block,
    CutBlock,
    QueryBatch,
    RowBlock,
    TableBlock,
    concat_batches,
)
from ldpsynth.shared.queries.builders import (
    condition,
    cut,
    dense,
    grouped,
    histogram,
    linear,
    marginal,
    mean,
    predicate,
    quantiles,
    sum_,
    variance,
)
from ldpsynth.shared.queries.compiler import (
    MAX_QUERY_WEIGHTS,
    compile_queries,
)
from ldpsynth.shared.queries.json_form import (
    dumps_queries,
    queries_from_json,
    queries_to_json,
    query_from_json,
    query_to_json,
)
from ldpsynth.shared.queries.model import (
    EQ10,
    MEAN,
    NORMALIZATION_ALIASES,
    NORMALIZATIONS,
    OPERATORS,
    RANGE,
    SUM,
    BaseQuery,
    Condition,
    CutQuery,
    DenseQuery,
    GroupedQuery,
    LinearQuery,
    MarginalQuery,
    PredicateQuery,
    Query,
    Scalar,
    normalization_name,
)
from ldpsynth.shared.queries.numeric import (
    HistogramQuery,
    MeanQuery,
    NumericQuery,
    QuantilesQuery,
    SumQuery,
    VarianceQuery,
)
from ldpsynth.shared.queries.packed import (
    grouped_batch,
    linear_batch,
)

#: The union of the modules' ``__all__``.
__all__ = [
    "NORMALIZATIONS",
    "NORMALIZATION_ALIASES",
    "RANGE",
    "EQ10",
    "SUM",
    "MEAN",
    "normalization_name",
    "OPERATORS",
    "Scalar",
    "Condition",
    "BaseQuery",
    "LinearQuery",
    "PredicateQuery",
    "MarginalQuery",
    "GroupedQuery",
    "CutQuery",
    "DenseQuery",
    "Query",
    "linear",
    "condition",
    "predicate",
    "marginal",
    "grouped",
    "cut",
    "dense",
    "mean",
    "sum_",
    "variance",
    "quantiles",
    "histogram",
    "NumericQuery",
    "MeanQuery",
    "SumQuery",
    "VarianceQuery",
    "QuantilesQuery",
    "HistogramQuery",
    "query_to_json",
    "query_from_json",
    "queries_from_json",
    "queries_to_json",
    "dumps_queries",
    "TableBlock",
    "RowBlock",
    "CutBlock",
    "Block",
    "QueryBatch",
    "concat_batches",
    "MAX_QUERY_WEIGHTS",
    "compile_queries",
    "linear_batch",
    "grouped_batch",
]
