"""The comparison harness (issue 5 item 2): errors, E always included, reports, WYZ §VI-A workloads, CLI."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

from ldpsynth.evaluation.comparison import wyz_figures
from ldpsynth.evaluation.comparison.harness import compare, summarize, write_report
from ldpsynth.evaluation.comparison.local_e import LocalE, joint_schema
from ldpsynth.evaluation.comparison.releases import CentralRelease
from ldpsynth.evaluation.comparison.workloads import Histogram, Workload
from ldpsynth.evaluation.primitives.guarantee import PrivacyGuarantee
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators import estimate
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.simulation.datasets import DatasetNotFound, dataset_path


class Offset:
    """A fake mechanism answering truth + a known offset per query (tests the error bookkeeping)."""

    def __init__(self, offsets: np.ndarray):
        self.offsets = offsets

    def release(self, data, workload, rng) -> CentralRelease:
        return CentralRelease("offset", workload.answers(data.counts) + self.offsets, None, data.n,
                              PrivacyGuarantee(0.0, 0.0, "none", "not private: a test double"))


def data(seed: int = 1) -> Histogram:
    rng = np.random.default_rng(seed)
    return Histogram.from_rows(rng.integers(0, 4, 5000), rng.integers(0, 5, 5000), 4, 5)


def test_errors_runs_and_e_always_included():
    offsets = np.array([0.1, -0.3, 0.2])

    def workloads(rng):
        return Workload(rng.random((3, 4, 5)), "mean")

    trials = compare(data(), workloads, {"offset": Offset(offsets)}, runs=4, rng=np.random.default_rng(2),
                     setting="s", x=1.0, epsilon=1.0, progress=lambda line: None)
    assert [(t.mechanism, t.run) for t in trials] == [(m, r) for r in range(4) for m in ("E", "offset")]
    fake = [t for t in trials if t.mechanism == "offset"]
    assert all(np.isclose(t.worst_abs, 0.3) and np.isclose(t.mean_abs, 0.2) and np.isclose(t.worst_sq, 0.09)
               for t in fake)
    rows = summarize(trials)
    assert [(r["mechanism"], r["runs"]) for r in rows] == [("E", 4), ("offset", 4)]
    with pytest.raises(ValueError, match="epsilon"):
        compare(data(), workloads, {"offset": Offset(offsets)}, runs=1, rng=np.random.default_rng(2))


def test_local_e_answers_are_the_companion_estimates_and_unbiased():
    """Seed 7, α ≈ 6e-5: the mean of 400 releases' answers is within 4 standard errors of the truth."""
    hist, rng = data(3), np.random.default_rng(7)
    workload = Workload(rng.random((6, 4, 5)), "eq10")
    truth = workload.answers(hist.counts)
    schema = joint_schema(4, 5, 1.0)
    mechanism = MechanismCard.for_schema(schema).mechanism
    state = np.random.default_rng(11)
    release = LocalE(1.0).release(hist, workload, state)
    # the same draw, answered directly by the estimator
    replay = np.random.default_rng(11)
    labels, values = hist.rows()
    stats = SufficientStatistics.from_schema(schema, labels, mechanism.perturb(values, replay))
    np.testing.assert_allclose(release.answers, estimate(workload.to_batch(schema, "label"), stats, mechanism).estimate)
    draws = np.array([LocalE(1.0).release(hist, workload, rng).answers for _ in range(400)])
    assert np.all(np.abs(draws.mean(axis=0) - truth) <= 4 * draws.std(axis=0, ddof=1) / np.sqrt(400))
    assert "ε-LDP" in str(release.guarantee)


def test_report_files(tmp_path):
    trials = compare(data(), lambda rng: Workload(rng.random((3, 4, 5)), "mean"), {}, runs=2,
                     rng=np.random.default_rng(4), setting="a", x=1.0, epsilon=1.0, progress=lambda line: None)
    trials += compare(data(), lambda rng: Workload(rng.random((3, 4, 5)), "mean"), {}, runs=2,
                      rng=np.random.default_rng(5), setting="|Q|=3", x=2.0, epsilon=1.0, progress=lambda line: None)
    paths = write_report(tmp_path, "t", trials, title="T", x_label="x")
    assert [p.name for p in paths] == ["t.csv", "t.md", "t.png"]
    text = (tmp_path / "t.md").read_text()
    assert "| setting | E |" in text and "| a |" in text and "| \\|Q\\|=3 |" in text and "ε-LDP" in text
    assert len(list(csv.DictReader((tmp_path / "t.csv").read_text(encoding="utf-8").splitlines()))) == 4
    assert (tmp_path / "t.png").stat().st_size > 5000


@pytest.mark.parametrize("h", [1, 4, 128])
def test_heterogeneous_workload_has_h_row_functions_of_range_one(h):
    workload = wyz_figures.heterogeneous_workload(h, queries=20)(np.random.default_rng(h))
    assert workload.weights.shape == (20, 128, 5) and workload.normalization == "range"
    np.testing.assert_allclose(workload.group_range, 1.0)
    for j in range(20):
        functions, counts = np.unique(workload.weights[j], axis=0, return_counts=True)
        assert len(functions) == h and np.all(counts == 128 // h)
    with pytest.raises(ValueError, match="divisor"):
        wyz_figures.heterogeneous_workload(3)


def test_database_sizes_and_slope():
    values = np.random.default_rng(0).integers(0, 5, 1000)
    small, kind = wyz_figures.database_of_size(values, 600, np.random.default_rng(1))
    big, kind_big = wyz_figures.database_of_size(values, 5000, np.random.default_rng(1))
    assert (small.n, kind, big.n, kind_big) == (600, "subsample", 5000, "bootstrap")
    assert wyz_figures.log_log_slope([1e4, 1e5, 1e6], [3e-3, 3e-4, 3e-5]) == pytest.approx(-1.0)
    assert wyz_figures.eq20_squared_bound(10_000, 1.0) == pytest.approx(
        (1 + 4 * np.exp(-1)) ** 2 / ((1 - np.exp(-1)) ** 2 * 10_000))


def test_cli_on_user_data(tmp_path):
    rng = np.random.default_rng(9)
    rows = tmp_path / "rows.csv"
    rows.write_text("movie,rating\n" + "".join(f"{m},{v}\n" for m, v in zip(rng.integers(0, 3, 2000),
                                                                              rng.integers(0, 5, 2000))))
    queries = tmp_path / "q.json"
    queries.write_text(json.dumps([{"kind": "marginal", "attributes": ["value"], "normalization": "mean"},
                                   {"kind": "grouped", "attribute": "movie", "normalization": "mean",
                                    "tables": [{"value": 1, "weights": [0, 0, 0, 1, 1]}]}]))
    done = subprocess.run([sys.executable, "-m", "ldpsynth.cli", "compare", "--data", str(rows), "--label", "movie",
                           "--value", "rating", "--queries", str(queries), "--mechanisms", "laplace,mwem",
                           "--runs", "2", "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "| rows.csv |" in done.stdout and "laplace" in done.stdout and "mwem" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "ldpsynth.cli", "compare", "--data", str(rows), "--value", "rating",
                          "--queries", str(queries), "--mechanisms", "nope"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "--mechanisms" in bad.stderr


def test_cli_fig2_quick(tmp_path):
    try:
        dataset_path("movielens-100k/u.data.gz")
    except DatasetNotFound as exc:
        pytest.skip(str(exc))
    done = subprocess.run([sys.executable, "-m", "ldpsynth.cli", "compare", "--experiment", "fig2", "--quick",
                           "--mechanisms", "laplace,mwem,mwem-subdb", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader((tmp_path / "fig2.csv").read_text(encoding="utf-8").splitlines()))
    assert {r["setting"] for r in rows} == {"h=1", "h=8", "h=128"}
    assert {r["mechanism"] for r in rows} == {"E", "laplace", "mwem", "mwem-subdb"}
    assert len(rows) == 3 * 4 * 2
