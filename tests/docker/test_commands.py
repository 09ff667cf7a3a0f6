"""``docker/``: every command the images and the compose file run is parsed by the real ``ldpsynth`` (and
``ray start``) argument parsers; every port is bound as docs/deployment.md documents; every long-running
service has its own health check."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ldpsynth.cli.main import build_parser
from tests.docker.docker_files import (
    DEPLOYMENT,
    MONITORING,
    ONE_SHOT,
    PORT,
    RAY_NODE_PORT_FLAGS,
    SERVICES,
    dockerfile_instructions,
    flag,
    host_port,
    image_of,
    ldpsynth_commands,
    nats_of,
    role,
    serve_argv,
    serve_of,
    service_argv,
    services,
)


# ----- commands -----------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", ldpsynth_commands(), ids=lambda argv: " ".join(argv[1:4]))
def test_every_ldpsynth_command_parses(argv: list[str]) -> None:
    args = build_parser().parse_args(argv[1:])  # an unknown flag or a bad value exits with status 2
    assert callable(args.handler)


def test_every_ray_start_flag_exists() -> None:
    ray = Path(sys.executable).with_name("ray")
    help_text = subprocess.run([str(ray), "start", "--help"], capture_output=True, text=True, timeout=120,
                               check=True).stdout
    starts = [argv for name in SERVICES if name not in MONITORING for argv in service_argv(name)
              if argv[:2] == ["ray", "start"]]
    assert len(starts) == 1 + len(services("ray-worker")) + len(services("replica"))
    for argv in starts:
        for word in argv[2:]:
            assert re.search(rf"^\s+{re.escape(word.split('=')[0])}\b", help_text, re.M), word


def test_server_port_is_the_exposed_the_health_checked_and_the_targeted_one() -> None:
    instructions = dockerfile_instructions("Dockerfile.aggregator")
    assert [args for instruction, args in instructions if instruction == "EXPOSE"] == [str(PORT)]
    for argv in ldpsynth_commands():
        if "--port" in argv:
            assert argv[argv.index("--port") + 1] == str(PORT)
        if "--target" in argv:
            assert all(target.endswith(f":{PORT}") for target in argv[argv.index("--target") + 1].split(","))


# ----- ports, health checks -----------------------------------------------------------------------
def documented_ports() -> dict[int, str]:
    """Port -> its row of the table in docs/deployment.md, "## Ports" (a range counts its ends)."""
    section = DEPLOYMENT.read_text(encoding="utf-8").split("\n## Ports\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| port")]
    return {int(port): row for row in rows for port in re.findall(r"\d{4,5}", row.split("|")[1])}


def test_every_server_binds_as_documented() -> None:
    docs = documented_ports()
    bound: list[int] = []
    for name in services("nats"):
        config = nats_of(name)
        # Clients and routes: every interface of the container (of the host's cluster network on
        # hosts); monitoring: loopback only, as the table says.
        assert host_port(config["listen"])[0] == host_port(config["cluster"]["listen"])[0] == "0.0.0.0"
        monitoring = host_port(config["http"])
        assert monitoring[0] == "127.0.0.1" and "127.0.0.1" in docs[monitoring[1]]
        bound += [host_port(config["listen"])[1], host_port(config["cluster"]["listen"])[1], monitoring[1]]
    for name in services("replica"):
        serve = serve_argv(name)
        assert flag(serve, "--host") == "0.0.0.0"
        bound.append(int(flag(serve, "--port")))
        assert flag(serve, "--metrics-host") == "0.0.0.0"  # in its container; Prometheus scrapes it on backend
        bound.append(int(flag(serve, "--metrics-port")))
    shuffler = serve_of("shuffler")
    assert host_port(flag(shuffler, "--listen"))[0] == flag(shuffler, "--metrics-host") == "0.0.0.0"
    bound += [host_port(flag(shuffler, "--listen"))[1], int(flag(shuffler, "--metrics-port"))]
    bound += [9090, 3000]  # Prometheus and Grafana, in their containers
    for name in MONITORING:
        published = [port.split(":") for port in SERVICES[name]["ports"]]
        assert all(parts[0] == "127.0.0.1" for parts in published)  # the host's loopback only
        bound += [int(parts[-1]) for parts in published]
    head = service_argv(services("ray-head")[0])[0]
    bound += [int(flag(head, f)) for f in ("--port", "--ray-client-server-port")]
    for name in [*services("ray-head"), *services("ray-worker"), *services("replica")]:
        bound += [int(flag(service_argv(name)[0], f)) for f in RAY_NODE_PORT_FLAGS]
    for port in bound:
        assert port in docs, f"port {port} is bound in docker/ but not in docs/deployment.md, Ports"
    assert {4222, 6222, 8222, 6379, PORT} <= set(bound)


def test_every_long_running_service_has_its_own_health_check() -> None:
    for name, service in SERVICES.items():
        check = service.get("healthcheck", {})
        if name in ONE_SHOT or role(name) == "key":
            assert image_of(service) == "Dockerfile.client" or check.get("disable") is True
            assert service["restart"] == "no"
            continue
        # Its own: the image's health check is the replica's (gRPC health on :50051).
        assert check["test"][0] == "CMD" and not check.get("disable"), name
        assert service["restart"] == "unless-stopped", name
    for name in services("nats"):
        test = " ".join(SERVICES[name]["healthcheck"]["test"])
        assert f"http://{nats_of(name)['http']}/healthz" in test
    for name in services("replica"):
        test = SERVICES[name]["healthcheck"]["test"][1:]
        assert test[:3] == ["ldpsynth", "aggregator", "health"]
        assert flag(test, "--target") == f"127.0.0.1:{flag(serve_argv(name), '--port')}"
