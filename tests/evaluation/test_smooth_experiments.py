"""The smooth-query experiments end to end in a small configuration, and the kernel-query evaluation."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ldpsynth.evaluation.smooth.queries import KernelQueries

ROOT = Path(__file__).resolve().parents[2]


def test_kernel_queries_match_a_direct_loop() -> None:
    rng = np.random.default_rng(0)
    batch = KernelQueries.random(7, 3, rng, kernels=4)
    assert np.allclose(batch.weights.sum(axis=1), 1.0) and (np.abs(batch.centres) <= 1).all()
    points = rng.uniform(-1, 1, size=(11, 3))
    mass = rng.dirichlet(np.ones(11))
    got = batch.answers(points, mass, (0.5, 2.0))
    for i, sigma in enumerate((0.5, 2.0)):
        for q in range(7):
            f = sum(batch.weights[q, j] * np.exp(-((points - batch.centres[q, j]) ** 2).sum(1) / (2 * sigma**2))
                    for j in range(4))
            assert got[i, q] == pytest.approx(mass @ f, rel=1e-12)


def quick_run(script: str, out: Path) -> subprocess.CompletedProcess:
    """``experiments/<script> --quick --out <out>``, which must succeed (skipped without scikit-learn)."""
    pytest.importorskip("sklearn", reason="scikit-learn (extra [evaluation]) ships the WDBC data")
    result = subprocess.run([sys.executable, str(ROOT / "experiments" / script), "--quick", "--out", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result


def test_wdbc_experiment_quick_run(tmp_path: Path) -> None:
    quick_run("smooth_wdbc.py", tmp_path)
    rows = list(csv.DictReader((tmp_path / "errors.csv").read_text(encoding="utf-8").splitlines()))
    assert len(rows) == 2 * 2 * 4 * 5   # rounds x tables x settings x sigmas
    private = [r for r in rows if r["setting"] in ("adaptive", "fixed-split")]
    assert len(private) == 40 and all(0.99 <= float(r["epsilon"]) <= 1.0 + 1e-9 for r in private)
    assert all(r["epsilon"] == "inf" for r in rows if r["setting"] in ("as-published", "non-private"))
    assert all(r["psi"] == "False" for r in rows if r["setting"] == "adaptive")      # n = 569, d = 30: skipped
    assert all(0.0 <= float(r["abs"]) < 1.0 for r in rows)
    summary = (tmp_path / "summary.md").read_text()
    assert "| paper | as published | claimed | abs | 0.037 | 0.059 | 0.039 | 0.011 | 0.012 |" in summary
    assert "| ldpsynth | NON-PRIVATE replication | not DP | rel ÷ paper |" in summary
    assert summary.count("PSI skipped") == 2
    assert (tmp_path / "wdbc_errors.png").stat().st_size > 1000


def test_low_dimensional_comparison_quick_run(tmp_path: Path) -> None:
    result = quick_run("smooth_lowdim.py", tmp_path)
    rows = list(csv.DictReader((tmp_path / "summary.csv").read_text(encoding="utf-8").splitlines()))
    datasets = {r["dataset"] for r in rows}
    assert {"wdbc mean radius", "wdbc mean radius x mean texture"} <= datasets
    for r in rows:
        for mechanism in ("E", "smooth", "laplace"):
            assert 0.0 <= float(r[mechanism]) < 0.5
    if "adult age" in datasets:      # Adult is read from ../shared/data when present (else skipped with a message)
        assert (tmp_path / "adult_age.png").stat().st_size > 1000
    else:
        assert "skipping Adult" in result.stderr
