"""A replica that cannot start says why at once; a replica asked to stop while starting stops.

Each test runs ``ldpsynth aggregator serve`` as users do (the console script, its own local Ray
runtime on 127.0.0.1) and times it from the process's start. (A worker that cannot even be created,
the image's defect, needs a non-editable install: tests/test_installed.py.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ldpsynth.aggregator.runtime.reaper import descendants, describe, start_time

from ..conftest import RATINGS

#: The issue's promise: a replica whose workers cannot start ends within this many seconds.
FAIL_FAST_SECONDS = 30.0
CONSOLE_SCRIPT = Path(sys.executable).parent / "ldpsynth"


def serve(data_dir: Path, collection: Path, cwd: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([str(CONSOLE_SCRIPT), "aggregator", "serve", "--data-dir", str(data_dir), "--port", "0",
                             "--shards", "2", "--collection", str(collection), *extra],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str], timeout: float) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the replica did not end within {timeout:g} s; stderr:\n{err[-3000:]}")
    return proc.returncode, out, err


@pytest.fixture
def collection(tmp_path: Path) -> Path:
    path = tmp_path / "ratings.json"
    path.write_text(RATINGS.dumps())
    return path


def test_a_worker_whose_start_raises_ends_the_replica_naming_the_cause(tmp_path: Path, collection: Path) -> None:
    """Shard 1's directory is a file: its worker's start raises; the replica says so and ends."""
    data = tmp_path / "data"
    (data / "shards").mkdir(parents=True)
    (data / "shards" / "shard-001").write_text("not a directory\n")
    started = time.monotonic()
    code, out, err = finish(serve(data, collection, tmp_path), FAIL_FAST_SECONDS + 30)
    assert code == 1, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("ldpsynth aggregator: error: shard 1: "), last
    assert "Error" in last and "Traceback" not in err
    assert time.monotonic() - started < FAIL_FAST_SECONDS


def test_sigterm_while_starting_stops_the_replica_and_everything_it_started(tmp_path: Path,
                                                                          collection: Path) -> None:
    """SIGTERM as soon as the Ray runtime's first processes exist (``ray.init`` under way): exit 0, no
    stack dump, and none of the processes it started is left running."""
    proc = serve(tmp_path / "data", collection, tmp_path)
    seen: dict[int, object] = {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        for helper in describe(descendants(proc.pid)):
            seen[int(helper["pid"])] = helper["start"]  # type: ignore[call-overload]
        if any(str(helper["name"]).startswith(("gcs_server", "raylet")) for helper in describe(descendants(proc.pid))):
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the replica ended by itself"
    proc.send_signal(signal.SIGTERM)
    code, out, err = finish(proc, 90)
    assert code == 0, err[-3000:]
    assert "listening" not in out
    assert "SIGTERM received" not in err and "Traceback" not in err, err[-3000:]
    alive = deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        alive = [pid for pid, start in seen.items() if start_time(pid) == start]
        if not alive:
            break
        time.sleep(0.2)
    assert not alive, f"left running: {describe(alive)}"  # type: ignore[arg-type]


def test_sigterm_after_start_is_still_graceful(tmp_path: Path, collection: Path) -> None:
    """The handlers installed before Ray's are kept after it started: a plain SIGTERM, exit 0."""
    proc = serve(tmp_path / "data", collection, tmp_path)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert '"listening"' in line, finish(proc, 60)[2][-3000:]
    os.kill(proc.pid, signal.SIGTERM)
    code, _, err = finish(proc, 90)
    assert code == 0 and "SIGTERM received" not in err, err[-3000:]
    assert "stopped" in err
