"""Smoke test of ``benchmarks/bench_ingest.py --quick``: it runs against a real aggregator and a
bare gRPC server, every report is stored once, and its tables are well formed.

Speed is not asserted (design: speed targets live in the benchmark, not in timed tests).
"""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_ingest.py"

pytestmark = pytest.mark.ray


def test_quick_run_writes_a_well_formed_table(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    markdown = (tmp_path / "ingest.md").read_text(encoding="utf-8")
    assert "Stored in the aggregator after the run: 8,060 reports (expected 8,060: each stored once)" in markdown
    assert markdown.count("not checked (--quick)") == 3
    with open(tmp_path / "ingest.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["part"] for r in rows] == ["a"] * 5 + ["b"]
    assert rows[0]["measurement"].startswith("SDK submit") and rows[4]["measurement"].startswith("bare gRPC")
    assert rows[3]["measurement"].startswith("write + fsync")
    for r in rows:
        seconds, rate = float(r["seconds"]), float(r["rows_per_s"])
        assert math.isfinite(seconds) and seconds > 0 and math.isfinite(rate) and rate > 0
        assert math.isclose(rate, int(r["rows"]) / seconds, rel_tol=0.01)
    assert (rows[-1]["rows"], rows[-1]["clients"], rows[-1]["errors"]) == ("60", "20", "0")
    assert float(rows[-1]["p99_ms"]) >= float(rows[-1]["p50_ms"]) > 0
    assert float(rows[4]["vs_bare"]) == 1.0
