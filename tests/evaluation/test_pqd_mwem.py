"""The MWEM synthetic table used as a black-box SDG in the DP-PQD experiment, and the experiment's smoke run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ldpsynth.evaluation.pqd.mwem import Binning, mwem_histogram, mwem_synthetic_table
from ldpsynth.evaluation.pqd.table import Table
from ldpsynth.shared.errors import ValidationError
from ldpsynth.simulation.datasets import DatasetNotFound, dataset_path

ROOT = Path(__file__).resolve().parents[2]


def _data(seed: int = 4, n: int = 5000) -> Table:
    rng = np.random.default_rng(seed)
    g = rng.choice(np.array(["a", "b"], dtype=object), n, p=[0.8, 0.2])
    x = np.where(g == "a", rng.integers(0, 10, n), rng.integers(30, 40, n)).astype(np.float64)
    return Table({"g": g, "x": x})


BINS = [Binning("g", values=("a", "b")), Binning("x", edges=(0, 10, 20, 30, 40))]


def test_mwem_learns_the_marginals_and_keeps_n():
    data = np.array([[4000.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1000.0]])
    synthetic = mwem_histogram(data, epsilon=5.0, rounds=10, rng=np.random.default_rng(1))
    assert synthetic.sum() == pytest.approx(5000.0)
    uniform_error = np.abs(np.full_like(data, 5000 / 8) - data).max()
    assert np.abs(synthetic - data).max() < 0.2 * uniform_error


def test_mwem_table_samples_inside_the_public_bins():
    table = mwem_synthetic_table(_data(), BINS, epsilon=5.0, rounds=10, rng=np.random.default_rng(2))
    assert len(table) == 5000 and set(table.column("g").tolist()) <= {"a", "b"}
    x = table.column("x")
    assert x.min() >= 0 and x.max() <= 39 and np.all(x == np.floor(x))
    # the dominant cell (g = a, x in [0, 10)) holds about 80 % of the rows
    share = np.mean((table.column("g") == "a") & (x < 10))
    assert 0.7 < share < 0.9


def test_values_outside_the_bins_are_rejected():
    bad = Table({"g": np.array(["a", "z"], dtype=object), "x": np.array([1.0, 2.0])})
    with pytest.raises(ValidationError, match="g at position 1"):
        mwem_synthetic_table(bad, BINS, 1.0, 2, np.random.default_rng(0))
    with pytest.raises(ValidationError, match="ascending"):
        Binning("x", edges=(0, 0))
    with pytest.raises(ValidationError, match="epsilon"):
        mwem_histogram(np.ones((2, 2)), 0.0, 2, np.random.default_rng(0))


def test_adult_experiment_quick_run(tmp_path):
    """The experiment end to end on Adult over 2 seeds (5 queries, 2 settings, 20 executions)."""
    try:
        dataset_path("adult/adult.csv.gz")
    except DatasetNotFound as exc:
        pytest.skip(str(exc))
    result = subprocess.run([sys.executable, str(ROOT / "experiments" / "pqd_adult.py"), "--quick", "--trials", "20",
                             "--seeds", "2", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "[seed 20232: 2/2] done" in result.stdout
    summary = (tmp_path / "summary.md").read_text()
    assert "over 2 seeds of the whole pipeline (20231, 20232)" in summary
    for name in ("LM_count", "EM_count", "LM_sum", "R2T_sum", "SVT_sum", "EM_med", "Hist_med"):
        assert f"| {name} |" in summary
    assert "| MWEM | SUM, DS ≤ GS/10 | SVT_sum |" in summary  # q38, SUM(hours-per-week) WHERE hours <= 8
    assert "| E | COUNT | all | LM_count | EM_count |" in (tmp_path / "comparisons.md").read_text()
    assert "| q38 | 440 | 8 | 99 | 0.081 | 8 |" in (tmp_path / "queries.md").read_text()
    assert (tmp_path / "sum_tau_MWEM.png").stat().st_size > 1000
    # 2 seeds x 2 sides x 2 settings x (3 COUNT + 3 + 3 SUM + 2 MEDIAN + 3 SUM deciders)
    lines = (tmp_path / "errors.csv").read_text().splitlines()
    assert len(lines) == 1 + 2 * 2 * 2 * (3 + 3 + 3 + 2 + 3)
    assert {line.split(",")[0] for line in lines[1:]} == {"20231", "20232"}
