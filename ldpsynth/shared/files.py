"""Durable file operations both sides use (the device's ledger, the aggregator's data files)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "fsync_directory",
    "write_durably",
]


def fsync_directory(path: str | os.PathLike) -> None:
    """Make the directory entries of ``path`` durable (after a create, link, rename or unlink in
    it): without this a power loss may drop a file that was fsynced itself."""
    fd = os.open(Path(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durably(path: Path, text: str) -> None:
    """``text`` into ``path`` (UTF-8) so that a crash leaves the old file or the new one, whole: a temporary
    file beside it fsynced, renamed over it, the directory fsynced."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_directory(path.parent)
