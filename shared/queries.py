"""Statistical queries (WYZ Def. 3, eqs. 9-10): the public names of the query modules.

One import for users; each part lives in its own module:

* :mod:`~ldpsynth.shared.query_model`: the query kinds, their conditions and normalisations;
* :mod:`~ldpsynth.shared.query_builders`: the builders (:func:`linear`, :func:`predicate`, ...);
* :mod:`~ldpsynth.shared.query_json`: the JSON form (documented there), parsing and serialisation;
* :mod:`~ldpsynth.shared.query_batch`: compiled batches (:class:`QueryBatch` and its blocks);
* :mod:`~ldpsynth.shared.query_compiler`: :func:`compile_queries`, checking queries against a schema;
* :mod:`~ldpsynth.shared.packed_batches`: :func:`linear_batch` and :func:`grouped_batch` from weight arrays.
"""

from .packed_batches import grouped_batch, linear_batch
from .query_batch import Block, CutBlock, QueryBatch, RowBlock, TableBlock, concat_batches
from .query_builders import condition, cut, dense, grouped, linear, marginal, predicate
from .query_compiler import MAX_QUERY_WEIGHTS, compile_queries
from .query_json import dumps_queries, queries_from_json, queries_to_json, query_from_json, query_to_json
from .query_model import (
    EQ10,
    MEAN,
    NORMALIZATION_ALIASES,
    NORMALIZATIONS,
    OPERATORS,
    RANGE,
    SUM,
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

__all__ = [
    # the model
    "NORMALIZATIONS", "NORMALIZATION_ALIASES", "RANGE", "EQ10", "SUM", "MEAN", "normalization_name", "OPERATORS",
    "Scalar", "Condition", "LinearQuery", "PredicateQuery", "MarginalQuery", "GroupedQuery", "CutQuery", "DenseQuery",
    "Query",
    # the builders
    "linear", "condition", "predicate", "marginal", "grouped", "cut", "dense",
    # JSON
    "query_to_json", "query_from_json", "queries_from_json", "queries_to_json", "dumps_queries",
    # compiled batches and compilation
    "TableBlock", "RowBlock", "CutBlock", "Block", "QueryBatch", "concat_batches", "MAX_QUERY_WEIGHTS",
    "compile_queries",
    # packed batches
    "linear_batch", "grouped_batch",
]
