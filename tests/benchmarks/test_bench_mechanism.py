"""Smoke test of ``benchmarks/bench_mechanism.py --quick``: it runs, and its table is well formed.

Speed is not asserted here (design: speed targets live in the benchmark, not in timed tests);
this checks that every case runs, that the Markdown and CSV hold one row per case with finite,
positive times and a ratio equal to time / baseline.
"""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_mechanism.py"
OPERATIONS = ("perturb", "perturb_secure", "statistics + estimate (marginal)", "grouped_batch + estimate")


def test_quick_run_writes_a_well_formed_table(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    markdown = (tmp_path / "mechanism.md").read_text(encoding="utf-8")
    with open(tmp_path / "mechanism.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(line for line in handle if not line.startswith("#")))
    operations = [r["operation"] for r in rows]
    for operation in OPERATIONS:
        assert operation in operations, operation
        assert f"| {operation} |" in markdown
    for r in rows:
        seconds, baseline, ratio = (float(r[c]) for c in ("seconds", "baseline_seconds", "ratio"))
        assert math.isfinite(seconds) and seconds > 0 and math.isfinite(baseline) and baseline > 0
        # The CSV rounds times to 1 µs; the ratio was computed before rounding.
        assert math.isclose(ratio, seconds / baseline, rel_tol=0.05, abs_tol=0.05)
