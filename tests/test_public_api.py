"""``import ldpsynth``: its version, its public names, and that it stays light (numpy only; the
client names, which need grpc, are imported on first use)."""

from __future__ import annotations

import importlib
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


def tier_modules() -> list[str]:
    """The modules of the public tiers: the shared core and its packages, the client SDK, the
    aggregator's errors (the generated wire code aside)."""
    package = ROOT / "ldpsynth"
    paths = [*(package / "shared").rglob("*.py"), *(package / "client").rglob("*.py"),
             package / "aggregator" / "errors.py"]
    names = []
    for path in sorted(paths):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if "__pycache__" in parts or parts[:3] == ["ldpsynth", "shared", "wire"]:
            continue
        if parts[-1] == "__init__":
            if not path.read_text(encoding="utf-8").strip():
                continue
            parts = parts[:-1]
        names.append(".".join(parts))
    return names


@pytest.mark.parametrize("name", tier_modules())
def test_every_public_module_names_its_public_part(name: str) -> None:
    """``__all__`` in every module of the public tiers, each name defined; the rest is internal."""
    module = importlib.import_module(name)
    assert isinstance(getattr(module, "__all__", None), list), f"{name} has no __all__"
    assert module.__all__ and len(set(module.__all__)) == len(module.__all__)
    for public in module.__all__:
        assert hasattr(module, public), f"{name}.__all__ names {public!r}, which it does not define"


def test_the_client_facade_exports_what_users_call_only() -> None:
    """``ldpsynth.client`` lists what a device or an analyst calls (it listed 32 names, internals
    included); the parts stay importable from their modules."""
    from ldpsynth import client

    assert set(client.__all__) == {"AnswerTable", "AsyncClient", "CardChanged", "Client", "DEFAULT_BUDGET_MULTIPLE",
                                   "LEDGER_ENV", "PrivacyBudgetExceeded", "PrivacyLedger", "QueryClient",
                                   "QueryError", "Release", "RetryPolicy", "SubmitError", "SubmitResult",
                                   "ValidationError", "default_ledger_path"}
    assert set(ldpsynth.__all__) - {"__version__"} <= {n for m in ("ldpsynth.client", "ldpsynth.shared.schema",
                                                                  "ldpsynth.shared.mechanism", "ldpsynth.shared.card",
                                                                  "ldpsynth.shared.release", "ldpsynth.shared.queries",
                                                                  "ldpsynth.shared.estimators.offline",
                                                                  "ldpsynth.shared.planning", "ldpsynth.shared.errors")
                                                       for n in importlib.import_module(m).__all__}
