"""Command-line options that several subcommands share, each defined once: where the aggregator is
(``--target``), the client side of TLS, and the confidence level of the intervals; and the making of a
subcommand's parser with its handler."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from typing import Any

TARGET_METAVAR = "HOST:PORT[,HOST:PORT...]"
REPLICAS_HELP = "the aggregator, or several of its replicas (round robin, failover)"


def add_target_argument(parser: argparse.ArgumentParser, help: str = REPLICAS_HELP) -> None:
    """Add the required ``--target`` (one address or a comma-separated list of replicas)."""
    parser.add_argument("--target", required=True, metavar=TARGET_METAVAR, help=help)


def add_tls_arguments(parser: argparse.ArgumentParser, certificate_help: str, key_help: str) -> None:
    """Add ``--tls-ca`` (TLS) and ``--tls-cert``/``--tls-key`` (mutual TLS) of a client of the aggregator."""
    parser.add_argument("--tls-ca", metavar="FILE", help="PEM of the CA that signed the server certificate (TLS)")
    parser.add_argument("--tls-cert", metavar="FILE", help=certificate_help)
    parser.add_argument("--tls-key", metavar="FILE", help=key_help)


def add_observability_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the flags of a serving process's metrics, traces and logs (a replica; a shuffler):
    ``--metrics-port``, ``--metrics-host``, ``--otlp-endpoint``, ``--log-format``."""
    parser.add_argument("--metrics-port", type=int, metavar="PORT",
                        help="serve Prometheus metrics on http://METRICS_HOST:PORT/metrics (default: off; 0 picks a "
                             "free port, logged)")
    parser.add_argument("--metrics-host", default="127.0.0.1",
                        help="address of the metrics port (default %(default)s; the endpoint has no authentication)")
    parser.add_argument("--otlp-endpoint", metavar="URL",
                        help="send trace spans to this OpenTelemetry collector over OTLP/HTTP, e.g. "
                             "http://127.0.0.1:4318 (default: no tracing)")
    parser.add_argument("--log-format", choices=("text", "json"), default="text",
                        help="log lines on stderr: text for people (default) or JSON lines with an event name and "
                             "fields")


#: One numeric option: its flag, type, default and help.
NumberOption = tuple[str, type, float, str]


def add_command(subparsers: argparse._SubParsersAction, name: str, handler: Callable[[argparse.Namespace], int],
                help: str, description: str | None = None) -> argparse.ArgumentParser:
    """Add the subcommand ``name`` (``help`` in the list of commands, ``description`` atop its own help), whose
    arguments ``handler`` runs; the caller adds its options to the parser returned."""
    parser = subparsers.add_parser(name, help=help, description=description)
    parser.set_defaults(handler=handler)
    return parser


def add_number_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup,
                         options: Iterable[NumberOption]) -> None:
    """Add one optional ``--flag`` of the given type, default and help per entry of ``options``."""
    for flag, kind, default, text in options:
        parser.add_argument(flag, type=kind, default=default, help=text)


def add_level_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup,
                       help: str = "confidence level in (0, 1) (default 0.95)") -> None:
    """Add ``--level``, the confidence level of the intervals (default 0.95)."""
    parser.add_argument("--level", type=float, default=0.95, help=help)


def add_wide_fit_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """``--iterations``, ``--replicates``, ``--seed`` (after ``prefix``, e.g. ``--wide-seed``): how a wide
    collection's model is fitted; the defaults are the server's, so that offline answers equal the server's."""
    from ldpsynth.shared.wide.parent import DEFAULT_FIT

    group = parser.add_argument_group("a wide collection's model (server and offline must agree)")
    group.add_argument(f"--{prefix}iterations", type=int, default=DEFAULT_FIT.iterations, metavar="N",
                       help="the least mirror-descent iterations of the fit and of each bootstrap refit; each runs on "
                            "until it fits the views within their noise (default %(default)s)")
    group.add_argument(f"--{prefix}replicates", type=int, default=DEFAULT_FIT.replicates, metavar="B",
                       help="bootstrap replicates B of a model answer's standard error (default %(default)s)")
    group.add_argument(f"--{prefix}seed", type=int, default=DEFAULT_FIT.seed, metavar="S",
                       help="seed of the bootstrap and of the sampled rows (default %(default)s)")


def wide_fit(args: argparse.Namespace, prefix: str = "") -> Any:
    """The :class:`~ldpsynth.shared.wide.parent.WideFit` of :func:`add_wide_fit_arguments`' options."""
    from ldpsynth.shared.errors import ValidationError
    from ldpsynth.shared.wide.parent import WideFit

    dest = prefix.replace("-", "_")
    try:
        return WideFit(getattr(args, f"{dest}iterations"), getattr(args, f"{dest}replicates"),
                       getattr(args, f"{dest}seed"))
    except ValidationError as exc:     # name the option, not the field
        raise ValidationError(f"--{prefix}{exc.field}", exc.legal, exc.problem) from None


def add_guarantees_argument(parser: argparse.ArgumentParser) -> None:
    """``--guarantees``: print the answers with the full statement of their guarantees."""
    parser.add_argument("--guarantees", action="store_true",
                        help="print {\"answers\": [...], \"guarantees\": {...}}: the local epsilon0, the public-key "
                             "groups the queries read with their counts and those withheld, and for a shuffled "
                             "collection the (epsilon, delta) against the shuffler, the aggregator's operator and "
                             "analysts (every answer carries local_epsilon, analysts_epsilon and operator_epsilon in "
                             "any case)")


def answers_json(answers: Any, with_guarantees: bool) -> Any:
    """What ``estimate`` and ``query`` print: the records, or with ``--guarantees`` an object with both."""
    records = answers.records()
    if not with_guarantees:
        return records
    stated = answers.guarantees.to_json() if answers.guarantees is not None else \
        {"scope": "answers", "local": {"epsilon": answers.epsilon, "delta": 0.0, "per": "report"}, "central": None}
    return {"answers": records, "guarantees": stated}
