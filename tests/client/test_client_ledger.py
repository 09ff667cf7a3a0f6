"""The on-device privacy ledger: budget refusal, memoization, durability, the keyed memo, damage and resets."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import sqlite3
import stat
import threading
from contextlib import closing
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from ldpsynth.cli import main as cli_main
from ldpsynth.client import DEFAULT_BUDGET_MULTIPLE, PrivacyLedger, default_ledger_path
from ldpsynth.client.device import collection_fingerprint, prepare_reports
from ldpsynth.client.ledger import marker_path
from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.errors import CardChanged, LedgerError, PrivacyBudgetExceeded, ValidationError

from .client_fakes import FakeCollectionService, ServerThread, ratings_info, ratings_rows


def prepare(ledger: PrivacyLedger, rows: dict, epsilon: float = 1.0, sealed: bool = False):
    info = ratings_info(epsilon)
    return prepare_reports(info, encode_columns(info.schema, rows), ledger, sealed=sealed)


def memo_rows(path) -> list[tuple]:
    with closing(sqlite3.connect(path)) as conn:  # closed: an open connection keeps the -wal/-shm files
        return conn.execute("SELECT memo_key, collection, report_id, private_code FROM memo").fetchall()


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


# --- Damage and resets (issue 16, item 5): refused with one LedgerError, never read as an empty ledger. ---


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


@pytest.mark.parametrize("stored", ["-100", "abc", "nan", "inf", "-inf", "1e5", "1/0", ""])
def test_damaged_spend_is_refused_at_open(tmp_path, stored) -> None:
    # The campaign's '-100' let 15 rows through a 10-row budget; 'abc'/'nan' were tracebacks.
    path = tmp_path / "l.sqlite"
    before = used_ledger(path)
    edit(path, f"UPDATE spend SET epsilon = '{stored}'")
    with pytest.raises(LedgerError, match=r"ledger: .*l\.sqlite: collection 'ratings': the epsilon spent is"):
        with PrivacyLedger(path) as ledger:
            prepare(ledger, ratings_rows(15, start=100))
    assert memo_rows(path) == before


@pytest.mark.parametrize("stored", ["-100", "abc", "nan", "inf"])
def test_spend_damaged_while_open_is_refused_on_every_read(tmp_path, stored) -> None:
    path = tmp_path / "l.sqlite"
    with PrivacyLedger(path) as ledger:
        prepare(ledger, ratings_rows(2))
        before = memo_rows(path)
        edit(path, f"UPDATE spend SET epsilon = '{stored}'")
        for read in (lambda: ledger.spent("ratings"), lambda: ledger.reports("ratings"),
                     lambda: prepare(ledger, ratings_rows(15, start=100))):
            with pytest.raises(LedgerError, match="the epsilon spent is"):
                read()
    assert memo_rows(path) == before


@pytest.mark.parametrize("statement", ["UPDATE memo SET private_code = 'x'", "UPDATE memo SET private_code = -1",
                                       "UPDATE memo SET report_id = x'00'"])
def test_malformed_memo_row_is_refused_on_lookup(tmp_path, statement) -> None:
    path = tmp_path / "l.sqlite"
    before = used_ledger(path)
    edit(path, statement)
    with PrivacyLedger(path) as ledger:
        with pytest.raises(LedgerError, match="collection 'ratings': a memoized report is malformed"):
            prepare(ledger, ratings_rows(2))
        assert ledger.reports("ratings") == 2
    assert len(memo_rows(path)) == len(before)


#: Damage a ledger is refused for on open ("damage": the SQL statements run on the closed file), and the
#: problem its error names (a regular expression).
DAMAGED_LEDGERS = json.loads((Path(__file__).parent / "damaged_ledgers.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", DAMAGED_LEDGERS, ids=lambda case: case["what"])
def test_damaged_ledger_is_refused_on_open(tmp_path, case) -> None:
    path = tmp_path / "l.sqlite"
    used_ledger(path)
    edit(path, *case["damage"])
    with pytest.raises(LedgerError, match=case["problem"]):
        PrivacyLedger(path)


def test_zero_length_ledger_is_refused(tmp_path) -> None:
    # A truncated ledger used to be opened as a new one: ε restarted at 0, every row reported afresh.
    path = tmp_path / "l.sqlite"
    used_ledger(path)
    os.truncate(path, 0)
    with pytest.raises(LedgerError, match=r"the ledger file is empty \(0 bytes\)"):
        PrivacyLedger(path)
    assert path.stat().st_size == 0
    fresh = tmp_path / "never-used.sqlite"  # a zero-length file is never a ledger being created (built, then linked)
    fresh.touch()
    with pytest.raises(LedgerError, match="the ledger file is empty"):
        PrivacyLedger(fresh)


def test_garbage_truncated_or_unreadable_file_is_refused(tmp_path) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"not a ledger" * 100)
    with pytest.raises(LedgerError, match="the ledger file is not a SQLite database"):
        PrivacyLedger(garbage)
    cut = tmp_path / "cut.sqlite"
    with PrivacyLedger(cut, budget=1000.0) as ledger:
        prepare(ledger, ratings_rows(300))
    os.truncate(cut, 8192)
    with pytest.raises(LedgerError, match="cannot open it"):
        PrivacyLedger(cut)
    folder = tmp_path / "folder.sqlite"  # unreadable as a file (the tests run as root: modes do not stop reads)
    folder.mkdir()
    with pytest.raises(LedgerError, match="cannot open it"):
        PrivacyLedger(folder)


def test_deleted_ledger_with_marker_is_not_recreated(tmp_path) -> None:
    path = tmp_path / "l.sqlite"
    used_ledger(path)
    assert marker_path(path).exists()
    path.unlink()
    with pytest.raises(LedgerError, match=r"the ledger is missing but files left next to it \(l\.sqlite\.created\)"):
        with PrivacyLedger(path) as ledger:
            prepare(ledger, ratings_rows(2))  # the same rows would get fresh, independent reports
    assert not path.exists()


def test_wal_leftovers_of_a_deleted_ledger_are_evidence(tmp_path) -> None:
    path = tmp_path / "l.sqlite"
    with PrivacyLedger(path) as running:  # another process still has the deleted ledger open
        prepare(running, ratings_rows(2))
        path.unlink()
        marker_path(path).unlink()
        with pytest.raises(LedgerError, match=r"\(l\.sqlite-wal, l\.sqlite-shm\)"):
            PrivacyLedger(path)
    assert not path.exists()


def test_replaced_ledger_is_refused_by_its_marker(tmp_path) -> None:
    path, other = tmp_path / "l.sqlite", tmp_path / "other.sqlite"
    used_ledger(path)
    PrivacyLedger(other).close()  # a fresh ledger (ε = 0) copied over the used one
    shutil.copyfile(other, path)
    with pytest.raises(LedgerError, match="it is not the ledger its marker l.sqlite.created was written for"):
        PrivacyLedger(path)
    marker_path(path).write_text("{not json", encoding="utf-8")
    with pytest.raises(LedgerError, match="its marker l.sqlite.created is not a ledger marker"):
        PrivacyLedger(path)


def test_first_use_needs_no_ceremony_and_writes_the_marker(tmp_path) -> None:
    path = tmp_path / "new" / "ledger.sqlite"
    with PrivacyLedger(path) as ledger:
        prepare(ledger, ratings_rows(2))
        secret = ledger._secret  # white-box: the marker's id is derived from it
    assert sorted(p.name for p in path.parent.iterdir()) == ["ledger.sqlite", "ledger.sqlite.created"]
    marker = json.loads(marker_path(path).read_text(encoding="utf-8"))
    assert marker["format"] == "ldpsynth-ledger-marker/1" and marker["ledger"] == "ledger.sqlite"
    assert marker["ledger_id"] == hmac.digest(secret, b"ldpsynth-ledger-id/1", "sha256")[:16].hex()
    assert stat.S_IMODE(marker_path(path).stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    with PrivacyLedger(path) as ledger:
        assert ledger.reports("ratings") == 2


def test_a_ledger_without_a_marker_is_adopted(tmp_path) -> None:
    # Ledgers written before markers existed (or a crash between linking the ledger and writing its marker).
    path = tmp_path / "l.sqlite"
    used_ledger(path)
    written = marker_path(path).read_text(encoding="utf-8")
    marker_path(path).unlink()
    with PrivacyLedger(path) as ledger:
        assert ledger.reports("ratings") == 2
    assert json.loads(marker_path(path).read_text(encoding="utf-8"))["ledger_id"] == json.loads(written)["ledger_id"]


def test_concurrent_first_use_creates_one_ledger(tmp_path) -> None:
    path = tmp_path / "l.sqlite"
    start = threading.Barrier(8)
    opened: list[PrivacyLedger] = []

    def first_use() -> None:
        start.wait()
        opened.append(PrivacyLedger(path, budget=100.0))

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(opened) == 8 and len({ledger._secret for ledger in opened}) == 1  # white-box: one ledger
    for i, ledger in enumerate(opened):
        prepare(ledger, ratings_rows(1, start=i))
    assert opened[0].reports("ratings") == 8
    for ledger in opened:
        ledger.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.sqlite", "l.sqlite.created"]


def test_reset_moves_everything_aside_and_records_it(tmp_path) -> None:
    path = tmp_path / "l.sqlite"
    before = used_ledger(path)
    edit(path, "UPDATE spend SET epsilon = '-100'")
    with pytest.raises(LedgerError):
        PrivacyLedger(path)
    record = PrivacyLedger.reset(path)
    aside = record["moved"]["l.sqlite"]
    assert aside.startswith("l.sqlite.reset-") and record["moved"] == {
        "l.sqlite": aside, "l.sqlite.created": aside + ".created"}
    assert memo_rows(tmp_path / aside) == before  # kept, not deleted
    with PrivacyLedger(path) as ledger:
        assert ledger.spent("ratings") == 0.0
        assert json.loads(ledger._conn.execute(  # white-box: the new ledger records the reset
            "SELECT value FROM device WHERE name = 'reset'").fetchone()[0]) == record
    assert json.loads(marker_path(path).read_text(encoding="utf-8"))["reset"] == record
    # A deleted ledger (only its marker left) starts over the same way.
    path.unlink()
    with pytest.raises(LedgerError, match="the ledger is missing"):
        PrivacyLedger(path)
    again = PrivacyLedger.reset(path)
    assert list(again["moved"]) == ["l.sqlite.created"]
    PrivacyLedger(path).close()
    with pytest.raises(ValidationError, match="in-memory"):
        PrivacyLedger.reset(":memory:")


def run_client(args: list[str], capsys) -> tuple[int, str, str]:
    code = cli_main.main(["client", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def only_client_command(monkeypatch):
    """Build the real ``ldpsynth`` parser with just the client subcommand (others may need extras)."""
    monkeypatch.setattr(cli_main, "SUBCOMMAND_MODULES", ("ldpsynth.cli.client_cmd",))


@pytest.mark.parametrize("damage, problem", [
    (lambda path: edit(path, "UPDATE spend SET epsilon = '-100'"), "the epsilon spent is '-100'"),
    (lambda path: edit(path, "UPDATE spend SET epsilon = 'abc'"), "the epsilon spent is 'abc'"),
    (lambda path: edit(path, "UPDATE spend SET epsilon = 'nan'"), "the epsilon spent is 'nan'"),
    (lambda path: edit(path, "UPDATE spend SET epsilon = 'inf'"), "the epsilon spent is 'inf'"),
    (lambda path: path.unlink(), "the ledger is missing"),
    (lambda path: os.truncate(path, 0), "the ledger file is empty"),
    (lambda path: path.write_bytes(b"\x00garbage" * 64), "not a SQLite database"),
    (lambda path: edit(path, "DELETE FROM device"), "its memo secret is missing"),
])
def test_cli_submit_on_a_damaged_ledger_prints_one_line_and_exits_2(only_client_command, tmp_path, capsys,
                                                                    damage, problem) -> None:
    ledger, rows = tmp_path / "l.sqlite", tmp_path / "rows.csv"
    rows.write_text("movie,region,rating,watched\n1,us,3,0\n2,us,4,1\n", encoding="utf-8")
    used_ledger(ledger)
    damage(ledger)
    service = FakeCollectionService(ratings_info())
    with ServerThread(service) as server:
        code, out, err = run_client(["submit", "--target", server.target, "--collection", "ratings", "--rows",
                                     str(rows), "--ledger", str(ledger), "--max-attempts", "1"], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("ldpsynth client: error: ledger: ") and problem in err and "reset-ledger" in err
    assert service.attempts == 0 and service.stored == {}


def test_cli_reset_ledger_starts_over_knowingly(only_client_command, tmp_path, capsys) -> None:
    ledger = tmp_path / "l.sqlite"
    used_ledger(ledger)
    ledger.unlink()
    code, out, err = run_client(["reset-ledger", "--ledger", str(ledger)], capsys)
    assert code == 0 and err == ""
    record = json.loads(out)
    assert list(record["moved"]) == ["l.sqlite.created"] and (tmp_path / record["moved"]["l.sqlite.created"]).exists()
    with PrivacyLedger(ledger) as fresh:
        assert fresh.reports("ratings") == 0
    folder = tmp_path / "folder.sqlite"
    folder.mkdir()
    code, out, err = run_client(["reset-ledger", "--ledger", str(folder)], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "cannot reset it" in err


# --- The audit of 5612345: an in-memory ledger per CLI run, and a budget that followed the server. ---
def submit_rows(server_target: str, rows: Path, ledger: str, capsys, *extra: str) -> tuple[int, str, str]:
    return run_client(["submit", "--target", server_target, "--collection", "ratings", "--rows", str(rows),
                       "--ledger", ledger, "--max-attempts", "1", *extra], capsys)


def test_cli_refuses_an_in_memory_ledger(only_client_command, tmp_path, capsys) -> None:
    """On main 5612345 the same 3 rows submitted 3 times with ``--ledger :memory:`` were stored as 9
    independent reports (acknowledged [3, 3, 3], each run printing epsilon_total 3): every run had a
    fresh ledger. Now each run is refused before anything is perturbed or sent."""
    rows = tmp_path / "rows.csv"
    rows.write_text("movie,region,rating,watched\n1,us,3,0\n2,us,4,1\n3,eu,5,0\n", encoding="utf-8")
    service = FakeCollectionService(ratings_info())
    with ServerThread(service) as server:
        for _ in range(3):
            code, out, err = submit_rows(server.target, rows, ":memory:", capsys)
            assert code == 2 and out == "" and err.count("\n") == 1
            assert err.startswith("ldpsynth client: error: ledger: got ':memory:'") and "for_simulation" in err
        code, out, _ = submit_rows(server.target, rows, str(tmp_path / "l.sqlite"), capsys)
        assert code == 0 and json.loads(out)["acknowledged"] == 3
        code, out, _ = submit_rows(server.target, rows, str(tmp_path / "l.sqlite"), capsys)
        assert code == 0 and json.loads(out)["acknowledged"] == 0 and json.loads(out)["epsilon_spent"] == 0
    assert len(service.stored) == 3


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


def test_cli_budget_and_reset_ledger_budget(only_client_command, tmp_path, capsys) -> None:
    rows = tmp_path / "rows.csv"
    rows.write_text("movie,region,rating,watched\n1,us,3,0\n2,us,4,1\n", encoding="utf-8")
    ledger = str(tmp_path / "l.sqlite")
    with ServerThread(FakeCollectionService(ratings_info())) as server:
        assert submit_rows(server.target, rows, ledger, capsys, "--budget", "2")[0] == 0
        code, out, err = submit_rows(server.target, rows, ledger, capsys, "--budget", "20")
        assert code == 2 and out == "" and "reset-ledger --budget" in err
        code, out, err = run_client(["reset-ledger", "--ledger", ledger, "--budget", "20"], capsys)
        assert code == 0 and json.loads(out)["budget"] == "epsilon 20 per collection"
        assert submit_rows(server.target, rows, ledger, capsys, "--budget", "20")[0] == 0


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
