"""The on-device privacy ledger, damage and resets (issue 16, item 5): refused with one LedgerError, never read as
an empty ledger."""

from __future__ import annotations

import hmac
import json
import os
import shutil
import stat
import threading
from pathlib import Path

import pytest

from ldpsynth.client import PrivacyLedger
from ldpsynth.client.ledger import marker_path
from ldpsynth.shared.errors import LedgerError, ValidationError

from .client_fakes import ratings_rows
from .ledger_helpers import edit, memo_rows, prepare, used_ledger


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
