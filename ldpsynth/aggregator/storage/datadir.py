"""The one-machine aggregator's data directory: its lock, its log and its shard workers' snapshots.

::

    DIR/aggregator.lock     flock of the serving process (released by the kernel, even on SIGKILL)
    DIR/layout.json         the log layout this directory holds (id, shards): written once
    DIR/log/                the embedded NATS server's JetStream store: the log, the store of record
    DIR/shards/shard-NNN/   each shard worker's snapshot (id runs, statistics): a view of the log
    DIR/acknowledged/shard-NNN  the highest sequence of each shard known durable (acknowledged), and
                            the losses an operator accepted (:mod:`~ldpsynth.aggregator.storage.acknowledged`)
    DIR/retiring.json       only while ``ldpsynth aggregator retire`` runs (or after it was interrupted:
                            serve and verify refuse the directory until the retirement is run again)

``layout.json`` ties the directory to its log: a log that was deleted, replaced or belongs to
another deployment is refused at start (:mod:`~ldpsynth.aggregator.storage.jetstream`), and so is a
directory laid out by an earlier version (SQLite shard files). Format 3 of ``layout.json`` says the
directory keeps ``DIR/acknowledged``: a missing file there is then refused too; a format-2
directory (main 5612345) is upgraded at its next start (the files are written from the log's end,
once the log is checked against the snapshots). In a cluster (``--nats``) the log
lives in the NATS cluster and the replicas keep no data directory.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from pathlib import Path
from typing import Any

from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.files import fsync_directory, write_durably

LAYOUT_FILE = "layout.json"
LAYOUT_FORMAT = "ldpsynth.data-dir/3"
#: The format before ``DIR/acknowledged`` (read, and upgraded at the next start).
OLD_LAYOUT_FORMATS = ("ldpsynth.data-dir/2",)
LOCK_FILE = "aggregator.lock"
RETIRING_FILE = "retiring.json"


class DataDirError(LdpsynthError):
    """The data directory is in use, unreadable, full, or holds something else."""


class DataDirInUse(DataDirError):
    """Another process (a running aggregator) holds the data directory's lock."""


def os_problem(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "no space left on the device"
    return exc.strerror or type(exc).__name__


class DataDir:
    """Exclusive use of one data directory by one server."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock_fd = -1

    @property
    def log_dir(self) -> Path:
        return self.path / "log"

    def shard_dir(self, shard: int) -> Path:
        return self.path / "shards" / f"shard-{shard:03d}"

    def acknowledged_file(self, shard: int) -> Path:
        return self.path / "acknowledged" / f"shard-{shard:03d}"

    def keeps_acknowledged(self) -> bool:
        """Whether ``layout.json`` says this directory keeps ``DIR/acknowledged`` (format 3)."""
        return self._layout_format() == LAYOUT_FORMAT

    def check_exists(self) -> None:
        """For ``verify``: the directory must exist (it creates nothing)."""
        if not self.path.exists():
            raise DataDirError(f"--data-dir {self.path}: does not exist")
        if not self.path.is_dir():
            raise DataDirError(f"--data-dir {self.path}: not a directory")

    def acquire(self) -> None:
        """Create the directory if needed and lock it; fail at once if another server holds it."""
        if self.path.exists() and not self.path.is_dir():
            raise DataDirError(f"--data-dir {self.path}: not a directory")
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise DataDirError(f"--data-dir {self.path}: cannot create or open it ({os_problem(exc)})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise DataDirInUse(f"--data-dir {self.path}: in use by another aggregator") from None
        self._lock_fd = fd
        old = sorted(p.name for p in self.path.glob("shard-*.sqlite"))
        if old:
            self.release()
            raise DataDirError(f"--data-dir {self.path}: holds SQLite shard files of an earlier ldpsynth "
                               f"({old[0]}, ...), which this version does not read; export the collections with "
                               "that version and serve a new data directory")

    def release(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _read_layout(self) -> dict[str, object] | None:
        path = self.path / LAYOUT_FILE
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise DataDirError(f"{path}: unreadable ({getattr(exc, 'strerror', None) or type(exc).__name__})") from None
        try:
            layout = json.loads(text)
            if layout["format"] not in (LAYOUT_FORMAT, *OLD_LAYOUT_FORMATS) or not isinstance(layout["layout"], str) \
                    or type(layout["shards"]) is not int:
                raise ValueError
        except (ValueError, KeyError, TypeError, RecursionError):
            raise DataDirError(f"{path}: not an ldpsynth data directory layout (format {LAYOUT_FORMAT!r}); "
                               "it was damaged or edited: restore it from a backup of the data directory") from None
        return dict(layout)

    def _layout_format(self) -> str | None:
        layout = self._read_layout()
        return None if layout is None else str(layout["format"])

    def recorded_layout(self) -> tuple[str, int] | None:
        """The layout id and shard count recorded in ``layout.json`` (``None``: a new directory)."""
        layout = self._read_layout()
        if layout is None:
            return None
        return str(layout["layout"]), int(layout["shards"])  # type: ignore[call-overload]

    def record_layout(self, layout_id: str, shards: int) -> None:
        """Write ``layout.json`` (when the log's layout is created, and to upgrade a format-2 directory
        once its acknowledged files are written)."""
        try:
            write_durably(self.path / LAYOUT_FILE, json.dumps(
                {"format": LAYOUT_FORMAT, "layout": layout_id, "shards": shards}, indent=2) + "\n")
        except OSError as exc:
            raise DataDirError(f"--data-dir {self.path}: cannot write {LAYOUT_FILE} ({os_problem(exc)})") from None

    # ----- a retirement under way (ldpsynth.aggregator.runtime.retire) ----------------------------------
    def retiring(self) -> dict[str, Any] | None:
        """What ``DIR/retiring.json`` says: a retirement under way or interrupted (``None``: none)."""
        path = self.path / RETIRING_FILE
        try:
            plan = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(plan, dict) or not isinstance(plan.get("collection"), str):
                raise ValueError
            return plan
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError):
            raise DataDirError(f"{path}: unreadable or damaged; it records an interrupted retirement: restore the "
                               "data directory from a backup") from None

    def interrupted_retirement(self) -> str | None:
        """Why the directory cannot be served or verified now (an interrupted retirement), or ``None``."""
        plan = self.retiring()
        if plan is None:
            return None
        return (f"--data-dir {self.path}: the retirement of collection {plan['collection']!r} was interrupted "
                f"({RETIRING_FILE}); finish it: ldpsynth aggregator retire --data-dir {self.path} --collection "
                f"{plan['collection']}")

    def record_retiring(self, plan: dict[str, Any]) -> None:
        try:
            write_durably(self.path / RETIRING_FILE, json.dumps(plan, indent=2, sort_keys=True) + "\n")
        except OSError as exc:
            raise DataDirError(f"--data-dir {self.path}: cannot write {RETIRING_FILE} ({os_problem(exc)})") from None

    def clear_retiring(self) -> None:
        (self.path / RETIRING_FILE).unlink(missing_ok=True)
        fsync_directory(self.path)
