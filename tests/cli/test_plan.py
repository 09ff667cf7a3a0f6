"""``ldpsynth plan`` end to end: a collection and queries in, the predicted errors out (text and JSON)."""

from __future__ import annotations

import csv
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ldpsynth.cli import main
from ldpsynth.cli import plan as cli
from ldpsynth.shared import queries as Q
from ldpsynth.shared.planning.planner import plan
from ldpsynth.shared.planning.row_distribution import SampleRows, UniformRows
from ldpsynth.shared.planning.schema_changes import schema_changes
from ldpsynth.shared.schema import Schema

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "docs" / "plan"


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main.main(["plan", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_text_tables_for_the_ratings_collection(capsys):
    code, out, _ = run(["--collection", str(EXAMPLES / "ratings.json"), "--devices", "100000",
                        "--queries", str(EXAMPLES / "queries.json"), "--target-halfwidth", "0.01"], capsys)
    assert code == 0
    assert "|D| = 5 (private: rating; public: movie)" in out
    assert re.search(r"\| share\[rating=1\] \| 1 \| 0\.006069 \| 0\.01189 \| 0\.01236 \| ok \|", out)
    assert "| share[rating=1] | 141,470 | 1.18 |" in out
    assert "| 5 stars, movie 50 | n/a | 16.03 |" in out
    assert "rating public (k = 1)" in out and "rating 1+2,3+4 (k = 3)" in out
    assert "Recommended: E: standard errors 1 x E's" in out     # |D| = 5 < 3e + 2


def test_json_carries_the_api_numbers(capsys, tmp_path):
    code, out, _ = run(["--collection", str(EXAMPLES / "ratings-private.json"), "--devices", "100000",
                        "--queries", str(EXAMPLES / "queries-private.json"), "--prior-uniform",
                        "--target-halfwidth", "0.01", "--json"], capsys)
    assert code == 0
    data = json.loads(out)
    schema = Schema.load(EXAMPLES / "ratings-private.json")
    queries = Q.queries_from_json((EXAMPLES / "queries-private.json").read_text())
    p = plan(schema, queries, 100_000, prior=UniformRows(schema), target_halfwidth=0.01,
             changes=schema_changes(schema))
    assert data["domain_size"] == 8410 and data["rows"] == 100_000 and len(data["queries"]) == 3
    for j, item in enumerate(data["queries"]):
        assert item["label"] == p.label(j) and item["status"] == p.status[j]
        assert item["se_worst"] == p.e.se_worst[j] and item["se_prior"] == p.e.se_prior[j]
        assert item["olh_se_prior"] == p.oracle("OLH").se_prior[j] and item["bound"] == p.bound[j]
        assert item["hr_se_worst"] == p.oracle("HR").se_worst[j] and item["ss_se_prior"] == p.oracle("SS").se_prior[j]
        assert item["epsilon_needed_worst"] == p.inverse.epsilon_worst[j]
        assert set(item["alternatives"]) == {"movie public", "movie 1682 -> 841 values", "rating public",
                                             "rating 1+2,3+4"}
    assert data["queries"][2]["devices_needed_worst"] is None     # a count: n/a
    assert data["recommended"] == p.recommended == "OLH" and data["recommendation"] == p.recommendation
    assert [m["mechanism"] for m in data["mechanisms"]] == ["E", "OUE", "OLH", "HR", "SS"]
    assert data["mechanisms"][2]["report_bytes"] == 10 and data["mechanisms"][2]["error_ratio"] < 0.04


def test_a_csv_prior_with_extra_columns_and_a_merge(capsys, tmp_path):
    rng = np.random.default_rng(3)
    rows = tmp_path / "rows.csv"
    with open(rows, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["user", "movie", "rating"])
        for i in range(500):
            writer.writerow([i, int(rng.integers(1, 20)), int(rng.choice(5, p=[0.05, 0.1, 0.2, 0.35, 0.3])) + 1])
    code, out, _ = run(["--collection", str(EXAMPLES / "ratings.json"), "--devices", "2000", "--queries",
                        str(EXAMPLES / "queries.json"), "--prior", str(rows), "--merge", "rating=1+2+3", "--json"],
                       capsys)
    assert code == 0
    data = json.loads(out)
    assert data["composition"] == f"public part and prior: {rows} (500 rows)"
    assert set(data["queries"][0]["alternatives"]) == {"rating public", "rating 1+2+3"}
    columns = {name: [] for name in ("movie", "rating")}
    with open(rows, encoding="utf-8") as fh:
        for record in csv.DictReader(fh):
            columns["movie"].append(int(record["movie"]))
            columns["rating"].append(int(record["rating"]))
    schema = Schema.load(EXAMPLES / "ratings.json")
    p = plan(schema, Q.queries_from_json((EXAMPLES / "queries.json").read_text()), 2000,
             prior=SampleRows.from_columns(schema, columns))
    assert [q["se_prior"] for q in data["queries"]] == list(p.e.se_prior)


@pytest.mark.parametrize("option, bad, field", [
    ("--merge", "rating", "--merge"),
    ("--merge", "colour=a+b", "merge.colour"),
    ("--merge", "rating=1+9", "merge.rating[0]"),
    ("--devices", "0", "devices"),
    ("--level", "1", "level"),
    ("--target-halfwidth", "0", "target_halfwidth"),
])
def test_bad_arguments_name_the_field(option, bad, field, capsys):
    base = {"--collection": str(EXAMPLES / "ratings.json"), "--devices": "10",
            "--queries": str(EXAMPLES / "queries.json")}
    args = [x for key, value in {**base, option: bad}.items() for x in (key, value)]
    code, _, err = run(args, capsys)
    assert code == 2 and f"error: {field}" in err


def test_a_prior_missing_a_column_and_an_unreadable_file(capsys, tmp_path):
    rows = tmp_path / "rows.csv"
    rows.write_text("rating\n4\n5\n", encoding="utf-8")
    base = ["--collection", str(EXAMPLES / "ratings.json"), "--devices", "10",
            "--queries", str(EXAMPLES / "queries.json")]
    code, _, err = run(base + ["--prior", str(rows)], capsys)
    assert code == 2 and "error: prior.movie" in err
    code, _, err = run(base + ["--prior", str(tmp_path / "absent.csv")], capsys)
    assert code == 2 and "error: --prior: rows" in err
    code, _, err = run(["--collection", str(tmp_path / "absent.json"), "--devices", "10", "--queries",
                        str(EXAMPLES / "queries.json")], capsys)
    assert code == 2 and "error: --collection" in err


def test_prior_flags_are_exclusive(capsys):
    with pytest.raises(SystemExit) as exit_:
        main.main(["plan", "--collection", "c.json", "--devices", "1", "--queries", "q.json", "--prior", "r.csv",
                   "--prior-uniform"])
    assert exit_.value.code == 2


def test_parse_merges():
    assert cli.parse_merges(["rating=1+2, 4+5", "genre=a+b"]) == {"rating": [["1", "2"], ["4", "5"]],
                                                                  "genre": [["a", "b"]]}


def readme_examples() -> list[tuple[str, str]]:
    """The ``ldpsynth plan`` commands of the user guide's "Before you collect" section and the output shown."""
    text = (ROOT / "docs" / "user-guide.md").read_text(encoding="utf-8")
    section = text.split("## Before you collect", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w*)\n(.*?)```", section, flags=re.S)
    pairs = []
    for (lang, body), (_, output) in zip(blocks, blocks[1:]):
        if lang == "sh" and body.startswith("ldpsynth plan"):
            pairs.append((body.replace("\\\n", " ").strip(), output))
    return pairs


def test_the_user_guide_shows_the_real_output_of_its_worked_example():
    pairs = readme_examples()
    assert len(pairs) == 2
    for command, shown in pairs:
        argv = shlex.split(command)
        done = subprocess.run([sys.executable, "-m", "ldpsynth.cli", *argv[1:]], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout == shown, command
