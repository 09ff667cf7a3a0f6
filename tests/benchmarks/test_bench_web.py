"""Smoke test of ``benchmarks/bench_web.py --quick``: it runs against a real replica with a web port,
every report is acknowledged as new on every path, and its table is well formed.

Speed is not asserted (design: speed targets live in the benchmark, not in timed tests).
"""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_web.py"

pytestmark = pytest.mark.ray


def test_quick_run_writes_a_well_formed_table(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, cwd=SCRIPT.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(tmp_path / "web.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    paths = ["gRPC SubmitReports stream", "gRPC SubmitBatch (unary)", "web Connect SubmitBatch, HTTP/1.1",
             "web gRPC-Web SubmitBatch, HTTP/1.1"]
    assert [r["path"] for r in rows] == paths * 2 + [f"{paths[1]}, 8 clients at once", f"{paths[2]}, 8 clients at once"]
    for r in rows:
        seconds, rate = float(r["seconds"]), float(r["reports_per_s"])
        assert math.isfinite(seconds) and seconds > 0 and math.isclose(rate, int(r["reports"]) / seconds, rel_tol=1e-6)
        assert float(r["replica_cpu_us_per_report"]) >= 0
    assert "| web Connect SubmitBatch, HTTP/1.1 | 1,024 | 4,096 |" in (tmp_path / "web.md").read_text(encoding="utf-8")
