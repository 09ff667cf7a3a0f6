"""DP-PQD queries (SQL subset and JSON), tables, and the validation of problems and bounds."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from ldpsynth.evaluation.pqd.deciders import DECIDERS, get_decider, run_decider
from ldpsynth.evaluation.pqd.problem import DecisionProblem
from ldpsynth.evaluation.pqd.query import Query, SqlCondition, parse_query, parse_sql, query_from_json
from ldpsynth.evaluation.pqd.sum import R2TSum, SVTSum, truncation_thresholds
from ldpsynth.evaluation.pqd.table import NumericDomain, Table, parse_domain, read_table
from ldpsynth.shared.errors import ValidationError

TABLE = Table({"sex": np.array(["Male", "Female", "Male", "Male", "Female"], dtype=object),
               "age": np.array([20.0, 35.0, 41.0, 41.0, 60.0]),
               "capital-gain": np.array([0.0, 500.0, 1000.0, 0.0, 7000.0])}, name="t")


@pytest.mark.parametrize("sql, expected", [
    ("SELECT COUNT(*) FROM t", 5.0),
    ("SELECT COUNT(*) FROM t WHERE sex = 'Male' AND age BETWEEN 30 AND 45", 2.0),
    ("select count(*) from adult where sex like 'Female'", 2.0),
    ("SELECT SUM(\"capital-gain\") FROM t WHERE 40 <= age", 8000.0),
    ("SELECT SUM(\"capital-gain\") FROM t WHERE sex IN ('Male', 'Female') AND age <> 60", 1500.0),
    ("SELECT MEDIAN(age) FROM t", 41.0),                      # ceil(5/2) = 3rd smallest
    ("SELECT MEDIAN(age) FROM t WHERE sex = 'Male'", 41.0),   # 20, 41, 41 -> 2nd
    ("SELECT MEDIAN(age) FROM t WHERE age < 41", 20.0),       # 20, 35 -> ceil(2/2) = 1st
    ("SELECT QUANTILE_CONT(age, 0.25) FROM t", 35.0),         # ceil(1.25) = 2nd
    ("SELECT COUNT(*) FROM t WHERE (age > -1) AND (age < 40.5)", 2.0),
])
def test_sql_subset(sql, expected):
    query = parse_sql(sql)
    assert query.answer(TABLE) == expected
    assert parse_sql(query.to_sql()) == query          # to_sql round trip
    assert query_from_json(query.to_json()) == query  # JSON round trip


@pytest.mark.parametrize("sql, field", [
    ("SELECT COUNT(*) FROM t WHERE sex = 'Male' OR age > 3", "OR"),
    ("SELECT COUNT(*) FROM t WHERE NOT sex = 'Male'", "NOT"),
    ("SELECT AVG(age) FROM t", "query.SELECT"),
    ("SELECT COUNT(age) FROM t", "query.SELECT"),
    ("SELECT COUNT(*), SUM(age) FROM t", "query.SELECT"),
    ("SELECT COUNT(*) FROM t GROUP BY sex", "GROUP"),
    ("SELECT COUNT(*) FROM t JOIN u ON t.a = u.a", "JOIN"),
    ("SELECT COUNT(*) FROM t WHERE sex LIKE 'M%'", "wildcards"),
    ("SELECT COUNT(*) FROM t WHERE age < 'x'", "a number"),
    ("SELECT COUNT(*) FROM t WHERE age = age", "literal"),
    ("SELECT COUNT(*) FROM t; SELECT COUNT(*) FROM t", "exactly one"),
    ("DELETE FROM t", "SELECT"),
    ("SELEC COUNT(*)", "query"),
    ("SELECT QUANTILE_CONT(age, 1.5) FROM t", "(0, 1)"),
    ("", "empty"),
])
def test_bad_sql_is_a_clear_error(sql, field):
    with pytest.raises(ValidationError, match=field.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        parse_sql(sql)


def test_json_form_and_errors():
    q = parse_query('{"aggregate": "sum", "attribute": "capital-gain", '
                    '"where": [{"attribute": "sex", "op": "==", "value": "Male"}]}')
    assert q.answer(TABLE) == 1000.0
    for bad, field in (('{"aggregate": "avg"}', "aggregate"), ('{"aggregate": "sum"}', "attribute"),
                       ('{"aggregate": "count", "extra": 1}', "unknown"),
                       ('{"aggregate": "count", "where": [{"attribute": "age", "op": "~", "value": 1}]}', "where.op"),
                       ('{"aggregate": "count", "where": [{"attribute": "age", "op": "between", "value": [5, 1]}]}',
                        "where.value"), ("{", "JSON")):
        with pytest.raises(ValidationError, match=field):
            parse_query(bad)


def test_conditions_check_the_column_type_and_existence():
    with pytest.raises(ValidationError, match="strings"):
        Query("count", where=(SqlCondition("sex", "==", 1.0),)).answer(TABLE)
    with pytest.raises(ValidationError, match="numeric column"):
        Query("count", where=(SqlCondition("sex", "<", 1.0),)).answer(TABLE)
    with pytest.raises(ValidationError, match="no such column"):
        Query("count", where=(SqlCondition("income", "==", 1.0),)).answer(TABLE)
    with pytest.raises(ValidationError, match="numeric column for SUM"):
        Query("sum", "sex").answer(TABLE)
    with pytest.raises(ValidationError, match="selects nothing"):
        Query("median", "age", (SqlCondition("age", ">", 100.0),)).answer(TABLE)


def test_weighted_tables_answer_with_the_same_code():
    weighted = Table(TABLE.columns, weights=np.array([2.0, 0.5, 1.0, -0.5, 1.0]), name="w")
    assert Query("count").answer(weighted) == pytest.approx(4.0)
    assert Query("sum", "capital-gain").answer(weighted) == pytest.approx(250 + 1000 + 7000)
    # quantile of weights (2, 0.5, 1, 0, 1) over ages (20, 35, 41, 41, 60): total 4.5, target 2.25 -> 35
    assert Query("median", "age").answer(weighted) == 35.0


def test_read_csv_gz_and_parquet(tmp_path):
    path = tmp_path / "d.csv.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("age, sex, capital-gain\n39, Male, 2174\n50, Female, 0\n")
    table = read_table(path)
    assert table.names == ("age", "sex", "capital-gain")
    assert parse_sql("SELECT SUM(\"capital-gain\") FROM t WHERE sex = 'Male'").answer(table) == 2174.0
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"age": [39, 50], "sex": ["Male", "Female"]}), tmp_path / "d.parquet")
    parquet = read_table(tmp_path / "d.parquet")
    assert parse_sql("SELECT MEDIAN(age) FROM t").answer(parquet) == 39.0
    with pytest.raises(ValidationError, match="not found"):
        read_table(tmp_path / "missing.csv")
    (tmp_path / "ragged.csv").write_text("a,b\n1,2\n3\n")
    with pytest.raises(ValidationError, match="line 3"):
        read_table(tmp_path / "ragged.csv")


# ----- problems and bounds -----------------------------------------------------------------------
COUNT = Query("count")


@pytest.mark.parametrize("kwargs, field", [
    ({"tau": 0.0}, "tau"), ({"tau": -1.0}, "tau"), ({"tau": float("nan")}, "tau"), ({"tau": float("inf")}, "tau"),
    ({"epsilon": 0.0}, "epsilon"), ({"epsilon": float("nan")}, "epsilon"), ({"epsilon": -0.1}, "epsilon"),
    ({"synthetic_answer": float("inf")}, "synthetic_answer"),
])
def test_invalid_tau_epsilon_are_rejected(kwargs, field):
    args = {"query": COUNT, "synthetic_answer": 10.0, "tau": 1.0, "epsilon": 0.5, **kwargs}
    with pytest.raises(ValidationError, match=field):
        DecisionProblem(**args)


def test_relative_tau():
    problem = DecisionProblem.relative(COUNT, 250.0, 0.032, 0.25)
    assert problem.interval == pytest.approx((242.0, 258.0))
    with pytest.raises(ValidationError, match="q\\(D_s\\) = 0"):
        DecisionProblem.relative(COUNT, 0.0, 0.032, 0.25)
    with pytest.raises(ValidationError, match="tau"):
        DecisionProblem.relative(COUNT, 10.0, 0.0, 0.25)


def test_invalid_bounds_are_rejected():
    with pytest.raises(ValidationError, match="lo <= hi"):
        NumericDomain(5, 1)
    with pytest.raises(ValidationError, match="step"):
        NumericDomain(0, 1, 0)
    with pytest.raises(ValidationError, match="finite"):
        NumericDomain(0, float("inf"))
    with pytest.raises(ValidationError, match="--domain"):
        parse_domain("age:0:100")
    assert parse_domain("age=0:100") == NumericDomain(0, 100, attribute="age")
    assert parse_domain("x=0:1:0.25").candidates().tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    sum_query = Query("sum", "age")
    with pytest.raises(ValidationError, match="domain of the aggregated attribute"):
        DecisionProblem(sum_query, 10.0, 1.0, 0.5, NumericDomain(0, 9, attribute="income"))
    for name in ("LM_sum", "R2T_sum", "SVT_sum"):  # SUM without public bounds
        with pytest.raises(ValidationError, match="domain"):
            run_decider(DECIDERS[name], TABLE, DecisionProblem(sum_query, 10.0, 1.0, 0.5), np.random.default_rng(0))
    negative = DecisionProblem(sum_query, 10.0, 1.0, 0.5, NumericDomain(-5, 100, attribute="age"))
    for name in ("R2T_sum", "SVT_sum"):  # truncation needs non-negative values
        with pytest.raises(ValidationError, match=">= 0"):
            run_decider(DECIDERS[name], TABLE, negative, np.random.default_rng(0))
    with pytest.raises(ValidationError, match="beta"):
        R2TSum(beta=1.0)
    with pytest.raises(ValidationError, match="theta"):
        SVTSum(theta=0.0)
    with pytest.raises(ValidationError, match="decider"):
        get_decider("LM_avg")
    with pytest.raises(ValidationError, match="handles SUM"):
        run_decider(DECIDERS["LM_sum"], TABLE, DecisionProblem(COUNT, 3.0, 1.0, 0.5), np.random.default_rng(0))
    with pytest.raises(ValidationError, match="trials"):
        run_decider(DECIDERS["LM_count"], TABLE, DecisionProblem(COUNT, 3.0, 1.0, 0.5), np.random.default_rng(0), 0)


def test_values_outside_the_public_domain_are_clamped():
    """GS_q bounds the sensitivity on any data: a value above the domain counts as the domain's max."""
    problem = DecisionProblem(Query("sum", "capital-gain"), 5000.0, 1.0, 1e6,
                              NumericDomain(0, 1000, attribute="capital-gain"))
    run = run_decider(DECIDERS["LM_sum"], TABLE, problem, np.random.default_rng(0), 2000)
    # clamped sum is 0 + 500 + 1000 + 0 + 1000 = 2500, far from (4999, 5001) with noise scale 1e-3
    assert run.decisions.sum() == 0
    assert truncation_thresholds(1000.0).tolist() == [2.0 ** j for j in range(1, 11)]
    assert truncation_thresholds(1.0).tolist() == [2.0]  # binary domain: one threshold (J >= 1)
