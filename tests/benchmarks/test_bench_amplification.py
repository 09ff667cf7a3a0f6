"""Smoke test of ``benchmarks/bench_amplification.py --quick``: it runs and its table is well formed.
Speed is not asserted here (design: speed targets live in the benchmark)."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_amplification.py"


def test_quick_run_writes_a_well_formed_table(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=600, cwd=SCRIPT.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(tmp_path / "amplification.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 12
    for r in rows:
        assert float(r["seconds"]) > 0 and r["met"] == ""
        assert float(r["lower_bound"]) <= float(r["epsilon"]) <= float(r["fmt21_numerical"])
    assert (tmp_path / "amplification.md").read_text().startswith("# Shuffle accountant benchmark")
