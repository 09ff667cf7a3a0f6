"""The public release of a collection: its mechanism card and the synthetic database (the stored
perturbed rows, in report-id order), as the aggregator exports it (``ldpsynth export``,
:meth:`QueryClient.export <ldpsynth.client.query.QueryClient.export>`).

:meth:`Release.write` puts it in a folder that :meth:`Release.read` and ``ldpsynth estimate`` read back::

    DIR/card.json          the mechanism card (schema, delivered ε, |D|, keep/lie probabilities)
    DIR/synthetic.csv      header = attribute names; public values in clear, private values decoded
                           (continuous attributes as bucket lower edges)
    DIR/synthetic.parquet  the same table, when pyarrow is installed
    DIR/guarantees.json    a shuffled collection's release: its guarantees, the local ε0 and the central
                           (ε, δ) per public-key group with the counts they come from
                           (:meth:`Guarantees.to_json <ldpsynth.shared.guarantees.Guarantees.to_json>`)

A collection of a frequency oracle has no synthetic row over D: its table holds the public values
and each row's report (:data:`REPORT_COLUMNS`: OUE's and SS's bit set in hexadecimal, byte 0 first;
OLH's seed and bucket; HR's index ``2j + b``), from which its card debiases every answer.

:meth:`Release.from_values` makes one from columns in that form. Everything in it is already
differentially private (each row went through the collection's mechanism on its device): publishing it
costs no further budget. Needs numpy only (and pyarrow for the Parquet file).
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ldpsynth.shared import jsonio
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.guarantees import Guarantees
from ldpsynth.shared.jsonio import read_text
from ldpsynth.shared.mechanisms.registry import ReportLayout, layout_of, name_of
from ldpsynth.shared.schema import ContinuousAttribute

__all__ = [
    "CARD_FILE",
    "CSV_FILE",
    "PARQUET_FILE",
    "REPORT_COLUMNS",
    "Release",
]

CARD_FILE = "card.json"
CSV_FILE = "synthetic.csv"
PARQUET_FILE = "synthetic.parquet"
GUARANTEES_FILE = "guarantees.json"
#: Relative tolerance (in bucket widths) for a continuous value to count as a bucket lower edge.
EDGE_TOLERANCE = 1e-6
#: The table columns of a frequency oracle's or a numeric collection's reports (names no attribute can have).
REPORT_COLUMNS = {"OUE": ("report.bitmap",), "SS": ("report.bitmap",), "OLH": ("report.seed", "report.bucket"),
                  "HR": ("report.index",), "HM": ("report.index",), "SW": ("report.index",)}


def _report_columns(layout: ReportLayout, reports: np.ndarray, hash_bits: int) -> dict[str, np.ndarray]:
    """The table columns of ``reports`` (:data:`REPORT_COLUMNS`)."""
    if layout.bitmap:
        return {"report.bitmap": np.array([row.tobytes().hex() for row in reports], dtype=object)}
    if layout.mechanism == "OLH":
        return {"report.seed": reports >> hash_bits, "report.bucket": reports & ((1 << hash_bits) - 1)}
    return {"report.index": reports}


def _integers(column: np.ndarray, name: str) -> np.ndarray:
    try:
        values = np.array([int(str(v).strip()) for v in column.tolist()], dtype=object)
        return values.astype(np.int64)
    except (ValueError, OverflowError):
        raise ValidationError(f"synthetic.{name}", "integers below 2^63", "not an integer") from None


def _reports_of(layout: ReportLayout, columns: Mapping[str, npt.ArrayLike], hash_bits: int) -> np.ndarray:
    """The reports in the table columns :data:`REPORT_COLUMNS` (the inverse of :func:`_report_columns`), checked."""
    names = REPORT_COLUMNS[layout.mechanism]
    missing = [name for name in names if name not in columns]
    if missing:
        raise ValidationError(f"synthetic.{missing[0]}", f"the report columns {', '.join(names)} of a "
                              f"{layout.mechanism} release", "missing column")
    if layout.bitmap:
        raw = np.asarray(columns["report.bitmap"])
        try:
            data = b"".join(bytes.fromhex(str(v)) if len(str(v)) == 2 * layout.width else b"!" for v in raw.tolist())
        except ValueError:
            data = b""
        if len(data) != len(raw) * layout.width:
            raise ValidationError("synthetic.report.bitmap", f"{2 * layout.width} hexadecimal digits per row",
                                  "malformed")
        reports = np.frombuffer(data, np.uint8).reshape(len(raw), layout.width)
    elif layout.mechanism == "OLH":
        seeds = _integers(np.asarray(columns["report.seed"]), "report.seed")
        buckets = _integers(np.asarray(columns["report.bucket"]), "report.bucket")
        for name, values, bound in (("report.seed", seeds, layout.bound >> hash_bits),
                                    ("report.bucket", buckets, 1 << hash_bits)):
            bad = (values < 0) | (values >= bound)
            if bad.any():
                raise ValidationError(f"synthetic.{name}", f"integers in [0, {bound - 1}]", "out of range",
                                      int(np.flatnonzero(bad)[0]))
        reports = (seeds << hash_bits) | buckets
    else:
        reports = _integers(np.asarray(columns["report.index"]), "report.index")
    return layout.check(reports, f"synthetic.{names[0]}")


def _float_or_nan(text: object) -> float:
    try:
        return float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return float("nan")


def _edge_midpoints(attr: ContinuousAttribute, column: np.ndarray) -> np.ndarray:
    """Bucket lower edges -> bucket midpoints (encoding a midpoint is immune to rounding at the edge)."""
    try:
        x = column.astype(np.float64)
    except (TypeError, ValueError):
        x = np.array([_float_or_nan(v) for v in column])
    index = np.rint((x - float(attr.lo)) / attr.width)
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(x - (float(attr.lo) + index * attr.width)) <= EDGE_TOLERANCE * attr.width)
        bad |= ~((index >= 0) & (index < attr.size))
    if bad.any():
        raise ValidationError(f"synthetic.{attr.name}", f"a bucket lower edge {attr.lo} + j * {attr.width} with j in "
                              f"[0, {attr.size - 1}]", "not a bucket lower edge", int(np.flatnonzero(bad)[0]))
    return x + attr.width / 2.0


def _csv_columns(path: Path, names: Collection[str], field: str) -> dict[str, np.ndarray]:
    """The columns ``names`` (those the header has; others are ignored) of a CSV file, as text."""
    reader = csv.reader(read_text(path, field).splitlines())
    header = next(reader, None)
    if header is None:
        raise ValidationError("synthetic", "a CSV file with a header of attribute names", "empty file")
    rows = list(reader)
    bad = [i for i, row in enumerate(rows) if len(row) != len(header)]
    if bad:
        raise ValidationError("synthetic", f"rows of {len(header)} fields (the header's)",
                              f"got {len(rows[bad[0]])} fields", bad[0])
    return {name: np.array([row[j].strip() for row in rows], dtype=object)
            for j, name in enumerate(header) if name in names}


def _parquet_columns(path: Path, names: Collection[str], field: str) -> dict[str, np.ndarray]:
    """The columns ``names`` (those the file has) of a Parquet file."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ValidationError(field, "a CSV file, or a Parquet file with pyarrow installed (the [parquet] extra)",
                              f"{path}: pyarrow is not installed") from None
    try:
        table = pq.read_table(path, columns=[name for name in pq.read_schema(path).names if name in names])
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError, ArrowIOError an OSError
        raise ValidationError(field, "a readable Parquet file", f"{path}: {exc}") from None
    return {name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names}


@dataclass(frozen=True, eq=False)
class Release:
    """A collection's public release: its mechanism card and the synthetic rows, as codes.

    Attributes
    ----------
    card : MechanismCard
        The collection's mechanism card.
    codes : dict of str to numpy.ndarray
        ``codes[name]``: the codes of attribute ``name`` of every row (int64, in ``[0, size)`` of
        the attribute, row order = report id), one column of equal length per attribute; a
        frequency oracle's release: the public attributes only. Not checked here:
        :meth:`from_values` and :meth:`read` check what they read.
    guarantees : Guarantees or None, default None
        What the aggregator stated for the release (a shuffled collection's export).
    reports : numpy.ndarray or None, default None
        A frequency oracle's report of every row
        (:func:`~ldpsynth.shared.mechanisms.registry.layout_of`); ``None`` for E.
    """

    card: MechanismCard
    codes: dict[str, np.ndarray]
    guarantees: Guarantees | None = None
    reports: np.ndarray | None = None

    def __len__(self) -> int:
        if self.reports is not None:
            return len(self.reports)
        return len(next(iter(self.codes.values()))) if self.codes else 0

    def private_reports(self) -> np.ndarray:
        """What every row's device sent for its private part.

        Returns
        -------
        numpy.ndarray
            E's perturbed codes (:meth:`private_codes`), or a frequency oracle's reports
            (:func:`~ldpsynth.shared.mechanisms.registry.layout_of`: (n,) int64 numbers or (n, width)
            uint8 bit sets).

        Raises
        ------
        ValidationError
            Naming a private attribute whose codes are missing, out of its range or of another length
            (E's release).
        """
        return self.private_codes() if self.reports is None else self.reports

    def _hash_bits(self) -> int:
        return int(getattr(self.card.mechanism, "hash_bits", 0))

    def public_keys(self) -> np.ndarray:
        """Public key of every row (mixed radix of the public attributes' codes).

        Returns
        -------
        numpy.ndarray
            int64 public keys (zeros when the schema has no public attribute).

        Raises
        ------
        ValidationError
            Naming a public attribute whose codes are missing, out of its range or of another length.
        """
        return self.card.schema.public_keys_of(self.codes, len(self))

    def private_codes(self) -> np.ndarray:
        """Perturbed code over D of every row (mixed radix of the private attributes' codes).

        Returns
        -------
        numpy.ndarray
            int64 codes in ``[0, |D|)``.

        Raises
        ------
        ValidationError
            Naming a private attribute whose codes are missing, out of its range or of another length.
        """
        return self.card.schema.private_codes_of(self.codes)

    def values(self) -> dict[str, np.ndarray]:
        """Decoded columns (what the CSV holds).

        Returns
        -------
        dict of str to numpy.ndarray
            Attribute name -> values (continuous attributes as bucket lower edges); a frequency
            oracle's release: its public attributes and its reports' columns.

        Raises
        ------
        ValidationError
            Naming an attribute whose codes are out of its range.
        KeyError
            ``codes`` has no column for an attribute of the schema.
        """
        if self.reports is not None:
            out = {a.name: a.decode(self.codes[a.name]) for a in self.card.schema.public_attributes}
            return {**out, **_report_columns(layout_of(self.card.mechanism), self.reports, self._hash_bits())}
        return {a.name: a.decode(self.codes[a.name]) for a in self.card.schema.attributes}

    @classmethod
    def from_values(cls, card: MechanismCard, columns: Mapping[str, npt.ArrayLike]) -> Release:
        """The release of ``card`` whose rows have the decoded values ``columns[name]``.

        The inverse of :meth:`values`.

        Parameters
        ----------
        card : MechanismCard
            The collection's mechanism card.
        columns : mapping of str to array_like
            Attribute name -> one-dimensional column of values, all of one length: public values in
            clear, private values as perturbed, continuous attributes as bucket lower edges
            (``lo + j * width``). Columns of other names are ignored.

        Returns
        -------
        Release

        Raises
        ------
        ValidationError
            Naming a missing column or one of another shape (``synthetic.<name>``), a value that is
            not a bucket lower edge (``synthetic.<name>``) or an illegal value (``<name>``), and the row.

        Examples
        --------

        >>> from ldpsynth.shared.schema import Schema
        >>> schema = Schema.from_json({"name": "ratings", "epsilon": 1.0, "attributes": [
        ...     {"name": "rating", "type": "integer", "min": 1, "max": 5}]})
        >>> release = Release.from_values(MechanismCard.for_schema(schema), {"rating": [4, 5, 1]})
        >>> len(release), release.private_codes().tolist()
        (3, [3, 4, 0])
        """
        schema = card.schema
        codes: dict[str, np.ndarray] = {}
        rows: int | None = None
        oracle = card.has_reports
        for attr in schema.public_attributes if oracle else schema.attributes:
            if attr.name not in columns:
                raise ValidationError(f"synthetic.{attr.name}", "a column for each attribute of the schema "
                                      f"({', '.join(a.name for a in schema.attributes)})", "missing column")
            column = np.asarray(columns[attr.name])
            if column.ndim != 1 or (rows is not None and len(column) != rows):
                raise ValidationError(f"synthetic.{attr.name}", "a column of one value per row"
                                      + ("" if rows is None else f" ({rows} rows)"), f"got shape {column.shape}")
            rows = len(column)
            values = _edge_midpoints(attr, column) if isinstance(attr, ContinuousAttribute) else column
            codes[attr.name] = attr.encode(values)
        if not oracle:
            return cls(card, codes)
        reports = _reports_of(layout_of(card.mechanism), columns, int(getattr(card.mechanism, "hash_bits", 0)))
        if rows is not None and len(reports) != rows:
            raise ValidationError("synthetic", f"one report per row ({rows} rows)", f"got {len(reports)}")
        return cls(card, codes, None, reports)

    @classmethod
    def read(cls, path: str | os.PathLike, *, card: MechanismCard | None = None, field: str = "release") -> Release:
        """The release in a folder as :meth:`write` leaves it, or in one table file with its card.

        Parameters
        ----------
        path : str or os.PathLike
            A folder with ``card.json`` and ``synthetic.csv`` (or ``synthetic.parquet`` without the
            CSV, and ``guarantees.json`` for a shuffled collection), or a table file: CSV, or
            Parquet by its ``.parquet`` suffix.
        card : MechanismCard or None, default None
            The release's card: required for a table file; for a folder it replaces ``card.json``.
        field : str, default "release"
            The field an error names for a file that cannot be read.

        Returns
        -------
        Release

        Raises
        ------
        ValidationError
            Naming ``field`` (a file that cannot be read, a Parquet file without pyarrow), ``card``
            (a table file without a card; ``card.*`` for a ``card.json`` that does not verify),
            ``synthetic`` (a CSV file without a header or with a row of another length),
            ``guarantees.json`` or ``guarantees`` (a malformed ``guarantees.json``), or a row as
            :meth:`from_values`.
        """
        path = Path(path)
        table = path
        guarantees = None
        if path.is_dir():
            parquet_only = (path / PARQUET_FILE).exists() and not (path / CSV_FILE).exists()
            table = path / (PARQUET_FILE if parquet_only else CSV_FILE)
            if card is None:
                card = MechanismCard.from_json(read_text(path / CARD_FILE, field))
            if (path / GUARANTEES_FILE).exists():
                stated = jsonio.loads(read_text(path / GUARANTEES_FILE, field), GUARANTEES_FILE, "a JSON object")
                guarantees = Guarantees.from_json(stated, card.schema.shuffle)
        elif card is None:
            raise ValidationError("card", "the release's mechanism card, to read a table file without its folder",
                                  "missing")
        names = {a.name for a in card.schema.attributes} | set(REPORT_COLUMNS.get(name_of(card.mechanism), ()))
        read = _parquet_columns if table.suffix == ".parquet" else _csv_columns
        release = cls.from_values(card, read(table, names, field))
        return release if guarantees is None else cls(release.card, release.codes, guarantees, release.reports)

    def write(self, out: str | Path, *, parquet: bool | None = None) -> list[Path]:
        """Write the card, the CSV and (``parquet`` None: when pyarrow is importable) the Parquet file.

        Also ``guarantees.json`` when the release has guarantees; files already there are replaced.

        Parameters
        ----------
        out : str or pathlib.Path
            The folder, created (with its parents) if missing.
        parquet : bool or None, default None
            Write ``synthetic.parquet`` too: ``None`` when pyarrow is importable, ``True`` always,
            ``False`` never.

        Returns
        -------
        list of pathlib.Path
            The files written.

        Raises
        ------
        ValidationError
            Naming ``out``: the folder cannot be created (e.g. ``out`` is a file) or a file in it
            cannot be written.
        ImportError
            ``parquet=True`` without pyarrow installed.
        """
        folder = Path(out)
        legal = "a folder that can be created and written"
        try:
            return self._write(folder, parquet)
        except FileExistsError:  # mkdir(exist_ok=True) raises it only for something that is not a folder
            raise ValidationError("out", legal, f"{folder}: exists and is not a folder") from None
        except OSError as exc:
            raise ValidationError("out", legal, f"{exc.filename or folder}: {exc.strerror or exc}") from None

    def _write(self, folder: Path, parquet: bool | None) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        written = [folder / CARD_FILE, folder / CSV_FILE]
        self.card.save(written[0])
        if self.guarantees is not None:
            written.append(folder / GUARANTEES_FILE)
            written[-1].write_text(json.dumps(self.guarantees.to_json(), indent=2) + "\n", encoding="utf-8")
        columns = self.values()
        names = list(columns)
        with open(written[1], "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(names)
            writer.writerows(zip(*(columns[name].tolist() for name in names)))
        if parquet is not False:
            try:
                import pyarrow as pa
                import pyarrow.parquet as pq
            except ImportError:
                if parquet:
                    raise
            else:
                path = folder / PARQUET_FILE
                pq.write_table(pa.table({name: np.asarray(columns[name]) for name in names}), path)
                written.append(path)
        return written

    def summary(self) -> dict[str, object]:
        """What ``ldpsynth export`` prints.

        Returns
        -------
        dict
            ``collection``, ``rows``, ``epsilon``, ``mechanism_version`` and, for a release stated per
            group (a shuffled collection's, or one with a minimum batch), its guarantees' summary (per party,
            and what was withheld) and ``groups``.
        """
        out: dict[str, object] = {"collection": self.card.schema.name, "rows": len(self),
                                  "epsilon": self.card.mechanism.epsilon, "mechanism_version": self.card.version}
        if self.guarantees is not None:
            out.update(self.guarantees.summary())
            out["groups"] = len(self.guarantees.labels)
        return out
