"""The helpers of ``benchmarks/bench_wide_coverage.py``: the triples, the kept cells, the predicates' truth, the
binomial interval and the summary (coverage, SD / SE ratio, standardized error) on hand-made records. No fit."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

pytest.importorskip("mbi")
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module("bench_wide_coverage")
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_triples_are_distinct_sorted_and_seeded(bench: ModuleType) -> None:
    triples = bench.choose_triples(8, 10, np.random.default_rng(1))
    assert len(set(triples)) == 10 and triples == sorted(triples)
    assert all(len(t) == 3 and list(t) == sorted(set(t)) and max(t) < 8 for t in triples)
    assert triples == bench.choose_triples(8, 10, np.random.default_rng(1))
    assert len(bench.choose_triples(4, 4, np.random.default_rng(0))) == 4       # all of C(4, 3)


def test_large_cells_keep_shares_at_the_threshold(bench: ModuleType) -> None:
    counts = np.array([5, 20, 19, 0, 56])
    assert bench.large_cells(counts, 100, 0.2).tolist() == [1, 4]


def test_predicate_truth_counts_rows_meeting_every_condition(bench: ModuleType) -> None:
    rows = np.array([[0, 1, 2], [1, 1, 0], [2, 0, 2], [1, 1, 2]])
    names = ("a", "b", "c")
    assert bench.predicate_truth(rows, names, {"a": (1, 2), "c": (2,)}) == 2.0
    assert bench.predicate_truth(rows, names, {"b": (1,)}) == 3.0
    query = bench.predicate({"a": (1, 2), "c": (2,)}, "p")
    assert [(c.attribute, c.op, tuple(c.value)) for c in query.where] == [("a", "in", (1, 2)), ("c", "in", (2,))]


def test_clopper_pearson_at_the_edges_and_inside(bench: ModuleType) -> None:
    low, high = bench.clopper_pearson(0, 10)
    assert low == 0.0 and high == pytest.approx(1 - 0.025 ** (1 / 10))
    low, high = bench.clopper_pearson(10, 10)
    assert high == 1.0 and low == pytest.approx(0.025 ** (1 / 10))
    low, high = bench.clopper_pearson(95, 100)
    assert low < 0.95 < high and high - low < 0.12


def test_summary_of_hand_made_records(bench: ModuleType) -> None:
    records = []
    for r, (e1, e2) in enumerate([(9.0, 100.0), (11.0, 104.0), (13.0, 96.0)]):
        records.append({"epsilon": 1.0, "collection": r, "query": "m", "label": "m[a=0]", "truth": 10.0,
                        "estimate": e1, "standard_error": 1.0, "covered": abs(e1 - 10.0) <= 2.5,
                        "model": 10.0 - 2 * (r + 1), "model_se": 2.0, "model_covered": r == 0})
        records.append({"epsilon": 1.0, "collection": r, "query": "p", "label": "p", "truth": 100.0,
                        "estimate": e2, "standard_error": 4.0, "covered": True,
                        "model": 102.0, "model_se": 1.0, "model_covered": True})
    rows = {s["query"]: s for s in bench.summarize(records)}
    assert set(rows) == {"m", "p", "all"}
    assert rows["m"]["coverage"] == pytest.approx(2 / 3) and rows["m"]["intervals"] == 3
    assert rows["m"]["model_coverage"] == pytest.approx(1 / 3)
    assert rows["all"]["model_coverage"] == pytest.approx(4 / 6)
    assert rows["m"]["model_mean_z"] == pytest.approx(-2.0)                       # -2, -4, -6 over SE 2
    assert rows["m"]["rmse_over_model"] == pytest.approx(math.sqrt((1 + 1 + 9) / (4 + 16 + 36)))
    assert rows["m"]["collections"] == 3 and rows["all"]["coverage"] == pytest.approx(5 / 6)
    assert rows["m"]["sd_over_se"] == pytest.approx(2.0)                          # SD of 9, 11, 13 over SE 1
    assert rows["p"]["sd_over_se"] == pytest.approx(1.0)                          # SD of 100, 104, 96 over 4
    assert rows["m"]["mean_z"] == pytest.approx(1.0)
    assert rows["m"]["rms_z"] == pytest.approx(math.sqrt((1 + 1 + 9) / 3))
    assert rows["all"]["sd_over_se"] == pytest.approx(1.5)                        # median of the two cells
