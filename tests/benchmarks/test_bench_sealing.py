"""Smoke test of ``benchmarks/bench_sealing.py --quick``: it runs (sealing, opening, and a real
aggregator storing sealed reports through SubmitShuffled) and its table is well formed. Speed is not
asserted (design: speed targets live in the benchmark)."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_sealing.py"

pytestmark = pytest.mark.ray


def test_quick_run_writes_a_well_formed_table(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=600, cwd=SCRIPT.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(tmp_path / "sealing.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["part"] for r in rows] == ["a"] * 13 + ["b"] * 6
    timed = [r for r in rows if r["seconds"]]
    assert all(math.isfinite(float(r["seconds"])) and float(r["seconds"]) > 0 for r in timed)
    sizes = {r["measurement"]: float(r["bytes_per_report"]) for r in rows if r["bytes_per_report"]}
    assert sizes["bytes: one sealed report (enc 32 + plaintext + tag 16)"] == 84.0
    assert (tmp_path / "sealing.md").read_text(encoding="utf-8").startswith("# Sealed reports benchmark")
