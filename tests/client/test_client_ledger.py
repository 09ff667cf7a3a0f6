"""The on-device privacy ledger: budget refusal, memoization, durability, the keyed memo. Damage and resets:
test_client_ledger_damage.py; the audit of 5612345: test_client_ledger_audit.py; the CLI: test_client_ledger_cli.py."""

from __future__ import annotations

import hashlib
import hmac
import sqlite3
import stat
import threading
from contextlib import closing
from fractions import Fraction

import numpy as np
import pytest

from ldpsynth.client import DEFAULT_BUDGET_MULTIPLE, PrivacyLedger, default_ledger_path
from ldpsynth.client.device import collection_fingerprint
from ldpsynth.shared.errors import PrivacyBudgetExceeded, ValidationError

from .client_fakes import ratings_info, ratings_rows
from .ledger_helpers import memo_rows, prepare


def test_ledger_file_is_wal_with_full_sync_and_private(tmp_path) -> None:
    path = tmp_path / "dev" / "ledger.sqlite"
    with PrivacyLedger(path) as ledger:
        assert ledger._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL (white-box)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_default_path_from_environment(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("LDPSYNTH_LEDGER", str(tmp_path / "explicit.sqlite"))
    assert default_ledger_path() == tmp_path / "explicit.sqlite"
    monkeypatch.delenv("LDPSYNTH_LEDGER")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_ledger_path() == tmp_path / "data" / "ldpsynth" / "ledger.sqlite"
    with PrivacyLedger() as ledger:
        assert ledger.path == tmp_path / "data" / "ldpsynth" / "ledger.sqlite"


def test_each_new_row_costs_the_delivered_epsilon(tmp_path) -> None:
    with PrivacyLedger(tmp_path / "l.sqlite", budget=100.0) as ledger:
        out = prepare(ledger, ratings_rows(7), epsilon=0.7)
        delivered = ratings_info(0.7).card.mechanism.epsilon
        assert out.epsilon_spent == float(7 * Fraction(delivered))
        assert ledger.spent("ratings") == out.epsilon_total == out.epsilon_spent
        assert ledger.reports("ratings") == 7 and out.memoized == 0 and len(out.reports) == 7


def test_default_budget_is_ten_times_epsilon_exactly_at_the_boundary(tmp_path) -> None:
    # ε = 0.1 is not a dyadic rational: a float running sum would drift; the ledger's sum is exact.
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:
        assert ledger.budget_for(0.1) == pytest.approx(DEFAULT_BUDGET_MULTIPLE * 0.1)
        for i in range(DEFAULT_BUDGET_MULTIPLE):
            prepare(ledger, ratings_rows(1, start=i), epsilon=0.1)
        with pytest.raises(PrivacyBudgetExceeded):
            prepare(ledger, ratings_rows(1, start=99), epsilon=0.1)
        assert ledger.reports("ratings") == DEFAULT_BUDGET_MULTIPLE


def test_refusal_records_nothing(tmp_path) -> None:
    path = tmp_path / "l.sqlite"
    with PrivacyLedger(path, budget=5.0) as ledger:
        prepare(ledger, ratings_rows(3))
        before = memo_rows(path)
        with pytest.raises(PrivacyBudgetExceeded, match="over this device's budget"):
            prepare(ledger, ratings_rows(3, start=10))  # 3 + 3 rows at ε ≈ 1 > 5
        assert memo_rows(path) == before
        assert ledger.reports("ratings") == 3
        assert ledger.spent("ratings") == pytest.approx(3.0)


def test_same_row_twice_gives_the_same_report_and_costs_once(tmp_path) -> None:
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:
        first = prepare(ledger, ratings_rows(4))
        again = prepare(ledger, ratings_rows(4))
        np.testing.assert_array_equal(again.reports.report_ids, first.reports.report_ids)
        np.testing.assert_array_equal(again.reports.private_codes, first.reports.private_codes)
        assert again.memoized == 4 and again.epsilon_spent == 0.0
        assert ledger.reports("ratings") == 4


def test_identical_rows_in_one_submission_share_one_report(tmp_path) -> None:
    rows = ratings_rows(3)
    doubled = {name: values + values[:1] for name, values in rows.items()}
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:
        out = prepare(ledger, doubled)
        assert (out.rows, len(out.reports), out.memoized) == (4, 3, 1)
        assert ledger.reports("ratings") == 3


def test_another_public_key_gets_an_independent_report(tmp_path) -> None:
    row = {"movie": [5], "region": ["eu"], "rating": [4], "watched": [1]}
    other = dict(row, movie=[6])
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:
        a = prepare(ledger, row)
        b = prepare(ledger, other)
        assert b.memoized == 0 and b.epsilon_spent > 0
        assert a.reports.report_ids.tobytes() != b.reports.report_ids.tobytes()
        assert ledger.reports("ratings") == 2


def sealed_memos(path) -> list[bytes]:
    with closing(sqlite3.connect(path)) as conn:
        return [key for (key,) in conn.execute("SELECT memo_key FROM memo_sealed ORDER BY 1")]


@pytest.mark.parametrize(("first", "then", "problem"), [
    (False, True, "first sent in clear; sending it sealed would link the report to this device"),
    (True, False, "first sent sealed, through a shuffler; sending it in clear would link the report to this device"),
], ids=["clear then sealed", "sealed then clear"])
def test_a_memoized_report_keeps_its_path(tmp_path, first, then, problem) -> None:
    """A report memoized in clear is never sealed later (its sealed copy would be matched to the clear one), nor
    a sealed one sent in clear: the whole submission is refused naming rows, nothing charged or recorded, even
    its new rows; the same path again is the free memoized resend."""
    path = tmp_path / "l.sqlite"
    with PrivacyLedger(path, budget=100.0) as ledger:
        sent = prepare(ledger, ratings_rows(3), sealed=first)
        before = (memo_rows(path), sealed_memos(path), ledger.spent("ratings"), ledger.reports("ratings"))
        assert len(before[1]) == (3 if first else 0)  # marked sealed in the memo's transaction
        new = ratings_rows(1, start=50)
        mixed = {name: column[:2] + new[name] for name, column in ratings_rows(3).items()}  # 2 memoized, 1 new
        with pytest.raises(ValidationError, match=rf"rows: .*collection 'ratings': 2 of these rows have a report "
                                                  rf"{problem}"):
            prepare(ledger, mixed, sealed=then)
        assert (memo_rows(path), sealed_memos(path), ledger.spent("ratings"), ledger.reports("ratings")) == before
        again = prepare(ledger, mixed, sealed=first)
        assert again.memoized == 2 and again.epsilon_spent > 0 and ledger.reports("ratings") == 4
        np.testing.assert_array_equal(again.reports.report_ids[:2], sent.reports.report_ids[:2])
        assert len(sealed_memos(path)) == (4 if first else 0)


def test_the_path_is_per_report_not_per_collection(tmp_path) -> None:
    """A collection that is not shuffled may take some rows in clear and others sealed (transport anonymity):
    each memoized report keeps its own path."""
    with PrivacyLedger(tmp_path / "l.sqlite", budget=100.0) as ledger:
        prepare(ledger, ratings_rows(2), sealed=False)
        prepare(ledger, ratings_rows(2, start=10), sealed=True)
        assert prepare(ledger, ratings_rows(2), sealed=False).memoized == 2
        assert prepare(ledger, ratings_rows(2, start=10), sealed=True).memoized == 2
        assert ledger.reports("ratings") == 4


def test_ledger_survives_reopen(tmp_path) -> None:
    path = tmp_path / "l.sqlite"
    with PrivacyLedger(path) as ledger:
        first = prepare(ledger, ratings_rows(5))
    with PrivacyLedger(path) as ledger:
        assert ledger.spent("ratings") == first.epsilon_total
        again = prepare(ledger, ratings_rows(5))
    assert again.memoized == 5
    np.testing.assert_array_equal(again.reports.report_ids, first.reports.report_ids)
    np.testing.assert_array_equal(again.reports.private_codes, first.reports.private_codes)


def test_memo_is_keyed_by_hmac_under_the_device_secret(tmp_path) -> None:
    path = tmp_path / "l.sqlite"
    info = ratings_info()
    rows = {"movie": [5], "region": ["us"], "rating": [4], "watched": [1]}
    with PrivacyLedger(path) as ledger:
        out = prepare(ledger, rows)
    with sqlite3.connect(path) as conn:
        secret = conn.execute("SELECT value FROM device WHERE name = 'memo_secret'").fetchone()[0]
    [(key, collection, report_id, stored_code)] = memo_rows(path)
    raw_code = 3 * 2 + 1  # rating 4, watched 1
    message = b"ldpsynth-memo/1" + collection_fingerprint(info.card) + np.array([5, 1, raw_code], "<u8").tobytes()
    assert len(secret) == 32 and key == hmac.digest(secret, message, "sha256")
    assert key != hashlib.sha256(message).digest()
    # The table keeps the perturbed code that was sent, the id, and no raw private value.
    assert collection == "ratings" and report_id == out.reports.report_ids[0].tobytes()
    assert stored_code == int(out.reports.private_codes[0])
    # Another device (another secret) keys the same row differently.
    with PrivacyLedger(tmp_path / "other.sqlite") as other:
        prepare(other, rows)
    assert memo_rows(tmp_path / "other.sqlite")[0][0] != key


def test_two_handles_on_one_file_add_up(tmp_path) -> None:
    path = tmp_path / "l.sqlite"
    handles = [PrivacyLedger(path, budget=100.0) for _ in range(4)]
    threads = [threading.Thread(target=prepare, args=(h, ratings_rows(5, start=5 * i))) for i, h in enumerate(handles)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert handles[0].reports("ratings") == 20
    for h in handles:
        h.close()


def test_in_memory_ledger_and_bad_arguments(tmp_path) -> None:
    with PrivacyLedger.for_simulation() as ledger:
        assert prepare(ledger, ratings_rows(2)).epsilon_total > 0
    with pytest.raises(ValidationError, match=r"ledger.*for_simulation"):
        PrivacyLedger(":memory:")
    with pytest.raises(ValidationError, match="budget"):
        PrivacyLedger(tmp_path / "l.sqlite", budget=float("nan"))
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ValidationError, match="ledger"):
        PrivacyLedger(blocker / "ledger.sqlite")
