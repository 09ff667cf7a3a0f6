"""Smoke test of ``benchmarks/bench_scale.py --quick``: it runs a local multi-node cluster (Ray
nodes, 3 NATS servers, 2 replicas, 2 client processes), a bare gRPC server, the log append runs and
the shard worker restarts; every acknowledged report is stored once and its tables are well formed.
Without a cluster: its options (``--shape``, ``--replicas``, ``--clients``) and how it shares a run
among client processes and merges what they did.

Speed is not asserted (design: speed targets live in the benchmark, not in timed tests).
"""

from __future__ import annotations

import csv
import importlib
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_scale.py"


def _module(name: str) -> ModuleType:
    """A module of the benchmark (it imports its sibling modules and its package scale/ from its own folder)."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(SCRIPT.parent))


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """The benchmark's entry point: its options."""
    return _module("bench_scale")


@pytest.fixture(scope="module")
def client() -> ModuleType:
    """The load client: how a run is shared among client processes and what they did merged."""
    return _module("scale.client")


@pytest.fixture(scope="module")
def cluster() -> ModuleType:
    """The cluster part: its plan of runs."""
    return _module("scale.cluster")


@pytest.mark.parametrize(("argv", "message"), [
    (["--replicas", "0"], "--replicas: an integer >= 1, got 0"),
    (["--clients", "0"], "--clients: an integer >= 1, got 0"),
    (["--clients", "101"], "--clients: an integer from 1 to --concurrency (100), got 101"),
    (["--quick", "--clients", "21"], "--clients: an integer from 1 to --concurrency (20), got 21"),
    (["--shape", "wide"], "argument --shape: invalid choice: 'wide'"),
])
def test_options_out_of_range_are_refused_naming_the_option(
        bench: ModuleType, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench.parse_args(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_a_shape_sets_defaults_that_explicit_options_override(bench: ModuleType, cluster: ModuleType) -> None:
    default = bench.parse_args([])
    assert (default.shards, default.concurrency, default.reports, default.connections) == (4, 100, 10, "both")
    assert (default.replicas, default.clients) == (2, 1)
    shaped = bench.parse_args(["--shape", "concurrent256", "--replicas", "3", "--clients", "4"])
    assert (shaped.shards, shaped.concurrency, shaped.reports, shaped.connections) == (16, 256, 10, "long-lived")
    assert (shaped.replicas, shaped.clients) == (3, 4)
    assert bench.parse_args(["--shape", "concurrent256", "--shards", "8"]).shards == 8
    assert cluster.run_plan(3, "long-lived") == [(0, False), (1, False), (3, False)]
    assert cluster.run_plan(1, "both") == [(0, True), (1, True), (0, False), (1, False)]


def test_a_run_is_shared_among_client_processes(client: ModuleType) -> None:
    drive = client.Drive("127.0.0.1:1", "/m", streams=2001, reports=10, concurrency=256, connect_each=False,
                        warmup=200, replica=True)
    parts = client.split_drive(drive, 3)
    assert [(p.streams, p.concurrency, p.warmup) for p in parts] == [(667, 86, 67), (667, 85, 67), (667, 85, 66)]
    assert {(p.target, p.method, p.reports, p.connect_each, p.replica) for p in parts} == {
        ("127.0.0.1:1", "/m", 10, False, True)}
    assert client.split_drive(drive, 1) == [drive]


def test_the_outcomes_of_client_processes_merge(client: ModuleType) -> None:
    outcomes = [
        {"latencies": [0.001, 0.002, 0.003], "finished": 12.5, "accepted": 30, "warm_accepted": 10,
         "errors": [f"e{i}" for i in range(15)]},
        {"latencies": [0.004, 0.005], "finished": 13.0, "accepted": 20, "warm_accepted": 10,
         "errors": [f"f{i}" for i in range(10)]},
        {"latencies": [], "finished": 10.5, "accepted": 0, "warm_accepted": 0, "errors": []},  # it had no stream
    ]
    merged = client.merge_outcomes(outcomes, go_at=10.0)
    assert (merged.streams, merged.seconds, merged.accepted) == (5, 3.0, 70)  # from the go to the last ack
    assert merged.p50_ms == pytest.approx(3.0) and merged.p99_ms == pytest.approx(4.96)  # of all 5 latencies
    assert merged.errors == [*(f"e{i}" for i in range(15)), *(f"f{i}" for i in range(5)), "... 5 more"]
    lone = client.merge_outcomes(outcomes[:1], go_at=12.0)
    assert (lone.streams, lone.seconds, lone.p50_ms) == (3, 0.5, pytest.approx(2.0))


@pytest.mark.slow
@pytest.mark.ray
def test_quick_run_writes_a_well_formed_table(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--clients", "2", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr[-5000:]
    markdown = (tmp_path / "scale.md").read_text(encoding="utf-8")
    # 3 replica runs of (20 warm-up + 200 measured) streams of 10 fresh reports, each stored once.
    assert "After the runs: 6,600 reports stored, 6,600 acknowledged as new; log checked: no problem." in markdown
    assert markdown.count("not checked (--quick)") == 6 and "Integrity problems" not in markdown
    assert "from 2 separate client process(es)" in markdown
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
