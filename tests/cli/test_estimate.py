"""``ldpsynth estimate`` end to end: a CSV export and its mechanism card in, JSON answers out."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import numpy as np
import pytest

from ldpsynth.cli import estimate as cli
from ldpsynth.shared import queries as Q
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators import ANSWER_FIELDS, estimate
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.schema import Schema

SCHEMA = Schema.from_json({"name": "ratings", "epsilon": 1.0, "attributes": [
    {"name": "movie", "type": "integer", "min": 1, "max": 3, "public": True},
    {"name": "rating", "type": "integer", "min": 1, "max": 5},
    {"name": "genre", "type": "categorical", "values": ["drama", "comedy"]},
    {"name": "score", "type": "continuous", "lo": 0.1, "hi": 0.7, "bits": 3},   # edges 0.1 + j * 0.075
]})
QUERIES = [
    {"kind": "predicate", "where": [{"attribute": "rating", "op": ">=", "value": 4}], "label": "high"},
    {"kind": "linear", "weights": [float(j % 7) for j in range(80)], "normalization": "mean"},
    {"kind": "marginal", "attributes": ["genre"]},
    {"kind": "grouped", "attribute": "movie", "tables": [{"value": 2, "weights": [1.0] * 40 + [0.0] * 40}]},
    {"kind": "predicate", "where": [{"attribute": "score", "op": ">=", "value": 0.4}], "normalization": "mean"},
]


def write_release(tmp_path: Path, n: int = 400) -> tuple[Path, Path, Path, np.ndarray, np.ndarray]:
    """Seed 21: a perturbed export (with an extra column the reader ignores), its card and a query file."""
    card = MechanismCard.for_schema(SCHEMA)
    card.save(tmp_path / "card.json")
    rng = np.random.default_rng(21)
    keys = rng.integers(0, 3, n)
    codes = card.mechanism.perturb(rng.integers(0, SCHEMA.private_domain_size, n), rng)
    columns = {**SCHEMA.decode_public(keys), **SCHEMA.decode_private(codes)}
    with open(tmp_path / "Y.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["report_id"] + [a.name for a in SCHEMA.attributes])
        for i in range(n):
            writer.writerow([f"r{i}"] + [columns[a.name][i] for a in SCHEMA.attributes])
    (tmp_path / "q.json").write_text(json.dumps(QUERIES), encoding="utf-8")
    return tmp_path / "Y.csv", tmp_path / "card.json", tmp_path / "q.json", keys, codes


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="ldpsynth")
    cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.handler(args)


def test_estimate_prints_one_answer_per_query(tmp_path, capsys):
    synthetic, card, queries, keys, codes = write_release(tmp_path)
    assert run(["estimate", "--synthetic", str(synthetic), "--card", str(card), "--queries", str(queries),
                "--level", "0.9"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [o["label"] for o in out] == ["high", "linear#1", "marginal#2[genre=drama]", "marginal#2[genre=comedy]",
                                         "grouped#3", "predicate#4"]
    assert all(list(o) == list(ANSWER_FIELDS) for o in out)
    assert all(o["level"] == 0.9 and o["n"] == 400 for o in out)
    assert all(o["ci_low"] < o["estimate"] < o["ci_high"] and o["std_error"] > 0 and o["bound"] > 0 for o in out)
    assert [o["proper_kind"] for o in out] == ["exact", "exact", "exact", "exact", "exact", "exact"]
    # The CSV round trip (decoded values, continuous bucket edges) reproduces the in-memory answers.
    direct = estimate(Q.compile_queries(Q.queries_from_json(QUERIES), SCHEMA),
                      SufficientStatistics.from_schema(SCHEMA, keys, codes),
                      MechanismCard.for_schema(SCHEMA).mechanism, level=0.9).records()
    assert out == json.loads(json.dumps(direct))


def test_main_dispatches_to_estimate(tmp_path, capsys):
    from ldpsynth.cli import main

    synthetic, card, queries, *_ = write_release(tmp_path, n=50)
    assert main.main(["estimate", "--synthetic", str(synthetic), "--card", str(card), "--queries", str(queries)]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 6
    (tmp_path / "bad.json").write_text('[{"kind": "linear", "weights": [1, 2]}]', encoding="utf-8")
    assert main.main(["estimate", "--synthetic", str(synthetic), "--card", str(card),
                      "--queries", str(tmp_path / "bad.json")]) == 2
    assert "queries[0].weights" in capsys.readouterr().err


def rewrite(path: Path, edit) -> None:
    rows = list(csv.reader(path.read_text(encoding="utf-8").splitlines()))
    edit(rows)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows)


@pytest.mark.parametrize("edit, field, position", [
    (lambda rows: [r.pop(2) for r in rows], "synthetic.rating", None),                  # column missing
    (lambda rows: rows[5].__setitem__(2, "6"), "rating", 4),                           # out of range
    (lambda rows: rows[3].__setitem__(1, "0"), "movie", 2),
    (lambda rows: rows[8].__setitem__(3, "jazz"), "genre", 7),
    (lambda rows: rows[2].__setitem__(4, "0.2"), "synthetic.score", 1),                # not a bucket edge
    (lambda rows: rows[2].__setitem__(4, "0.7"), "synthetic.score", 1),                # the top edge is no bucket
    (lambda rows: rows[4].__setitem__(4, "x"), "synthetic.score", 3),
    (lambda rows: rows[6].pop(), "synthetic", 5),                                      # ragged row
    (lambda rows: rows.clear(), "synthetic", None),                                    # empty file
])
def test_bad_synthetic_csv_is_rejected_naming_column_and_row(tmp_path, edit, field, position):
    synthetic, card, queries, *_ = write_release(tmp_path, n=20)
    rewrite(synthetic, edit)
    with pytest.raises(ValidationError) as err:
        run(["estimate", "--synthetic", str(synthetic), "--card", str(card), "--queries", str(queries)])
    assert err.value.field == field and err.value.position == position


def test_missing_files_bad_queries_and_bad_level(tmp_path):
    synthetic, card, queries, *_ = write_release(tmp_path, n=20)
    base = ["estimate", "--synthetic", str(synthetic), "--card", str(card), "--queries", str(queries)]
    with pytest.raises(ValidationError) as err:
        run(base[:2] + [str(tmp_path / "nope.csv")] + base[3:])
    assert err.value.field == "--synthetic"
    (tmp_path / "q2.json").write_text('[{"kind": "cut", "S": [1], "T": [2]}]', encoding="utf-8")
    with pytest.raises(ValidationError) as err:
        run(base[:-1] + [str(tmp_path / "q2.json")])
    assert err.value.field == "queries[0].source"
    with pytest.raises(ValidationError) as err:
        run(base + ["--level", "1.5"])
    assert err.value.field == "level"


@pytest.mark.parametrize("content, problem", [
    (b"[" * 1000 + b"]" * 1000, "nested 1000 deep"),                                   # RecursionError today
    (b'[{"kind": "linear", "weights": [' + b"7" * 5000 + b"]}]", "5000 digits"),       # ValueError today
    (b'[{"kind": "marginal", "attributes": ["r\xe9ting"]}]', "not UTF-8"),               # UnicodeDecodeError today
])
def test_queries_past_the_json_limits_or_not_utf8_exit_2_with_one_line(tmp_path, capsys, content, problem):
    from ldpsynth.cli import main

    synthetic, card, queries, *_ = write_release(tmp_path, n=20)
    queries.write_bytes(content)
    assert main.main(["estimate", "--synthetic", str(synthetic), "--card", str(card), "--queries", str(queries)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and problem in captured.err, captured.err
    assert captured.err.startswith("ldpsynth estimate: error: ")
