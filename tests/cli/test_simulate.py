"""``ldpsynth simulate`` refuses bad settings naming the option and its legal range, before it starts anything."""

from __future__ import annotations

import pytest

from ldpsynth.cli.main import main


@pytest.mark.parametrize("argv, flag, legal", [
    (["--drop-rate", "2"], "--drop-rate", "a number in [0, 1]"),
    (["--drop-after", "-1"], "--drop-after", "a finite number of seconds >= 0"),
    (["--delay", "nan"], "--delay", "a finite number of seconds >= 0"),
    (["--connections", "0"], "--connections", "an integer in [1, 1024]"),
    (["--batch-size", "0"], "--batch-size", "an integer >= 1"),
    (["--level", "1.5"], "--level", "a number in (0, 1)"),
    (["--target", "127.0.0.1:1", "--shards", "2"], "--target", "no data_dir, shards or ray_address with a target"),
    (["--movies", "50", "--ratings-per-device", "60"], "--ratings-per-device", "an integer in [1, 50]"),
    (["--devices", "0"], "--devices", "an integer >= 1"),
    (["--dataset", "facebook", "--vertices", "1"], "--vertices", "an integer in [2, 4039]"),
    (["--epsilon", "0"], "--epsilon", "a finite number > 0"),
])
def test_bad_settings_name_the_option(argv: list[str], flag: str, legal: str, capsys: pytest.CaptureFixture[str]):
    assert main(["simulate", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ldpsynth simulate: error: {flag}: ") and legal in err and err.count("\n") == 1, err
