"""The aggregator's data directory: its lock, its shard layout and the shard file names.

The number of shards is fixed when a data directory is created (``layout.json``): reports are
routed to shards by id, so serving the same directory with another shard count would send a
retried report to a shard that does not know it and store it twice. A server takes
``aggregator.lock`` (``flock``, released by the kernel when the process dies, even by SIGKILL)
so two servers never share a directory.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from ldpsynth.shared.errors import LdpsynthError

LAYOUT_FILE = "layout.json"
LAYOUT_FORMAT = "ldpsynth.aggregator-layout/1"
LOCK_FILE = "aggregator.lock"


class DataDirError(LdpsynthError):
    """The data directory is in use, unreadable, or laid out differently from what was asked."""


def shard_path(data_dir: str | Path, shard: int) -> Path:
    return Path(data_dir) / f"shard-{shard:03d}.sqlite"


def read_layout(data_dir: str | Path) -> list[Path]:
    """The shard files of an existing data directory, in shard order."""
    path = Path(data_dir) / LAYOUT_FILE
    try:
        layout = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataDirError(f"{data_dir} is not an aggregator data directory (no {LAYOUT_FILE})") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise DataDirError(f"{path}: unreadable ({type(exc).__name__})") from None
    if not isinstance(layout, dict):
        layout = {}
    shards = layout.get("shards")
    if layout.get("format") != LAYOUT_FORMAT or isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
        raise DataDirError(f"{path}: expected format {LAYOUT_FORMAT!r} with an integer shards >= 1")
    return [shard_path(data_dir, k) for k in range(shards)]


def _write_durably(path: Path, text: str) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class DataDir:
    """Exclusive use of one data directory by one server."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock_fd = -1

    def acquire(self) -> None:
        """Create the directory if needed and lock it; fail at once if another server holds it."""
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirError(f"{self.path} is in use by another aggregator") from None
        self._lock_fd = fd

    def release(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def shard_paths(self, requested: int | None) -> list[Path]:
        """The shard files; a new directory gets ``requested`` shards (``None``: one per CPU).

        An existing directory keeps its shard count; asking explicitly for another is an error.
        """
        if (self.path / LAYOUT_FILE).exists():
            paths = read_layout(self.path)
            if requested is not None and requested != len(paths):
                raise DataDirError(f"{self.path} holds {len(paths)} shards; it cannot be served with --shards "
                                   f"{requested} (reports are routed to shards by id)")
            return paths
        shards = requested if requested is not None else (os.cpu_count() or 1)
        if shards < 1:
            raise DataDirError(f"shards: an integer >= 1, got {shards}")
        _write_durably(self.path / LAYOUT_FILE,
                       json.dumps({"format": LAYOUT_FORMAT, "shards": shards}, indent=2) + "\n")
        return [shard_path(self.path, k) for k in range(shards)]
