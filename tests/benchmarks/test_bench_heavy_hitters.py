"""Smoke test of ``benchmarks/bench_heavy_hitters.py --quick``: ours and pure-ldp's PEM run on the same
population, and the tables are well formed. Speed is not asserted (design: speed targets live in the benchmark)."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_heavy_hitters.py"
WORDS = Path("/usr/share/dict/american-english")


def test_quick_run_writes_a_well_formed_table(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=300, cwd=SCRIPT.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    markdown = (tmp_path / "bench_heavy_hitters.md").read_text(encoding="utf-8")
    assert "| population | method | n | ε | k |" in markdown
    with open(tmp_path / "bench_heavy_hitters.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    populations = (["words"] if WORDS.exists() else []) + ["urls"]
    assert [(r["population"], r["method"]) for r in rows] == [
        (p, m) for p in populations for m in ("ours", "pure-ldp PEM+CMS")]
    for r in rows:
        assert (r["n"], r["epsilon"], r["k"]) == ("20000", "4", "10")
        assert r["peer_n"] == ("20000" if r["method"] == "ours" else "2000")
        for column in ("precision", "recall", "f1"):
            assert 0.0 <= float(r[column]) <= 1.0, (r["population"], r["method"], column)
        for column in ("client_ms", "server_us", "wall_s"):
            assert math.isfinite(float(r[column])) and float(r[column]) > 0, (r["population"], column)
        if r["method"] == "ours":
            assert float(r["f1"]) >= 0.3          # seeded: 0.5 on both populations at n = 20,000, eps = 4
            assert 0.0 <= float(r["ci_coverage"]) <= 1.0
        else:
            assert r["ci_coverage"] == "nan"
