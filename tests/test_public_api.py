"""``import ldpsynth``: its version, its public names, and that it stays light (numpy only; the
client names, which need grpc, are imported on first use)."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import tomllib

import ldpsynth

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("grpc", "ray", "scipy", "numba", "pyarrow")
CLIENT_NAMES = ("Client", "AsyncClient", "PrivacyLedger", "QueryClient", "RetryPolicy", "SubmitError", "QueryError")


def run_fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_import_ldpsynth_loads_no_grpc_ray_scipy_numba_or_pyarrow() -> None:
    out = run_fresh(f"import json, sys, ldpsynth\nprint(json.dumps([n for n in {list(HEAVY)!r} if n in sys.modules]))")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


def test_a_client_name_imports_grpc_only_when_used() -> None:
    out = run_fresh("import sys, ldpsynth\nbefore = 'grpc' in sys.modules\nldpsynth.QueryClient\n"
                    "print(before, 'grpc' in sys.modules, 'ray' in sys.modules)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True", "False"]


def test_without_grpc_a_client_name_says_which_extra_to_install() -> None:
    out = run_fresh("import sys\nsys.modules['grpc'] = None\nimport ldpsynth\nprint(ldpsynth.Schema.__name__)\n"
                    "ldpsynth.Client")
    assert out.stdout.split() == ["Schema"]   # the numpy-only names work without grpc
    assert "ImportError: ldpsynth.Client needs the client SDK's dependencies: pip install 'ldpsynth[client]'" \
        in out.stderr


def test_version_is_the_distributions_and_pyprojects() -> None:
    with open(ROOT / "pyproject.toml", "rb") as handle:
        declared = tomllib.load(handle)["project"]["version"]
    assert ldpsynth.__version__ == version("ldpsynth") == declared


def test_every_public_name_resolves_and_is_listed_by_dir() -> None:
    assert len(set(ldpsynth.__all__)) == len(ldpsynth.__all__)
    for name in ldpsynth.__all__:
        assert getattr(ldpsynth, name) is not None, name
    assert set(ldpsynth.__all__) <= set(dir(ldpsynth))
    from ldpsynth import client
    from ldpsynth.shared import queries

    assert all(getattr(ldpsynth, name) is getattr(client, name) for name in CLIENT_NAMES)
    assert all(getattr(ldpsynth, name) is getattr(queries, name)
               for name in ("linear", "condition", "predicate", "marginal", "grouped", "cut", "dense"))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'estimate_everything'"):
        ldpsynth.estimate_everything   # noqa: B018
