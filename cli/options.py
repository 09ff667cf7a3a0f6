"""Command-line options that several subcommands share, each defined once: where the aggregator is
(``--target``), the client side of TLS, and the confidence level of the intervals."""

from __future__ import annotations

import argparse

TARGET_METAVAR = "HOST:PORT[,HOST:PORT...]"
REPLICAS_HELP = "the aggregator, or several of its replicas (round robin, failover)"


def add_target_argument(parser: argparse.ArgumentParser, help: str = REPLICAS_HELP) -> None:  # noqa: A002
    """Add the required ``--target`` (one address or a comma-separated list of replicas)."""
    parser.add_argument("--target", required=True, metavar=TARGET_METAVAR, help=help)


def add_tls_arguments(parser: argparse.ArgumentParser, certificate_help: str, key_help: str) -> None:
    """Add ``--tls-ca`` (TLS) and ``--tls-cert``/``--tls-key`` (mutual TLS) of a client of the aggregator."""
    parser.add_argument("--tls-ca", metavar="FILE", help="PEM of the CA that signed the server certificate (TLS)")
    parser.add_argument("--tls-cert", metavar="FILE", help=certificate_help)
    parser.add_argument("--tls-key", metavar="FILE", help=key_help)


def add_level_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--level``, the confidence level of the intervals (default 0.95)."""
    parser.add_argument("--level", type=float, default=0.95, help="confidence level in (0, 1) (default 0.95)")
