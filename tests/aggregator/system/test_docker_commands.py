"""The commands of ``docker/compose.yaml`` work against a real aggregator serving the collection
the image ships (``docker/collections/ratings.json``), with the target rewritten to the test's
server: the health check, the simulator and a device (see ``tests/docker/``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docker.docker_files import DOCKER, service_argv

pytestmark = pytest.mark.ray


def run_cli(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``ldpsynth ARGV`` in a subprocess (the console script's code path)."""
    return subprocess.run([sys.executable, "-m", "ldpsynth.cli", *argv], capture_output=True, text=True,
                          timeout=300, env=env)


def retarget(argv: list[str], target: str) -> list[str]:
    """``argv`` (an ``ldpsynth ...`` command from compose) with ``--target`` set to ``target``."""
    argv = list(argv[1:])
    argv[argv.index("--target") + 1] = target
    return argv


def test_compose_commands_against_the_served_collection(start_process, tmp_path: Path) -> None:
    server = start_process("--data-dir", str(tmp_path / "data"), "--port", "0",
                           "--collection", str(DOCKER / "collections" / "ratings.json"))

    health = run_cli(["aggregator", "health", "--target", server.address])
    assert health.returncode == 0, health.stderr
    assert json.loads(health.stdout)["status"] == "SERVING"

    simulate = retarget(service_argv("simulator")[0], server.address)
    simulate[simulate.index("--devices") + 1] = "150"
    simulated = run_cli(simulate)
    assert simulated.returncode == 0, simulated.stdout + simulated.stderr
    assert "1500 sent" in simulated.stdout

    device = retarget(service_argv("device")[0], server.address)
    device[device.index("--rows") + 1] = str(DOCKER / "rows" / "device.csv")
    env = {"LDPSYNTH_LEDGER": str(tmp_path / "ledger.sqlite"), "PATH": "/usr/bin:/bin"}
    submitted = run_cli(device, env=env)
    assert submitted.returncode == 0, submitted.stderr
    summary = json.loads(submitted.stdout)
    assert (summary["sent"], summary["acknowledged"]) == (5, 5)

    assert server.terminate() == 0
    gone = run_cli(["aggregator", "health", "--target", server.address, "--deadline", "2"])
    assert gone.returncode == 1 and json.loads(gone.stdout)["status"] == "UNAVAILABLE"


def test_health_rejects_a_deadline_that_is_not_positive() -> None:
    result = run_cli(["aggregator", "health", "--target", "127.0.0.1:1", "--deadline", "0"])
    assert result.returncode == 2 and "--deadline" in result.stderr
