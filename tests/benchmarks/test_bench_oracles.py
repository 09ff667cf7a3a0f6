"""Smoke test of ``benchmarks/bench_oracles.py --quick``: it runs beside the peers, and its tables are well formed.

Speed is not asserted (design: speed targets live in the benchmark, not in timed tests).
"""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_oracles.py"


def test_quick_run_writes_a_well_formed_table(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=600, cwd=SCRIPT.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    markdown = (tmp_path / "oracles.md").read_text(encoding="utf-8")
    for heading in ("## 1. Speed", "## 2. Bytes per report", "## 3. Error on MovieLens", "## 4. Choices"):
        assert heading in markdown
    with open(tmp_path / "oracles.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["oracle"], r["k"]) for r in rows] == [(o, k) for o in ("OUE", "OLH", "HR", "SS") for k in ("64", "1024")]
    for r in rows:
        for column in ("perturb (s / 10^6)", "perturb_secure (s / 10^6)", "decode (s / 10^6)",
                       "decode speed-up vs faster peer"):
            assert math.isfinite(float(r[column])) and float(r[column]) > 0, (r["oracle"], column)
        assert r["met"] == ""
        assert ("pure-ldp" in r["peers"]) or ("multi-freq-ldpy" in r["peers"])
    assert all((r["HR decode / (bincount + FWHT)"] != "") == (r["oracle"] == "HR") for r in rows)
