"""The ledger's file and its marker: where it lives, how it is created whole, opened, and moved aside by a reset.

A ledger is created only where nothing shows an earlier one, and refused, never recreated, when its
marker or SQLite's ``-wal``/``-shm`` are left without it (docs/internals.md, ``ldpsynth.client.ledger``).
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from pathlib import Path

from ldpsynth.client.ledger.rules import Budget, ledger_id, refused, shown
from ldpsynth.client.ledger.store import FORMAT, connect, initialise, ledger_errors, stored_budget, upgrade, verify
from ldpsynth.shared.files import fsync_directory

__all__ = ["LEDGER_ENV", "MARKER_SUFFIX", "SQLITE_SUFFIXES", "default_ledger_path", "marker_path", "open_file",
           "reset_file"]

#: Environment variable naming the default ledger file.
LEDGER_ENV = "LDPSYNTH_LEDGER"
#: Suffix of the marker written next to a ledger when it is created: ``ledger.sqlite.created``.
MARKER_SUFFIX = ".created"
#: Suffixes of the files SQLite keeps next to a ledger in WAL mode.
SQLITE_SUFFIXES = ("-wal", "-shm")

_MARKER_FORMAT = "ldpsynth-ledger-marker/1"
_SQLITE_HEADER = b"SQLite format 3\x00"


def default_ledger_path() -> Path:
    """``$LDPSYNTH_LEDGER``, else ``$XDG_DATA_HOME/ldpsynth/ledger.sqlite`` (``~/.local/share`` by default).

    Returns
    -------
    pathlib.Path
        The default ledger file (``~`` expanded in ``$LDPSYNTH_LEDGER``); it need not exist.
    """
    explicit = os.environ.get(LEDGER_ENV)
    if explicit:
        return Path(explicit).expanduser()
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data) / "ldpsynth" / "ledger.sqlite"


def marker_path(path: str | os.PathLike) -> Path:
    """The marker of the ledger at ``path``: ``<path>.created``."""
    return Path(f"{os.fspath(path)}{MARKER_SUFFIX}")


def _staging(path: Path) -> Path:
    """A fresh temporary name next to ``path`` (same directory, so it can be linked or renamed into place)."""
    return path.with_name(f"{path.name}.new-{secrets.token_hex(8)}")


def _move_aside(source: Path, target: Path) -> None:
    """Rename ``source`` to ``target``, never over an existing file (a crash leaves both names, not neither)."""
    os.link(source, target)
    os.unlink(source)


@contextmanager
def _built_ledger(path: Path, budget: Budget, reset: dict | None = None) -> Iterator[tuple[Path, bytes]]:
    """Build a complete new ledger under a temporary name next to ``path``; yield it and its secret.

    The caller links it into place; the temporary name is removed when the block ends. Built
    whole and then linked, a ledger is never seen half-made: a zero-length file at a ledger's
    path is therefore evidence of damage, never of a creation in progress.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    building = _staging(path)
    try:
        os.close(os.open(building, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        conn = connect(str(building))
        try:
            secret = initialise(conn, budget, reset)
        finally:
            conn.close()  # checkpoints the WAL into the file and removes it
        yield building, secret
    finally:
        building.unlink(missing_ok=True)


def _evidence(path: Path) -> list[Path]:
    """The files that show a ledger existed at ``path``: its marker and SQLite's ``-wal``/``-shm``."""
    candidates = [marker_path(path), *(Path(f"{path}{suffix}") for suffix in SQLITE_SUFFIXES)]
    return [candidate for candidate in candidates if os.path.lexists(candidate)]


def _create_if_new(path: Path, budget: Budget) -> None:
    """Create a ledger at ``path`` if nothing there shows an earlier one; refuse if only its evidence is left."""
    if os.path.lexists(path):
        return
    evidence = _evidence(path)
    if evidence and not os.path.lexists(path):  # (the second look: another process may have just created it)
        names = ", ".join(item.name for item in evidence)
        raise refused(path, f"the ledger is missing but files left next to it ({names}) show that one was created "
                            "here: a new ledger would let rows already reported be reported afresh")
    if not evidence:
        with _built_ledger(path, budget) as (built, _), suppress(FileExistsError):  # another process won the race
            os.link(built, path)
        fsync_directory(path.parent)


def _check_file(path: Path) -> None:
    """Refuse a ledger file that is empty or not a SQLite database, before SQLite sees it."""
    with open(path, "rb") as handle:
        head = handle.read(len(_SQLITE_HEADER))
    if not head:
        raise refused(path, "the ledger file is empty (0 bytes): an earlier ledger was truncated or replaced")
    if head != _SQLITE_HEADER:
        raise refused(path, "the ledger file is not a SQLite database")


def _write_marker(path: Path, ledger: str, reset: dict | None = None) -> None:
    """Write the marker of the ledger at ``path``, whose id is ``ledger``, atomically (owner-only, fsynced)."""
    content: dict[str, object] = {"format": _MARKER_FORMAT, "ledger": path.name, "ledger_id": ledger,
                                  "written": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if reset is not None:
        content["reset"] = reset
    marker = marker_path(path)
    staging = _staging(marker)
    try:
        with os.fdopen(os.open(staging, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600), "w", encoding="utf-8") as out:
            out.write(json.dumps(content, sort_keys=True) + "\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(staging, marker)
    finally:
        staging.unlink(missing_ok=True)
    fsync_directory(path.parent)


def _check_marker(path: Path, ledger: str) -> None:
    """Refuse a ledger its marker was not written for (id ``ledger``); write the marker of a ledger that has none."""
    marker = marker_path(path)
    try:
        data = marker.read_bytes()
    except FileNotFoundError:
        _write_marker(path, ledger)
        return
    try:
        recorded = json.loads(data)["ledger_id"]
    except (ValueError, TypeError, KeyError, RecursionError):
        raise refused(path, f"its marker {marker.name} is not a ledger marker") from None
    if recorded != ledger:
        raise refused(path, f"it is not the ledger its marker {marker.name} was written for (ledger id {ledger}, "
                            f"marker {shown(recorded)}): the ledger was replaced")


def open_file(path: Path, budget: Budget) -> tuple[sqlite3.Connection, bytes, Budget]:
    """Open the ledger at ``path``, created with ``budget`` if nothing shows an earlier one: checked whole, its
    marker checked (or written), upgraded to the current format. Returns the connection, the memo secret
    and the stored budget."""
    with ledger_errors(path, "cannot open it"):
        _create_if_new(path, budget)
        _check_file(path)
        conn = connect(str(path))
        try:
            version, secret = verify(conn, path)
            _check_marker(path, ledger_id(secret))
            if version < FORMAT:
                upgrade(conn, budget)
            return conn, secret, stored_budget(conn, path)
        except BaseException:
            conn.close()
            raise


def reset_file(path: Path, budget: Budget) -> dict:
    """Move the ledger at ``path``, its ``-wal``/``-shm`` and its marker aside and link in a new one with
    ``budget`` that records the reset (:meth:`PrivacyLedger.reset`); return the record."""
    now = datetime.now(timezone.utc)
    aside = f"{path}.reset-{now:%Y%m%dT%H%M%S%fZ}"
    files = [suffix for suffix in ("", *SQLITE_SUFFIXES) if os.path.lexists(f"{path}{suffix}")]
    marked = os.path.lexists(marker_path(path))
    moved = {f"{path.name}{suffix}": f"{Path(aside).name}{suffix}"
             for suffix in files + ([MARKER_SUFFIX] if marked else [])}
    record = {"at": now.isoformat(timespec="seconds"), "moved": moved, "budget": budget.describe()}
    with ledger_errors(path, "cannot reset it"):
        with _built_ledger(path, budget, record) as (built, secret):
            for suffix in files:  # the database first: its -wal must never be gone while it is in place
                _move_aside(Path(f"{path}{suffix}"), Path(f"{aside}{suffix}"))
            os.link(built, path)
        if marked:
            _move_aside(marker_path(path), marker_path(aside))
        _write_marker(path, ledger_id(secret), record)
    return record
