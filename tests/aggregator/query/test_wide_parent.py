"""Queries and export on a wide collection's parent through a real server (port 0, the session's Ray cluster).

2,000 devices, each with its own ledger, submit a 4-attribute row (a chain a -> b -> c -> d) to the wide
collection ``chain`` (views a+b, b+c, c+d) through the SDK. On the parent: a marginal inside a view answers
analytically and equals the view sub-collection's own answer scaled from its n_V devices to all N; a 3-way
marginal answers from the model; the export (the wide card, every view's release, sampled rows) gives, through
``ldpsynth estimate``, exactly the server's numbers; bad queries are INVALID_ARGUMENT naming the field; without the
[wide] extra model queries are FAILED_PRECONDITION naming it and analytic ones still answer.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from ldpsynth.cli.main import main as cli_main
from ldpsynth.client import Client, PrivacyLedger
from ldpsynth.client.errors import QueryError
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.wide import model as wide_model
from ldpsynth.shared.wide.collection import WideCard, WideSchema
from ldpsynth.shared.wide.parent import WideFit
from ldpsynth.shared.wide.release import WideRelease, estimate_wide_release

pytest.importorskip("mbi")
pytestmark = [pytest.mark.ray, pytest.mark.slow]

DEVICES = 2000
FIT = WideFit(iterations=300, replicates=8, seed=11)
WIDE = WideCard.for_schema(WideSchema.from_json({
    "name": "chain", "epsilon": 2.0,
    "attributes": [{"name": "a", "type": "categorical", "values": ["x", "y", "z"]},
                   {"name": "b", "type": "binary"},
                   {"name": "c", "type": "integer", "min": 1, "max": 2},
                   {"name": "d", "type": "categorical", "values": ["lo", "hi"]},
                   {"name": "region", "type": "categorical", "values": ["n", "s"], "public": True}],
    "views": {"kind": "list", "views": [["a", "b"], ["b", "c"], ["c", "d"]], "salt": "3c" * 16}}))
INSIDE = {"kind": "marginal", "attributes": ["a", "b"]}
SHARE = {"kind": "marginal", "attributes": ["a", "b"], "normalization": "mean"}
THREE = {"kind": "marginal", "attributes": ["a", "b", "c"]}
CELLS = np.indices((3, 2, 2, 2)).reshape(4, -1)                # D: a, b, c, d, the last fastest
# grouped by the public region: inside the view a+b (analytic per group), and across views (each group's model)
GROUPED_IN = {"kind": "grouped", "attribute": "region", "normalization": "sum",
              "tables": [{"value": "n", "weights": ((CELLS[0] == 0) & (CELLS[1] == 1)).astype(float).tolist()},
                         {"value": "s", "weights": (CELLS[0] == 1).astype(float).tolist()}]}
GROUPED_MODEL = {"kind": "grouped", "attribute": "region", "normalization": "sum",
                 "tables": [{"value": "n", "weights": ((CELLS[0] == 0) & (CELLS[3] == 1)).astype(float).tolist()}]}


def _rows(rng: np.random.Generator) -> dict[str, np.ndarray]:
    a = rng.integers(0, 3, DEVICES)
    b = np.where(rng.random(DEVICES) < 0.8, a % 2, 1 - a % 2)
    c = np.where(rng.random(DEVICES) < 0.8, b, 1 - b)
    d = np.where(rng.random(DEVICES) < 0.7, c, 1 - c)
    region = np.array(["n", "s"])[rng.integers(0, 2, DEVICES)]
    return {"a": np.array(["x", "y", "z"])[a], "b": b, "c": c + 1, "d": np.array(["lo", "hi"])[d], "region": region}


def _not_json(literal: str) -> None:
    raise AssertionError(f"printed {literal}, which is not JSON (RFC 8259)")


def _columns(answers: object) -> np.ndarray:
    return np.array([[r["estimate"], r["std_error"], r["ci_low"], r["ci_high"]]
                     for r in answers.records()])  # type: ignore[attr-defined]


def test_parent_answers_and_export_equal_offline(start_server, tmp_path, capsys, monkeypatch) -> None:
    server = start_server(collections=WIDE.cards, wide=(WIDE,), wide_fit=FIT)
    rows = _rows(np.random.default_rng(3))
    with Client(server.address) as client:
        for i in range(DEVICES):
            ledger = PrivacyLedger.for_simulation(budget=10.0)
            client.submit("chain", {name: column[i:i + 1] for name, column in rows.items()}, ledger=ledger)
            ledger.close()

    with QueryClient(server.address) as analyst:
        # without the [wide] extra: model queries refused naming it, analytic ones still answered
        def missing() -> None:
            raise ImportError("No module named 'mbi'")

        monkeypatch.setattr(wide_model, "_mbi", missing)
        with pytest.raises(QueryError) as refused:
            analyst.estimate("chain", queries=[THREE])
        assert refused.value.status == "FAILED_PRECONDITION" and "[wide] extra" in refused.value.details
        assert len(analyst.estimate("chain", queries=[INSIDE]).records()) == 6
        monkeypatch.undo()

        served = analyst.estimate("chain", queries=[INSIDE, SHARE, THREE])
        grouped = analyst.estimate("chain", queries=[GROUPED_IN, GROUPED_MODEL])
        view = analyst.estimate("chain/a+b", queries=[INSIDE, SHARE])
        for bad, field in [({"kind": "grouped", "attribute": "a", "tables": [{"value": "x", "weights": [1.0]}]},
                            "queries[0].attribute"),
                           ({"kind": "grouped", "attribute": "region", "tables": [{"value": "n", "weights": [1.0]}]},
                            "queries[0].tables[0].weights"),
                           ({"kind": "marginal", "attributes": ["e"]}, "queries[0].attributes[0]")]:
            with pytest.raises(QueryError) as invalid:
                analyst.estimate("chain", queries=[bad])
            assert invalid.value.status == "INVALID_ARGUMENT" and field in invalid.value.details
        with pytest.raises(QueryError) as packed:
            analyst.estimate("chain", linear=np.ones((1, 24)))
        assert packed.value.status == "INVALID_ARGUMENT" and "linear" in packed.value.details
        with pytest.raises(ValidationError) as ordinary:
            analyst.export("chain")
        assert ordinary.value.field == "collection"
        wide = analyst.export_wide("chain")

    records = served.records()
    assert len(records) == 6 + 6 + 12 and all(r["n"] == DEVICES for r in records)
    n_view = view.records()[0]["n"]
    # inside the view a+b: the analytic answer is the sub-collection's, scaled from its n_V devices to N
    assert [r["estimate"] for r in records[:6]] == \
        pytest.approx([r["estimate"] * DEVICES / n_view for r in view.records()[:6]], rel=1e-9)
    assert [r["estimate"] for r in records[6:12]] == pytest.approx([r["estimate"] for r in view.records()[6:]],
                                                                   rel=1e-9)
    three = records[12:]                                         # a 3-way marginal from the model: a distribution
    assert sum(r["estimate"] for r in three) == pytest.approx(DEVICES, rel=1e-6)
    assert all(r["estimate"] >= -1e-9 and r["std_error"] > 0 and r["ci_low"] < r["estimate"] < r["ci_high"]
               for r in three)

    offline = estimate_wide_release(wide, [INSIDE, SHARE, THREE], fit=FIT)
    assert [r["method"] for r in offline.records()] == ["analytic"] * 12 + ["model"] * 12
    assert served.methods == offline.methods and [r["method"] for r in records] == list(offline.methods)
    assert np.array_equal(_columns(offline), _columns(served))   # same reports, same fit: the same numbers

    # grouped by the public region: per group from its views or its own model; the server's numbers offline
    assert grouped.methods == ("analytic", "model") and grouped.labels == ("grouped#0", "grouped#1")
    offline_grouped = estimate_wide_release(wide, [GROUPED_IN, GROUPED_MODEL], fit=FIT)
    assert offline_grouped.methods == grouped.methods
    assert np.array_equal(_columns(offline_grouped), _columns(grouped))

    out, queries = tmp_path / "export", tmp_path / "q.json"     # the CLI: export, then estimate offline
    queries.write_text(json.dumps([INSIDE, SHARE, THREE]))
    fit = ["--iterations", str(FIT.iterations), "--replicates", str(FIT.replicates), "--seed", str(FIT.seed)]
    assert cli_main(["export", "--target", server.address, "--collection", "chain", "--out", str(out),
                     "--synthetic-rows", "500", *fit]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["population"], summary["synthetic_rows"], summary["note"]) == (DEVICES, 500, None)
    assert WideRelease.read(out).card == WIDE
    with open(out / "synthetic.csv", newline="", encoding="utf-8") as handle:
        sampled = list(csv.reader(handle))
    assert sampled[0] == ["a", "b", "c", "d"] and len(sampled) == 501
    assert cli_main(["estimate", "--synthetic", str(out), "--card", str(out / "card.json"),
                     "--queries", str(queries), *fit]) == 0
    printed = json.loads(capsys.readouterr().out, parse_constant=_not_json)      # strict JSON: NaN is null
    assert {(r["bound"], r["bound_proper"]) for r in printed} == {(None, None)}  # WYZ eqs. 20/22 do not apply
    assert [(r["label"], r["estimate"], r["std_error"], r["ci_low"], r["ci_high"], r["method"]) for r in printed] == \
        [(r["label"], r["estimate"], r["std_error"], r["ci_low"], r["ci_high"], r["method"]) for r in records]

    with Client(server.address) as client:                        # new reports: a new fit, over all of them
        for i in range(30):
            ledger = PrivacyLedger.for_simulation(budget=10.0)
            client.submit("chain", {name: column[i:i + 1] for name, column in rows.items()}, ledger=ledger)
            ledger.close()
    with QueryClient(server.address) as analyst:
        assert {r["n"] for r in analyst.estimate("chain", queries=[INSIDE, THREE]).records()} == {DEVICES + 30}
