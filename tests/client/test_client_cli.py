"""``ldpsynth client submit`` end to end against the fake server (a real socket, its own thread)."""

from __future__ import annotations

import json

import pytest

from ldpsynth.cli import main as cli_main
from ldpsynth.shared.protocol import Limits

from .client_fakes import FakeCollectionService, Faults, ServerThread, ratings_info

CSV = "movie,region,rating,watched\n" + "".join(f"{i},us,{1 + i % 5},{i % 2}\n" for i in range(10))


@pytest.fixture
def only_client_command(monkeypatch):
    """Build the real ``ldpsynth`` parser with just this subcommand (others may need extras)."""
    assert "ldpsynth.cli.client_cmd" in cli_main.SUBCOMMAND_MODULES
    monkeypatch.setattr(cli_main, "SUBCOMMAND_MODULES", ("ldpsynth.cli.client_cmd",))


@pytest.fixture
def rows_csv(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text(CSV, encoding="utf-8")
    return path


def run_cli(target: str, *extra: str, rows, ledger) -> int:
    return cli_main.main(["client", "submit", "--target", target, "--collection", "ratings", "--rows", str(rows),
                          "--ledger", str(ledger), "--deadline", "5", "--max-attempts", "3", *extra])


def test_submit_prints_a_json_summary(only_client_command, rows_csv, tmp_path, capsys) -> None:
    service = FakeCollectionService(ratings_info(limits=Limits(max_batch_reports=100)), Faults(token="cli-token"))
    with ServerThread(service) as server:
        code = run_cli(server.target, "--token", "cli-token", "--batch-size", "4", rows=rows_csv,
                       ledger=tmp_path / "l.sqlite")
        assert code == 0
        summary = json.loads(capsys.readouterr().out)
        assert (summary["sent"], summary["acknowledged"], summary["batches"]) == (10, 10, 3)
        assert summary["epsilon_spent"] == pytest.approx(10.0) and summary["memoized"] == 0
        assert run_cli(server.target, "--token", "cli-token", rows=rows_csv, ledger=tmp_path / "l.sqlite") == 0
        again = json.loads(capsys.readouterr().out)
    assert (again["acknowledged"], again["duplicates"], again["memoized"], again["epsilon_spent"]) == (0, 10, 10, 0.0)
    assert len(service.stored) == 10


def run_failing(argv_extra: tuple[str, ...], capsys, rows, ledger, csv_text: str | None = None,
                collection: str = "ratings") -> str:
    if csv_text is not None:
        rows.write_text(csv_text, encoding="utf-8")
    service = FakeCollectionService(ratings_info())
    with ServerThread(service) as server:
        code = cli_main.main(["client", "submit", "--target", server.target, "--collection", collection,
                              "--rows", str(rows), "--ledger", str(ledger), "--max-attempts", "1", *argv_extra])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "" and service.stored == {}
    assert captured.err.count("\n") == 1 and captured.err.startswith("ldpsynth client: error: ")
    return captured.err


def test_errors_exit_2_with_one_line(only_client_command, rows_csv, tmp_path, capsys) -> None:
    ledger = tmp_path / "l.sqlite"
    err = run_failing((), capsys, rows_csv, ledger, collection="nope")
    assert "GetCollection failed with FAILED_PRECONDITION" in err
    err = run_failing(("--budget", "0.5"), capsys, rows_csv, ledger)
    assert "over this device's budget" in err
    err = run_failing((), capsys, rows_csv, ledger, csv_text="movie,region,rating,watched\n1,us,3,0\n2,us,77123,1\n")
    assert "rating at position 1" in err and "[1, 5]" in err and "77123" not in err
    err = run_failing(("--tls-cert", str(rows_csv)), capsys, rows_csv, ledger)
    assert "private_key" in err


def test_an_empty_token_variable_means_no_token(only_client_command, rows_csv, tmp_path, capsys, monkeypatch) -> None:
    """``LDPSYNTH_TOKEN=`` (set, empty) sends no token, as unset does (today: "malformed token", exit 2);
    a non-empty one is still the default of ``--token``."""
    monkeypatch.setenv("LDPSYNTH_TOKEN", "")
    anyone = FakeCollectionService(ratings_info())
    with ServerThread(anyone) as server:
        assert run_cli(server.target, rows=rows_csv, ledger=tmp_path / "a.sqlite") == 0, capsys.readouterr().err
    assert len(anyone.stored) == 10 and all(not m.get("authorization") for m in anyone.metadata)
    monkeypatch.setenv("LDPSYNTH_TOKEN", "cli-token")
    checked = FakeCollectionService(ratings_info(), Faults(token="cli-token"))
    with ServerThread(checked) as server:
        assert run_cli(server.target, rows=rows_csv, ledger=tmp_path / "b.sqlite") == 0
    assert len(checked.stored) == 10
