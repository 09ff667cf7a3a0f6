"""The on-device privacy ledger, the audit of 5612345: a budget that followed the server (an epsilon pinned per
collection, a budget fixed when the ledger is created) and the upgrade of ledgers of earlier formats. The
in-memory ledger per CLI run: test_client_ledger_cli.py."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from fractions import Fraction

import numpy as np
import pytest

from ldpsynth.client import PrivacyLedger
from ldpsynth.client.device import prepare_reports
from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.errors import CardChanged, PrivacyBudgetExceeded, ValidationError

from .client_fakes import ratings_info, ratings_rows
from .ledger_helpers import edit, prepare


def test_a_collection_reissued_at_another_epsilon_needs_a_reset(tmp_path) -> None:
    """On main 5612345: 10 rows at epsilon 1 used the default budget (10 x 1); the collection re-issued
    under the same name at epsilon 4 raised the default budget to 40 and gave the same rows fresh
    reports (the memo is bound to the card): 7 of them went through. Now the epsilon is pinned."""
    path = tmp_path / "l.sqlite"
    rows = ratings_rows(10)
    with PrivacyLedger(path) as ledger:
        first = prepare(ledger, rows)
        assert len(first.reports) == 10 and ledger.spent("ratings") == pytest.approx(10, rel=1e-12)
        with pytest.raises(PrivacyBudgetExceeded, match="over this device's budget"):
            prepare(ledger, ratings_rows(1, start=50))
        reissued = ratings_info(4.0)
        with pytest.raises(CardChanged, match="now released at epsilon 4.*made at epsilon 1.*reset-ledger"):
            prepare_reports(reissued, encode_columns(reissued.schema, rows), ledger)
        for n in range(1, 8):  # not one of the 7 rows of the audit, whatever their number
            with pytest.raises(CardChanged):
                prepare_reports(reissued, encode_columns(reissued.schema, ratings_rows(n)), ledger)
        assert ledger.reports("ratings") == 10
    PrivacyLedger.reset(path)
    with PrivacyLedger(path) as ledger:
        assert prepare(ledger, ratings_rows(7), 4.0).epsilon_spent == pytest.approx(28, rel=1e-12)


def test_the_budget_is_fixed_when_the_ledger_is_created(tmp_path) -> None:
    """``--budget`` was not stored: a later, higher one simply applied. Now it is stored; a lower one caps
    one session; a higher one needs reset-ledger --budget."""
    path = tmp_path / "l.sqlite"
    info = ratings_info(1.0)
    with PrivacyLedger(path, budget=3.0) as ledger:
        assert prepare(ledger, ratings_rows(3)).epsilon_spent == pytest.approx(3, rel=1e-12)
    with pytest.raises(ValidationError, match=r"budget.*at most 3, the budget this ledger was created with"):
        PrivacyLedger(path, budget=30.0)
    with PrivacyLedger(path) as ledger:  # no budget given: the stored one
        with pytest.raises(PrivacyBudgetExceeded):
            prepare_reports(info, encode_columns(info.schema, ratings_rows(1, start=50)), ledger)
    with PrivacyLedger(path, budget=2.0) as ledger:  # lower: a stricter cap, not stored
        assert ledger.budget_for(1.0) == 2.0
    record = PrivacyLedger.reset(path, budget=30.0)
    assert record["budget"] == "epsilon 30 per collection"
    with PrivacyLedger(path) as ledger:
        assert ledger.budget_for(1.0) == 30.0
    # The default (10 x the collection's epsilon) is stored as such: a budget above it is refused too.
    default = tmp_path / "default.sqlite"
    with PrivacyLedger(default) as ledger:
        assert prepare(ledger, ratings_rows(2)).epsilon_spent == pytest.approx(2, rel=1e-12)
    with PrivacyLedger(default, budget=11.0) as ledger, pytest.raises(ValidationError, match="at most 10"):
        prepare_reports(info, encode_columns(info.schema, ratings_rows(1, start=60)), ledger)


def test_a_ledger_of_format_1_is_upgraded_with_its_collections_pinned(tmp_path) -> None:
    """A ledger written by 5612345 (format 1: no stored budget, no pinned epsilon) opens: the budget
    given then (else the default) is stored and each collection's epsilon pinned at its spend per report."""
    path = tmp_path / "l.sqlite"
    info = ratings_info(1.0)
    with PrivacyLedger(path) as ledger:
        prepare_reports(info, encode_columns(info.schema, ratings_rows(4)), ledger)
    edit(path, "DROP TABLE pinned", "DROP TABLE memo_report", "DROP TABLE promise", "DROP TABLE memo_sealed",
         "DELETE FROM device WHERE name = 'budget'", "PRAGMA user_version = 1")
    with PrivacyLedger(path, budget=5.0) as ledger:
        assert ledger.reports("ratings") == 4 and ledger.budget_for(1.0) == 5.0
        with pytest.raises(CardChanged):
            prepare_reports(ratings_info(2.0), encode_columns(info.schema, ratings_rows(1, start=70)), ledger)
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 5
        assert conn.execute("SELECT epsilon FROM pinned").fetchall() == [(str(Fraction(info.card.mechanism.epsilon)),)]


def test_a_ledger_of_format_2_is_upgraded_with_the_table_of_bit_set_reports(tmp_path) -> None:
    """A ledger written before the frequency oracles (format 2) opens as format 5, its memo kept (in clear)."""
    path = tmp_path / "l.sqlite"
    info = ratings_info(1.0)
    with PrivacyLedger(path) as ledger:
        first = prepare_reports(info, encode_columns(info.schema, ratings_rows(4)), ledger)
    edit(path, "DROP TABLE memo_report", "DROP TABLE promise", "DROP TABLE memo_sealed", "PRAGMA user_version = 2")
    with PrivacyLedger(path) as ledger:
        again = prepare_reports(info, encode_columns(info.schema, ratings_rows(4)), ledger)
        assert again.memoized == 4 and np.array_equal(again.reports.private_codes, first.reports.private_codes)
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 5
        assert conn.execute("SELECT COUNT(*) FROM memo_report").fetchone()[0] == 0
