"""Type-check the ``ldpsynth`` package with mypy (``make lint``, so ``make test`` and CI).

The package's folders are mapped onto one import package by ``[tool.setuptools] package-dir``
in pyproject.toml (``shared/`` is ``ldpsynth.shared``, ``client/`` is ``ldpsynth.client``, ...),
which mypy cannot follow: it names a module after its file's path. So this builds, under
``build/typecheck/``, a tree of symbolic links laid out as the installed package
(``ldpsynth/shared -> ../../../shared``, ...), from that same table, and runs mypy on it with
the settings of ``[tool.mypy]``. Error lines are reported with the repository's own paths.

Usage: ``python tools/typecheck.py [extra mypy arguments]``; exits with mypy's status.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from mypy import api

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
TREE = ROOT / "build" / "typecheck"


def package_dirs() -> dict[str, Path]:
    """``{import name: folder}`` from pyproject.toml's ``package-dir`` (the top-level entries only:
    a sub-package inside a mapped folder is found through its parent's link)."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        mapping: dict[str, str] = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    top = {name: folder for name, folder in mapping.items()
           if not any(name.startswith(other + ".") and folder == f"{mapping[other]}/{name[len(other) + 1:]}"
                      for other in mapping if other != name)}
    return {name: ROOT / folder for name, folder in top.items()}


def build_tree() -> Path:
    """The link tree ``build/typecheck/ldpsynth/...``, made afresh; returns its root."""
    shutil.rmtree(TREE, ignore_errors=True)
    dirs = package_dirs()
    package = TREE / "ldpsynth"
    package.mkdir(parents=True)
    for entry in dirs["ldpsynth"].iterdir():
        if entry.suffix in (".py", ".pyi", ".typed"):
            os.symlink(entry, package / entry.name)
    for name, folder in dirs.items():
        if name != "ldpsynth":
            link = TREE.joinpath(*name.split("."))
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(folder, link, target_is_directory=True)
    return TREE


def main(argv: list[str]) -> int:
    tree = build_tree()
    stdout, stderr, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), *argv, str(tree / "ldpsynth")])
    for name, folder in sorted(package_dirs().items(), key=lambda item: -len(item[0])):  # sub-packages first
        stdout = stdout.replace(str(tree.relative_to(ROOT).joinpath(*name.split("."))) + os.sep,
                                str(folder.relative_to(ROOT)) + os.sep)
    sys.stdout.write(stdout)
    sys.stderr.write(stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
