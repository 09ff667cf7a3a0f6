"""``benchmarks/probe_wide_identified.py``'s linear program: the range of a target over the tables with given
pair tables, on populations where it is known by hand. Deterministic."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

pytest.importorskip("scipy")
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def probe() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module("probe_wide_identified")
    finally:
        sys.path.remove(str(BENCHMARKS))


def _cell(levels: tuple[int, ...], sizes: tuple[int, ...]) -> dict[int, np.ndarray]:
    return {j: np.arange(k) == v for j, (v, k) in enumerate(zip(levels, sizes))}


def test_parity_rows_leave_a_cell_anywhere_between_zero_and_all(probe: ModuleType) -> None:
    # the even-parity rows of three bits, 5 copies each: every pair table is uniform (5 per cell), which the
    # odd-parity rows share, so the count of (0, 0, 0) can be 0 (odd) or 5 (even) and anything between
    even = np.array([(0, 0, 0), (0, 1, 1), (1, 0, 1), (1, 1, 0)] * 5)
    assert probe.pair_range(even, (2, 2, 2), _cell((0, 0, 0), (2, 2, 2))) == pytest.approx((0.0, 5.0))
    # a predicate: a = 0 and b = 0 lies in one pair table, so it is pinned (5 rows either way)
    ab = {0: np.array([True, False]), 1: np.array([True, False]), 2: np.array([True, True])}
    assert probe.pair_range(even, (2, 2, 2), ab) == pytest.approx((5.0, 5.0))


def test_rows_all_alike_pin_every_cell(probe: ModuleType) -> None:
    rows = np.array([(1, 2, 0)] * 7 + [(0, 0, 1)] * 3)
    sizes = (2, 3, 2)
    assert probe.pair_range(rows, sizes, _cell((1, 2, 0), sizes)) == pytest.approx((7.0, 7.0))
    assert probe.pair_range(rows, sizes, _cell((1, 1, 0), sizes)) == pytest.approx((0.0, 0.0))


def test_a_label_of_the_coverage_run_reads_as_its_conditions(probe: ModuleType) -> None:
    sizes = (9, 8, 16, 7, 14, 5, 2, 2)
    cell = probe.conditions_of("age×workclass×marital[age=1,workclass=3,marital=2]", sizes)
    assert sorted(cell) == [0, 1, 3] and cell[0].tolist() == [v == 1 for v in range(9)]
    degree = probe.conditions_of("degree, exec/prof, >50K", sizes)
    assert sorted(degree) == [2, 4, 7] and np.flatnonzero(degree[2]).tolist() == [9, 10, 12, 14]
