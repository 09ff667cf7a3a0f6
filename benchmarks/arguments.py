"""Command-line checks shared by the benchmarks."""

from __future__ import annotations

import argparse
from collections.abc import Iterable


def require_positive(parser: argparse.ArgumentParser, args: argparse.Namespace, names: Iterable[str]) -> None:
    """Exit through ``parser.error`` naming the first option of ``names`` (attribute names) below 1."""
    for name in names:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}: an integer >= 1, got {getattr(args, name)}")
