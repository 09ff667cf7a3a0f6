"""Smoke test of ``benchmarks/bench_shuffler.py --quick``: it runs (the permutation, a real
``ldpsynth shuffler serve`` toward a sink and toward a real aggregator) and its table is well formed.
Speed is not asserted (design: speed targets live in the benchmark)."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_shuffler.py"

pytestmark = pytest.mark.ray


def test_quick_run_writes_a_well_formed_table(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=600, cwd=SCRIPT.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(tmp_path / "shuffler.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["part"] for r in rows] == ["a"] * 2 + ["b"] * 4
    assert all(math.isfinite(float(r["seconds"])) and float(r["seconds"]) > 0 for r in rows)
    ratios = [float(r["ratio"]) for r in rows if r["ratio"]]
    assert len(ratios) == 4 and all(math.isfinite(x) and x > 0 for x in ratios)
    assert all(int(r["n"]) >= 4 * 4096 for r in rows if r["part"] == "b")
    assert (tmp_path / "shuffler.md").read_text(encoding="utf-8").startswith("# Shuffler benchmark")
