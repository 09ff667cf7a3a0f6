"""``ldpsynth pqd`` end to end on small files (and on Adult when the data set is present)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from ldpsynth.cli.main import main
from ldpsynth.simulation.datasets import DatasetNotFound, dataset_path

try:
    from .pqd_fixtures import private_table
except ImportError:  # tests/evaluation is not a package
    from pqd_fixtures import private_table


def _write(table, path, rows=None):
    names = list(table.columns)
    index = range(len(table)) if rows is None else rows
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(names)
        for i in index:
            writer.writerow([table.columns[n][i] if table.columns[n].dtype == object else int(table.columns[n][i])
                             for n in names])


@pytest.fixture()
def files(tmp_path):
    table = private_table(n=2000)
    _write(table, tmp_path / "private.csv")
    _write(table, tmp_path / "synthetic.csv", rows=range(0, 2000, 2))  # a "synthetic" half: answers ~ half
    return tmp_path


def test_private_decisions_json(files, capsys):
    code = main(["pqd", "--private", str(files / "private.csv"), "--synthetic", str(files / "synthetic.csv"),
                 "--query", "SELECT SUM(x) FROM t WHERE g = 'a'", "--tau", "0.05", "--relative",
                 "--epsilon", "0.5", "--domain", "x=0:63", "--seed", "7", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["decider"] for r in out["results"]] == ["LM_sum", "R2T_sum", "SVT_sum"]
    assert out["epsilon_total"] == pytest.approx(1.5)
    assert all(r["decision"] in (0, 1) for r in out["results"])
    assert out["tau"] == pytest.approx(0.05 * out["synthetic_answer"])


def test_evaluation_mode_reports_errors(files, capsys):
    code = main(["pqd", "--private", str(files / "private.csv"), "--synthetic", str(files / "synthetic.csv"),
                 "--query", "SELECT COUNT(*) FROM t WHERE g = 'a' AND x <= 10", "--tau", "0.5", "--relative",
                 "--epsilon", "0.25", "--trials", "400", "--seed", "1", "--decider", "LM_count",
                 "--decider", "EM_count_legacy"])
    assert code == 0
    out = capsys.readouterr().out
    assert "evaluation: 400 executions" in out and "| LM_count | " in out and "| EM_count_legacy | " in out
    # the truth (about twice the synthetic count) lies far outside I: both deciders answer 0 always
    assert "0/400 | 0.0000 | 0.0000" in out


def test_a_decider_that_is_not_differentially_private_is_refused_in_private_mode(files, capsys):
    """The audit's sequence: on main 5612345 this printed ``epsilon_total 2.0`` for EM_count_legacy,
    whose privacy loss is unbounded (tests/evaluation/test_pqd_privacy.py)."""
    code = main(["pqd", "--private", str(files / "private.csv"), "--synthetic", str(files / "synthetic.csv"),
                 "--query", "SELECT COUNT(*) FROM t WHERE g = 'a'", "--tau", "0.032", "--relative",
                 "--epsilon", "1", "--decider", "EM_count", "--decider", "EM_count_legacy"])
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    assert "decider" in captured.err and "EM_count_legacy is not differentially private" in captured.err
    assert "--trials" in captured.err


@pytest.mark.parametrize("argv, message", [
    (["--tau", "-1"], "tau"),
    (["--epsilon", "0"], "epsilon"),
    (["--query", "SELECT AVG(x) FROM t"], "query.SELECT"),
    (["--decider", "LM_sum"], "handles SUM"),
    (["--query", "SELECT MEDIAN(x) FROM t"], "domain"),
])
def test_bad_arguments_exit_2_with_a_clear_message(files, capsys, argv, message):
    args = ["pqd", "--private", str(files / "private.csv"), "--synthetic", str(files / "synthetic.csv")]
    defaults = {"--query": "SELECT COUNT(*) FROM t", "--tau": "3", "--epsilon": "0.5"}
    overrides = dict(zip(argv[::2], argv[1::2]))
    for key, value in {**defaults, **overrides}.items():
        args += [key, value]
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_adult_end_to_end(capsys):
    try:
        adult = dataset_path("adult/adult.csv.gz")
    except DatasetNotFound as exc:
        pytest.skip(str(exc))
    code = main(["pqd", "--private", str(adult), "--synthetic-answer", "37", "--query",
                 "SELECT MEDIAN(age) FROM t WHERE sex = 'Male' AND race = 'White'", "--tau", "2",
                 "--epsilon", "0.25", "--domain", "age=0:100", "--trials", "200", "--seed", "3", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["results"][0]["true_answer"] == 38.0
    for row in out["results"]:
        assert abs(row["empirical_error"] - row["exact_error"]) <= 4.89 * np.sqrt(0.25 / 200)


def test_synthetic_side_from_an_ldpsynth_release(tmp_path, capsys):
    """--card: q(D_s) is the companion estimate of the release; the deciders certify it."""
    from ldpsynth.shared.card import MechanismCard
    from ldpsynth.shared.schema import CategoricalAttribute, IntegerAttribute, Schema

    schema = Schema("r", 3.0, (CategoricalAttribute("g", True, ("a", "b", "c")), IntegerAttribute("x", False, 0, 63)))
    table = private_table(n=3000)
    _write(table, tmp_path / "private.csv")
    card = MechanismCard.for_schema(schema)
    columns = {"g": table.columns["g"], "x": table.columns["x"].astype(np.int64)}
    codes = card.mechanism.perturb(schema.encode_private(columns), np.random.default_rng(9))
    with (tmp_path / "release.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["g", "x"])
        writer.writerows(zip(columns["g"], schema.decode_private(codes)["x"]))
    card.save(tmp_path / "card.json")
    code = main(["pqd", "--private", str(tmp_path / "private.csv"), "--synthetic", str(tmp_path / "release.csv"),
                 "--card", str(tmp_path / "card.json"), "--query", "SELECT COUNT(*) FROM t WHERE g = 'a' AND x < 10",
                 "--tau", "0.5", "--relative", "--epsilon", "1", "--trials", "50", "--seed", "2", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["synthetic_source"] == "ldpsynth release (eq. 17 estimate)"
    truth = out["results"][0]["true_answer"]
    assert out["synthetic_answer"] != truth and abs(out["synthetic_answer"] - truth) < 0.5 * truth
