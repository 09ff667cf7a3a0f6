"""``ldpsynth plan --shuffler`` on a numeric, a categorical and a discovery collection (ldpsynth/cli/plan_modes.py,
ldpsynth/cli/plan.py): the JSON keys and numbers are the library's (and the accountant's on the card terms), the
table is printed, bad flags are refused naming the flag, a discovery refuses --shuffler. No randomness."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ldpsynth.cli import main
from ldpsynth.shared import guarantees as G
from ldpsynth.shared.planning.shuffled_numeric import plan_mean_shuffled
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.shuffle_spec import ShuffleSpec

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "plan"
HOURS = ["--collection", str(EXAMPLES / "hours.json"), "--devices", "32561"]
SHUFFLED = ["--shuffler", "--min-batch", "5000", "--target-central-epsilon", "0.5"]


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main.main(["plan", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_a_numeric_collection_behind_a_shuffler(capsys):
    code, out, _ = run([*HOURS, *SHUFFLED, "--json"], capsys)
    assert code == 0
    s = json.loads(out)["shuffle"]
    assert set(s) == {"delta", "min_batch", "assume_injected", "shuffler", "rows_per_device", "target_central_epsilon",
                      "groups", "any_group_below_min_batch", "mechanisms", "recommended", "recommendation"}
    expected = plan_mean_shuffled(Schema.from_json((EXAMPLES / "hours.json").read_text(encoding="utf-8")), 32561,
                                  min_batch=5000, target_central_epsilon=0.5)
    assert s["recommended"] == expected.recommended and s["recommendation"] == expected.recommendation
    spec = ShuffleSpec(1e-9, 5000)
    for m, r in zip(s["mechanisms"], expected.rows, strict=True):
        assert m["mechanism"] == r.mechanism and m["bound"] == r.bound
        assert m["bound"] == ("blanket" if m["mechanism"].startswith("E/") else "fmt21-numerical")
        card = G.compute(G.RELEASE, m["epsilon0_for_target"], m["domain_size"], spec, ["all rows"],
                         np.array([32561]), mechanism=m["card_mechanism"])            # the card terms
        assert card.central == (m["central_epsilon_at_epsilon0"], m["central_delta_at_epsilon0"])
        assert m["against"]["analysts"]["epsilon"] == r.at_planned.analysts.epsilon < 1.0
        assert m["against"]["operator"]["epsilon"] == 1.0                       # the operator runs the shuffler
        assert m["shuffled_se"] == r.shuffled.std_error and m["plain_ldp_se_worst"] == r.plain.worst_case_std_error
    code, out, _ = run([*HOURS, *SHUFFLED], capsys)
    assert code == 0 and "| mechanism | bound | central ε vs analysts at ε0 = 1 |" in out
    assert "| HM | fmt21-numerical |" in out and "| E/16 | blanket |" in out
    assert f"Recommended behind the shuffler: {expected.recommendation}." in out


def test_a_categorical_collection_plans_the_oracles_behind_the_shuffler(capsys):
    argv = ["--collection", str(EXAMPLES / "ratings-private.json"), "--devices", "100000", "--queries",
            str(EXAMPLES / "queries-private.json"), *SHUFFLED]
    code, out, _ = run([*argv, "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    s, k = data["shuffle"], data["domain_size"]
    assert [b["mechanism"] for b in s["behind"]] == ["OUE", "OLH", "HR", "SS"]
    spec = ShuffleSpec(1e-9, 5000)
    for b in s["behind"]:
        assert set(b) == {"mechanism", "bound", "available", "epsilon0_for_target", "central_epsilon_at_epsilon0",
                          "error_ratio"} and b["bound"] == "fmt21-numerical"
        card = G.compute(G.RELEASE, b["epsilon0_for_target"], k, spec, ["all rows"], np.array([100000]),
                         mechanism=b["mechanism"])
        assert card.central[0] == b["central_epsilon_at_epsilon0"] <= 0.5
        assert all(f"shuffled_{b['mechanism'].lower()}_se_worst" in q for q in data["queries"])
    assert s["recommended"] in ("E", "OUE", "OLH", "HR", "SS")
    code, out, _ = run(argv, capsys)
    assert code == 0 and "The frequency oracles behind the shuffler (FMT21's clone bound" in out
    assert "| OUE | fmt21-numerical |" in out


def test_a_discovery_refuses_the_shuffler(capsys, tmp_path):
    prior = tmp_path / "words.csv"
    prior.write_text("word\nab\ncd\n", encoding="utf-8")
    argv = ["--collection", str(EXAMPLES / "words.json"), "--devices", "1000", "--prior", str(prior)]
    for extra, flag in ((["--shuffler"], "--shuffler"), (["--min-batch", "10"], "--min-batch")):
        code, _, err = run([*argv, *extra], capsys)
        assert code == 2 and f"error: {flag}: given" in err and "discovery" in err


@pytest.mark.parametrize("extra, flag", [
    (["--delta", "1e-6"], "--shuffler"),
    (["--shuffler", "--min-batch", "0"], "--min-batch"),
    (["--shuffler", "--delta", "2"], "--delta"),
    (["--shuffler", "--target-central-epsilon", "-1"], "--target-central-epsilon"),
    (["--shuffler", "--min-batch", "10", "--assume-injected", "10"], "--assume-injected"),
    (["--shuffler", "--rows-per-device", "2"], "--rows-per-device"),
])
def test_bad_flags_are_refused_naming_the_flag(extra, flag, capsys):
    code, _, err = run([*HOURS, *extra], capsys)
    assert code == 2 and f"error: {flag}" in err


def test_a_categorical_plan_names_a_bad_shuffle_flag(capsys):
    argv = ["--collection", str(EXAMPLES / "ratings-private.json"), "--devices", "1000", "--queries",
            str(EXAMPLES / "queries-private.json"), "--shuffler", "--delta", "0"]
    code, _, err = run(argv, capsys)
    assert code == 2 and "error: --delta" in err
