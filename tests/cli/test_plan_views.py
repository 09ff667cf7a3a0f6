"""``ldpsynth plan --views pairs``: the views mode beside the full domain, in text and JSON, and its flags' errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ldpsynth.cli import main
from ldpsynth.shared import queries as Q
from ldpsynth.shared.planning.row_distribution import UniformRows
from ldpsynth.shared.planning.views import MODEL, plan_views
from ldpsynth.shared.queries.compiler import compile_queries
from ldpsynth.shared.schema import Schema

SIZES = {"a": 6, "b": 5, "c": 7, "d": 2}
QUERIES = [{"kind": "marginal", "attributes": ["a", "d"], "normalization": "mean", "label": "a x d"},
           {"kind": "marginal", "attributes": ["a", "b", "c"], "normalization": "mean", "label": "a x b x c"}]


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    schema = {"name": "four", "epsilon": 1.0, "attributes": [
        {"name": n, "type": "categorical", "values": [f"v{i}" for i in range(k)]} for n, k in SIZES.items()]}
    (tmp_path / "c.json").write_text(json.dumps(schema))
    (tmp_path / "q.json").write_text(json.dumps(QUERIES))
    return tmp_path / "c.json", tmp_path / "q.json"


def run(files: tuple[Path, Path], extra: list[str], capsys) -> tuple[int, str, str]:
    code = main.main(["plan", "--collection", str(files[0]), "--queries", str(files[1]), "--devices", "60000",
                      *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_text_shows_the_views_beside_the_full_domain_and_the_mode(files, capsys):
    code, plain, _ = run(files, [], capsys)
    code2, out, _ = run(files, ["--views", "pairs", "--views-attributes", "a, d,b"], capsys)
    assert code == code2 == 0 and out.startswith(plain) and "Wide rows" not in plain
    schema = Schema.load(files[0])
    vp = plan_views(schema, compile_queries(Q.queries_from_json(json.dumps(QUERIES)), schema), 60000, 1.0,
                    attributes=["a", "d", "b"])
    assert "3 2-way views (20,000.0 devices each)" in out
    assert f"| a x d[a=v0,d=v0] | {1.959963984540054 * vp.se_worst[0]:.4g} | " in out
    assert out.count(MODEL) == 6 * 5 * 7 + 1 and "Recommended mode: views" in out


def test_json_carries_the_views(files, capsys):
    code, out, _ = run(files, ["--views", "pairs", "--prior-uniform", "--json"], capsys)
    data = json.loads(out)
    schema = Schema.load(files[0])
    vp = plan_views(schema, compile_queries(Q.queries_from_json(json.dumps(QUERIES)), schema), 60000, 1.0,
                    prior=UniformRows(schema))
    views = data["views"]
    assert code == 0 and len(views["views"]) == 6 and views["devices_per_view"] == 10000
    assert views["recommended_mode"] == "views" and 0 < views["error_ratio"] < 1
    first = views["queries"][0]
    assert first["views"] == [["a", "d"]] and first["se_worst"] == pytest.approx(vp.se_worst[0], rel=1e-12)
    assert first["se_prior"] == pytest.approx(vp.se_prior[0], rel=1e-12)
    assert views["queries"][-1] == {"label": "a x b x c[a=v5,b=v4,c=v6]", "views": [], "answer": MODEL}
    assert np.isfinite([q["halfwidth_worst"] for q in views["queries"][:12]]).all()
    code, out, _ = run(files, ["--json"], capsys)
    assert "views" not in json.loads(out)


@pytest.mark.parametrize("extra, field, legal", [
    (["--views", "triples"], "--views", "one of: pairs"),
    (["--views-attributes", "a,b"], "--views", "given with --views-attributes"),
    (["--views", "pairs", "--views-attributes", "a"], "--views-attributes", "two or more distinct private"),
    (["--views", "pairs", "--views-attributes", "a,zz"], "--views-attributes", "two or more distinct private"),
    (["--views", "pairs", "--rows-per-device", "2", "--devices", "30000"], "--views", "one row per device"),
])
def test_bad_view_flags_name_the_flag_and_the_legal_values(files, capsys, extra, field, legal):
    code, _, err = run(files, extra, capsys)
    assert code == 2 and f"error: {field}" in err and legal in err


def test_a_schema_with_one_private_attribute_has_no_pair_views(capsys):
    docs = Path(__file__).resolve().parents[2] / "docs" / "plan"
    code = main.main(["plan", "--collection", str(docs / "ratings.json"), "--queries", str(docs / "queries.json"),
                      "--devices", "1000", "--views", "pairs"])
    err = capsys.readouterr().err
    assert code == 2 and "error: --views" in err and "two or more private attributes" in err


def test_views_chosen_by_the_queries(files, capsys):
    # the workload a x d and a x b x c: two views, (a, d) and (a, b, c), half the devices each; the 3-way marginal
    # is now analytic (inside its own view)
    code, out, _ = run(files, ["--views", "queries", "--json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["views"]["views"] == [["a", "d"], ["a", "b", "c"]]
    assert data["views"]["devices_per_view"] == 30000
    schema = Schema.load(files[0])
    batch = compile_queries(Q.queries_from_json(json.dumps(QUERIES)), schema)
    vp = plan_views(schema, batch, 60000, 1.0, views=[("a", "d"), ("a", "b", "c")])
    assert all(np.isfinite(vp.se_worst)) and data["views"]["queries"][0]["se_worst"] == vp.se_worst[0]
    code, out, _ = run(files, ["--views", "queries"], capsys)
    assert code == 0 and "2-, 3-way views (30,000.0 devices each)" in out
    code, _, err = run(files, ["--views", "queries", "--views-attributes", "a,b"], capsys)
    assert code == 2 and "error: --views-attributes" in err
