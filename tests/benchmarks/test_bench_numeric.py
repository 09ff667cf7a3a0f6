"""Smoke test of ``benchmarks/bench_numeric.py --quick``: it runs on the real data, and its tables are well formed.

Speed is not asserted (design: speed targets live in the benchmark, not in timed tests). Skipped when the
data sets are absent (the script then says so and writes nothing).
"""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_numeric.py"
DATA = ("movielens rating", "adult age", "adult hours-per-week")
EPSILONS = ("0.5", "1.0", "2.0", "4.0")


def test_quick_run_writes_a_well_formed_table(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=600, cwd=SCRIPT.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    if done.stdout.startswith("skipped:"):
        pytest.skip(done.stdout.strip())
    markdown = (tmp_path / "bench_numeric.md").read_text(encoding="utf-8")
    for heading in ("## 1. Mean", "## 2. Distribution", "## 3. Quantile", "## 4. Device cost"):
        assert heading in markdown
    assert (tmp_path / "bench_numeric.png").stat().st_size > 0
    with open(tmp_path / "bench_numeric.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    mean = {(r["data"], r["epsilon"], r["mechanism"], r["metric"]): float(r["value"]) for r in rows
            if r["table"] == "mean"}
    for data in DATA:
        e = "E/5" if data.startswith("movielens") else "E/16"
        for eps in EPSILONS:
            for mech in ("duchi", "pm", "hm", e):
                assert mean[(data, eps, mech, "empirical")] > 0, (data, eps, mech)
            for mech in ("duchi", "pm", "hm"):  # pooled, 5 n >= 160,000 reports, fixed seed: SD ~0.3 %
                closed = mean[(data, eps, mech, "closed_form")]
                assert abs(mean[(data, eps, mech, "pooled")] / closed - 1) < 0.05, (data, eps, mech)
    distribution = [r for r in rows if r["table"] == "distribution"]
    assert len(distribution) == 2 * len(DATA) * len(EPSILONS)
    assert all(math.isfinite(float(r["value"])) and float(r["value"]) >= 0 for r in distribution)
    cost = {(r["mechanism"], r["metric"]): float(r["value"]) for r in rows if r["table"] == "cost"}
    for mech in ("duchi", "pm", "hm", "sw"):
        for metric in ("cpu us per value, one per call", "os.urandom cpu us, one per call",
                       "ratio to os.urandom, one per call", "cpu us per value, batch of 1e5",
                       "os.urandom cpu us per value, batch", "ratio to os.urandom, batch"):
            assert math.isfinite(cost[(mech, metric)]) and cost[(mech, metric)] > 0, (mech, metric)
