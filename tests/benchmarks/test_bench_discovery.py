"""Smoke test of ``benchmarks/bench_discovery.py --quick``: the discovery collection's server path and the
simulation run on the same population and the table is well formed. Speed is not asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_discovery.py"
WORDS = Path("/usr/share/dict/american-english")


@pytest.mark.skipif(not WORDS.exists(), reason="apt-get install -y wamerican")
def test_quick_run_writes_a_well_formed_table(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = (tmp_path / "bench_discovery.md").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "| n | epsilon | k | method | f1 | rel_error | ci_coverage | population | seconds |"
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    assert [r[3] for r in rows] == ["collection", "simulate (N known)"]
    for r in rows:
        assert r[:3] == ["20,000", "4.000", "10"]
        assert 0.3 <= float(r[4]) <= 1.0                       # seeded: 0.6 and 0.5
        assert 0.0 <= float(r[6]) <= 1.0
    assert abs(int(rows[0][7].replace(",", "")) - 20_000) < 1_000   # R n_0: sd about 140
