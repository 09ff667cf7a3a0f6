"""``docker/``: every ``COPY`` source exists in the build context and the files the commands name are the
files the images copy; each image installs its extra with pinned versions; the collection and device rows fit
the simulated population; the docs keep what the deployment relies on."""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath

import pytest

from ldpsynth.client.rows import load_rows
from ldpsynth.shared.schema import Schema
from ldpsynth.simulation.datasets import ratings_schema
from tests.docker.docker_files import DEPLOYMENT, DOCKER, ROOT, dockerfile_instructions, image_commands, service_argv
from tests.tomlcompat import tomllib


# ----- files --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["Dockerfile.aggregator", "Dockerfile.client"])
def test_copy_sources_exist_and_named_files_are_copied(name: str) -> None:
    copies = [shlex.split(args) for instruction, args in dockerfile_instructions(name) if instruction == "COPY"]
    destinations = {}
    for *sources, destination in copies:
        for source in sources:
            assert (ROOT / source).exists(), f"{name}: COPY {source}: not in the build context"
            destinations[PurePosixPath(destination)] = ROOT / source
    # The package folder is copied whole (pip install . needs it; the top-level shared/, client/, ...
    # are links into it and are not copied: a dangling link in the image would shadow nothing, but
    # copying them is useless).
    with open(ROOT / "pyproject.toml", "rb") as handle:
        assert tomllib.load(handle)["tool"]["setuptools"]["packages"]["find"]["include"] == ["ldpsynth*"]
    assert destinations.get(PurePosixPath("./ldpsynth")) == ROOT / "ldpsynth"
    assert not any(source.is_symlink() for source in destinations.values())
    # Every /etc/ldpsynth/... file a command of this image names is copied into it.
    named = [PurePosixPath(word) for argv in image_commands(name) for word in argv if word.startswith("/etc/ldpsynth/")]
    assert named
    for path in named:
        assert any((source / path.relative_to(dest)).is_file() for dest, source in destinations.items()
                   if path.is_relative_to(dest)), f"{name}: {path} is not copied into the image"


@pytest.mark.parametrize("name, extra", [("Dockerfile.aggregator", "aggregator"), ("Dockerfile.client", "client")])
def test_each_image_installs_exactly_its_extra(name: str, extra: str) -> None:
    """One ``pip install`` of one extra per image: the aggregator image gets the serving dependencies only,
    never the [evaluation] extra (tests/test_layers.py checks what each extra holds)."""
    installs = [shlex.split(args) for instruction, args in dockerfile_instructions(name) if instruction == "RUN"
                and "pip install" in args]
    assert [words[words.index("install") + 1:words.index("install") + 4] for words in installs] \
        == [["-c", "constraints.txt", f".[{extra}]"]]  # pinned: every version from docker/constraints.txt


def test_the_constraints_pin_every_dependency_of_the_aggregator_extra() -> None:
    """docker/constraints.txt holds an exact version of each package pyproject's [aggregator] extra
    names (which holds [client]'s), so both images install the versions CI built and tested."""
    with open(ROOT / "pyproject.toml", "rb") as handle:
        extras = tomllib.load(handle)["project"]["optional-dependencies"]
    pins = dict(line.split("==") for line in (DOCKER / "constraints.txt").read_text(encoding="utf-8").splitlines()
                if line and not line.startswith("#"))
    named = {re.split(r"[<>=\[;]", requirement)[0].strip().lower() for requirement in extras["aggregator"]}
    assert named <= {name.lower() for name in pins}, named - {name.lower() for name in pins}
    assert all(re.fullmatch(r"[0-9][0-9A-Za-z.+]*", version) for version in pins.values())


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


def test_readme_says_how_the_images_are_built_and_run() -> None:
    text = (DOCKER / "README.md").read_text(encoding="utf-8")
    assert "tests/test_containers.py" in text and "docker/base/make-base-image.sh" in text
    assert "docker compose -p ldpsynth -f docker/compose.yaml up --build" in text and "docs/deployment.md" in text


def test_deployment_doc_keeps_the_capacity_plan_section() -> None:
    text = DEPLOYMENT.read_text(encoding="utf-8")
    assert "\n### Capacity plan\n" in text and "benchmarks/bench_scale.py" in text
