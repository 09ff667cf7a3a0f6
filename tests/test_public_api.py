"""``import ldpsynth``: its version, its public names, and that it stays light (numpy only; the
client names, which need grpc, are imported on first use)."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

import ldpsynth
from tests.tomlcompat import tomllib

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
    serving tiers' errors and the aggregator's (the generated wire code aside)."""
    package = ROOT / "ldpsynth"
    paths = [*(package / "shared").rglob("*.py"), *(package / "client").rglob("*.py"),
             package / "serving" / "errors.py", package / "aggregator" / "errors.py"]
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
                                   "QueryError", "Release", "RetryPolicy", "Shuffler", "SubmitError",
                                   "SubmitResult", "ValidationError", "default_ledger_path"}
    assert set(ldpsynth.__all__) - {"__version__"} <= {n for m in ("ldpsynth.client", "ldpsynth.shared.schema",
                                                                  "ldpsynth.shared.mechanism", "ldpsynth.shared.card",
                                                                  "ldpsynth.shared.release", "ldpsynth.shared.queries",
                                                                  "ldpsynth.shared.estimators.offline",
                                                                  "ldpsynth.shared.planning", "ldpsynth.shared.errors")
                                                       for n in importlib.import_module(m).__all__}


# ----- numpydoc sections of the public callables ------------------------------------------------
# The sections are parsed here in a few lines rather than with numpydoc.docscrape: numpydoc depends
# on Sphinx (and its dozen dependencies), a heavy addition to the dev extra for a check that needs
# only the section headers and the names of the entries.
#: The sections that name a callable's parameters: the constructor's of a class, or a dataclass's
#: fields (whose constructor they are) as ``Attributes``.
PARAMETER_SECTIONS = ("Parameters", "Attributes")


def public_callables() -> list[tuple[str, object]]:
    """Every public callable of the two tiers: the functions and classes of ``ldpsynth.__all__`` and
    ``ldpsynth.client.__all__``, and the public methods, classmethods and staticmethods of those
    classes (inherited ones too, when ldpsynth defines them; not Python's own, e.g. ``with_traceback``)."""
    from ldpsynth import client

    found: dict[str, object] = {}
    for name in sorted((set(ldpsynth.__all__) | set(client.__all__)) - {"__version__"}):
        obj = getattr(client, name) if name in client.__all__ else getattr(ldpsynth, name)
        if not callable(obj):
            continue  # a constant (LEDGER_ENV, DEFAULT_BUDGET_MULTIPLE)
        found[name] = obj
        if inspect.isclass(obj):
            for member in dir(obj):
                owner = next(c for c in obj.__mro__ if member in vars(c))
                if member.startswith("_") or not owner.__module__.startswith("ldpsynth"):
                    continue
                if callable(getattr(obj, member)):
                    found[f"{name}.{member}"] = getattr(obj, member)
    return sorted(found.items())


def numpydoc_sections(doc: str) -> dict[str, list[str]]:
    """The sections of a (dedented) numpydoc docstring, by header (a line underlined with dashes),
    to the lines of their bodies."""
    lines = doc.splitlines()
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    underline = False
    for line, below in zip(lines, [*lines[1:], ""]):
        if underline:
            underline = False
        elif line.strip() and set(below.strip()) == {"-"}:
            current, underline = sections.setdefault(line.strip(), []), True
        elif current is not None:
            current.append(line)
    return sections


def section_entries(body: list[str]) -> list[tuple[str, str]]:
    """``(name, type)`` of every entry of a Parameters/Attributes section: its unindented lines
    ``name : type``, ``a, b : type`` (one entry each) or ``*args : type``."""
    entries = []
    for line in body:
        if line.strip() and not line[0].isspace():
            names, _, kind = line.partition(" : ")
            entries += [(name.strip().lstrip("*"), kind.strip()) for name in names.split(",")]
    return entries


def signature_parameters(obj: Any) -> list[str] | None:
    """The parameters a caller passes (not ``self``/``cls``, not a private ``_name``), or ``None`` for
    a class whose constructor is Python's own (an exception taking a message)."""
    try:
        signature = inspect.signature(obj)
    except ValueError:
        return None
    return [p for p in signature.parameters if p not in ("self", "cls") and not p.startswith("_")]


def returns_something(obj: Any) -> bool:
    """Whether a function's annotated return is other than ``None`` (a class returns its instance)."""
    if inspect.isclass(obj):
        return False
    annotation = inspect.signature(obj).return_annotation
    assert annotation is not inspect.Signature.empty, "no return annotation"
    return annotation not in (None, "None")


PUBLIC_CALLABLES = public_callables()


def test_the_section_parser_reads_numpydoc() -> None:
    doc = inspect.cleandoc('''Summary.

        Parameters
        ----------
        a, b : int
            Two.

            More about them.
        *where : Condition
            Conditions.
        label: str
            Not numpydoc (no space before the colon).

        Returns
        -------
        float
        ''')
    sections = numpydoc_sections(doc)
    assert list(sections) == ["Parameters", "Returns"]
    assert section_entries(sections["Parameters"]) == [("a", "int"), ("b", "int"), ("where", "Condition"),
                                                       ("label: str", "")]
    assert [line for line in sections["Returns"] if line.strip()] == ["float"]


def test_the_public_callables_are_many() -> None:
    """The enumeration below finds what it should (a guard against a test that checks nothing)."""
    names = {name for name, _ in PUBLIC_CALLABLES}
    assert {"Schema", "Schema.from_json", "plan", "estimate_release", "Client.submit", "AsyncClient.submit",
            "PrivacyLedger.transaction", "QueryClient.estimate", "AnswerTable.records", "Release.read"} <= names
    assert len(names) >= 80


@pytest.mark.parametrize(("name", "obj"), PUBLIC_CALLABLES, ids=[name for name, _ in PUBLIC_CALLABLES])
def test_every_public_callable_has_a_numpydoc_docstring(name: str, obj: object) -> None:
    """A one-line summary; a ``Parameters`` section (a dataclass: ``Attributes``) naming, with a type,
    exactly the parameters of the signature, in order; ``Returns`` or ``Yields`` if it returns something."""
    doc = inspect.getdoc(obj) or ""
    assert doc.strip(), f"{name} has no docstring"
    assert doc.splitlines()[0].strip() and (len(doc.splitlines()) == 1 or not doc.splitlines()[1].strip()), \
        f"{name}: the docstring's first line is not a one-line summary"
    sections = numpydoc_sections(doc)
    parameters = signature_parameters(obj)
    if parameters:
        allowed = PARAMETER_SECTIONS if dataclasses.is_dataclass(obj) else PARAMETER_SECTIONS[:1]
        section = next((s for s in allowed if s in sections), None)
        assert section is not None, f"{name} has parameters {parameters} but no {' or '.join(allowed)} section"
        entries = section_entries(sections[section])
        assert [n for n, _ in entries] == parameters, f"{name}: {section} names {[n for n, _ in entries]}, " \
                                                     f"the signature {parameters}"
        untyped = [n for n, kind in entries if not kind]
        assert not untyped, f"{name}: {section} gives no type (`name : type`) for {untyped}"
    if returns_something(obj):
        assert "Returns" in sections or "Yields" in sections, f"{name} returns something but has no Returns section"
