"""``ldpsynth plan`` on a numeric attribute that declares ``step`` (ldpsynth/cli/plan_modes.py): E over its levels
(said in the text and in ``--json``'s ``e_levels``), ``--levels`` refused, a prior off the levels refused naming the
file, the column and the legal values, with and without ``--shuffler``. No randomness."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ldpsynth.cli import main
from ldpsynth.shared import guarantees as G
from ldpsynth.shared.numeric.scale import NumericRange
from ldpsynth.shared.planning.numeric import plan_mean
from ldpsynth.shared.planning.shuffled_numeric import plan_mean_shuffled
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.shuffle_spec import ShuffleSpec

STARS = {"name": "stars", "epsilon": 1.0, "attributes": [{"name": "rating", "type": "numeric", "range": [1, 5],
                                                          "mechanism": "SW", "step": 1}]}
HOURS = {"name": "hours", "epsilon": 1.0, "attributes": [{"name": "hours", "type": "numeric", "range": [0, 100],
                                                          "mechanism": "HM"}]}
LEVELS = [1.0, 2.0, 3.0, 4.0, 5.0]
SHUFFLED = ["--shuffler", "--min-batch", "20000", "--target-central-epsilon", "0.5"]


@pytest.fixture
def files(tmp_path):
    def write(name: str, text: str) -> str:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return str(path)

    return {"stars": write("stars.json", json.dumps(STARS)), "hours": write("hours.json", json.dumps(HOURS)),
            "on": write("on.csv", "rating,movie\n1,a\n4,b\n4.0000001,c\n5,d\n3,e\n"),
            "off": write("off.csv", "rating,movie\n1,a\n2,b\n3.5,c\n"),
            "hours_prior": write("hours.csv", "hours\n10\n40\n40\n")}


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main.main(["plan", "--devices", "100000", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_without_a_prior_e_is_planned_over_the_declared_levels(files, capsys):
    code, out, _ = run(["--collection", files["stars"]], capsys)
    assert code == 0 and "| E/5 | " in out and "| E/16 |" not in out
    assert "E is planned over the attribute's 5 levels, every 1 from 1 (its declared step): no bucketing bias." in out
    assert "collected by SW for its distribution and quantiles, fitted on its 5 declared levels" in out
    code, out, _ = run(["--collection", files["stars"], "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["e_levels"] == {"count": 5, "step": 1.0, "from": "step"}
    expected = plan_mean(1.0, 100_000, NumericRange(1, 5, "rating"), levels=LEVELS)
    assert [m["se"] for m in data["mean"]] == [c.std_error for c in expected.choices]
    assert data["mean"][-1]["mechanism"] == "E/5" and data["mean"][-1]["bias"] == 0.0


def test_an_on_level_prior_is_read_on_the_levels(files, capsys):
    code, out, _ = run(["--collection", files["stars"], "--prior", files["on"], "--json"], capsys)
    data = json.loads(out)
    expected = plan_mean(1.0, 100_000, NumericRange(1, 5, "rating"), prior=[1.0, 4.0, 4.0, 5.0, 3.0], levels=LEVELS)
    assert code == 0 and data["e_levels"]["from"] == "step" and data["recommended"] == expected.recommended
    assert [m["se"] for m in data["mean"]] == [c.std_error for c in expected.choices]
    assert data["mean"][-1]["bias"] == 0.0                          # 4.0000001 is read as the level 4


@pytest.mark.parametrize("shuffled", [[], SHUFFLED])
def test_a_prior_off_the_levels_is_refused_naming_the_file_column_and_levels(files, capsys, shuffled):
    code, out, err = run(["--collection", files["stars"], "--prior", files["off"], *shuffled], capsys)
    assert code == 2 and out == ""
    assert (f"error: --prior {files['off']}: rating at position 2: illegal value; legal range: a number in "
            "[1.0, 5.0] on the levels every 1.0 from 1.0") in err


@pytest.mark.parametrize("shuffled", [[], SHUFFLED])
def test_levels_are_refused_with_a_declared_step(files, capsys, shuffled):
    code, _, err = run(["--collection", files["stars"], "--levels", "8", *shuffled], capsys)
    assert code == 2 and "error: --levels: given; legal range: absent ('rating' declares step 1: E is planned " \
        "over its 5 levels; for E over other levels, plan a collection without step)" in err


def test_without_a_step_the_json_says_which_levels(files, capsys):
    cases = [([], {"count": 16, "step": None, "from": "buckets"}),
             (["--levels", "8"], {"count": 8, "step": None, "from": "buckets"}),
             (["--prior", files["hours_prior"]], {"count": 2, "step": None, "from": "prior"})]
    for extra, wanted in cases:
        code, out, _ = run(["--collection", files["hours"], "--json", *extra], capsys)
        assert code == 0 and json.loads(out)["e_levels"] == wanted
    code, out, _ = run(["--collection", files["hours"]], capsys)
    assert "E is planned over 16 equal buckets of the range" in out and "SW for" not in out


def test_the_shuffled_plan_of_a_stepped_attribute(files, capsys):
    code, out, _ = run(["--collection", files["stars"], "--prior", files["on"], *SHUFFLED, "--json"], capsys)
    data = json.loads(out)
    expected = plan_mean_shuffled(Schema.from_json(STARS), 100_000, prior=[1.0, 4.0, 4.0, 5.0, 3.0], min_batch=20000,
                                  target_central_epsilon=0.5)
    e = data["shuffle"]["mechanisms"][-1]
    assert code == 0 and data["e_levels"] == {"count": 5, "step": 1.0, "from": "step"}
    assert e["mechanism"] == "E/5" and e["domain_size"] == 5 and e["bound"] == "blanket" and e["shuffled_bias"] == 0.0
    assert e["shuffled_se"] == expected.row("E/5").shuffled.std_error
    assert data["shuffle"]["recommendation"] == expected.recommendation
    code, out, _ = run(["--collection", files["stars"], *SHUFFLED], capsys)
    assert code == 0 and "| E/5 | blanket |" in out and "its declared step" in out
    # the central epsilon is the accountant's on the card terms at E's 5 levels; at 16 (the buckets) it would differ
    spec = ShuffleSpec(1e-9, 20000)
    at = {k: G.compute(G.RELEASE, e["epsilon0_for_target"], k, spec, ["all rows"], np.array([100_000]),
                       mechanism="E").central for k in (5, 16)}
    assert at[5] == (e["central_epsilon_at_epsilon0"], e["central_delta_at_epsilon0"]) and at[5][0] <= 0.5
    assert at[16] != at[5]
