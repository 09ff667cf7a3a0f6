"""Experiment output: records (one mapping per row, the same keys in the same order) as a CSV file."""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


def write_records(path: Path, rows: Sequence[Mapping[str, Any]], more: Iterable[Mapping[str, Any]] = ()) -> None:
    """Write ``rows`` then ``more`` to ``path`` (UTF-8) under a header of the first row's keys.

    Every row must have exactly those keys (:class:`csv.DictWriter` raises otherwise)."""
    if not rows:
        raise ValueError(f"{path.name}: no rows to write")
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
        writer.writerows(more)
