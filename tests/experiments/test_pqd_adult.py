"""experiments/pqd_adult.py and its summary over seeds (pqd_adult_summary.py): the t-intervals, per-seed cell
means and paired comparisons on known inputs, and the experiment's query families and E-release routing.

The end-to-end quick run on Adult is in tests/evaluation/test_pqd_mwem.py."""

from __future__ import annotations

import csv
import importlib
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from ldpsynth.evaluation.pqd.query import parse_sql
from ldpsynth.evaluation.pqd.table import Table

ROOT = Path(__file__).resolve().parents[2]

# Student t quantiles from the tables: t_{0.975, 1}, t_{0.975, 2}, t_{0.975, 4}, t_{0.95, 4}.
T975_1, T975_2, T975_4, T95_4 = 12.706204736, 4.302652730, 2.776445105, 2.131846786


@pytest.fixture(scope="module")
def experiments():
    """The two experiment modules (the script imports its summary as a sibling: experiments/ goes on the path)."""
    sys.path.insert(0, str(ROOT / "experiments"))
    try:
        yield importlib.import_module("pqd_adult"), importlib.import_module("pqd_adult_summary")
    finally:
        sys.path.remove(str(ROOT / "experiments"))


@pytest.fixture(scope="module")
def summary(experiments):
    return experiments[1]


@pytest.fixture(scope="module")
def adult(experiments):
    return experiments[0]


def row(seed, error, relation="q(D) in I", decider="LM_sum", side="E", family="SUM, DS > GS/10", query=13):
    return {"seed": seed, "side": side, "query": query, "aggregate": "sum", "family": family, "sweep": "tau",
            "tau": 0.032, "epsilon": 0.25, "decider": decider, "relation": relation, "error": error}


def test_t_interval_on_known_inputs(summary):
    five = summary.t_interval([1.0, 2.0, 3.0, 4.0, 5.0])  # mean 3, s = sqrt(2.5)
    half = T975_4 * math.sqrt(2.5) / math.sqrt(5)
    assert (five.mean, five.seeds) == (3.0, 5)
    assert five.low == pytest.approx(3 - half, abs=1e-8) and five.high == pytest.approx(3 + half, abs=1e-8)
    assert five.high - five.low == pytest.approx(2 * 1.963243, abs=1e-6)
    ninety = summary.t_interval([1.0, 2.0, 3.0, 4.0, 5.0], level=0.90)
    assert ninety.high == pytest.approx(3 + T95_4 * math.sqrt(2.5) / math.sqrt(5), abs=1e-8)
    two = summary.t_interval([0.2, 0.4])  # s = 0.1 sqrt(2), half width t_{0.975,1} * 0.1
    assert (two.low, two.high) == (pytest.approx(0.3 - T975_1 * 0.1), pytest.approx(0.3 + T975_1 * 0.1))
    constant = summary.t_interval([0.25] * 4)
    assert (constant.low, constant.high) == (0.25, 0.25)
    one = summary.t_interval([0.7])
    assert one.seeds == 1 and one.mean == 0.7 and math.isnan(one.low) and math.isnan(one.high)
    with pytest.raises(ValueError, match="no values"):
        summary.t_interval([])
    clipped = two.clipped(0.0, 1.0)
    assert (clipped.mean, clipped.low, clipped.high) == (pytest.approx(0.3), 0.0, 1.0)


def test_t_interval_covers_the_mean_95_percent_of_the_time(summary):
    """4,000 samples of 5 normal values (seed 7): coverage ~ Binomial(4000, 0.95), sd 13.8; accept 3800 +- 4.5 sd
    (two-sided alpha ~ 7e-6)."""
    rng = np.random.default_rng(7)
    covered = 0
    for sample in rng.normal(0.3, 0.1, size=(4000, 5)):
        interval = summary.t_interval(list(sample))
        covered += interval.low < 0.3 < interval.high
    assert abs(covered - 3800) <= 4.5 * math.sqrt(4000 * 0.95 * 0.05)


def test_cells_are_means_over_seeds_of_per_seed_means(summary):
    rows = [row(1, 0.1), row(1, 0.3), row(1, 0.9, "q(D) not in I"),  # seed 1: in I 0.2, not in I 0.9, all 13/30
            row(2, 0.4), row(2, 0.5, "q(D) not in I"),  # seed 2: in I 0.4, not in I 0.5, all 0.45
            row(3, 0.7, "q(D) not in I")]  # seed 3: in I absent, not in I 0.7, all 0.7
    means = summary.per_seed_means(rows)
    assert means[("E", "SUM, DS > GS/10", "LM_sum", "q(D) in I")] == {1: pytest.approx(0.2), 2: pytest.approx(0.4)}
    assert means[("E", "SUM, DS > GS/10", "LM_sum", "all")] == {1: pytest.approx(1.3 / 3), 2: pytest.approx(0.45),
                                                                  3: pytest.approx(0.7)}
    cells = {c["relation"]: c for c in summary.summarize(rows)}
    assert set(cells) == {"q(D) in I", "q(D) not in I", "all"}  # no "q(D) = q(D_s)" pair: no cell
    in_i = cells["q(D) in I"]
    assert (in_i["seeds"], in_i["pairs"], in_i["mean"]) == (2, 3, pytest.approx(0.3))  # not 0.8/3: seeds weigh 1 each
    assert (in_i["low"], in_i["high"]) == (0.0, 1.0)  # 0.3 -+ 1.27, clipped to [0, 1]
    not_in = cells["q(D) not in I"]  # 0.9, 0.5, 0.7: s = 0.2
    assert (not_in["seeds"], not_in["mean"]) == (3, pytest.approx(0.7))
    assert (not_in["low"], not_in["high"]) == (pytest.approx(0.7 - T975_2 * 0.2 / math.sqrt(3)), 1.0)  # clipped at 1
    assert summary.format_interval(summary.Interval(0.3, 0.0, 1.0, 2), 3) == "0.300 [0.000, 1.000] (2 of 3 seeds)"
    assert summary.format_interval(summary.Interval(0.7, math.nan, math.nan, 1), 3) == "0.700 (1 of 3 seeds)"


def test_paired_comparison_and_verdict(summary):
    lm = [0.10, 0.20, 0.15, 0.30, 0.25]
    r2t = [0.50, 0.55, 0.60, 0.70, 0.58]  # always 0.35-0.45 above LM: the paired interval excludes 0
    svt = [0.12, 0.15, 0.20, 0.28, 0.30]  # differences to LM of both signs
    rows = [row(s, e, decider=d) for d, errors in (("LM_sum", lm), ("R2T_sum", r2t), ("SVT_sum", svt))
            for s, e in enumerate(errors)]
    found = {(c["a"], c["b"], c["relation"]): c for c in summary.compare(rows)}
    assert set(found) == {(a, b, rel) for a, b in (("LM_sum", "R2T_sum"), ("LM_sum", "SVT_sum"), ("R2T_sum", "SVT_sum"))
                          for rel in ("q(D) in I", "all")}
    lm_r2t = found[("LM_sum", "R2T_sum", "q(D) in I")]
    d = np.subtract(lm, r2t)
    half = T975_4 * d.std(ddof=1) / math.sqrt(5)
    assert lm_r2t["difference"] == pytest.approx(d.mean())
    assert (lm_r2t["low"], lm_r2t["high"]) == (pytest.approx(d.mean() - half), pytest.approx(d.mean() + half))
    assert lm_r2t["verdict"] == "LM_sum < R2T_sum" and lm_r2t["marginals_disjoint"]
    assert found[("R2T_sum", "SVT_sum", "all")]["verdict"] == "R2T_sum > SVT_sum"
    assert found[("LM_sum", "SVT_sum", "q(D) in I")]["verdict"] == "not separated"
    # an interval touching 0 does not separate
    assert summary.verdict(summary.Interval(-0.1, -0.2, 0.0, 5), "A", "B") == "not separated"


def test_write_summary_tables(summary, tmp_path):
    rows = [row(s, e, decider=d) for d, errors in (("LM_sum", [0.1, 0.2, 0.3]), ("R2T_sum", [0.9, 0.8, 0.95]))
            for s, e in enumerate(errors)]
    summary.write_summary(rows, [0, 1, 2], 100, tmp_path)
    text = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "over 3 seeds of the whole pipeline (0, 1, 2)" in text
    lm = f"0.200 [0.000, {0.2 + T975_2 * 0.1 / math.sqrt(3):.3f}]"  # 0.1, 0.2, 0.3: s = 0.1, clipped at 0
    assert f"| E | SUM, DS > GS/10 | LM_sum | - | {lm} | - | {lm} |" in text
    with open(tmp_path / "comparisons.csv", newline="", encoding="utf-8") as handle:
        comparisons = list(csv.DictReader(handle))
    assert [c["verdict"] for c in comparisons] == ["LM_sum < R2T_sum"] * 2
    assert "| E | SUM, DS > GS/10 | q(D) in I | LM_sum | R2T_sum | 0.200 | 0.883 |" in \
        (tmp_path / "comparisons.md").read_text(encoding="utf-8")


def test_query_families_and_sensitivities(adult):
    table = Table({"capital-loss": np.array([0.0] * 19 + [3000.0] + [1500.0] * 20),
                   "sex": np.array(["F"] * 20 + ["M"] * 20)})
    sparse = adult.query_facts(parse_sql("SELECT SUM(\"capital-loss\") FROM t WHERE sex = 'F'"), table)
    # DS_q,D = the largest selected value; 95 % of the selected values are 0 <= 2: Alg. 4 stops far below DS
    assert (sparse.truth, sparse.selected) == (3000, 20)
    assert (sparse.downward_sensitivity, sparse.global_sensitivity) == (3000, 99999)
    assert sparse.family == "SUM, DS ≤ GS/10" and sparse.alg4_threshold == 2
    dense = adult.query_facts(parse_sql("SELECT SUM(\"capital-loss\") FROM t WHERE sex = 'M'"), table)
    assert dense.downward_sensitivity == 1500 and dense.alg4_threshold == 2048  # the first 2^j >= 1500
    edge = Table({"hours-per-week": np.array([9.9, 1.0]), "age": np.array([30.0, 30.0])})
    assert adult.query_facts(parse_sql('SELECT SUM("hours-per-week") FROM t'), edge).family == "SUM, DS ≤ GS/10"
    above = Table({"hours-per-week": np.array([10.0, 1.0])})
    assert adult.query_facts(parse_sql('SELECT SUM("hours-per-week") FROM t'), above).family == "SUM, DS > GS/10"
    assert adult.query_facts(parse_sql("SELECT COUNT(*) FROM t WHERE age >= 30"), edge).family == "COUNT"
    assert adult.query_facts(parse_sql("SELECT MEDIAN(age) FROM t"), edge).family == "MEDIAN"


@pytest.mark.parametrize("sql, release", [
    ("SELECT COUNT(*) FROM t WHERE sex = 'Male'", "age"),  # public attributes only: any release answers exactly
    ("SELECT SUM(\"capital-gain\") FROM t WHERE \"capital-gain\" BETWEEN 1 AND 4999", "capital-gain"),
    ("SELECT MEDIAN(age) FROM t WHERE race = 'Black'", "age"),
    ("SELECT SUM(\"capital-loss\") FROM t WHERE sex = 'Male'", None),  # no E release of capital-loss
    ("SELECT SUM(\"capital-loss\") FROM t WHERE age BETWEEN 17 AND 19", None),  # two numeric attributes
])
def test_each_query_goes_to_the_e_release_of_its_attribute(adult, sql, release):
    assert adult.e_release_of(parse_sql(sql)) == release


def test_the_sum_families_are_the_documented_split(adult):
    """q13-q21 have DS > GS/10 and q31-q40 DS <= GS/10 on Adult (skipped without the data)."""
    from ldpsynth.simulation.datasets import DatasetNotFound

    try:
        private = adult.load_adult()
    except DatasetNotFound as exc:
        pytest.skip(str(exc))
    families = {k: adult.query_facts(parse_sql(sql), private).family for k, sql in enumerate(adult.QUERIES, start=1)}
    assert [k for k, f in families.items() if f == "SUM, DS > GS/10"] == list(range(13, 22))
    assert [k for k, f in families.items() if f == "SUM, DS ≤ GS/10"] == list(range(31, 41))
    assert private.column("sex").dtype.kind == "U"  # text as fixed-width strings (vectorised masks)
