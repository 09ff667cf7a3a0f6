"""``docker/``: the images and the compose file are consistent with the code they run.

Docker is not available on the CI machine, so the images are not built here; instead every
command the files run is parsed by the real ``ldpsynth`` (and ``ray start``) argument parsers,
every ``COPY`` source exists in the build context, and the files the commands name are the
files the images copy.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
import yaml

from ldpsynth.aggregator.simulation.datasets import ratings_schema
from ldpsynth.cli.main import build_parser
from ldpsynth.client import load_rows
from ldpsynth.shared.schema import Schema

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
COMPOSE = yaml.safe_load((DOCKER / "compose.yaml").read_text(encoding="utf-8"))
SERVICES = COMPOSE["services"]
PORT = 50051


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
    return service["build"]["dockerfile"].rsplit("/", 1)[-1]


def service_argv(name: str) -> list[list[str]]:
    """The commands a compose service runs (a ``sh -c`` script split at ``&&``), ``exec`` dropped."""
    service = SERVICES[name]
    entrypoint = service.get("entrypoint") or exec_form(dockerfile_instructions(image_of(service)), "ENTRYPOINT")
    argv = [*entrypoint, *service["command"]]
    if argv[:2] == ["sh", "-c"]:
        return [[word for word in shlex.split(part) if word != "exec"] for part in argv[2].split("&&")]
    return [argv]


def image_commands(name: str) -> list[list[str]]:
    """Every command line run from the image built by Dockerfile ``name``: its default command,
    its health check, and the commands of the compose services built from it."""
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


def test_compose_has_the_deployment_services() -> None:
    assert set(SERVICES) == {"ray-head", "aggregator", "simulator", "device"}
    assert image_of(SERVICES["device"]) == "Dockerfile.client"
    assert all(image_of(SERVICES[name]) == "Dockerfile.aggregator" for name in ("ray-head", "aggregator", "simulator"))
    assert all(SERVICES[name]["build"]["context"] == ".." for name in SERVICES)
    assert SERVICES["aggregator"]["ports"] == [f"{PORT}:{PORT}"]
    for name in ("simulator", "device"):
        assert SERVICES[name]["depends_on"]["aggregator"]["condition"] == "service_healthy"
    assert SERVICES["device"]["deploy"]["replicas"] >= 2


def test_every_ray_node_mounts_the_shard_volume_where_the_aggregator_keeps_it() -> None:
    serve = next(argv for argv in service_argv("aggregator") if argv[:3] == ["ldpsynth", "aggregator", "serve"])
    data_dir = serve[serve.index("--data-dir") + 1]
    for name in ("ray-head", "aggregator"):  # a shard actor may be placed on either node
        assert f"shards:{data_dir}" in SERVICES[name]["volumes"]
    assert "shards" in COMPOSE["volumes"]


def test_the_aggregator_joins_the_ray_head() -> None:
    start, serve = service_argv("aggregator")
    assert start[:2] == ["ray", "start"] and "--address=ray-head:6379" in start
    assert serve[serve.index("--ray-address") + 1] == "auto"
    head = service_argv("ray-head")[0]
    assert head[:3] == ["ray", "start", "--head"] and "--port=6379" in head


@pytest.mark.parametrize("argv", ldpsynth_commands(), ids=lambda argv: " ".join(argv[1:4]))
def test_every_ldpsynth_command_parses(argv: list[str]) -> None:
    args = build_parser().parse_args(argv[1:])  # an unknown flag or a bad value exits with status 2
    assert callable(args.handler)


def test_every_ray_start_flag_exists() -> None:
    ray = Path(sys.executable).with_name("ray")
    help_text = subprocess.run([str(ray), "start", "--help"], capture_output=True, text=True, timeout=120,
                               check=True).stdout
    for name in ("ray-head", "aggregator"):
        for argv in service_argv(name):
            if argv[:2] == ["ray", "start"]:
                for flag in argv[2:]:
                    assert re.search(rf"^\s+{re.escape(flag.split('=')[0])}\b", help_text, re.M), flag


def test_server_port_is_the_exposed_the_health_checked_and_the_targeted_one() -> None:
    instructions = dockerfile_instructions("Dockerfile.aggregator")
    assert [args for instruction, args in instructions if instruction == "EXPOSE"] == [str(PORT)]
    for argv in ldpsynth_commands():
        if "--port" in argv:
            assert argv[argv.index("--port") + 1] == str(PORT)
        if "--target" in argv:
            assert argv[argv.index("--target") + 1].endswith(f":{PORT}")


@pytest.mark.parametrize("name", ["Dockerfile.aggregator", "Dockerfile.client"])
def test_copy_sources_exist_and_named_files_are_copied(name: str) -> None:
    copies = [shlex.split(args) for instruction, args in dockerfile_instructions(name) if instruction == "COPY"]
    destinations = {}
    for *sources, destination in copies:
        for source in sources:
            assert (ROOT / source).exists(), f"{name}: COPY {source}: not in the build context"
            destinations[PurePosixPath(destination)] = ROOT / source
    # Every package folder of pyproject.toml is copied (pip install . needs them all).
    for folder in ("shared", "client", "aggregator", "cli"):
        assert any(source == ROOT / folder for source in destinations.values()), folder
    # Every /etc/ldpsynth/... file a command of this image names is copied into it.
    named = [PurePosixPath(word) for argv in image_commands(name) for word in argv if word.startswith("/etc/ldpsynth/")]
    assert named
    for path in named:
        assert any((source / path.relative_to(dest)).is_file() for dest, source in destinations.items()
                   if path.is_relative_to(dest)), f"{name}: {path} is not copied into the image"


@pytest.mark.parametrize("name, extra", [("Dockerfile.aggregator", "aggregator"), ("Dockerfile.client", "client")])
def test_each_image_installs_exactly_its_extra(name: str, extra: str) -> None:
    """One ``pip install`` of one extra per image: the aggregator image gets the serving dependencies only,
    never the [evaluation] extra (tests/central/test_serving_imports.py checks what each extra holds)."""
    installs = [shlex.split(args) for instruction, args in dockerfile_instructions(name) if instruction == "RUN"
                and "pip install" in args]
    assert [words[words.index("install") + 1] for words in installs] == [f".[{extra}]"]


def test_the_collection_is_the_simulated_population_and_the_device_rows_fit_it() -> None:
    served = Schema.from_json((DOCKER / "collections" / "ratings.json").read_text(encoding="utf-8"))
    simulate = next(argv for argv in service_argv("simulator"))
    movies = int(simulate[simulate.index("--movies") + 1])
    epsilon = float(simulate[simulate.index("--epsilon") + 1])
    assert served == ratings_schema(epsilon, movies)
    rows = (DOCKER / "rows" / "device.csv").read_text(encoding="utf-8").splitlines()
    header = rows[0].split(",")
    columns = {name: [int(line.split(",")[i]) for line in rows[1:]] for i, name in enumerate(header)}
    assert len(load_rows(served, columns)) == len(rows) - 1  # raises on a row outside the domain


def test_readme_says_the_images_are_not_built_in_ci() -> None:
    text = (DOCKER / "README.md").read_text(encoding="utf-8")
    assert "not built in CI" in text and "docker compose -f docker/compose.yaml up --build" in text
