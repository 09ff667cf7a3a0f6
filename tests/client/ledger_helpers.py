"""Helpers of the ledger tests: reports prepared through a ledger, its memo rows read back, a used ledger,
and a closed ledger file changed behind the SDK's back."""

from __future__ import annotations

import sqlite3
from contextlib import closing

from ldpsynth.client import PrivacyLedger
from ldpsynth.client.device import prepare_reports
from ldpsynth.client.rows import encode_columns

from .client_fakes import ratings_info, ratings_rows


def prepare(ledger: PrivacyLedger, rows: dict, epsilon: float = 1.0, sealed: bool = False):
    info = ratings_info(epsilon)
    return prepare_reports(info, encode_columns(info.schema, rows), ledger, sealed=sealed)


def memo_rows(path) -> list[tuple]:
    with closing(sqlite3.connect(path)) as conn:  # closed: an open connection keeps the -wal/-shm files
        return conn.execute("SELECT memo_key, collection, report_id, private_code FROM memo").fetchall()


def used_ledger(path, rows: int = 2) -> list[tuple]:
    """A ledger at ``path`` that has reported ``rows`` rows to 'ratings'; its memo rows."""
    with PrivacyLedger(path) as ledger:
        prepare(ledger, ratings_rows(rows))
    return memo_rows(path)


def edit(path, *statements: str) -> None:
    """Change a closed ledger file behind the SDK's back (as the fault campaign did)."""
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
