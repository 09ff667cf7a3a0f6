"""Smoke test of ``benchmarks/bench_level_quantiles.py --runs 3 --n 500``: it writes a well-formed table, one row per
law, ε and q, whose coverages are shares of the runs and whose interval widths are whole levels on average."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_level_quantiles.py"


def test_a_short_run_writes_a_well_formed_table(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--runs", "3", "--n", "500", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=SCRIPT.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    markdown = (tmp_path / "bench_level_quantiles.md").read_text(encoding="utf-8")
    assert markdown.startswith("# Quantile intervals on declared levels (3 runs, n = 500, 95 %")
    assert markdown.count("\n| ") == 1 + 6                   # the header and 3 laws x 2 epsilons
    with open(tmp_path / "bench_level_quantiles.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert {(r["law"], r["epsilon"]) for r in rows} == {(law, eps) for law in ("ratings", "jumps", "twenty")
                                                        for eps in ("1.0", "2.0")}
    assert len(rows) == 30
    for r in rows:
        for column in ("coverage", "old_coverage", "plain_share"):
            assert round(float(r[column]) * 3, 2) in (0.0, 1.0, 2.0, 3.0), r
        assert 0.0 <= float(r["mean_width_levels"]) <= int(r["levels"]) - 1, r
    jumps = [r for r in rows if r["law"] == "jumps" and r["epsilon"] == "1.0"]
    assert [float(r["true_quantile"]) for r in jumps] == [0.0, 1.0, 2.0, 3.0, 4.0]   # min{v : F(v) >= q}, at the jumps
