"""``ldpsynth simulate`` refuses bad settings naming the option and its legal range, before it starts anything."""

from __future__ import annotations

from pathlib import Path

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


def test_the_web_demo_says_how_to_build_the_sdk_bundle_it_needs(tmp_path: Path) -> None:
    from ldpsynth.shared.errors import ValidationError
    from ldpsynth.simulation.web_demo import SURVEY, WebDemo, _queries

    with pytest.raises(ValidationError, match=r"--web: missing; legal range: the SDK's browser bundle .*make demo-web"):
        WebDemo(sdk_dir=tmp_path)
    # Per drink: its number of ratings, then one count per rating; the survey's drink is public, the rating private.
    assert len(_queries()) == 4 * 6 and [a.name for a in SURVEY.public_attributes] == ["item"]
