"""``ldpsynth aggregator advance``'s two forms: --server (a running aggregator) or --data-dir (a stopped one's),
exactly one; no --finite-out file without an answer; a server that does not answer is one line and exit 2."""

from __future__ import annotations

import socket

import pytest

from ldpsynth.cli.aggregator_cmd import main


def test_exactly_one_of_server_and_data_dir(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    for argv in (["advance", "--collection", "words"],
                 ["advance", "--server", "127.0.0.1:1", "--data-dir", str(tmp_path), "--collection", "words"]):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2
        assert "--server" in capsys.readouterr().err


def test_no_finite_file_when_the_server_does_not_answer(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    with socket.socket() as free:            # a port nobody listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    assert main(["advance", "--server", f"127.0.0.1:{port}", "--collection", "words", "--deadline", "2",
                 "--finite-out", str(tmp_path / "f.json")]) == 2
    assert "AdvanceRound" in capsys.readouterr().err
    assert not (tmp_path / "f.json").exists()


def test_a_server_that_does_not_answer_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as free:            # a port nobody listens on
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    assert main(["advance", "--server", f"127.0.0.1:{port}", "--collection", "words", "--deadline", "2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "AdvanceRound" in err[0] and ("UNAVAILABLE" in err[0] or "DEADLINE" in err[0])
