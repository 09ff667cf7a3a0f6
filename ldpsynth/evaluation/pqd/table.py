"""Tables for DP-PQD: the private table D, a synthetic copy D_s, and public domains.

A :class:`Table` is a set of named columns (numeric columns as ``float64``, text columns as
``str`` objects) with an optional non-negative-or-signed row *weight*: plain tables (a CSV or
Parquet file, an MWEM sample) have weight 1 per row; the debiased histogram of an ldpsynth
release (:mod:`.release`) is a table with one row per cell and the cell's unbiased count
estimate as its weight. The same query code (:mod:`.query`) answers a query on either.

A :class:`NumericDomain` is the *public* domain of an aggregated attribute (DP-PQD §2.1,
``dom(A_i)``): it gives the global-sensitivity bound :math:`GS_q` of SUM (§5) and the candidate
set of EM_med (§6.1). It is a parameter, never read from the private data.

Files are read with the standard :mod:`csv` module (``.csv`` or ``.csv.gz``; blanks after the
separator are skipped, as in the UCI Adult file) or with pyarrow (``.parquet``).
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_real

#: Largest number of candidate values of a numeric domain (EM_med's output range).
MAX_CANDIDATES = 1 << 22


def _numeric(cells: list[str]) -> np.ndarray | None:
    """The cells as float64 if every one parses as a finite number, else None."""
    try:
        values = np.array([float(c) for c in cells], dtype=np.float64)
    except ValueError:
        return None
    return values if np.isfinite(values).all() else None


@dataclass(frozen=True, eq=False)
class Table:
    """Named columns of equal length, with optional row weights (``None``: every row weighs 1)."""

    columns: Mapping[str, np.ndarray]
    weights: np.ndarray | None = None
    name: str = "table"

    def __post_init__(self) -> None:
        lengths = {len(col) for col in self.columns.values()}
        if len(lengths) > 1:
            raise ValidationError(f"{self.name}.columns", "columns of one common length",
                                  f"got lengths {sorted(lengths)}")
        if self.weights is not None:
            w = np.asarray(self.weights, dtype=np.float64)
            if w.ndim != 1 or (lengths and w.shape[0] != next(iter(lengths))) or not np.isfinite(w).all():
                raise ValidationError(f"{self.name}.weights", "one finite weight per row", "wrong shape or not finite")
            object.__setattr__(self, "weights", w)

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()))) if self.columns else 0

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.columns)

    def column(self, name: str) -> np.ndarray:
        """The column ``name``; a clear error lists the columns when it does not exist."""
        try:
            return self.columns[name]
        except KeyError:
            raise ValidationError(f"{self.name}.{name}", f"a column of {self.name}: {', '.join(self.columns)}",
                                  "no such column") from None

    def row_weights(self) -> np.ndarray:
        """Per-row weights (ones for a plain table)."""
        return np.ones(len(self)) if self.weights is None else self.weights


def _open_text(path: Path):
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return path.open("r", encoding="utf-8", newline="")


def read_csv(path: Path, name: str) -> Table:
    """A CSV table with a header line; numeric columns become float64, the others text."""
    try:
        with _open_text(path) as handle:
            rows = list(csv.reader(handle, skipinitialspace=True))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValidationError(name, "a readable CSV file (optionally .gz) with a header line",
                              f"{path}: {exc}") from None
    rows = [r for r in rows if r]
    if not rows:
        raise ValidationError(name, "a CSV file with a header line", f"{path} is empty")
    header = [h.strip() for h in rows[0]]
    if len(set(header)) != len(header) or "" in header:
        raise ValidationError(f"{name}.header", "distinct non-empty column names", f"got {header}")
    body = rows[1:]
    bad = [i for i, r in enumerate(body) if len(r) != len(header)]
    if bad:
        raise ValidationError(name, f"rows of {len(header)} fields (the header's)", f"line {bad[0] + 2} of {path}")
    columns: dict[str, np.ndarray] = {}
    for j, col in enumerate(header):
        cells = [r[j].strip() for r in body]
        numeric = _numeric(cells)
        columns[col] = numeric if numeric is not None else np.array(cells, dtype=object)
    return Table(columns, name=name)


def read_parquet(path: Path, name: str) -> Table:
    """A Parquet table (pyarrow); numeric columns become float64, the others text."""
    import pyarrow.parquet as pq  # heavy: only when a Parquet file is read

    try:
        arrow = pq.read_table(path)
    except (OSError, ValueError) as exc:
        raise ValidationError(name, "a readable Parquet file", f"{path}: {exc}") from None
    columns: dict[str, np.ndarray] = {}
    for col in arrow.column_names:
        values = arrow.column(col).to_numpy(zero_copy_only=False)
        if values.dtype.kind in "iufb":
            values = values.astype(np.float64)
            if not np.isfinite(values).all():
                raise ValidationError(f"{name}.{col}", "finite numbers (no nulls)", "null or non-finite values")
        else:
            values = np.array([str(v) for v in values], dtype=object)
        columns[col] = values
    return Table(columns, name=name)


def read_table(path: str | Path, name: str = "table") -> Table:
    """Read ``.csv``, ``.csv.gz`` or ``.parquet``."""
    path = Path(path)
    if not path.is_file():
        raise ValidationError(name, "an existing .csv, .csv.gz or .parquet file", f"{path} not found")
    if path.suffix == ".parquet":
        return read_parquet(path, name)
    return read_csv(path, name)


@dataclass(frozen=True)
class NumericDomain:
    """Public domain ``{lo, lo + step, ..., hi}`` of a numeric attribute (step 1: the integers).

    ``lo`` and ``hi`` bound every value the attribute may take; for SUM DP-PQD's global
    sensitivity bound is :math:`GS_q = \\max |dom(A_i)|` under add/remove neighbours (DP-PQD §5, Ex. 2.5).
    """

    lo: float
    hi: float
    step: float = 1.0
    attribute: str = "attribute"

    def __post_init__(self) -> None:
        fld = f"domain.{self.attribute}"
        for key in ("lo", "hi"):
            check_real(getattr(self, key), f"{fld}.{key}")
        if self.lo > self.hi:
            raise ValidationError(fld, "lo <= hi", f"got lo={self.lo}, hi={self.hi}")
        check_real(self.step, f"{fld}.step", low=0.0, low_open=True)
        if (self.hi - self.lo) / self.step + 1 > MAX_CANDIDATES:
            raise ValidationError(fld, f"at most {MAX_CANDIDATES} values (hi - lo) / step + 1",
                                  f"got {(self.hi - self.lo) / self.step + 1:.0f}")

    @property
    def global_sensitivity(self) -> float:
        """:math:`GS_q = \\max(|lo|, |hi|)`: the largest change of a SUM when one tuple is added or removed."""
        return float(max(abs(self.lo), abs(self.hi)))

    def candidates(self) -> np.ndarray:
        """Every value of the domain, ascending (EM_med's output range, §6.1)."""
        count = int(math.floor((self.hi - self.lo) / self.step + 1e-9)) + 1
        return self.lo + self.step * np.arange(count, dtype=np.float64)

    def clamp(self, values: np.ndarray) -> np.ndarray:
        """Values clamped into ``[lo, hi]`` (what makes GS_q a true sensitivity bound on any data)."""
        return np.clip(values, self.lo, self.hi)


def parse_domain(text: str) -> NumericDomain:
    """``"name=lo:hi"`` or ``"name=lo:hi:step"`` (command-line form of :class:`NumericDomain`)."""
    legal = "NAME=LO:HI or NAME=LO:HI:STEP with finite numbers"
    name, sep, spec = text.partition("=")
    parts = spec.split(":")
    if not sep or not name.strip() or len(parts) not in (2, 3):
        raise ValidationError("--domain", legal, f"got {text!r}")
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        raise ValidationError("--domain", legal, f"got {text!r}") from None
    step = numbers[2] if len(numbers) == 3 else 1.0
    return NumericDomain(numbers[0], numbers[1], step, attribute=name.strip())
