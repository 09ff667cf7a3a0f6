"""``ldpsynth estimate``: answer statistical queries offline from an export of the synthetic database.

::

    ldpsynth estimate --synthetic Y.csv --card card.json --queries q.json [--level 0.95]

prints a JSON array with one object per (compiled) query: ``label``, ``estimate`` (eq. 17),
``proper_estimate`` and ``proper_kind`` (eq. 21), ``std_error``, ``ci_low``, ``ci_high``,
``level``, ``bound`` (RMS of eq. 20), ``bound_proper`` (eq. 22), ``n`` and ``epsilon``
(delivered); a shuffled collection's release adds ``local_epsilon``, ``rows_per_device``,
``analysts_epsilon``, ``analysts_delta``, ``operator_epsilon`` and ``operator_delta`` (per device,
docs/shuffle-accountant.md §6), a group below the minimum batch is withheld (``withheld_groups``,
``withheld_reports``), and ``--guarantees`` prints ``{"answers": [...], "guarantees": {...}}`` with every
public-key group read and the guarantee against each party (:mod:`ldpsynth.shared.guarantees`). The query
JSON is documented in :mod:`ldpsynth.shared.queries.json_form`; in Python, the same answers come from one call,
:func:`ldpsynth.estimate_release`
(:func:`ldpsynth.shared.estimators.offline.estimate_release`).

A wide collection's export (``ldpsynth export`` of its parent: a folder with the wide card)::

    ldpsynth estimate --synthetic DIR --card DIR/card.json --queries q.json [--iterations --replicates --seed]

answers query objects over the wide row's attributes from the views' releases, each record with its ``method``
(``analytic`` or ``model``): the server's answers when fitted as the server (the defaults; docs/wide.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ldpsynth.cli.options import (
    add_command,
    add_guarantees_argument,
    add_level_argument,
    add_wide_fit_arguments,
    answers_json,
    wide_fit,
)
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.offline import estimate_release
from ldpsynth.shared.jsonio import dumps, read_text
from ldpsynth.shared.release import Release
from ldpsynth.shared.wide.collection import WideCard
from ldpsynth.shared.wide.release import WideRelease, estimate_wide_release, is_wide_card


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``estimate`` subcommand."""
    parser = add_command(
        subparsers, "estimate", run, help="answer statistical queries from an exported synthetic database",
        description="Answer statistical queries with error bars from an export of the synthetic database "
                    "and its mechanism card, offline (the companion estimators, WYZ eqs. 17-22).")
    parser.add_argument("--synthetic", required=True, type=Path,
                        help="CSV with a header of attribute names, one perturbed row per line: public attributes in "
                             "clear, private attributes decoded, continuous attributes as bucket lower edges; "
                             "other columns are ignored (a .parquet file: the same table, with pyarrow)")
    parser.add_argument("--card", required=True, type=Path, help="the mechanism card (JSON) of the release")
    parser.add_argument("--queries", required=True, type=Path, help="JSON array of query objects")
    add_level_argument(parser)
    add_guarantees_argument(parser)
    parser.add_argument("--rows-per-device", type=int, metavar="M",
                        help="a shuffled release: the most rows one device sent, for the central guarantee, at "
                             "least the card's shuffle.rows_per_device (default: that)")
    add_wide_fit_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Handler of ``ldpsynth estimate``: print the answers as a JSON array."""
    text = read_text(args.card, "--card")
    if is_wide_card(text):
        fit = wide_fit(args)            # the options checked before the release is read
        wide = WideRelease.read(args.synthetic, field="--synthetic")
        if wide.card != WideCard.from_json(text):
            raise ValidationError("--card", "the wide card of the export in --synthetic", "another wide card")
        answers: Any = estimate_wide_release(wide, read_text(args.queries, "--queries"), level=args.level,
                                             fit=fit)
        sys.stdout.write(dumps(answers_json(answers, args.guarantees), indent=2) + "\n")
        return 0
    card = MechanismCard.from_json(text)
    release = Release.read(args.synthetic, card=card, field="--synthetic")
    answers = estimate_release(release, read_text(args.queries, "--queries"), level=args.level,
                               rows_per_device=args.rows_per_device)
    sys.stdout.write(dumps(answers_json(answers, args.guarantees), indent=2) + "\n")
    return 0
