"""write_records: the CSV every experiment writes."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from ldpsynth.evaluation.records import write_records


def test_header_from_the_first_row_then_rows_then_more(tmp_path: Path) -> None:
    path = tmp_path / "out.csv"
    write_records(path, [{"b": 1, "a": "x"}, {"b": 2, "a": "y"}], [{"b": 3, "a": "mean"}])
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows == [["b", "a"], ["1", "x"], ["2", "y"], ["3", "mean"]]


def test_no_rows_and_mismatched_keys_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="out.csv: no rows"):
        write_records(tmp_path / "out.csv", [])
    with pytest.raises(ValueError):
        write_records(tmp_path / "bad.csv", [{"a": 1}, {"a": 2, "b": 3}])
