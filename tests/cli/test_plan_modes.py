"""``ldpsynth plan`` on a numeric and on a discovery collection (ldpsynth/cli/plan_modes.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ldpsynth.cli import main
from ldpsynth.shared.numeric.scale import NumericRange
from ldpsynth.shared.planning.numeric import plan_mean

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "plan"


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main.main(["plan", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_numeric_collection_is_planned_per_mechanism(capsys, tmp_path):
    code, out, _ = run(["--collection", str(EXAMPLES / "hours.json"), "--devices", "32561"], capsys)
    assert code == 0 and "Recommended for the mean and sum: HM" in out and "| E/16 |" in out
    prior = tmp_path / "prior.csv"
    prior.write_text("hours,other\n" + "".join(f"{v},x\n" for v in (10, 40, 40, 45, 60, 38.5)), encoding="utf-8")
    code, out, _ = run(["--collection", str(EXAMPLES / "hours.json"), "--devices", "32561", "--prior", str(prior),
                        "--levels", "8", "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    expected = plan_mean(1.0, 32561, NumericRange(0, 100, "hours"), prior=np.array([10, 40, 40, 45, 60, 38.5]),
                         levels=8)
    assert data["recommended"] == expected.recommended
    assert [m["se"] for m in data["mean"]] == [c.std_error for c in expected.choices]
    assert [m["mechanism"] for m in data["mean"]] == ["HM", "PM", "Duchi", "E/8"]


def test_a_discovery_collection_is_planned_by_emulation(capsys, tmp_path):
    prior = tmp_path / "words.csv"
    words = [f"{a}{b}{c}" for a in "abcdefgh" for b in "abcdefgh" for c in "abcd"]
    prior.write_text("word\n" + "\n".join(words) + "\n", encoding="utf-8")
    argv = ["--collection", str(EXAMPLES / "words.json"), "--devices", "200000", "--prior", str(prior),
            "--zipf", "1.2", "--trials", "3", "--epsilon", "4"]
    code, out, _ = run(argv, capsys)
    assert code == 0 and "Discovery of 'word' (top 10; 10 values of the prior)" in out and "recall" in out
    code, out, _ = run([*argv, "--json"], capsys)
    data = json.loads(out)
    assert data["kind"] == "discovery" and data["rounds"] == 3 and len(data["found_by_rank"]) == 10
    assert 0.0 <= data["recall"] <= 1.0 and data["trials"] == 3


@pytest.mark.parametrize("argv, field", [
    (["--collection", str(EXAMPLES / "words.json"), "--devices", "1000"], "--prior"),
    (["--collection", str(EXAMPLES / "ratings.json"), "--devices", "1000"], "--queries"),
])
def test_missing_inputs_are_named(argv, field, capsys):
    code, _, err = run(argv, capsys)
    assert code == 2 and f"error: {field}" in err
