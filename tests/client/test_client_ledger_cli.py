"""The on-device privacy ledger through ``ldpsynth client`` against the fake server: a damaged ledger, reset-ledger,
an in-memory ledger refused, the budget."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ldpsynth.cli import main as cli_main
from ldpsynth.client import PrivacyLedger

from .client_fakes import FakeCollectionService, ServerThread, ratings_info
from .ledger_helpers import edit, used_ledger


# --- Damage and resets (issue 16, item 5): refused with one LedgerError, never read as an empty ledger. ---
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
