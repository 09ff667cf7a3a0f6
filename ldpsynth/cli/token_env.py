"""``--token`` of the commands that call the aggregator, defaulting to ``$LDPSYNTH_TOKEN``.

Set but empty (``LDPSYNTH_TOKEN=``, e.g. a blank line of an env file) means no token, as unset
does: an empty string is never a token, and sending it would only be refused as malformed.
"""

from __future__ import annotations

import argparse
import os

TOKEN_ENV = "LDPSYNTH_TOKEN"


def add_token_argument(parser: argparse.ArgumentParser, role: str = "") -> None:
    """Add ``--token`` to ``parser``; ``role`` completes its help, e.g. "with the query role"."""
    parser.add_argument("--token", default=os.environ.get(TOKEN_ENV) or None, metavar="T",
                        help=f"bearer token{' ' + role if role else ''} (default: ${TOKEN_ENV}; unset or empty: none)")
