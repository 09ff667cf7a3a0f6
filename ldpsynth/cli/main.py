"""The ``ldpsynth`` console script: one subcommand per module of this package.

Each subcommand module exposes ``register(subparsers)``, which adds its parser and sets
``handler`` (a function ``(args) -> int``). Modules import their heavy dependencies (gRPC,
Ray, scipy) inside the handler, so ``ldpsynth client ...`` works with the ``[client]`` extra
alone.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ldpsynth.shared.errors import LdpsynthError

#: Subcommand modules, in the order they appear in ``ldpsynth --help``.
SUBCOMMAND_MODULES = (
    "ldpsynth.cli.simulate",
    "ldpsynth.cli.aggregator_cmd",
    "ldpsynth.cli.shuffler_cmd",
    "ldpsynth.cli.estimate",
    "ldpsynth.cli.plan",
    "ldpsynth.cli.client_cmd",
    "ldpsynth.cli.pqd",
    "ldpsynth.cli.compare",
    "ldpsynth.cli.query_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ldpsynth",
        description="Local differential privacy by randomized response: clients, aggregator, estimators.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except LdpsynthError as exc:
        print(f"ldpsynth {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
