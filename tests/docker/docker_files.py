"""``docker/`` read for the tests of this folder (and tests/aggregator/system/test_docker_commands.py):
the compose file, the Dockerfiles' instructions, the commands each service runs and the NATS configurations.

tests/test_containers.py builds the images and runs the compose deployment (CI runs a Docker engine); the
tests of this folder need none and run everywhere: they check that the images, the compose file and the NATS
configurations are consistent with the code they run and with docs/deployment.md.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
DEPLOYMENT = ROOT / "docs" / "deployment.md"
COMPOSE = yaml.safe_load((DOCKER / "compose.yaml").read_text(encoding="utf-8"))
SERVICES = COMPOSE["services"]
PORT = 50051
#: The ``ray start`` port flags every Ray node pins (docs/deployment.md, "Ports").
RAY_NODE_PORT_FLAGS = ("--node-manager-port", "--object-manager-port", "--runtime-env-agent-port",
                       "--dashboard-agent-grpc-port", "--dashboard-agent-listen-port", "--metrics-export-port",
                       "--min-worker-port", "--max-worker-port")
#: Services that run once and end (no health check, no restart).
ONE_SHOT = ("simulator", "device")
#: The monitoring services (compose profile "monitoring"), and where their files are.
MONITORING = ("grafana", "prometheus")
PROMETHEUS = DOCKER / "prometheus"
GRAFANA = DOCKER / "grafana"
#: The port every replica serves its metrics on, in the compose file.
METRICS_PORT = 9464


def dockerfile_instructions(name: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` of a Dockerfile, continuation lines joined, comments dropped."""
    text = (DOCKER / name).read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1].strip())
            for line in joined.splitlines() if line.strip()]


def exec_form(instructions: list[tuple[str, str]], name: str) -> list[str]:
    """The JSON (exec) form of the last ``name`` instruction."""
    values = [args for instruction, args in instructions if instruction == name]
    assert values, f"no {name}"
    return json.loads(values[-1])


def image_of(service: dict) -> str:
    """The Dockerfile a service is built from, or the registry image it runs (Grafana)."""
    return service["build"]["dockerfile"].rsplit("/", 1)[-1] if "build" in service else service["image"]


def service_argv(name: str) -> list[list[str]]:
    """The commands a compose service runs (a ``sh -c`` script split at ``&&`` and ``||``), ``exec`` dropped."""
    service = SERVICES[name]
    entrypoint = service.get("entrypoint") or exec_form(dockerfile_instructions(image_of(service)), "ENTRYPOINT")
    argv = [*entrypoint, *service["command"]]
    if argv[:2] == ["sh", "-c"]:
        return [[word for word in shlex.split(part) if word != "exec"] for part in re.split(r"&&|\|\|", argv[2])]
    return [argv]


def image_commands(name: str) -> list[list[str]]:
    """Every command line run from the image built by Dockerfile ``name``: its default command,
    its health check, and the commands and health checks of the compose services built from it."""
    instructions = dockerfile_instructions(name)
    commands = [[*exec_form(instructions, "ENTRYPOINT"), *exec_form(instructions, "CMD")]]
    commands += [json.loads(args.split("CMD", 1)[1]) for instruction, args in instructions
                 if instruction == "HEALTHCHECK"]
    for service_name, service in SERVICES.items():
        if image_of(service) == name:
            commands += service_argv(service_name)
            test = service.get("healthcheck", {}).get("test")
            if test:
                commands.append(test[1:])
    return commands


def ldpsynth_commands() -> list[list[str]]:
    """Every ``ldpsynth ...`` command line in the Dockerfiles and the compose file."""
    return [argv for name in ("Dockerfile.aggregator", "Dockerfile.client") for argv in image_commands(name)
            if argv[0] == "ldpsynth"]


def flag(argv: list[str], name: str) -> str:
    """The value of ``--name VALUE`` or ``--name=VALUE`` in ``argv``."""
    for i, word in enumerate(argv):
        if word == name:
            return argv[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    raise AssertionError(f"{name} not in {argv}")


def copied_into(image: str, path: PurePosixPath) -> Path:
    """The file of the build context that Dockerfile ``image`` copies to ``path``."""
    for args in (args for instruction, args in dockerfile_instructions(image) if instruction == "COPY"):
        *sources, destination = shlex.split(args)
        if len(sources) == 1 and path.is_relative_to(destination):
            candidate = ROOT / sources[0] / path.relative_to(destination)
            if candidate.is_file():
                return candidate
    raise AssertionError(f"{image}: {path} is not copied into the image")


def nats_config(text: str) -> dict[str, Any]:
    """The subset of the NATS configuration syntax the files of ``docker/nats`` use: ``key: value``
    lines, ``key {`` blocks, ``key: [`` lists of one item per line, ``#`` comments. (The real
    parser, ``nats-server -t``, checks the files in :func:`test_nats_configurations_are_valid`.)"""
    root: dict[str, Any] = {}
    stack: list[Any] = [root]
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line in ("}", "]"):
            stack.pop()
            continue
        if isinstance(stack[-1], list):
            stack[-1].append(line.strip('"'))
            continue
        key, value = re.fullmatch(r"(\w+)\s*[:=]?\s*(.*)", line).groups()
        if value in ("{", "["):
            stack[-1][key] = {} if value == "{" else []
            stack.append(stack[-1][key])
        else:
            stack[-1][key] = value.strip('"')
    assert stack == [root], "unbalanced braces"
    return root


def host_port(listen: str) -> tuple[str, int]:
    host, port = listen.rsplit(":", 1)
    return host, int(port)


def role(name: str) -> str:
    """A service's role, from what it runs."""
    if "monitoring" in SERVICES[name].get("profiles", []):
        return "prometheus" if image_of(SERVICES[name]) == "Dockerfile.prometheus" else "grafana"
    commands = service_argv(name)
    if commands[0][0] == "nats-server":
        return "nats"
    if any(argv[:3] == ["ldpsynth", "aggregator", "serve"] for argv in commands):
        return "replica"
    if any(argv[:3] == ["ldpsynth", "shuffler", "serve"] for argv in commands):
        return "shuffler"
    if any(argv[:3] == ["ldpsynth", "aggregator", "sealing-key"] for argv in commands):
        return "key"
    if commands[0][:3] == ["ray", "start", "--head"]:
        return "ray-head"
    if commands[0][:2] == ["ray", "start"]:
        return "ray-worker"
    return "other"


def services(kind: str) -> list[str]:
    return sorted(name for name in SERVICES if role(name) == kind)


def nats_file(name: str) -> Path:
    """The configuration file of NATS service ``name``, in the build context."""
    return copied_into(image_of(SERVICES[name]), PurePosixPath(flag(service_argv(name)[0], "-c")))


def nats_of(name: str) -> dict[str, Any]:
    return nats_config(nats_file(name).read_text(encoding="utf-8"))


def volume_at(name: str, path: str) -> str:
    """The named volume service ``name`` mounts at ``path`` or at a parent of it."""
    for mount in SERVICES[name].get("volumes", []):
        volume, target = mount.split(":")[:2]
        if PurePosixPath(path).is_relative_to(target):
            return volume
    raise AssertionError(f"{name}: nothing mounted at {path}")


def serve_argv(name: str) -> list[str]:
    return next(argv for argv in service_argv(name) if argv[:3] == ["ldpsynth", "aggregator", "serve"])


def size(value: str) -> int:
    """A NATS size (``8MB`` is 8 * 1024**2, ``8M`` is 8 * 1000**2; NATS configuration docs)."""
    number, unit = re.fullmatch(r"(\d+)\s*([KMG]B?)?", value.upper()).groups()
    unit = unit or ""
    return int(number) * (1024 if unit.endswith("B") else 1000) ** (" KMG".index(unit[:1] or " "))


def serve_of(name: str) -> list[str]:
    """The ``ldpsynth ... serve`` command of service ``name``."""
    [argv] = [argv for argv in service_argv(name) if argv[0] == "ldpsynth" and "serve" in argv[:3]]
    return argv
