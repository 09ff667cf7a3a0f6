"""Smoke test of ``benchmarks/bench_query.py --quick``: a real server answers cut and linear batches
(the cut estimates are checked inside the script against eq. 34 from bare sums) and the table is
well formed. Speed is not asserted here (design: speed targets live in the benchmark)."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_query.py"

pytestmark = pytest.mark.ray


def test_quick_run_writes_a_well_formed_table(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--repeats", "1", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(tmp_path / "query.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["operation"].split(",")[0] for r in rows] == [
        "cut queries via the server", "cut queries via the server",
        "linear batch via the server (chunked request", "linear batch"]
    for r in rows:
        seconds, baseline, ratio = float(r["seconds"]), float(r["baseline_seconds"]), float(r["ratio"])
        assert math.isfinite(seconds) and seconds > 0 and baseline > 0
        assert math.isclose(ratio, seconds / baseline, rel_tol=1e-9)
    assert "quick run: sizes reduced, goals not checked" in (tmp_path / "query.md").read_text(encoding="utf-8")
