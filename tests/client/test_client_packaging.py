"""The client installs and imports with the ``[client]`` extra alone: no scipy, no Ray."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("scipy", "ray")


def imported_after(statement: str, names: tuple[str, ...]) -> list[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps([n for n in {list(names)!r} if n in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout)


def test_client_package_imports_neither_scipy_nor_ray() -> None:
    assert imported_after("import ldpsynth.client", HEAVY) == []


def test_cli_command_module_imports_grpc_only_when_it_runs() -> None:
    assert imported_after("import ldpsynth.cli.client_cmd", ("grpc", "ldpsynth.client", *HEAVY)) == []


def test_the_console_script_parser_imports_neither_scipy_nor_ray() -> None:
    """``ldpsynth client ...`` in the client image builds the whole parser (every subcommand's
    ``register``) first: no subcommand module may import the accountant or Ray at import time."""
    assert imported_after("from ldpsynth.cli.main import build_parser; build_parser()", HEAVY) == []


def test_client_extra_resolves_without_scipy_or_ray(tmp_path) -> None:
    report = tmp_path / "report.json"
    subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                    "--report", str(report), f"{ROOT}[client]"], check=True, capture_output=True, timeout=60)
    names = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert {"ldpsynth", "numpy", "grpcio", "protobuf"} <= names
    assert not names & {"scipy", "ray", "cryptography"}


def test_shuffle_extra_is_the_client_and_the_hpke_library(tmp_path) -> None:
    """A device that seals for a shuffler adds `cryptography` (HPKE) to [client], and nothing heavy."""
    report = tmp_path / "report.json"
    subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                    "--report", str(report), f"{ROOT}[shuffle]"], check=True, capture_output=True, timeout=60)
    names = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert {"ldpsynth", "numpy", "grpcio", "protobuf", "cryptography"} <= names
    assert not names & {"scipy", "ray", "pyhpke"}


def test_client_package_imports_no_hpke_library_until_a_report_is_sealed() -> None:
    assert imported_after("import ldpsynth.client", ("cryptography",)) == []
