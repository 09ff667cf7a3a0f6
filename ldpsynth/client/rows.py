"""A device's raw rows: read them (columns or CSV), validate them locally, encode them to codes.

Rows come as *columns* (a mapping attribute name → sequence of raw values) or as a CSV file whose
header holds the attribute names. The columns must be exactly the schema's attributes: a missing
column or an extra one is an error (an unknown column could be a private field that the schema
does not protect). Every value is checked against its attribute's legal range
before anything is perturbed or sent; errors are
:class:`~ldpsynth.shared.errors.ValidationError` naming the attribute, the row position
(0-based data row: the header and blank lines are not counted) and the legal range, and never
the value itself.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.schema import Schema

__all__ = [
    "Rows",
    "EncodedRows",
    "read_csv",
    "encode_columns",
    "load_rows",
]

#: Raw rows as columns: attribute name → one raw value per row.
Columns = Mapping[str, Sequence[Any] | np.ndarray]
#: What :func:`load_rows` accepts: columns, or the path of a CSV file.
Rows = Columns | str | os.PathLike


@dataclass(frozen=True)
class EncodedRows:
    """Rows encoded to codes, still on the device.

    Attributes
    ----------
    public_codes:
        ``(n, m)`` int64, one column per public attribute in schema order (sent in clear).
    private_codes:
        ``(n,)`` int64 *raw* private codes in ``[0, |D|)`` (mixed radix, docs/contract.md §3). They never
        leave the device: only their perturbation by mechanism E does.
    """

    public_codes: np.ndarray
    private_codes: np.ndarray

    def __len__(self) -> int:
        return int(self.private_codes.shape[0])


def read_csv(path: str | os.PathLike) -> dict[str, list[str]]:
    """Columns of a CSV file with a header of attribute names (values stay strings).

    A record with more or fewer cells than the header is an error naming its position.
    """
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                raise ValidationError("rows", "a CSV file with a header of attribute names", "empty file")
            names = [name.strip() for name in header]
            if len(set(names)) != len(names):
                raise ValidationError("header", "distinct attribute names", "a column name is repeated")
            columns: dict[str, list[str]] = {name: [] for name in names}
            cells = list(columns.values())
            position = 0
            for record in reader:
                if not record:
                    continue
                if len(record) != len(names):
                    raise ValidationError("row", f"{len(names)} cells, one per header column",
                                          f"got {len(record)} cells", position)
                for column, cell in zip(cells, record):
                    column.append(cell)
                position += 1
    except OSError as exc:
        raise ValidationError("rows", "a readable CSV file", f"cannot read it ({exc.strerror})") from None
    except (UnicodeDecodeError, csv.Error):
        raise ValidationError("rows", "a UTF-8 CSV file", "not readable as CSV") from None
    return columns


def _length(name: str, column: Any) -> int:
    """Rows in one column; a column is a sequence or a 1-d array of raw values (not a string)."""
    legal = "a sequence (or 1-d array) of raw values, one per row"
    if isinstance(column, (str, bytes)) or not hasattr(column, "__len__"):
        raise ValidationError(name, legal, "not a column")
    try:
        flat = np.ndim(column) == 1
    except ValueError:  # ragged nested sequences
        flat = False
    if not flat:
        raise ValidationError(name, legal, "not a flat column")
    return len(column)


def encode_columns(schema: Schema, columns: Columns) -> EncodedRows:
    """Validate raw columns against ``schema`` and encode them (public codes, raw private codes)."""
    known = {a.name for a in schema.attributes}
    for name in columns:
        if name not in known:
            attributes = ", ".join(a.name for a in schema.attributes)
            raise ValidationError(str(name), f"one of the attributes of {schema.name!r}: {attributes}",
                                  "not an attribute of the collection")
    for attr in schema.attributes:
        if attr.name not in columns:
            raise ValidationError(attr.name, attr.legal_range, "missing column")
    first = schema.attributes[0].name
    n = _length(first, columns[first])
    for attr in schema.attributes[1:]:
        length = _length(attr.name, columns[attr.name])
        if length != n:
            raise ValidationError(attr.name, f"a column of {n} rows (as many as {first!r})", f"got {length} rows")
    public = [attr.encode(columns[attr.name]) for attr in schema.public_attributes]
    public_codes = np.column_stack(public) if public else np.zeros((n, 0), np.int64)
    private_codes = schema.encode_private({a.name: columns[a.name] for a in schema.private_attributes})
    return EncodedRows(public_codes.astype(np.int64, copy=False), private_codes)


def load_rows(schema: Schema, rows: Rows) -> EncodedRows:
    """Encode ``rows`` (columns, or a CSV path) for ``schema``; see :func:`encode_columns`."""
    if isinstance(rows, (str, os.PathLike)):
        rows = read_csv(rows)
    return encode_columns(schema, rows)
