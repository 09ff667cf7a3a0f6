"""WYZ Fig. 2 sensitivity (issue 19 item 3): the grid of contestants, the paired comparison with E, the CLI."""

from __future__ import annotations

import csv
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from ldpsynth.evaluation.comparison.harness import Trial
from ldpsynth.evaluation.comparison.local_e import LocalE
from ldpsynth.evaluation.comparison.mwem import MWEM, SubDatabaseMWEM
from ldpsynth.evaluation.comparison.subdb_sensitivity import contestants, paired_summary
from ldpsynth.simulation.datasets import DatasetNotFound, dataset_path


def test_the_grid_of_contestants():
    grid = contestants(1.0, (10, 30))
    assert list(grid)[:2] == ["E", "MWEM T=10"] and len(grid) == 11
    assert isinstance(grid["E"], LocalE) and isinstance(grid["MWEM T=30"], MWEM) and grid["MWEM T=30"].rounds == 30
    variants = {(m.rounds, m.partition, m.split) for m in grid.values() if isinstance(m, SubDatabaseMWEM)}
    assert variants == {(t, p, s) for t in (10, 30) for p in ("label", "coarsest") for s in ("parallel", "sequential")}
    assert grid["sub-db T=30 one per movie sequential"].partition == "label"
    assert all(m.epsilon == 1.0 for m in grid.values())


def _trial(mechanism: str, run: int, worst: float) -> Trial:
    return Trial("h=4", 4.0, mechanism, run, 200, 1000, worst, worst / 3, worst**2, 0.01, "g")


def test_paired_summary_interval_and_verdicts():
    e = np.array([0.020, 0.025, 0.018, 0.022, 0.030])
    offsets = {"up": np.array([0.004, 0.006, 0.005, 0.003, 0.007]),
               "down": -np.array([0.01, 0.012, 0.011, 0.009, 0.01]),
               "tie": np.array([0.003, -0.004, 0.001, -0.002, 0.0025])}
    trials = [_trial("E", r, e[r]) for r in range(5)]
    trials += [_trial(name, r, e[r] + d[r]) for name, d in offsets.items() for r in range(5)]
    rows = {r["mechanism"]: r for r in paired_summary(trials)}
    assert rows["E"]["verdict"] == "" and rows["E"]["diff_vs_E"] == 0.0
    for name, d in offsets.items():
        half = stats.t.ppf(0.975, 4) * d.std(ddof=1) / np.sqrt(5)
        row = rows[name]
        assert row["worst_abs"] == pytest.approx((e + d).mean()) and row["h"] == 4 and row["runs"] == 5
        assert (row["diff_low"], row["diff_high"]) == pytest.approx((d.mean() - half, d.mean() + half))
    assert [rows[n]["verdict"] for n in ("up", "down", "tie")] == ["above", "below", "tied"]
    one_run = {r["mechanism"]: r for r in paired_summary([_trial("E", 0, 0.02), _trial("x", 0, 0.5)])}
    assert one_run["x"]["verdict"] == "tied"                   # no interval from a single run


def test_cli_fig2_sensitivity_quick(tmp_path):
    try:
        dataset_path("movielens-100k/u.data.gz")
    except DatasetNotFound as exc:
        pytest.skip(str(exc))
    done = subprocess.run([sys.executable, "-m", "ldpsynth.cli", "compare", "--experiment", "fig2-sensitivity",
                           "--quick", "--rounds", "10", "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert "[fig2-sensitivity] h = 128: run 2/2 done" in done.stderr
    rows = list(csv.DictReader((tmp_path / "fig2_sensitivity.csv").read_text(encoding="utf-8").splitlines()))
    assert {r["h"] for r in rows} == {"1", "8", "128"} and len(rows) == 3 * 6
    sequential = {r["h"]: r["guarantee"] for r in rows if r["mechanism"] == "sub-db T=10 coarsest sequential"}
    assert "P = 8 non-empty" in sequential["8"] and "P = 128 non-empty" in sequential["128"]
    assert len(list(csv.DictReader(
        (tmp_path / "fig2_sensitivity_trials.csv").read_text(encoding="utf-8").splitlines()))) == 3 * 6 * 2
    text = (tmp_path / "fig2_sensitivity.md").read_text(encoding="utf-8")
    assert "| sub-db T=10 one per movie parallel |" in text and "--rounds 10 --quick" in text
    assert (tmp_path / "fig2_sensitivity.png").stat().st_size > 5000
    bad = subprocess.run([sys.executable, "-m", "ldpsynth.cli", "compare", "--experiment", "fig2-sensitivity",
                          "--mechanisms", "mwem", "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--mechanisms" in bad.stderr
