"""Durable file operations both sides use (the device's ledger, the aggregator's data files)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "fsync_directory",
]


def fsync_directory(path: str | os.PathLike) -> None:
    """Make the directory entries of ``path`` durable (after a create, link, rename or unlink in
    it): without this a power loss may drop a file that was fsynced itself."""
    fd = os.open(Path(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
