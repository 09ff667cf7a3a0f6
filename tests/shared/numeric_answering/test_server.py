"""Numeric queries through a real local server (port 0, the session's Ray cluster): devices submit through the
SDK, the server's Estimate answers mean, sum and variance (HM, grouped and not) and quantiles, histograms and
variance (SW, without and with declared levels) from the stored counts, equal to the offline answers on the export
(``estimate_release`` and ``ldpsynth estimate``; on levels the quantiles' interval ends too, inverted from the CDF's),
and refuses bad queries with INVALID_ARGUMENT naming the field.

The device path's randomness is the OS CSPRNG; here ``coins.secure_words`` is replaced by a seeded Generator's
words so the run is reproducible (fixed seed, no retry).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ldpsynth.cli.main import main
from ldpsynth.client import Client, PrivacyLedger
from ldpsynth.client.errors import QueryError
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators.offline import estimate_release
from ldpsynth.shared.mechanisms import coins
from ldpsynth.shared.queries import dumps_queries, histogram, mean, quantiles, sum_, variance
from ldpsynth.shared.schema import Schema

from ...aggregator.conftest import ray_address, start_server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.ray


def card(name: str, mechanism: str, epsilon: float, step: float | None = None) -> MechanismCard:
    hours: dict[str, Any] = {"name": "hours", "type": "numeric", "range": [0, 99], "mechanism": mechanism}
    if step is not None:
        hours["step"] = step
    return MechanismCard.for_schema(Schema.from_json({"name": name, "epsilon": epsilon, "attributes": [
        hours,
        {"name": "region", "type": "categorical", "values": ["north", "south"], "public": True}]}))


HM, SW, LOW, LEVELS = card("hm", "HM", 1.0), card("sw", "SW", 2.0), card("low", "HM", 0.5), card("lv", "SW", 2.0, 1)
N = 2000


def values(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    region = rng.integers(0, 2, N)
    hours = 99.0 * rng.beta(np.where(region == 0, 3.0, 6.0), np.where(region == 0, 6.0, 4.0))
    return {"hours": hours, "region": np.array(["north", "south"])[region]}


def columns(table: Any) -> dict[str, np.ndarray]:
    return {name: np.asarray(getattr(table, name)) for name in
            ("estimate", "proper_estimate", "std_error", "ci_low", "ci_high", "bound", "bound_proper")}


def test_the_server_answers_numeric_queries_as_the_export_does(start_server: Any, tmp_path: Path,  # noqa: F811
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    words = np.random.default_rng(42).bit_generator.random_raw
    monkeypatch.setattr(coins, "secure_words", lambda count: np.asarray(words(count), dtype=np.uint64))
    server = start_server(collections=(HM, SW, LEVELS))
    rows = {"hm": values(1), "sw": values(2), "lv": values(3)}
    rows["lv"]["hours"] = np.rint(rows["lv"]["hours"])            # on the levels 0, 1, ..., 99
    with PrivacyLedger(tmp_path / "ledger.sqlite", budget=10_000.0) as ledger, Client(server.address) as client:
        for name, data in rows.items():
            if name != "lv":
                assert client.submit(name, data, ledger=ledger).acknowledged == N
        # a device memoizes a repeated row: equal rows on levels go to different devices (the k-th copy to the k-th)
        pair = np.unique(np.stack([rows["lv"]["hours"], rows["lv"]["region"] == "north"]), axis=1,
                         return_inverse=True)[1].reshape(-1)
        order = np.argsort(pair, kind="stable")
        copy = np.empty(N, np.int64)
        copy[order] = np.arange(N) - np.searchsorted(pair[order], pair[order])
        for k in range(copy.max() + 1):
            with PrivacyLedger(tmp_path / f"ledger{k}.sqlite", budget=10_000.0) as device:
                part = {column: v[copy == k] for column, v in rows["lv"].items()}
                assert client.submit("lv", part, ledger=device).acknowledged == (copy == k).sum()
    asked = {"hm": [mean("hours"), mean("hours", by="region"), sum_("hours"), sum_("hours", by="region"),
                    variance("hours"), variance("hours", by="region")],
             "sw": [quantiles("hours", [0.25, 0.5, 0.75]), quantiles("hours", [0.5], by="region"),
                    histogram("hours", 3), variance("hours")],
             "lv": [quantiles("hours", [0.25, 0.5, 0.75]), quantiles("hours", [0.5], by="region"),
                    histogram("hours", 3)]}
    with QueryClient(server.address) as query:
        answers = {name: query.estimate(name, queries=qs) for name, qs in asked.items()}
        releases = {name: query.export(name) for name in asked}

    hm, sw = answers["hm"], answers["sw"]
    data = rows["hm"]
    region = data["region"] == "north"
    truth = [data["hours"].mean(), data["hours"][region].mean(), data["hours"][~region].mean(), data["hours"].sum(),
             data["hours"][region].sum(), data["hours"][~region].sum(), data["hours"].var(),
             data["hours"][region].var(), data["hours"][~region].var()]
    assert hm.labels == ("mean#0", "mean#1[region=north]", "mean#1[region=south]", "sum#2", "sum#3[region=north]",
                         "sum#3[region=south]", "variance#4", "variance#5[region=north]", "variance#5[region=south]")
    assert hm.n == N and hm.epsilon == HM.mechanism.epsilon
    sizes = [N, int(region.sum()), int((~region).sum())]
    assert hm.rows_sent() is not None and hm.rows_sent().tolist() == sizes * 3     # n_g per answer, on the wire
    assert ((hm.ci_low <= truth) & (truth <= hm.ci_high)).all()           # seeded run: each interval covers
    assert hm.estimate[3] == pytest.approx(N * hm.estimate[0])
    assert hm.estimate[4] + hm.estimate[5] == pytest.approx(hm.estimate[3])
    assert sw.labels[:3] == ("quantiles#0[q=0.25]", "quantiles#0[q=0.5]", "quantiles#0[q=0.75]")
    median = float(np.median(rows["sw"]["hours"]))
    assert abs(sw.estimate[1] - median) < 4 * sw.std_error[1]             # α ≈ 6e-5 were the bootstrap SE exact
    assert sw.estimate[5:8].sum() == pytest.approx(1.0)
    assert sw.labels[8] == "variance#3"
    assert abs(sw.estimate[8] - rows["sw"]["hours"].var()) < 4 * sw.std_error[8]  # EMS bias about +3 %
    lv = answers["lv"]                              # quantiles on levels: ends inverted from the CDF's, levels
    assert set(np.concatenate([lv.ci_low[:5], lv.ci_high[:5]]).tolist()) <= set(range(100))
    assert ((lv.ci_low[:5] <= lv.estimate[:5]) & (lv.estimate[:5] <= lv.ci_high[:5])).all()

    for name, qs in asked.items():                  # offline, on the export: equal, to the last bit
        offline = estimate_release(releases[name], qs)
        assert [offline.label(j) for j in range(len(offline))] == list(answers[name].labels)
        for column, value in columns(offline).items():
            np.testing.assert_array_equal(value, columns(answers[name])[column], err_msg=column)
        assert offline.rows_sent().tolist() == answers[name].rows_sent().tolist()
        folder = tmp_path / name
        releases[name].write(folder, parquet=False)
        (tmp_path / f"{name}.json").write_text(dumps_queries(qs))
        capsys.readouterr()
        assert main(["estimate", "--synthetic", str(folder / "synthetic.csv"), "--card", str(folder / "card.json"),
                     "--queries", str(tmp_path / f"{name}.json")]) == 0
        printed = json.loads(capsys.readouterr().out)
        assert [r["label"] for r in printed] == list(answers[name].labels)
        for key in ("estimate", "std_error", "ci_low", "ci_high"):
            assert [r[key] for r in printed] == columns(answers[name])[key].tolist(), key
        assert [r["rows"] for r in printed] == answers[name].rows_sent().tolist()


def test_bad_numeric_queries_are_refused_naming_the_field(start_server: Any) -> None:  # noqa: F811
    server = start_server(collections=(HM, SW, LOW))
    with QueryClient(server.address) as query:
        for name, queries, field, text in [
            ("low", [variance("hours")], "epsilon", "0.6094"),
            ("hm", [mean("hours"), quantiles("hours", [0.5])], "queries[1].kind", "collected by SW"),
            ("sw", [mean("hours")], "queries[0].kind", "collected by HM"),
            ("sw", [histogram("hours", 2, by="hours")], "queries[0].by", "public attribute"),
            ("hm", [sum_("minutes")], "queries[0].attribute", "'hours'"),
            ("hm", [{"kind": "marginal", "attributes": ["hours"]}], "queries[0].kind", "mean, sum"),
            ("hm", [{"kind": "quantiles", "attribute": "hours", "q": [2]}], "queries[0].q", "[0, 1]"),
        ]:
            with pytest.raises(QueryError) as info:
                query.estimate(name, queries=queries)
            assert info.value.status == "INVALID_ARGUMENT" and info.value.details.startswith(field), info.value
            assert text in info.value.details
        with pytest.raises(QueryError) as info:                            # packed weights weigh categories
            query.estimate("hm", linear=np.ones((1, HM.mechanism.domain_size)))
        assert info.value.status == "INVALID_ARGUMENT" and info.value.details.startswith("mechanism")
        with pytest.raises(QueryError) as info:                            # no row stored yet
            query.estimate("hm", queries=[mean("hours")])
        assert info.value.status == "FAILED_PRECONDITION"
        empty = query.estimate("hm", queries=[])
        assert len(empty) == 0 and empty.n == 0
