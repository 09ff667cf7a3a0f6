"""The command line both smooth-query experiments (``smooth_lowdim.py``, ``smooth_wdbc.py``) share."""

from __future__ import annotations

import argparse
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def smooth_parser(doc: str, name: str, rounds: int, queries: int, seed: int,
                  quick_help: str) -> argparse.ArgumentParser:
    """A parser described by the first line of ``doc`` with ``--out`` (default ``results/<name>``), ``--rounds``,
    ``--queries``, ``--seed`` and ``--quick`` (``quick_help``); the experiment adds its own options."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--out", type=Path, default=RESULTS / name)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--queries", type=int, default=queries)
    parser.add_argument("--seed", type=int, default=seed)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    return parser
