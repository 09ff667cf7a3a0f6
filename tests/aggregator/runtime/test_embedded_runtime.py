"""The embedded Ray runtime of a server started without ``--ray-address`` (issue 16, item 6): always
local (never a cluster found on the host), bound to 127.0.0.1 only, ended with the server even when
the server is SIGKILLed, its raylet's death logged, and its log lines out of the CLI's output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ldpsynth.aggregator.runtime.reaper import descendants, describe

from ..conftest import ServerProcess

pytestmark = pytest.mark.ray
LOOPBACK = ("127.0.0.1:", "[::ffff:127.0.0.1]:", "[::1]:")


@pytest.fixture
def own_runtime(tmp_path: Path, collection_files: list[Path], ray_address: str) -> Iterator[ServerProcess]:
    """A server with its own runtime; RAY_ADDRESS names the session's cluster, which it must not join."""
    args = ["--data-dir", str(tmp_path / "data"), "--port", "0", "--shards", "2"]
    for f in collection_files:
        args += ["--collection", str(f)]
    server = ServerProcess.aggregator(args, tmp_path / "server.log", env={**os.environ, "RAY_ADDRESS": ray_address})
    yield server
    server.kill()  # if still running; closes its log either way


def listeners(pids: set[int]) -> list[str]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if any(f"pid={pid}," in line for pid in pids)]


def test_own_runtime_is_local_loopback_and_ends_with_the_server(own_runtime: ServerProcess) -> None:
    server = own_runtime
    helpers = describe(descendants(server.proc.pid))
    names = {t["name"] for t in helpers}
    assert {"gcs_server", "raylet", "nats-server"} <= names, names  # its own runtime, not the session's
    mine = listeners({server.proc.pid} | {int(t["pid"]) for t in helpers})
    assert len(mine) >= 4
    assert [line for line in mine if not line.split()[3].startswith(LOOPBACK)] == []
    server.kill()  # SIGKILL: the server cannot stop anything itself
    deadline = time.monotonic() + 20
    while (alive := describe(int(t["pid"]) for t in helpers if t["start"] == _start(int(t["pid"])))):
        assert time.monotonic() < deadline, f"still running 20 s after the server's SIGKILL: {alive}"
        time.sleep(0.2)
    # The cause is the SIGKILL: nothing may blame the raylet, which ends with the server (on main
    # 5612345 the reaper said the raylet "had exited before the aggregator; that ended it").
    time.sleep(1.0)
    assert "raylet" not in server.log() or "ended without stopping its helper processes" in server.log()
    assert "before the aggregator" not in server.log() and "ended it" not in server.log(), server.log()[-2000:]


def _start(pid: int) -> object:
    found = describe([pid])
    return found[0]["start"] if found else None


def test_a_dead_raylet_is_logged_and_ends_the_server(own_runtime: ServerProcess) -> None:
    server = own_runtime
    (raylet,) = [t for t in describe(descendants(server.proc.pid)) if t["name"] == "raylet"]
    os.kill(int(raylet["pid"]), signal.SIGKILL)
    code = server.wait(60)
    assert code == 1
    assert f"the embedded Ray runtime's raylet (pid {raylet['pid']}) exited" in server.log(), server.log()[-2000:]


def test_a_temporary_directory_too_long_for_rays_sockets_is_one_line(tmp_path: Path,
                                                                     collection_files: list[Path]) -> None:
    """Ray's socket paths under RAY_TMPDIR must fit AF_UNIX's 107 bytes; on main 5612345 a longer one
    crashed ``serve`` with a traceback."""
    long = tmp_path / ("t" * (100 - len(str(tmp_path))))
    long.mkdir()
    args = [sys.executable, "-m", "ldpsynth.cli.main", "aggregator", "serve", "--data-dir", str(tmp_path / "data"),
            "--port", "0", "--shards", "1", "--collection", str(collection_files[0])]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "RAY_TMPDIR": str(long), "RAY_ADDRESS": ""})
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "AF_UNIX" in done.stderr and "set RAY_TMPDIR to a shorter directory" in done.stderr


def test_ray_log_lines_stay_out_of_the_cli_output_unless_verbose(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "ldpsynth.cli.main", "simulate", "--devices", "20", "--no-progress",
               "--processes", "1"]
    quiet = subprocess.run(command, capture_output=True, text=True, timeout=600,
                           env={**os.environ, "RAY_ADDRESS": ""})
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    assert quiet.stderr.strip().splitlines() == [quiet.stderr.strip().splitlines()[0]]  # only "simulating: ..."
    assert quiet.stderr.startswith("simulating:")
    assert "ray" not in quiet.stdout.lower().replace("array", "")
