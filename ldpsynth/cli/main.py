"""The ``ldpsynth`` console script: one subcommand per module of this package.

Each subcommand module exposes ``register(subparsers)``, which adds its parser and sets
``handler`` (a function ``(args) -> int``); one that also runs alone (``python -m
ldpsynth.cli.aggregator_cmd serve ...``) has a ``main()`` that calls :func:`main_alone`. Modules
import their heavy dependencies (gRPC, Ray, scipy) inside the handler, so ``ldpsynth client ...``
works with the ``[client]`` extra alone.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

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


def run(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> int:
    """Parse ``argv`` and run the subcommand's handler; its :class:`LdpsynthError` is one line on stderr,
    ``ldpsynth COMMAND: error: ...``, and exit status 2."""
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except LdpsynthError as exc:
        print(f"ldpsynth {args.command}: error: {exc}", file=sys.stderr)
        return 2


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser(), argv)


def main_alone(command: str, register: Callable[[argparse._SubParsersAction], None], description: str,
               argv: Sequence[str] | None = None) -> int:
    """The ``main()`` of a subcommand module run alone (``python -m ldpsynth.cli.shuffler_cmd serve ...``):
    the subcommand ``command`` that ``register`` adds, given ``argv`` (default ``sys.argv[1:]``) without
    its name, run as :func:`main` runs it (program ``ldpsynth-COMMAND``)."""
    parser = argparse.ArgumentParser(prog=f"ldpsynth-{command}", description=description)
    register(parser.add_subparsers(dest="command", metavar="COMMAND", required=True))
    return run(parser, [command, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
