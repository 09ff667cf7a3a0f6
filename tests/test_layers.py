"""The package's layers: a module imports only from its own layer and the ones below it.

Statically (every import of every module, in functions too, read with ``ast``), from the bottom up:

* ``ldpsynth.shared``: what both sides need; imports nothing else of ldpsynth;
* ``ldpsynth.client``: the device SDK; shared only;
* ``ldpsynth.serving``: what every tier that serves gRPC calls shares, the aggregator's replicas and
  the shuffler alike: ``serving.errors`` (the errors that end a request, the one vocabulary), then
  ``serving.observe`` (log events, metrics, traces: what every serving process records), then the
  rest (the error-to-status mapping, authentication, TLS files, the event loop); shared and serving
  only, and nothing of ``ldpsynth.aggregator``;
* ``ldpsynth.aggregator``: ``errors`` (its own: shards, shard workers, pins, the web port);
  ``storage`` (the log, the shard workers, the index, the data directory); ``runtime`` (Ray, the
  embedded NATS server, the backend, verify); ``query``; ``operate`` (operator calls: a discovery's rounds);
  ``ingress`` (gRPC and the web port: servers,
  handlers, quotas), each importing shared, serving's errors and observe, and only those before it
  (and from ``runtime`` on, all of serving);
* ``ldpsynth.shuffler``: the shuffler tier (docs/contract.md §16), which another party runs: shared,
  serving and the client SDK's transport (it calls the replicas); nothing of ``ldpsynth.aggregator``;
* ``ldpsynth.simulation``: simulated devices and local clusters; shared, client, aggregator, shuffler;
* ``ldpsynth.evaluation``: the central mechanisms; shared, and the simulation's data sets;
* ``ldpsynth.cli``: everything (the evaluation commands only in their handlers).

Third-party seams: gRPC only where calls are served or made (ingress, serving, shuffler, client, cli, simulation and
the generated wire code), the web port's HTTP server (Hypercorn) only in ``aggregator.ingress``, Ray
only in ``aggregator.runtime.ray_cluster`` and the local clusters,
and the evaluation's packages (sqlglot, matplotlib, scikit-learn) only in ``ldpsynth.evaluation``.
A fresh interpreter importing every serving module loads none of the evaluation code.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ldpsynth"

#: From the bottom up, each importing shared and those before it (and, from the aggregator's runtime
#: on, all of serving): serving's errors and observe, then the aggregator's roles.
STACK = ["ldpsynth.serving.errors", "ldpsynth.serving.observe", "ldpsynth.aggregator.errors",
         "ldpsynth.aggregator.storage", "ldpsynth.aggregator.runtime", "ldpsynth.aggregator.query",
         "ldpsynth.aggregator.operate", "ldpsynth.aggregator.ingress"]
#: The tiers that stand apart from the aggregator (the shuffler is run by another party): they import
#: no module of ``ldpsynth.aggregator``.
APART = ("ldpsynth.serving", "ldpsynth.shuffler")
#: (layer, what it may import of ldpsynth), the most specific layer first.
LAYERS: list[tuple[str, list[str]]] = [
    *((layer, ["ldpsynth.shared", *STACK[:i + 1],
               *(["ldpsynth.serving"] if i >= STACK.index("ldpsynth.aggregator.runtime") else [])])
      for i, layer in enumerate(STACK)),
    ("ldpsynth.serving", ["ldpsynth.shared", "ldpsynth.serving"]),
    ("ldpsynth.shuffler", ["ldpsynth.shared", "ldpsynth.serving", "ldpsynth.client", "ldpsynth.shuffler"]),
    ("ldpsynth.shared", ["ldpsynth.shared"]),
    ("ldpsynth.client", ["ldpsynth.shared", "ldpsynth.client"]),
    ("ldpsynth.simulation", ["ldpsynth.shared", "ldpsynth.client", "ldpsynth.aggregator", "ldpsynth.serving",
                             "ldpsynth.shuffler", "ldpsynth.simulation"]),
    ("ldpsynth.evaluation", ["ldpsynth.shared", "ldpsynth.evaluation", "ldpsynth.simulation.datasets"]),
    ("ldpsynth.cli", ["ldpsynth"]),
    ("ldpsynth", ["ldpsynth.shared", "ldpsynth.client"]),  # the package's own __init__
]
GRPC = ("grpc", "grpc_health", "grpc_reflection")
GRPC_ALLOWED = ("ldpsynth.aggregator.ingress", "ldpsynth.serving", "ldpsynth.shuffler", "ldpsynth.client",
                "ldpsynth.cli", "ldpsynth.simulation", "ldpsynth.shared.wire")
RAY_ALLOWED = ("ldpsynth.aggregator.runtime.ray_cluster", "ldpsynth.simulation.local_cluster")
WEB_SERVERS = ("hypercorn",)
EVALUATION_PACKAGES = ("sqlglot", "matplotlib", "sklearn")
#: The ``ldpsynth`` subcommands that are evaluation tools (they import ldpsynth.evaluation in their handlers).
EVALUATION_COMMANDS = ("ldpsynth.cli.compare", "ldpsynth.cli.pqd")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in path.parts}


def imports(text: str, module: str, is_package: bool) -> set[str]:
    """Every module name ``text`` imports, anywhere (relative imports resolved; ``from a import b`` gives a, a.b)."""
    package = module if is_package else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else (package if node.level else "")
            stem = ".".join(part for part in (base, node.module) if part)
            found.add(stem)
            found.update(f"{stem}.{alias.name}" for alias in node.names)
    return found


def within(name: str, prefixes: tuple[str, ...] | list[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def layer_of(module: str) -> tuple[str, list[str]]:
    return next(rule for rule in LAYERS if within(module, [rule[0]]))


def violations(module: str, names: set[str]) -> list[str]:
    layer, allowed = layer_of(module)
    out = [f"{module} imports {name} (layer {layer})" for name in sorted(names)
           if name.startswith("ldpsynth") and not within(name, allowed)
           and not (module in EVALUATION_COMMANDS and within(name, ["ldpsynth.evaluation"]))]
    tops = {name.split(".")[0] for name in names}
    if tops & set(GRPC) and not within(module, GRPC_ALLOWED):
        out.append(f"{module} imports gRPC")
    if "ray" in tops and not within(module, RAY_ALLOWED):
        out.append(f"{module} imports Ray")
    if tops & set(WEB_SERVERS) and not within(module, ["ldpsynth.aggregator.ingress"]):
        out.append(f"{module} imports a web server")
    if tops & set(EVALUATION_PACKAGES) and not within(module, ["ldpsynth.evaluation"]):
        out.append(f"{module} imports an evaluation package {sorted(tops & set(EVALUATION_PACKAGES))}")
    return out


def test_every_module_has_a_layer_and_the_roles_are_folders() -> None:
    found = modules()
    assert len(found) > 140
    for name in found:
        layer_of(name)
    for role in ("ingress", "storage", "runtime", "query"):
        assert (PACKAGE / "aggregator" / role / "__init__.py").is_file()
    assert (PACKAGE / "serving" / "observe" / "__init__.py").is_file()
    assert not [p for p in (PACKAGE / "aggregator").glob("*.py") if p.name not in ("__init__.py", "errors.py")]


def test_the_tiers_apart_import_nothing_of_the_aggregator() -> None:
    """Serving and the shuffler import no ``ldpsynth.aggregator`` module (in functions neither), and no
    rule of theirs would let them."""
    def of_aggregator(name: str) -> bool:
        return within(name, ["ldpsynth.aggregator"])

    assert [(layer, allowed) for layer, allowed in LAYERS if within(layer, APART) and any(
        of_aggregator(name) or within("ldpsynth.aggregator", [name]) for name in allowed)] == []
    apart = {name: path for name, path in modules().items() if within(name, APART)}
    assert {"ldpsynth.serving.status", "ldpsynth.serving.observe.metrics", "ldpsynth.shuffler.server"} <= apart.keys()
    found = {name: sorted(other for other in imports(path.read_text(encoding="utf-8"), name, path.name == "__init__.py")
                          if of_aggregator(other))
             for name, path in apart.items()}
    assert {name: names for name, names in found.items() if names} == {}


def test_no_module_imports_a_layer_above_its_own() -> None:
    problems = [problem for name, path in modules().items()
                for problem in violations(name, imports(path.read_text(encoding="utf-8"), name,
                                                        path.name == "__init__.py"))]
    assert problems == []


@pytest.mark.parametrize("module, text, expected", [
    ("ldpsynth.aggregator.storage.x", "from ldpsynth.serving.status import rpc",
     "imports ldpsynth.serving.status"),
    ("ldpsynth.aggregator.storage.x", "def f():\n    from ldpsynth.aggregator.runtime import backend",
     "imports ldpsynth.aggregator.runtime"),
    ("ldpsynth.aggregator.query.x", "import grpc", "imports gRPC"),
    ("ldpsynth.shared.x", "from ..client import aio", "imports ldpsynth.client"),
    ("ldpsynth.client.x", "import ray", "imports Ray"),
    ("ldpsynth.aggregator.runtime.x", "from hypercorn.asyncio import serve", "imports a web server"),
    ("ldpsynth.simulation.x", "import sqlglot", "imports an evaluation package"),
    ("ldpsynth.aggregator.ingress.x", "from ldpsynth.evaluation import pqd", "imports ldpsynth.evaluation"),
    ("ldpsynth.serving.status", "from ldpsynth.aggregator.errors import ShardFull",
     "imports ldpsynth.aggregator.errors"),
    ("ldpsynth.serving.observe.metrics", "def f():\n    from ldpsynth.aggregator.ingress import server",
     "imports ldpsynth.aggregator.ingress"),
    ("ldpsynth.shuffler.x", "from ..aggregator import errors", "imports ldpsynth.aggregator"),
    ("ldpsynth.shuffler.x", "import ldpsynth.aggregator.storage.segments", "imports ldpsynth.aggregator.storage"),
    ("ldpsynth.serving.errors", "from ldpsynth.serving.observe import events", "imports ldpsynth.serving.observe"),
    ("ldpsynth.serving.observe.events", "from ..status import rpc", "imports ldpsynth.serving.status"),
])
def test_the_check_sees_a_violation(module: str, text: str, expected: str) -> None:
    found = violations(module, imports(text, module, False))
    assert any(expected in problem for problem in found), found


def test_importing_every_serving_module_loads_no_evaluation_code() -> None:
    """In a fresh interpreter: every module outside ldpsynth.evaluation, and the ``ldpsynth`` parser."""
    serving = sorted(name for name in modules() if not within(name, ["ldpsynth.evaluation"])
                     and not name.endswith("__main__"))
    script = ("import importlib, json, sys\n"
              f"for name in {serving!r}:\n"
              "    importlib.import_module(name)\n"
              "from ldpsynth.cli.main import build_parser\n"
              "build_parser()\n"
              "print(json.dumps(sorted(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert "ldpsynth.aggregator.ingress.server" in loaded and "ldpsynth.client.query" in loaded
    assert [name for name in loaded if within(name, ["ldpsynth.evaluation"])] == []
    assert [name for name in loaded if name.split(".")[0] in (*EVALUATION_PACKAGES, "pyarrow")] == []


def extra_requirements(extra: str) -> dict[str, str]:
    """The requirements the installed ldpsynth metadata lists for ``extra``: distribution name -> specifier."""
    out = {}
    for requirement in importlib.metadata.requires("ldpsynth") or []:
        spec, _, marker = requirement.partition(";")
        if f'extra == "{extra}"' in marker:
            name = re.match(r"[A-Za-z0-9._-]+", spec.strip()).group(0).lower()  # type: ignore[union-attr]
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
    assert set(re.search(r"\[(.*)\]", everything["ldpsynth"]).group(1).split(",")) == {  # type: ignore[union-attr]
        "client", "shuffle", "aggregator", "evaluation", "wide"}
    # The wide-row model (Private-PGM on JAX) is its own extra, in neither the device's nor the replicas' image yet.
    assert extra_requirements("wide").keys() == {"mbi"}
    assert not (extra_requirements("client").keys() | extra_requirements("aggregator").keys()) & {"mbi", "jax"}
    # Sealing reports for a shuffler: the device's [shuffle] extra is [client] and the HPKE library,
    # nothing heavier; the replicas open them with the same library.
    assert extra_requirements("shuffle").keys() == {"ldpsynth", "cryptography"}
    assert extra_requirements("shuffle")["ldpsynth"] == "ldpsynth[client]"
    assert "cryptography" in extra_requirements("aggregator") and "cryptography" not in extra_requirements("client")
