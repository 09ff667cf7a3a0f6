"""The images and the compose deployment, built and run for real by a Docker engine.

CI runs a Docker engine (``.ci/run`` installs Debian's ``docker.io``, ``docker-compose`` and
``debootstrap``, starts ``dockerd`` and makes the base image with ``docker/base/make-base-image.sh``:
no container registry is reachable there, so ``python:3.11-slim-bookworm`` cannot be pulled).
Outside CI these tests are skipped where no engine answers. Builds use the host's network (pip
reaches the package index as the host does); every port published binds 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ldpsynth.shared.amplification import composed_epsilon
from ldpsynth.shared.mechanism import MechanismE

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker" / "compose.yaml"
AGGREGATOR_IMAGE = "ldpsynth-aggregator:latest"
CLIENT_IMAGE = "ldpsynth-client:latest"
LOCAL_BASE = "ldpsynth-base:bookworm"
QUERIES = ROOT / "docs" / "plan" / "queries.json"

pytestmark = pytest.mark.slow


def run(*argv: str, timeout: float = 600, check: bool = True, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=env)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(argv)}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done


@pytest.fixture(scope="module")
def engine() -> None:
    if shutil.which("docker") and run("docker", "info", check=False, timeout=60).returncode == 0:
        return
    if os.environ.get("CI") == "true":
        pytest.fail("CI runs a Docker engine (.ci/run starts dockerd), but `docker info` failed")
    pytest.skip("no Docker engine answers here (`docker info` failed); CI builds and runs the images")


@pytest.fixture(scope="module")
def images(engine: None) -> None:
    """Both images, built as docker/README.md says, on the local base image where there is one."""
    base = os.environ.get("LDPSYNTH_BASE_IMAGE")
    if base is None and run("docker", "image", "inspect", LOCAL_BASE, check=False).returncode == 0:
        base = LOCAL_BASE
    args = ["--build-arg", f"BASE={base}"] if base else []
    for dockerfile, tag in (("Dockerfile.aggregator", AGGREGATOR_IMAGE), ("Dockerfile.client", CLIENT_IMAGE)):
        run("docker", "build", "--network", "host", *args, "-f", f"docker/{dockerfile}", "-t", tag, str(ROOT),
            timeout=1200)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def health(target: str) -> str:
    done = run(sys.executable, "-m", "ldpsynth.cli.main", "aggregator", "health", "--target", target, check=False)
    return json.loads(done.stdout)["status"] if done.stdout.strip() else done.stderr.strip()


def wait_serving(targets: list[str], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        states = [health(t) for t in targets]
        if all(state == "SERVING" for state in states):
            return
        assert time.monotonic() < deadline, f"not SERVING after {seconds:g} s: {states}"
        time.sleep(2)


def stored_rows(target: str) -> int:
    done = run(sys.executable, "-m", "ldpsynth.cli.main", "query", "--target", target, "--collection", "ratings",
               "--queries", str(QUERIES), timeout=120)
    return int(json.loads(done.stdout)[0]["n"])


def wait_listening(target: str, seconds: float) -> None:
    host, port = target.rsplit(":", 1)
    deadline = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection((host, int(port)), 5).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on {target} after {seconds:g} s"
            time.sleep(2)


def through_the_shuffler(replica: str, shuffler: str, devices: int) -> int:
    """``devices`` devices at once, one sealed rating each to the shuffled collection ``survey`` through the
    shuffler; the reports acknowledged (a device whose pool missed the threshold gets UNAVAILABLE: 0)."""
    from ldpsynth.client import AsyncClient, PrivacyLedger, RetryPolicy, Shuffler, SubmitError

    async def fleet() -> int:
        async with AsyncClient(replica, shuffler=Shuffler(shuffler), retry=RetryPolicy(max_attempts=1),
                               deadline=120) as client:
            async def device(d: int) -> int:
                try:
                    result = await client.submit("survey", {"rating": [d % 5 + 1]},
                                                 ledger=PrivacyLedger.for_simulation())
                    return result.acknowledged
                except SubmitError:
                    return 0
            return sum(await asyncio.gather(*(device(d) for d in range(devices))))

    return asyncio.run(fleet())


def shuffled_answer(target: str, queries: Path) -> dict[str, Any]:
    """The first answer of ``ldpsynth query`` on `survey` (with its guarantees)."""
    queries.write_text(json.dumps([{"kind": "marginal", "attributes": ["rating"], "normalization": "mean"}]))
    done = run(sys.executable, "-m", "ldpsynth.cli.main", "query", "--target", target, "--collection", "survey",
               "--queries", str(queries), timeout=120)
    answer: dict[str, Any] = json.loads(done.stdout)[0]
    return answer


def test_the_aggregator_image_serves_as_its_user_and_stops_gracefully(images: None, tmp_path: Path) -> None:
    """The image as its Dockerfile lays it out: WORKDIR /opt/ldpsynth with the copied sources, a
    non-editable install, user 10001, the default command (one machine, embedded log in /data).
    Its health check turns healthy, the client image's device submits to it, `docker stop` exits 0."""
    name = f"ldpsynth-test-{uuid.uuid4().hex[:8]}"
    port = free_port()
    run("docker", "run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:50051", AGGREGATOR_IMAGE)
    try:
        config = json.loads(run("docker", "inspect", name).stdout)[0]["Config"]
        assert (config["WorkingDir"], config["User"]) == ("/opt/ldpsynth", "ldpsynth")
        assert run("docker", "exec", name, "id", "-u").stdout.strip() == "10001"
        # Installed, not imported from the copied sources (-I: no working directory on sys.path; the
        # server's Ray workers do get it there, and find the same complete package).
        installed = run("docker", "exec", name, "python", "-I", "-c",
                        "import ldpsynth.aggregator.ingress.server as m; print(m.__file__)").stdout.strip()
        assert installed.endswith("site-packages/ldpsynth/aggregator/ingress/server.py"), installed
        deadline = time.monotonic() + 180
        while (state := run("docker", "inspect", "-f", "{{.State.Health.Status}}", name).stdout.strip()) != "healthy":
            assert state in ("starting", "") and time.monotonic() < deadline, run("docker", "logs", name).stderr
            time.sleep(2)
        assert health(f"127.0.0.1:{port}") == "SERVING"
        device = run("docker", "run", "--rm", "--network", "host", CLIENT_IMAGE, "client", "submit", "--target",
                     f"127.0.0.1:{port}", "--collection", "ratings", "--rows", "/etc/ldpsynth/rows/device.csv")
        assert json.loads(device.stdout)["acknowledged"] == 5
        assert stored_rows(f"127.0.0.1:{port}") == 5
        run("docker", "stop", "-t", "30", name, timeout=60)
        assert run("docker", "inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip() == "0"
        assert "stopped" in run("docker", "logs", name).stderr
    finally:
        run("docker", "rm", "-f", name, check=False)


@pytest.fixture
def compose(images: None) -> Iterator[tuple[list[str], dict[str, str], list[str]]]:
    """``docker compose`` (or Debian's ``docker-compose``) on a project of its own; taken down with its
    volumes afterwards. Yields the command prefix, its environment and the two replicas' targets."""
    if run("docker", "compose", "version", check=False).returncode == 0:
        tool = ["docker", "compose"]
    elif shutil.which("docker-compose"):
        tool = ["docker-compose"]
    else:
        pytest.fail("neither `docker compose` nor `docker-compose` is installed (.ci/run installs docker-compose)")
    ports = [free_port(), free_port(), free_port()]
    # Not this process's RAY_* variables: ray.init sets RAY_AUTH_MODE=token in its own environment when
    # ~/.ray/auth_token exists, and compose.yaml passes RAY_AUTH_MODE to every Ray node.
    env = {name: value for name, value in os.environ.items() if not name.startswith("RAY_")}
    env |= {"LDPSYNTH_PUBLISH_HOST": "127.0.0.1", "LDPSYNTH_REPLICA_1_PORT": str(ports[0]),
            "LDPSYNTH_REPLICA_2_PORT": str(ports[1]), "LDPSYNTH_SHUFFLER_PORT": str(ports[2])}
    prefix = [*tool, "-p", f"ldpsynth-test-{uuid.uuid4().hex[:8]}", "-f", str(COMPOSE_FILE)]
    try:
        yield prefix, env, [f"127.0.0.1:{p}" for p in ports]  # the replicas', then the shuffler's
    finally:
        logs = run(*prefix, "logs", "--no-color", "--tail", "40", check=False, env=env, timeout=120)
        print(logs.stdout[-20000:])
        run(*prefix, "down", "-v", "--timeout", "20", check=False, env=env, timeout=300)


def container_states(prefix: list[str], env: dict[str, str], service: str) -> list[tuple[str, int]]:
    """``(status, exit code)`` of every container of ``service``."""
    ids = run(*prefix, "ps", "-q", service, env=env).stdout.split()
    return [tuple(run("docker", "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", i).stdout.split())
            for i in ids]  # type: ignore[misc]


def test_the_compose_deployment_end_to_end(compose: tuple[list[str], dict[str, str], list[str]],
                                           tmp_path: Path) -> None:
    """3 NATS servers, a Ray head and 2 worker nodes, 2 replicas; the simulator's 2,000 devices and 3
    device containers through both replicas; both replicas answer alike; a Ray worker node and a NATS
    server killed, both replicas SERVING again, one more device stored; the replicas agree again. Through
    the shuffler tier: 1,300 devices' sealed ratings of `survey`, pools of at least 500; both replicas hold
    exactly what the shuffler acknowledged and state the pool floor's central ε (about 0.66 at ε0 = 2) against
    analysts and the operator."""
    prefix, env, (*targets, shuffler) = compose
    run(*prefix, "up", "-d", "--no-build", env=env, timeout=900)
    deadline = time.monotonic() + 600
    while True:
        states = [*container_states(prefix, env, "simulator"), *container_states(prefix, env, "device")]
        if len(states) == 4 and all(status == "exited" for status, _ in states):
            break
        assert time.monotonic() < deadline, f"the simulator and devices did not finish: {states}"
        time.sleep(5)
    assert all(code == "0" for _, code in states), states
    summary = run(*prefix, "logs", "--no-color", "simulator", env=env).stdout
    assert "2000 delivered, 0 failed" in summary, summary[-3000:]
    wait_serving(targets, 120)
    assert [stored_rows(t) for t in targets] == [20_000 + 3 * 5] * 2
    wait_listening(shuffler, 120)
    delivered = through_the_shuffler(targets[0], shuffler, 1300)
    assert 1000 <= delivered <= 1300  # thresholds drawn in [500, 625]: the last pool's reports may wait
    answers = [shuffled_answer(t, tmp_path / "survey-queries.json") for t in targets]
    assert [a["n"] for a in answers] == [delivered] * 2
    # An independent shuffler: the pool floor's central guarantee (min_batch 500 less F = 1 injected report, at
    # ε0 = 2 over |D| = 5, δ = 1e-9: about 0.66) holds against analysts and the operator alike.
    eps0 = MechanismE(2.0, 5).epsilon
    floor = composed_epsilon(eps0, 5, 499, 1e-9, 1)
    assert all(a["local_epsilon"] == eps0 and a["analysts_epsilon"] == pytest.approx(floor, rel=1e-6)
               and a["operator_epsilon"] == a["analysts_epsilon"] < 0.7
               and a["analysts_delta"] == a["operator_delta"] <= 1e-9 for a in answers), answers
    run(*prefix, "kill", "ray-worker-1", "nats-2", env=env)
    time.sleep(5)
    wait_serving(targets, 240)
    device = json.loads(run(*prefix, "run", "--rm", "device", env=env, timeout=300).stdout.strip().splitlines()[-1])
    # A batch retried after a shard failed mid-commit has its committed part back as duplicates.
    assert device["acknowledged"] + device["duplicates"] == 5 and device["rows"] == 5
    assert [stored_rows(t) for t in targets] == [20_000 + 4 * 5] * 2
