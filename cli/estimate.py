"""``ldpsynth estimate``: answer statistical queries offline from an export of the synthetic database.

::

    ldpsynth estimate --synthetic Y.csv --card card.json --queries q.json [--level 0.95]

prints a JSON array with one object per (compiled) query: ``label``, ``estimate`` (eq. 17),
``proper_estimate`` and ``proper_kind`` (eq. 21), ``std_error``, ``ci_low``, ``ci_high``,
``level``, ``bound`` (RMS of eq. 20), ``bound_proper`` (eq. 22), ``n`` and ``epsilon``
(delivered). The query JSON is documented in :mod:`ldpsynth.shared.query_json`.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimator_engine import estimate
from ldpsynth.shared.jsonio import read_text
from ldpsynth.shared.query_compiler import compile_queries
from ldpsynth.shared.query_json import queries_from_json
from ldpsynth.shared.schema import ContinuousAttribute, Schema
from ldpsynth.shared.statistics import SufficientStatistics

#: Relative tolerance (in bucket widths) for a continuous value to count as a bucket lower edge.
EDGE_TOLERANCE = 1e-6


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``estimate`` subcommand."""
    parser = subparsers.add_parser(
        "estimate", help="answer statistical queries from an exported synthetic database",
        description="Answer statistical queries with error bars from an export of the synthetic database "
                    "and its mechanism card, offline (seed 000 eqs. 17-22).")
    parser.add_argument("--synthetic", required=True, type=Path,
                        help="CSV with a header of attribute names, one perturbed row per line: public attributes in "
                             "clear, private attributes decoded, continuous attributes as bucket lower edges; "
                             "other columns are ignored")
    parser.add_argument("--card", required=True, type=Path, help="the mechanism card (JSON) of the release")
    parser.add_argument("--queries", required=True, type=Path, help="JSON array of query objects")
    parser.add_argument("--level", type=float, default=0.95, help="confidence level in (0, 1) (default 0.95)")
    parser.set_defaults(handler=run)


def _float_or_nan(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return float("nan")


def _edge_midpoints(attr: ContinuousAttribute, column: np.ndarray) -> np.ndarray:
    """Bucket lower edges -> bucket midpoints (encoding a midpoint is immune to rounding at the edge)."""
    try:
        x = column.astype(np.float64)
    except ValueError:
        x = np.array([_float_or_nan(v) for v in column])
    index = np.rint((x - float(attr.lo)) / attr.width)
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(x - (float(attr.lo) + index * attr.width)) <= EDGE_TOLERANCE * attr.width)
        bad |= ~((index >= 0) & (index < attr.size))
    if bad.any():
        raise ValidationError(f"synthetic.{attr.name}", f"a bucket lower edge {attr.lo} + j * {attr.width} with j in "
                              f"[0, {attr.size - 1}]", "not a bucket lower edge", int(np.flatnonzero(bad)[0]))
    return x + attr.width / 2.0


def read_synthetic(path: Path, schema: Schema) -> tuple[np.ndarray, np.ndarray]:
    """Public keys and private codes of the rows of a synthetic-database CSV export."""
    text = read_text(path, "--synthetic")
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if header is None:
        raise ValidationError("synthetic", "a CSV file with a header of attribute names", "empty file")
    where = {name: j for j, name in enumerate(header)}
    for attr in schema.attributes:
        if attr.name not in where:
            raise ValidationError(f"synthetic.{attr.name}", f"a column of the CSV header {header}", "missing column")
    rows = list(reader)
    bad = [i for i, row in enumerate(rows) if len(row) != len(header)]
    if bad:
        raise ValidationError("synthetic", f"rows of {len(header)} fields (the header's)",
                              f"got {len(rows[bad[0]])} fields", bad[0])
    columns: dict[str, np.ndarray] = {}
    for attr in schema.attributes:
        column = np.array([row[where[attr.name]].strip() for row in rows], dtype=object)
        columns[attr.name] = _edge_midpoints(attr, column) if isinstance(attr, ContinuousAttribute) else column
    return schema.encode_public(columns), schema.encode_private(columns)


def run(args: argparse.Namespace) -> int:
    """Handler of ``ldpsynth estimate``: print the answers as a JSON array."""
    card = MechanismCard.from_json(read_text(args.card, "--card"))
    batch = compile_queries(queries_from_json(read_text(args.queries, "--queries")), card.schema)
    keys, codes = read_synthetic(args.synthetic, card.schema)
    stats = SufficientStatistics.from_schema(card.schema, keys, codes)
    answers = estimate(batch, stats, card.mechanism, level=args.level, codes=codes)
    json.dump(answers.records(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
