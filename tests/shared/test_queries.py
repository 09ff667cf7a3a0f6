"""The query model: builders, JSON round trips, compilation to weights, and every bad-query error."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from ldpsynth.shared import queries as Q
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.queries.model import QUERY_KINDS
from ldpsynth.shared.schema import Schema

RATINGS = Schema.from_json({"name": "ratings", "epsilon": 1.0, "attributes": [
    {"name": "movie", "type": "integer", "min": 1, "max": 4, "public": True},
    {"name": "rating", "type": "integer", "min": 1, "max": 5},
    {"name": "genre", "type": "categorical", "values": ["drama", "comedy", "horror"]},
    {"name": "score", "type": "continuous", "lo": 0.0, "hi": 1.0, "bits": 2},
]})
K = 5 * 3 * 4
GRAPH = Schema.from_json({"name": "graph", "epsilon": 1.0, "attributes": [
    {"name": "src", "type": "integer", "min": 0, "max": 9, "public": True},
    {"name": "dst", "type": "integer", "min": 0, "max": 9, "public": True},
    {"name": "edge", "type": "binary"},
]})
DIGITS = RATINGS.private_digits(np.arange(K))
RATING = DIGITS["rating"] + 1
GENRE = np.array(["drama", "comedy", "horror"])[DIGITS["genre"]]
SCORE = DIGITS["score"] * 0.25


def every_kind() -> list[Q.Query]:
    return [
        Q.linear(np.arange(K), normalization="mean", label="lin"),
        Q.predicate(Q.condition("rating", ">=", 4), Q.condition("genre", "in", ["drama", "horror"])),
        Q.predicate(Q.condition("score", "between", [0.25, 0.5]), value="rating", normalization="mean"),
        Q.predicate(),
        Q.marginal("genre", "rating", label="m"),
        Q.grouped("movie", {1: np.ones(K), 3: np.arange(K)}, default=np.full(K, 2.0)),
        Q.grouped("movie", [(2, np.arange(K) % 7)]),
        Q.dense(np.eye(3, K), normalization="sum"),
    ]


def test_json_round_trip_of_every_kind():
    queries = every_kind() + [Q.cut([0, 1], [2, 3, 4], source="src", target="dst", edge="edge", label="c")]
    text = Q.dumps_queries(queries)
    again = Q.queries_from_json(text)
    assert again == queries
    assert Q.queries_to_json(again) == json.loads(text)
    assert [o["kind"] for o in json.loads(text)] == ["linear", "predicate", "predicate", "predicate", "marginal",
                                                     "grouped", "grouped", "dense", "cut"]


def test_documented_json_examples_parse_and_compile():
    doc = [
        {"kind": "linear", "weights": list(range(K)), "normalization": "mean"},
        {"kind": "predicate", "where": [{"attribute": "rating", "op": ">=", "value": 4},
                                        {"attribute": "genre", "op": "in", "value": ["drama", "comedy"]}]},
        {"kind": "marginal", "attributes": ["rating", "genre"]},
        {"kind": "grouped", "attribute": "movie",
         "tables": [{"value": 1, "weights": [0] * K}, {"value": 2, "weights": [1] * K}], "default": [0] * K},
    ]
    batch = Q.compile_queries(Q.queries_from_json(doc), RATINGS)
    assert len(batch) == 3 + 15
    cut = Q.compile_queries(Q.queries_from_json([{"kind": "cut", "S": [0, 1, 2], "T": [3, 4]}]), GRAPH)
    assert len(cut) == 1


def weights_of(batch: Q.QueryBatch, j: int) -> np.ndarray:
    for block in batch.blocks:
        hit = np.flatnonzero(block.positions == j)
        if hit.size:
            return block.weights[hit[0]]
    raise AssertionError(j)


def test_predicate_weights_match_a_direct_evaluation():
    batch = Q.compile_queries(every_kind()[1:4], RATINGS)
    w = weights_of(batch, 0)[0]
    np.testing.assert_array_equal(w, ((RATING >= 4) & np.isin(GENRE, ["drama", "horror"])).astype(float))
    w = weights_of(batch, 1)[0]
    np.testing.assert_array_equal(w, RATING * ((SCORE >= 0.25) & (SCORE <= 0.5)))
    np.testing.assert_array_equal(weights_of(batch, 2)[0], np.ones(K))
    assert [batch.label(j) for j in range(3)] == ["predicate#0", "predicate#1", "predicate#2"]


def test_equality_conditions_compare_codes_and_ordering_compares_decoded_values():
    batch = Q.compile_queries([Q.predicate(Q.condition("score", "==", 0.3)),
                               Q.predicate(Q.condition("score", ">", 0.3)),
                               Q.predicate(Q.condition("genre", "!=", "drama"))], RATINGS)
    np.testing.assert_array_equal(weights_of(batch, 0)[0], (DIGITS["score"] == 1).astype(float))  # bucket [.25, .5)
    np.testing.assert_array_equal(weights_of(batch, 1)[0], (SCORE > 0.3).astype(float))         # lower edges
    np.testing.assert_array_equal(weights_of(batch, 2)[0], (GENRE != "drama").astype(float))


def test_marginal_expands_to_labelled_cells_in_mixed_radix_order():
    batch = Q.compile_queries([Q.linear(np.ones(K)), Q.marginal("genre", "rating", label="m")], RATINGS)
    assert len(batch) == 16 and list(batch.origins) == [0] + [1] * 15
    assert batch.label(1) == "m[genre=drama,rating=1]" and batch.label(15) == "m[genre=horror,rating=5]"
    for cell in range(15):
        g, r = divmod(cell, 5)
        np.testing.assert_array_equal(weights_of(batch, 1 + cell)[0],
                                      ((DIGITS["genre"] == g) & (DIGITS["rating"] == r)).astype(float))


def test_grouped_queries_share_a_block_over_the_union_of_values():
    batch = Q.compile_queries(every_kind()[5:7], RATINGS)
    (block,) = batch.blocks
    assert isinstance(block, Q.TableBlock) and block.attribute == "movie"
    np.testing.assert_array_equal(block.values, [0, 1, 2])  # codes of movies 1, 2, 3
    np.testing.assert_array_equal(block.weights[0], [np.ones(K), np.full(K, 2.0), np.arange(K)])
    np.testing.assert_array_equal(block.default[0], np.full(K, 2.0))
    np.testing.assert_array_equal(block.weights[1], [np.zeros(K), np.arange(K) % 7, np.zeros(K)])
    np.testing.assert_array_equal(block.default[1], np.zeros(K))
    assert list(block.normalization) == [Q.EQ10, Q.EQ10]


def test_cut_defaults_and_masks():
    batch = Q.compile_queries([Q.cut([0, 9], [3])], GRAPH)
    (block,) = batch.blocks
    assert (block.source, block.target, block.edge) == ("src", "dst", "edge")
    np.testing.assert_array_equal(np.flatnonzero(block.sources[0]), [0, 9])
    np.testing.assert_array_equal(np.flatnonzero(block.targets[0]), [3])
    assert block.normalization[0] == Q.SUM


def test_grouped_batch_from_an_array():
    w = np.random.default_rng(0).random((6, 4, K))
    batch = Q.grouped_batch(RATINGS, "movie", w)
    (block,) = batch.blocks
    assert block.weights is w and len(batch) == 6 and batch.label(5) == "q5"
    np.testing.assert_array_equal(block.values, np.arange(4))
    w[2, 1, 3] = np.nan
    with pytest.raises(ValidationError) as err:
        Q.grouped_batch(RATINGS, "movie", w)
    assert err.value.field == "weights" and err.value.position == 2
    with pytest.raises(ValidationError) as err:
        Q.grouped_batch(RATINGS, "movie", np.ones((2, 3, K)))
    assert err.value.field == "weights" and "(Q >= 1, 4, 60)" in err.value.legal
    with pytest.raises(ValidationError) as err:
        Q.grouped_batch(RATINGS, "rating", np.ones((2, 5, K)))
    assert err.value.field == "attribute"


def test_linear_batch_from_an_array_equals_compiled_linear_queries():
    w = np.random.default_rng(1).random((7, K))
    batch = Q.linear_batch(RATINGS, w, normalization="mean")
    (block,) = batch.blocks
    compiled = Q.compile_queries([Q.linear(row, normalization="mean") for row in w], RATINGS).blocks[0]
    np.testing.assert_array_equal(block.weights, compiled.weights)
    np.testing.assert_array_equal(block.normalization, compiled.normalization)
    assert block.attribute is None and len(batch) == 7 and batch.label(6) == "q6"
    assert np.shares_memory(block.weights, w)
    w[4, 2] = np.inf
    with pytest.raises(ValidationError) as err:
        Q.linear_batch(RATINGS, w)
    assert err.value.field == "weights" and err.value.position == 4
    with pytest.raises(ValidationError) as err:
        Q.linear_batch(RATINGS, np.ones((2, K - 1)))
    assert err.value.field == "weights" and f"(Q >= 1, {K})" in err.value.legal
    with pytest.raises(ValidationError) as err:
        Q.linear_batch(RATINGS, np.ones((2, K)), normalization="max")
    assert err.value.field == "normalization"


W = [0] * K
BAD_QUERIES = [  # (query JSON, schema, expected field, expected text in the legal range or problem)
    ({"kind": "median"}, RATINGS, "queries[0].kind", "linear, predicate"),
    ({"kind": ["linear"]}, RATINGS, "queries[0].kind", "linear, predicate"),
    ([1, 2], RATINGS, "queries[0].kind", "object"),
    ({"kind": "linear", "weights": W, "weight": 1}, RATINGS, "queries[0].weight", "fields of a linear"),
    ({"kind": "linear"}, RATINGS, "queries[0].weights", "missing"),
    ({"kind": "linear", "weights": [0.0] * (K - 1) + [float("nan")]}, RATINGS, "queries[0].weights", "finite"),
    ({"kind": "linear", "weights": [float("inf")] + W[1:]}, RATINGS, "queries[0].weights", "finite"),
    ({"kind": "linear", "weights": [True] + W[1:]}, RATINGS, "queries[0].weights", "finite numbers"),
    ({"kind": "linear", "weights": [10**400] + W[1:]}, RATINGS, "queries[0].weights", "finite numbers"),
    ({"kind": "linear", "weights": []}, RATINGS, "queries[0].weights", "non-empty"),
    ({"kind": "linear", "weights": [1, 2, 3]}, RATINGS, "queries[0].weights", "|D| = 60"),
    ({"kind": "linear", "weights": W, "normalization": "max"}, RATINGS, "queries[0].normalization", "eq10"),
    ({"kind": "linear", "weights": W, "label": 7}, RATINGS, "queries[0].label", "string"),
    ({"kind": "predicate", "where": [{"attribute": "stars", "op": "==", "value": 1}]}, RATINGS,
     "queries[0].where[0].attribute", "private attribute"),
    ({"kind": "predicate", "where": [{"attribute": "movie", "op": "==", "value": 1}]}, RATINGS,
     "queries[0].where[0].attribute", "private attribute"),
    ({"kind": "predicate", "where": [{"attribute": "rating", "op": "=~", "value": 1}]}, RATINGS,
     "queries[0].where[0].op", "between"),
    ({"kind": "predicate", "where": [{"attribute": "rating", "op": "==", "value": 9}]}, RATINGS,
     "queries[0].where[0].value", "[1, 5]"),
    ({"kind": "predicate", "where": [{"attribute": "rating", "op": "in", "value": [1, 6]}]}, RATINGS,
     "queries[0].where[0].value[1]", "[1, 5]"),
    ({"kind": "predicate", "where": [{"attribute": "rating", "op": "in", "value": []}]}, RATINGS,
     "queries[0].where[0].value", "non-empty"),
    ({"kind": "predicate", "where": [{"attribute": "rating", "op": "between", "value": [4, 2]}]}, RATINGS,
     "queries[0].where[0].value", "lo <= hi"),
    ({"kind": "predicate", "where": [{"attribute": "rating", "op": ">=", "value": "4"}]}, RATINGS,
     "queries[0].where[0].value", "finite number"),
    ({"kind": "predicate", "where": [{"attribute": "genre", "op": "<", "value": 1}]}, RATINGS,
     "queries[0].where[0].op", "categorical"),
    ({"kind": "predicate", "where": [{"attribute": "genre", "op": "==", "value": "jazz"}]}, RATINGS,
     "queries[0].where[0].value", "'drama'"),
    ({"kind": "predicate", "where": [{"attribute": "rating", "op": "=="}]}, RATINGS,
     "queries[0].where[0]", "attribute, op, value"),
    ({"kind": "predicate", "where": {"attribute": "rating"}}, RATINGS, "queries[0].where", "list"),
    ({"kind": "predicate", "value": "genre"}, RATINGS, "queries[0].value", "numeric"),
    ({"kind": "marginal", "attributes": ["rating", "rating"]}, RATINGS, "queries[0].attributes", "distinct"),
    ({"kind": "marginal", "attributes": ["movie"]}, RATINGS, "queries[0].attributes[0]", "private attribute"),
    ({"kind": "marginal", "attributes": "rating"}, RATINGS, "queries[0].attributes", "list"),
    ({"kind": "grouped", "attribute": "rating", "tables": [{"value": 1, "weights": W}]}, RATINGS,
     "queries[0].attribute", "public attribute"),
    ({"kind": "grouped", "attribute": "movie", "tables": [{"value": 1, "weights": W},
                                                          {"value": 2, "weights": [1, 2]}]}, RATINGS,
     "queries[0].tables[1].weights", "|D| = 60"),
    ({"kind": "grouped", "attribute": "movie", "tables": [{"value": 5, "weights": W}]}, RATINGS,
     "queries[0].tables[0].value", "[1, 4]"),
    ({"kind": "grouped", "attribute": "movie", "tables": [{"value": 1, "weights": W}, {"value": 1, "weights": W}]},
     RATINGS, "queries[0].tables", "one table per value"),
    ({"kind": "grouped", "attribute": "movie", "tables": [{"value": 1, "weights": W}], "default": [1]}, RATINGS,
     "queries[0].default", "|D| = 60"),
    ({"kind": "grouped", "attribute": "movie", "tables": []}, RATINGS, "queries[0].tables", "non-empty"),
    ({"kind": "grouped", "attribute": "movie", "tables": [{"value": 1}]}, RATINGS, "queries[0].tables[0]",
     "value, weights"),
    ({"kind": "cut", "S": [], "T": [1]}, GRAPH, "queries[0].S", "non-empty"),
    ({"kind": "cut", "S": [1], "T": []}, GRAPH, "queries[0].T", "non-empty"),
    ({"kind": "cut", "S": [1, 2], "T": [2, 3]}, GRAPH, "queries[0].T", "disjoint"),
    ({"kind": "cut", "S": [1, 1], "T": [2]}, GRAPH, "queries[0].S", "distinct"),
    ({"kind": "cut", "S": [1, 10], "T": [2]}, GRAPH, "queries[0].S[1]", "[0, 9]"),
    ({"kind": "cut", "S": [1], "T": [-1]}, GRAPH, "queries[0].T[0]", "[0, 9]"),
    ({"kind": "cut", "S": [1], "T": [2], "source": "src", "target": "src"}, GRAPH, "queries[0].target",
     "same vertex domain"),
    ({"kind": "cut", "S": [1], "T": [2], "edge": "src"}, GRAPH, "queries[0].edge", "private attribute"),
    ({"kind": "cut", "S": [1], "T": [2]}, RATINGS, "queries[0].source", "public attribute"),
    ({"kind": "cut", "S": [1], "T": [2], "source": "movie", "target": "movie"}, RATINGS, "queries[0].target",
     "same vertex domain"),
    ({"kind": "dense", "table": [[0] * K, [0] * (K - 1)]}, RATINGS, "queries[0].table", "equal length"),
    ({"kind": "dense", "table": [[0, 1]]}, RATINGS, "queries[0].table", "|D| = 60"),
    ({"kind": "dense", "table": []}, RATINGS, "queries[0].table", "non-empty"),
]


@pytest.mark.parametrize("obj, schema, field, text", BAD_QUERIES,
                         ids=[f"{i}-{b[2]}" for i, b in enumerate(BAD_QUERIES)])
def test_every_bad_query_raises_a_validation_error_naming_index_and_field(obj, schema, field, text):
    with pytest.raises(ValidationError) as err:
        Q.compile_queries(Q.queries_from_json([obj]), schema)
    assert err.value.field == field
    assert text in err.value.legal or text in err.value.problem, str(err.value)


def test_binary_edge_required_for_cuts():
    schema = Schema.from_json({"name": "g", "epsilon": 1.0, "attributes": [
        {"name": "a", "type": "integer", "min": 0, "max": 3, "public": True},
        {"name": "b", "type": "integer", "min": 0, "max": 3, "public": True},
        {"name": "w", "type": "integer", "min": 0, "max": 2}]})
    with pytest.raises(ValidationError) as err:
        Q.compile_queries([Q.cut([0], [1])], schema)
    assert err.value.field == "queries[0].edge" and "binary" in err.value.legal


def test_error_names_the_index_of_the_bad_query():
    good = {"kind": "linear", "weights": W}
    with pytest.raises(ValidationError) as err:
        Q.queries_from_json([good, good, {"kind": "linear", "weights": [math.nan] * K}])
    assert err.value.field == "queries[2].weights" and err.value.position == 0
    with pytest.raises(ValidationError) as err:
        Q.compile_queries(Q.queries_from_json([good, {"kind": "marginal", "attributes": ["rating"]},
                                               {"kind": "predicate", "where": [{"attribute": "x", "op": "==",
                                                                                "value": 1}]}]), RATINGS)
    assert err.value.field == "queries[2].where[0].attribute"


@pytest.mark.parametrize("text, problem", [("{", "invalid JSON"), ('{"kind": "linear"}', "got dict"),
                                           ("[1] x", "invalid JSON")])
def test_query_file_must_be_a_json_array(text, problem):
    with pytest.raises(ValidationError) as err:
        Q.queries_from_json(text)
    assert err.value.field == "queries" and problem in err.value.problem


def test_builders_validate_like_json():
    with pytest.raises(ValidationError) as err:
        Q.linear([1.0, float("nan")])
    assert err.value.field == "weights" and err.value.position == 1
    with pytest.raises(ValidationError) as err:
        Q.cut([1, 2], [2])
    assert err.value.field == "T"
    with pytest.raises(ValidationError) as err:
        Q.condition("rating", "between", [1])
    assert err.value.field == "value"
    with pytest.raises(ValidationError):
        Q.grouped("movie", {1: [1.0, float("inf")]})


# ----- the normalisations' names ---------------------------------------------------------------
def test_range_is_the_name_of_eq10s_normalisation_and_eq10_is_read_as_it():
    w = np.arange(K) % 5
    built = [Q.linear(w, normalization="eq10"), Q.grouped("movie", {1: w}, normalization="eq10"),
             Q.dense(np.eye(2, K), normalization="eq10"), Q.marginal("genre", normalization="eq10")]
    assert [q.normalization for q in built] == ["range"] * 4
    assert built[0] == Q.linear(w, normalization="range") == Q.linear(w)   # also the default
    assert {o["normalization"] for o in Q.queries_to_json(built)} == {"range"}
    parsed = Q.queries_from_json([{"kind": "linear", "weights": w.tolist(), "normalization": n}
                                  for n in ("eq10", "range")])
    assert parsed[0] == parsed[1] and parsed[0].normalization == "range"
    block = Q.compile_queries(parsed, RATINGS).blocks[0]
    assert list(block.normalization) == [Q.RANGE, Q.RANGE]
    packed = [Q.linear_batch(RATINGS, np.ones((2, K)), normalization=n).blocks[0].normalization
              for n in ("eq10", "range")]
    np.testing.assert_array_equal(packed[0], packed[1])
    assert Q.normalization_name("eq10") == "range" and Q.NORMALIZATIONS[Q.RANGE] == "range"


@pytest.mark.parametrize("bad", ["EQ10", "Range", "", None, 10])
def test_an_unknown_normalisation_names_the_field_and_the_legal_names(bad):
    with pytest.raises(ValidationError) as err:
        Q.queries_from_json([{"kind": "linear", "weights": [1.0] * K, "normalization": bad}])
    assert err.value.field == "queries[0].normalization"
    assert "'range', 'sum', 'mean'" in err.value.legal and "eq10" in err.value.legal


def test_every_kind_has_keyword_normalization_and_label_from_the_base() -> None:
    defaults = {"linear": "range", "predicate": "sum", "marginal": "sum", "grouped": "range", "cut": "sum",
                "dense": "range"}
    assert {kind: cls.default_normalization for kind, cls in QUERY_KINDS.items()} == defaults
    assert all(issubclass(cls, Q.BaseQuery) for cls in QUERY_KINDS.values())
    assert Q.LinearQuery([1.0] * K).normalization == "range"
    assert Q.LinearQuery([1.0] * K, normalization=None) == Q.LinearQuery([1.0] * K, normalization="eq10")
    assert Q.MarginalQuery(("rating",), label="m").normalization == "sum"
    with pytest.raises(TypeError):
        Q.LinearQuery([1.0] * K, "sum")  # type: ignore[misc]
    with pytest.raises(ValidationError, match="label"):
        Q.MarginalQuery(("rating",), label="x" * 257)
