"""The numeric query kinds: builders, JSON round trip, field checks, and the refusals when a batch is compiled
against a schema (a kind the attribute's mechanism cannot answer names the field and the mechanism that would)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.numeric.answering import MAX_BOOTSTRAP_GROUPS, compile_numeric, concat_numeric
from ldpsynth.shared.queries import (
    compile_queries,
    dumps_queries,
    histogram,
    marginal,
    mean,
    quantiles,
    queries_from_json,
    query_from_json,
    query_to_json,
    sum_,
)
from ldpsynth.shared.schema import Schema


def schema(mechanism: str = "HM") -> Schema:
    return Schema.from_json({"name": "c", "epsilon": 1.0, "attributes": [
        {"name": "hours", "type": "numeric", "range": [0, 100], "mechanism": mechanism},
        {"name": "region", "type": "categorical", "values": ["north", "south"], "public": True}]})


def test_builders_and_their_json_round_trip() -> None:
    built = [mean("hours"), mean("hours", by="region", label="m"), sum_("hours", by="region"),
             quantiles("hours", [0.25, 0.5], by="region"), histogram("hours", 4)]
    as_json = [query_to_json(q) for q in built]
    assert as_json == [{"kind": "mean", "attribute": "hours"},
                       {"kind": "mean", "attribute": "hours", "by": "region", "label": "m"},
                       {"kind": "sum", "attribute": "hours", "by": "region"},
                       {"kind": "quantiles", "attribute": "hours", "q": [0.25, 0.5], "by": "region"},
                       {"kind": "histogram", "attribute": "hours", "bins": 4}]
    assert [query_from_json(obj) for obj in as_json] == built
    assert queries_from_json(dumps_queries(built)) == built
    assert quantiles("hours", np.array([0.5])).q == (0.5,)


@pytest.mark.parametrize(("obj", "field"), [
    ({"kind": "quantiles", "attribute": "hours", "q": [0.5, 1.5]}, "q"),
    ({"kind": "quantiles", "attribute": "hours", "q": []}, "q"),
    ({"kind": "quantiles", "attribute": "hours", "q": "0.5"}, "q"),
    ({"kind": "quantiles", "attribute": "hours"}, "q"),
    ({"kind": "histogram", "attribute": "hours", "bins": 0}, "bins"),
    ({"kind": "histogram", "attribute": "hours", "bins": 2.5}, "bins"),
    ({"kind": "mean", "attribute": ""}, "attribute"),
    ({"kind": "mean"}, "attribute"),
    ({"kind": "mean", "attribute": "hours", "by": 3}, "by"),
    ({"kind": "mean", "attribute": "hours", "normalization": "sum"}, "normalization"),
    ({"kind": "sum", "attribute": "hours", "label": "x" * 257}, "label"),
])
def test_malformed_queries_are_refused_naming_the_field(obj: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        queries_from_json([obj])
    assert info.value.field == f"queries[0].{field}"


def test_a_kind_the_mechanism_cannot_answer_names_the_kind_and_the_mechanism_that_would() -> None:
    with pytest.raises(ValidationError) as info:
        compile_numeric([mean("hours")], schema("SW"))
    assert info.value.field == "queries[0].kind"
    assert "quantiles, histogram" in info.value.legal and "collected by HM" in info.value.problem
    for query in (quantiles("hours", [0.5]), histogram("hours", 3)):
        with pytest.raises(ValidationError) as info:
            compile_numeric([mean("hours"), query], schema("HM"), first_index=5)
        assert info.value.field == "queries[6].kind" and "collected by SW" in info.value.problem


@pytest.mark.parametrize(("query", "field"), [
    (mean("rating"), "attribute"), (mean("hours", by="hours"), "by"), (sum_("hours", by="city"), "by"),
    (marginal("hours"), "kind"),
])
def test_queries_that_do_not_fit_the_schema_are_refused(query: Any, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        compile_numeric([query], schema())
    assert info.value.field == f"queries[0].{field}"


def test_a_numeric_kind_on_a_categorical_collection_is_refused_naming_the_attribute() -> None:
    categorical = Schema.from_json({"name": "c", "epsilon": 1.0, "attributes": [
        {"name": "hours", "type": "integer", "min": 0, "max": 9}]})
    with pytest.raises(ValidationError) as info:
        compile_queries([marginal("hours"), mean("hours")], categorical)
    assert info.value.field == "queries[1].attribute" and "numeric collection" in info.value.legal


def test_answers_are_laid_out_per_group_and_probability_or_bin() -> None:
    hm = compile_numeric([mean("hours"), sum_("hours", by="region", label="total")], schema("HM"))
    assert hm.labels == ("mean#0", "total[region=north]", "total[region=south]")
    assert hm.origins.tolist() == [0, 1, 1]
    sw = compile_numeric([quantiles("hours", [0.1, 0.9], by="region"), histogram("hours", 2)], schema("SW"),
                         first_index=3)
    assert sw.labels == ("quantiles#3[region=north,q=0.1]", "quantiles#3[region=north,q=0.9]",
                         "quantiles#3[region=south,q=0.1]", "quantiles#3[region=south,q=0.9]",
                         "histogram#4[bin=[0, 50)]", "histogram#4[bin=[50, 100]]")
    assert sw.origins.tolist() == [0, 0, 0, 0, 1, 1]


def test_the_json_schema_of_a_query_batch_describes_the_numeric_kinds() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    path = Path(__file__).resolve().parents[3] / "docs" / "schemas" / "query-batch.schema.json"
    validator = jsonschema.Draft202012Validator(json.loads(path.read_text(encoding="utf-8")))
    good = json.loads(dumps_queries([mean("hours", by="region"), sum_("hours", label="s"),
                                     quantiles("hours", [0, 0.5, 1]), histogram("hours", 7)]))
    assert not list(validator.iter_errors(good))
    for bad in ({"kind": "mean"}, {"kind": "sum", "attribute": "hours", "normalization": "sum"},
                {"kind": "quantiles", "attribute": "hours", "q": [1.5]}, {"kind": "histogram", "attribute": "hours"},
                {"kind": "histogram", "attribute": "hours", "bins": 0}):
        assert not validator.is_valid([bad]), bad
        with pytest.raises(ValidationError):                         # the Python reader refuses them too
            queries_from_json([bad])


def test_a_batch_asks_at_most_max_bootstrap_groups_sw_fits() -> None:
    sw = schema("SW")                                               # "by region": 2 groups per query
    per_region = [histogram("hours", 2, by="region")] * (MAX_BOOTSTRAP_GROUPS // 2)
    assert compile_numeric(per_region, sw).fits == MAX_BOOTSTRAP_GROUPS
    with pytest.raises(ValidationError) as info:
        compile_numeric([*per_region, quantiles("hours", [0.5])], sw)
    assert info.value.field == f"queries[{MAX_BOOTSTRAP_GROUPS // 2}]" and "split the batch" in info.value.legal
    halves = [compile_numeric(per_region, sw),
              compile_numeric([quantiles("hours", [0.5])], sw, first_index=len(per_region))]
    with pytest.raises(ValidationError) as info:                    # the same limit over chunks sent apart
        concat_numeric(halves, [len(per_region), 1])
    assert info.value.field == "queries"
    assert compile_numeric([mean("hours", by="region")] * 100, schema("HM")).fits == 0   # HM: no bootstrap
