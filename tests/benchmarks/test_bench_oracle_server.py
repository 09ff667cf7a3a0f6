"""Smoke test of ``benchmarks/bench_oracle_server.py --quick``: a real server, every mechanism, a well-formed table.

Skipped where MovieLens-100K is absent (the script then says so and writes nothing). Speed is not asserted.
"""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from pathlib import Path

import pytest

from ldpsynth.simulation.datasets import MOVIELENS_FILE, DatasetNotFound, dataset_path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_oracle_server.py"


def test_quick_run_serves_every_mechanism_with_error_bars(tmp_path: Path) -> None:
    try:
        dataset_path(MOVIELENS_FILE)
    except DatasetNotFound as exc:
        pytest.skip(f"MovieLens-100K is not on this machine: {exc}")
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path)], capture_output=True,
                          text=True, timeout=600, cwd=SCRIPT.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    with open(tmp_path / "oracle_server.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["mechanism"], r["queries"]) for r in rows] == [
        (m, q) for m in ("E", "OUE", "OLH", "HR", "SS") for q in ("movies", "ratings", "cells")]
    wire = {r["mechanism"]: float(r["wire bytes per report"]) for r in rows}
    assert wire["HR"] < wire["E"] < wire["OLH"] < wire["OUE"] == wire["SS"]
    for r in rows:
        assert int(r["n"]) == 5000 and math.isfinite(float(r["RMSE"])) and float(r["served SE (RMS)"]) > 0
    movies = {r["mechanism"]: float(r["RMSE"]) for r in rows if r["queries"] == "movies"}
    assert max(movies[m] for m in ("OUE", "OLH", "HR", "SS")) < movies["E"] / 10   # |D| = 8,410: the oracles win
    assert "| epsilon | mechanism | queries |" in (tmp_path / "oracle_server.md").read_text(encoding="utf-8")
