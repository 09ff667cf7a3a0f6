"""The serving code never imports the central mechanisms or the evaluation dependencies.

aggregator/central/ and the ``[evaluation]`` extra (sqlglot, matplotlib, scikit-learn, pyarrow) exist
for ``ldpsynth compare``, ``ldpsynth pqd`` and experiments/. The server, its
shard workers, the simulator, the client SDK and the shared core must run without them (the aggregator image installs
``[aggregator]`` only): no serving module imports ``ldpsynth.aggregator.central``, at import time
or inside a function, and importing all of them pulls in none of the evaluation packages.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import ldpsynth.aggregator
import ldpsynth.aggregator.simulation
import ldpsynth.cli
import ldpsynth.client
import ldpsynth.shared
import ldpsynth.shared.wire

CENTRAL = "ldpsynth.aggregator.central"
#: The ``ldpsynth`` subcommands that are evaluation tools: they import the central mechanisms in their handlers.
EVALUATION_COMMANDS = ("ldpsynth.cli.compare", "ldpsynth.cli.pqd")
EVALUATION_PACKAGES = ("sqlglot", "matplotlib", "sklearn", "pyarrow")
SERVING_PACKAGES = (ldpsynth.shared, ldpsynth.shared.wire, ldpsynth.client, ldpsynth.aggregator,
                    ldpsynth.aggregator.simulation, ldpsynth.cli)


def serving_modules() -> dict[str, Path]:
    """Every module of the serving packages (not ``__main__``, not the central subpackages), with its file."""
    out = {}
    for package in SERVING_PACKAGES:
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            if info.ispkg or info.name.endswith(".__main__"):
                continue
            out[info.name] = Path(info.module_finder.path) / (info.name.rsplit(".", 1)[1] + ".py")
    assert not any(name.startswith(CENTRAL) for name in out)
    return out


def imported_names(path: Path, module: str) -> set[str]:
    """Absolute names of every module ``path`` imports, anywhere in the file (relative imports resolved)."""
    package = module.rsplit(".", 1)[0]
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            stem = ".".join(part for part in (base, node.module) if part)
            names.add(stem)
            names.update(f"{stem}.{alias.name}" for alias in node.names)
    return names


def test_the_serving_modules_are_found() -> None:
    modules = serving_modules()
    for name in ("ldpsynth.aggregator.server", "ldpsynth.aggregator.ingest", "ldpsynth.aggregator.query",
                 "ldpsynth.aggregator.ray_cluster", "ldpsynth.aggregator.shard_worker", "ldpsynth.aggregator.jetstream",
                 "ldpsynth.aggregator.simulation.federation", "ldpsynth.client.query",
                 "ldpsynth.cli.main", "ldpsynth.shared.estimators"):
        assert name in modules and modules[name].is_file(), name


def test_no_serving_module_imports_the_central_mechanisms_anywhere() -> None:
    """Static: not even a lazy import inside a function (only the evaluation subcommands may)."""
    offenders = {name: sorted(n for n in imported_names(path, name) if n.startswith(CENTRAL))
                 for name, path in serving_modules().items() if name not in EVALUATION_COMMANDS}
    assert {name: found for name, found in offenders.items() if found} == {}
    # the check sees an import when there is one
    assert any(n.startswith(CENTRAL) for n in imported_names(Path(ldpsynth.cli.__path__[0]) / "pqd.py",
                                                              "ldpsynth.cli.pqd"))


def test_importing_every_serving_module_loads_no_central_or_evaluation_package() -> None:
    """In a fresh interpreter: every serving module, and the ``ldpsynth`` parser with all its subcommands."""
    script = (
        "import importlib, json, sys\n"
        f"for name in {sorted(serving_modules())!r}:\n"
        "    importlib.import_module(name)\n"
        "from ldpsynth.cli.main import build_parser\n"
        "build_parser()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert "ldpsynth.aggregator.server" in loaded and "ldpsynth.client.query" in loaded
    assert [name for name in loaded if name.startswith(CENTRAL)] == []
    assert [name for name in loaded if name.split(".")[0] in EVALUATION_PACKAGES] == []


def extra_requirements(extra: str) -> dict[str, str]:
    """The requirements the installed ldpsynth metadata lists for ``extra``: distribution name -> specifier."""
    out = {}
    for requirement in importlib.metadata.requires("ldpsynth") or []:
        spec, _, marker = requirement.partition(";")
        if f'extra == "{extra}"' in marker:
            name = re.match(r"[A-Za-z0-9._-]+", spec.strip()).group(0).lower()
            out[name] = spec.strip()
    return out


def test_the_extras_separate_serving_from_evaluation() -> None:
    evaluation = {"sqlglot", "matplotlib", "scikit-learn", "pyarrow"}
    assert "ray" in extra_requirements("aggregator") and not extra_requirements("aggregator").keys() & evaluation
    assert not extra_requirements("client").keys() & evaluation
    assert evaluation - {"pyarrow"} <= extra_requirements("evaluation").keys()
    assert extra_requirements("evaluation")["ldpsynth"] == "ldpsynth[parquet]"
    assert extra_requirements("parquet").keys() == {"pyarrow"}
    everything = extra_requirements("all")
    assert everything.keys() == {"ldpsynth"}
    assert set(re.search(r"\[(.*)\]", everything["ldpsynth"]).group(1).split(",")) == {"client", "aggregator",
                                                                                        "evaluation"}
