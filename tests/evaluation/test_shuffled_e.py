"""``ldpsynth compare``'s E behind a shuffler (issue 27 item 3): E at the local ε0 whose central guarantee is the
central mechanisms' ε, labelled (ε, δ)-DP beside the pure ε-DP rows; on MovieLens (skipped without the data)."""

from __future__ import annotations

import csv
import subprocess
import sys

import numpy as np
import pytest

from ldpsynth.evaluation.comparison import wyz_figures
from ldpsynth.evaluation.comparison.harness import compare
from ldpsynth.evaluation.comparison.shuffled_e import ShuffledE
from ldpsynth.evaluation.comparison.workloads import Histogram
from ldpsynth.evaluation.primitives.guarantee import Neighbours
from ldpsynth.shared.amplification import central_epsilon, local_epsilon_for
from ldpsynth.shared.errors import ValidationError
from ldpsynth.simulation.datasets import DatasetNotFound, dataset_path


def data() -> Histogram:
    rng = np.random.default_rng(5)
    labels = np.repeat(np.arange(4), [3000, 2500, 2000, 1500])
    return Histogram.from_rows(labels, rng.integers(0, 5, len(labels)), 4, 5)


def test_shuffled_e_runs_at_the_local_epsilon_the_accountant_gives_for_the_central_one():
    hist = data()
    workload = wyz_figures.heterogeneous_workload(2, 50, groups=4)(np.random.default_rng(1))
    public = ShuffledE(1.0, 1e-9).release(hist, workload, np.random.default_rng(2))
    wanted = local_epsilon_for(1.0, 5, 1500, 1e-9)                               # the smallest label group
    assert public.details["epsilon0"] <= wanted and public.details["epsilon0"] == pytest.approx(wanted, rel=1e-9)
    assert central_epsilon(public.details["epsilon0"], 5, 1500, 1e-9) <= 1.0
    g = public.guarantee
    assert (g.epsilon, g.delta, g.neighbours) == (1.0, 1e-9, Neighbours.REPLACE_ONE_VALUE)
    assert str(g).startswith("(1, 1e-09)-DP") and "n = 1,500" in g.statement
    joint = ShuffledE(1.0, 1e-9, private_label=True).release(hist, workload, np.random.default_rng(2))
    assert joint.details["epsilon0"] == pytest.approx(local_epsilon_for(1.0, 20, 9000, 1e-9), rel=1e-9)
    assert joint.guarantee.neighbours == Neighbours.REPLACE_ONE_ROW
    truth = workload.answers(hist.counts)
    for release in (public, joint):
        assert np.abs(release.answers - truth).max() < 0.1
    with pytest.raises(ValidationError, match="delta"):
        ShuffledE(1.0, 0.0)


def test_compare_rows_label_pure_and_approximate_guarantees():
    mechanisms = wyz_figures.mechanisms(["laplace", "e-shuffled", "e-shuffled-private-label"], 1.0, delta=1e-9)
    trials = compare(data(), wyz_figures.heterogeneous_workload(2, 20, groups=4), mechanisms, runs=2,
                     rng=np.random.default_rng(3), epsilon=1.0, progress=lambda line: None)
    kinds = {t.mechanism: t.guarantee.split(" under ")[0] for t in trials}
    assert kinds == {"E": "1-DP", "laplace": "1-DP", "e-shuffled": "(1, 1e-09)-DP",
                     "e-shuffled-private-label": "(1, 1e-09)-DP"}
    assert "local" in next(t.guarantee for t in trials if t.mechanism == "E")


def test_cli_fig2_quick_with_e_behind_a_shuffler(tmp_path):
    try:
        dataset_path("movielens-100k/u.data.gz")
    except DatasetNotFound as exc:
        pytest.skip(str(exc))
    done = subprocess.run([sys.executable, "-m", "ldpsynth.cli", "compare", "--experiment", "fig2", "--quick",
                           "--runs", "1", "--mechanisms", "laplace,e-shuffled", "--delta", "1e-6",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader((tmp_path / "fig2.csv").read_text(encoding="utf-8").splitlines()))
    assert {r["mechanism"] for r in rows} == {"E", "laplace", "e-shuffled"}
    shuffled = [r for r in rows if r["mechanism"] == "e-shuffled"]
    assert all(r["guarantee"].startswith("(1, 1e-06)-DP") for r in shuffled)
    assert "Not the same promise" in (tmp_path / "fig2.md").read_text(encoding="utf-8")
