"""``ldpsynth simulate --collection``: one small end-to-end run per collection mode on a hosted aggregator
(the session's Ray cluster, one shard, one worker process), skipped when its data set is absent.

The devices randomize from the OS CSPRNG (in worker processes), so the statistical checks are not seeded:
each states its α and none is retried.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpsynth.aggregator.runtime.config import load_collection
from ldpsynth.shared.wide.collection import WideCard
from ldpsynth.simulation.datasets import DatasetNotFound
from ldpsynth.simulation.devices import Faults
from ldpsynth.simulation.federation import SimulationSettings
from ldpsynth.simulation.modes import data
from ldpsynth.simulation.modes.run import simulate_collection

pytestmark = pytest.mark.ray

DOCS = Path(__file__).resolve().parents[3] / "docs" / "simulate"


def settings(ray_address: str, **changes: Any) -> SimulationSettings:
    return SimulationSettings(shards=1, ray_address=ray_address, processes=1, connections=4,
                              faults=Faults(drop_rate=0.1, drop_after=0.02), progress=False, **changes)


def run(path: Path, devices: int, ray_address: str, dataset: str | None = None) -> dict[str, Any]:
    try:
        return asyncio.run(simulate_collection(path, dataset, devices, settings(ray_address)))
    except DatasetNotFound as exc:
        pytest.skip(str(exc))


def consistent(report: dict[str, Any], devices: int) -> None:
    d = report["delivery"]
    assert d["failures"] == [] and d["consistent"] is True
    assert d["devices"] == devices and d["stored"] == d["sent"]
    assert json.loads(json.dumps(report)) == report          # what summary.json holds


@pytest.mark.timeout(240)
def test_wide_views_answer_their_devices_shares(ray_address: str) -> None:
    path = DOCS / "adult-wide.json"
    card = load_collection(path)
    assert isinstance(card, WideCard)
    report = run(path, 600, ray_address)
    consistent(report, 600)
    assert report["delivery"]["epsilon_per_device_max"] == pytest.approx(2.0)   # one view each, ε once
    views = report["table"]
    assert [v["view"] for v in views] == list(card.names) and sum(v["devices"] for v in views) == 600
    for name, view in zip(card.names, card.cards, strict=True):
        rows = [r for r in report["answers"] if r["view"] == name]
        attrs = [a for a in view.schema.attributes if not a.public]
        assert len(rows) == int(np.prod([a.size for a in attrs]))
        assert sum(r["truth"] for r in rows) == pytest.approx(1.0)
        assert sum(r["population_share"] for r in rows) == pytest.approx(1.0)
        for u, r in enumerate(rows):                         # the truth's cell numbering is the query's
            digits = np.unravel_index(u, [a.size for a in attrs])
            assert re.search(",".join(f"{a.name}={a.decode(np.array([d]))[0]}" for a, d in zip(attrs, digits,
                                                                                              strict=True)),
                             r["cell"])
    # 87 cells, each interval covering with probability ~0.95: fewer than 60 % covering has α < 1e-6
    # even if the 6 views' cells failed together in blocks (3 of 6 views wholly uncovered).
    assert sum(r["covered"] for r in report["answers"]) >= 0.6 * len(report["answers"])


@pytest.mark.timeout(240)
def test_numeric_mean_covers_the_sampled_rows_mean(ray_address: str) -> None:
    report = run(DOCS / "adult-hours.json", 800, ray_address)
    consistent(report, 800)
    columns, _ = data.sample_devices({"h": data.adult_columns()["hours_per_week"],
                                      "sex": data.adult_columns()["sex"]}, np.arange(32561), 800, seed=1)
    rows = {r["group"]: r for r in report["answers"]}
    assert set(rows) == {"all", "sex=Female", "sex=Male"}
    assert rows["all"]["truth"] == pytest.approx(columns["h"].mean())
    assert rows["sex=Male"]["truth"] == pytest.approx(columns["h"][columns["sex"] == "Male"].mean())
    assert rows["sex=Female"]["n"] + rows["sex=Male"]["n"] == rows["all"]["n"] == 800
    for r in rows.values():   # each within 5 SE of the truth: α ≈ 6e-7 per answer (normal estimates)
        assert r["ci_low"] < r["estimate"] < r["ci_high"] and abs(r["estimate"] - r["truth"]) < 5 * r["std_error"]


def words_file(tmp_path: Path, min_reports: int) -> Path:
    """A two-round discovery of the top word of 5 letters at ε = 4."""
    if not data.WORDS_FILE.is_file():
        pytest.skip(f"no word list at {data.WORDS_FILE}")
    path = tmp_path / "words.json"
    path.write_text(json.dumps({
        "name": "words", "epsilon": 4.0,
        "attributes": [{"name": "word", "type": "string", "max_length": 5, "alphabet": "abcdefghijklmnopqrstuvwxyz"}],
        "discovery": {"first_bits": 10, "fragment_bits": 15, "top_k": 1, "cap": 4, "salt": "5a" * 16,
                      "min_reports_per_round": min_reports}}))
    return path


@pytest.mark.timeout(240)
def test_discovery_runs_its_rounds_and_finds_the_top_word(ray_address: str, tmp_path: Path) -> None:
    report = asyncio.run(simulate_collection(words_file(tmp_path, 20), None, 300, settings(ray_address),
                                             vocabulary=20, exponent=2.0))
    consistent(report, 300)
    rounds = report["rounds"]
    assert [r["round"] for r in rounds] == [0, 1] and sum(r["reports"] for r in rounds) == 300
    assert [r["sent"] for r in rounds] == [r["reports"] for r in rounds]
    assert rounds[1]["your round has passed"] == rounds[0]["sent"]      # round 0's devices did not report again
    assert report["delivery"]["epsilon_per_device_max"] <= 4.0 * (1 + 1e-9)
    quality = report["quality"]
    assert quality["reports_per_round"] == [r["reports"] for r in rounds]
    # Zipf(2) over 20 words: the top word holds ~62 % of the devices, ~90 reports in each round of ~150, ≥ 9
    # standard errors of a count at ε = 4 above every other cell: missing it has α < 1e-6.
    assert quality["recall"] == 1.0
    top = next(r for r in report["answers"] if r["true_rank"] == 1)
    assert abs(top["estimate"] - top["truth"]) < 5 * top["std_error"]   # α ≈ 6e-7


@pytest.mark.timeout(240)
def test_an_underfilled_round_stops_the_discovery_with_its_refusal(ray_address: str, tmp_path: Path) -> None:
    report = asyncio.run(simulate_collection(words_file(tmp_path, 1000), None, 60, settings(ray_address),
                                             vocabulary=20, exponent=2.0))
    assert report["rounds"] == [] and report["answers"] == [] and report["quality"] == {}
    assert report["delivery"]["consistent"] is False           # round 0's reports are stored, not closed
    assert report["notes"][0].startswith("stopped:") and "at least 1000 reports" in report["notes"][0]


@pytest.mark.timeout(240)
def test_the_cli_prints_the_table_and_writes_the_outputs(ray_address: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from ldpsynth.cli.main import main

    try:
        data.adult_columns()
    except DatasetNotFound as exc:
        pytest.skip(str(exc))
    out = tmp_path / "out"
    assert main(["simulate", "--collection", str(DOCS / "adult-hours.json"), "--devices", "200", "--processes", "1",
                 "--shards", "1", "--ray-address", ray_address, "--no-progress", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "collection        adult-hours (numeric)" in printed and "| group | statistic |" in printed
    summary = json.loads((out / "summary.json").read_text())
    assert summary["mode"] == "numeric" and summary["delivery"]["stored"] == 200
    assert (out / "answers.csv").read_text().splitlines()[0].startswith("group,statistic,n,truth,estimate")
    assert len((out / "answers.csv").read_text().splitlines()) == 1 + len(summary["answers"]) == 4
    assert (out / "answers.md").read_text() in printed
