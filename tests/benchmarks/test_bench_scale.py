"""Smoke test of ``benchmarks/bench_scale.py --quick``: it runs a local multi-node cluster (Ray
nodes, 3 NATS servers, 2 replicas), a bare gRPC server, the log append runs and the shard worker
restarts; every acknowledged report is stored once and its tables are well formed.

Speed is not asserted (design: speed targets live in the benchmark, not in timed tests).
"""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_scale.py"

pytestmark = [pytest.mark.slow, pytest.mark.ray]


def test_quick_run_writes_a_well_formed_table(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr[-5000:]
    markdown = (tmp_path / "scale.md").read_text(encoding="utf-8")
    # 3 replica runs of (20 warm-up + 200 measured) streams of 10 fresh reports, each stored once.
    assert "After the runs: 6,600 reports stored, 6,600 acknowledged as new; log checked: no problem." in markdown
    assert markdown.count("not checked (--quick)") == 4 and "Integrity problems" not in markdown
    with open(tmp_path / "scale.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["part"], r["measurement"]) for r in rows] == [
        ("a", "bare"), ("a", "1 replica"), ("a", "bare"), ("a+b", "1 replica"), ("b", "2 replicas"),
        ("c", "3 servers, R=3"), ("c", "1 embedded server, R=1"),
        ("c", "3 servers, R=3"), ("c", "1 embedded server, R=1"),
        ("d", "shard worker restart"), ("d", "shard worker restart")]
    for r in rows:
        seconds = float(r["seconds"])
        assert math.isfinite(seconds) and seconds > 0
    for r in rows[:9]:
        rate = float(r["reports_per_s"])
        assert rate > 0 and math.isclose(rate, int(r["reports"]) / float(r["seconds"]), rel_tol=0.01)
    for r in rows[:5]:
        assert (r["streams"], r["reports"], r["errors"]) == ("200", "2000", "0")
        assert float(r["cpu_ms_per_stream"]) > 0 and float(r["p99_ms"]) >= float(r["p50_ms"]) > 0
        assert math.isclose(float(r["cpu_us_per_report"]), float(r["cpu_ms_per_stream"]) * 100, rel_tol=0.01)
    assert float(rows[0]["vs_baseline"]) == float(rows[2]["vs_baseline"]) == 1.0
    assert [r["vs_baseline"] for r in rows[6:9:2]] == ["1.0000", "1.0000"]  # R=1 is (c)'s baseline
    restarts = rows[9:]
    assert [int(r["reports"]) for r in restarts] == [10**4, 10**5]
    for r in restarts:  # it replays what the last snapshot (if any) does not hold, never more than is stored
        assert 0 < int(r["replayed_reports"]) <= int(r["reports"]) and int(r["replayed"]) >= 1
