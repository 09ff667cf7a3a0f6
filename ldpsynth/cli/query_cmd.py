"""``ldpsynth query`` and ``ldpsynth export``: the analyst's commands against a running aggregator.

::

    ldpsynth query  --target HOST:PORT --collection NAME --queries Q.json [--level 0.95] [--token T]
    ldpsynth export --target HOST:PORT --collection NAME --out DIR [--token T]

``query`` prints a JSON array with the fields of ``ldpsynth estimate`` (one object per compiled
query; a shuffled collection's answers carry the guarantee against each party, ``--guarantees`` prints them
with the public-key groups read); ``export`` writes ``DIR/card.json``, ``DIR/synthetic.csv`` (and
``synthetic.parquet`` when pyarrow is installed; a shuffled collection's, or one with a minimum batch,
``DIR/guarantees.json``) and prints a JSON summary (with the central ε and δ against analysts and the
aggregator's operator, and the groups withheld below the minimum batch). ``ldpsynth estimate`` on an export returns the
numbers ``ldpsynth query`` gets from the server. Only the ``[client]`` extra is needed.

``query`` sends the file's queries in chunks of whole queries, each within the server's message
limit (one query too large for it: one line naming ``queries[j]`` and the limit, exit 2); ``[]``
prints ``[]``. Both commands retry UNAVAILABLE and ABORTED with backoff (``--max-attempts``);
a call that fails for good prints one line and exits 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ldpsynth.cli.options import (
    add_command,
    add_guarantees_argument,
    add_level_argument,
    add_target_argument,
    add_tls_arguments,
    add_wide_fit_arguments,
    answers_json,
    wide_fit,
)
from ldpsynth.cli.token_env import add_token_argument
from ldpsynth.shared import jsonio
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.wide.release import WideRelease

if TYPE_CHECKING:
    from ldpsynth.client.query import QueryClient


def _connection(parser: argparse.ArgumentParser) -> None:
    add_target_argument(parser)
    parser.add_argument("--collection", required=True, metavar="NAME", help="the collection")
    add_token_argument(parser, "with the query role")
    add_tls_arguments(parser, "PEM of this client's certificate (mutual TLS)",
                      "PEM of this client's private key (mutual TLS)")
    parser.add_argument("--deadline", type=float, default=600.0, metavar="SECONDS",
                        help="deadline of each attempt of the call (default: %(default)s)")
    parser.add_argument("--max-attempts", type=int, default=8, metavar="N",
                        help="attempts of a call failing with UNAVAILABLE or ABORTED before giving up "
                             "(default: %(default)s)")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``query`` and ``export``."""
    query = _command(
        subparsers, "query", _query, help="answer statistical queries on an aggregator's live synthetic database",
        description="Send a batch of statistical queries (the JSON of `ldpsynth estimate`) to the aggregator and "
                    "print the answers with error bars (WYZ eqs. 17-22). Costs no privacy budget.")
    query.add_argument("--queries", required=True, type=Path, metavar="Q.json", help="JSON array of query objects")
    add_level_argument(query)
    add_guarantees_argument(query)
    export = _command(
        subparsers, "export", _export, help="download the public release (synthetic database + mechanism card)",
        description="Write the collection's synthetic database (CSV, and Parquet when pyarrow is installed) and "
                    "its mechanism card to a folder that `ldpsynth estimate` reads.")
    export.add_argument("--out", required=True, type=Path, metavar="DIR", help="folder to write (created)")
    export.add_argument("--synthetic-rows", type=int, metavar="N",
                        help="a wide collection: rows to sample from its model into DIR/synthetic.csv (default: N, "
                             "the reports of all its views; 0: none)")
    add_wide_fit_arguments(export)


def _command(subparsers: argparse._SubParsersAction,
             name: str, handler: Callable[[argparse.Namespace], int], help: str,
             description: str) -> argparse.ArgumentParser:
    """A subcommand that calls the aggregator: its connection options, then its own (added by the caller)."""
    parser = add_command(subparsers, name, handler, help, description)
    _connection(parser)
    return parser


def _client(args: argparse.Namespace) -> QueryClient:
    """The query client of the command's connection options (grpc is imported here, when needed)."""
    from ldpsynth.client.query import QueryClient
    from ldpsynth.client.retry import RetryPolicy

    return QueryClient(args.target, token=args.token, root_certificates=args.tls_ca, certificate_chain=args.tls_cert,
                       private_key=args.tls_key, deadline=args.deadline,
                       retry=RetryPolicy(max_attempts=args.max_attempts))


def _query(args: argparse.Namespace) -> int:
    from ldpsynth.client.errors import QueryError

    queries = jsonio.load_file(args.queries, "--queries", "a JSON array of query objects")
    if not isinstance(queries, list):
        raise ValidationError("--queries", "a JSON array of query objects", f"got {type(queries).__name__}")
    try:
        with _client(args) as client:
            answers = client.estimate(args.collection, queries=queries, level=args.level)
    except QueryError as exc:
        print(f"ldpsynth query: error: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(jsonio.dumps(answers_json(answers, args.guarantees), indent=2) + "\n")
    return 0


def _export(args: argparse.Namespace) -> int:
    from ldpsynth.client.errors import QueryError

    fit = wide_fit(args)                # the options checked before the download
    try:
        with _client(args) as client:
            release = client.export_release(args.collection)
    except QueryError as exc:
        print(f"ldpsynth export: error: {exc}", file=sys.stderr)
        return 1
    if isinstance(release, WideRelease):   # the views' releases, the wide card and the sampled rows
        population = release.measurements().population
        written, note = release.write(args.out, rows=args.synthetic_rows, fit=fit)
        sampled = 0 if note is not None else population if args.synthetic_rows is None else args.synthetic_rows
        print(jsonio.dumps({"collection": args.collection, "views": [r.summary() for r in release.releases],
                          "population": population, "synthetic_rows": sampled, "note": note,
                          "files": [str(f) for f in written]}, sort_keys=True))
        return 0
    files = release.write(args.out)
    print(jsonio.dumps({**release.summary(), "files": [str(f) for f in files]}, sort_keys=True))
    return 0
