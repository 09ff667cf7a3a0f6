"""Predicted standard errors (ldpsynth plan, prior = the rows) agree with the empirical standard deviation
over seeded simulated releases, within the Monte Carlo error: experiments/plan_agreement.py's z statistic
(empirical minus predicted variance over its delta-method standard error) at α = 1e-4 per query, 400
releases (about 60 queries: every kind, |D| 2-128, ε 0.5-4; synthetic data always, MovieLens and Adult
when $LDPSYNTH_DATA or ../shared/data holds them, else skipped with the path)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from statistics import NormalDist

import pytest

from ldpsynth.simulation.datasets import DatasetNotFound

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "plan_agreement.py"


def load_script():
    spec = importlib.util.spec_from_file_location("plan_agreement", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


AGREEMENT = load_script()


@pytest.mark.slow
@pytest.mark.parametrize("make", AGREEMENT.CONFIGS, ids=range(len(AGREEMENT.CONFIGS)))
def test_predicted_standard_errors_agree_with_simulated_releases(make):
    try:
        config = make()
    except DatasetNotFound as exc:
        pytest.skip(str(exc))
    limit = NormalDist().inv_cdf(1 - AGREEMENT.ALPHA / 2)
    for record in AGREEMENT.agreement(config, releases=400, seed=2):
        assert abs(record["z"]) < limit, record


def test_the_experiment_writes_its_tables(tmp_path, monkeypatch):
    monkeypatch.setattr(AGREEMENT, "CONFIGS", (AGREEMENT.synthetic_dense,))
    assert AGREEMENT.main(["--releases", "50", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "agreement.csv").read_text().startswith("config,domain_size,epsilon,rows,query")
    assert "synthetic dense" in (tmp_path / "agreement.md").read_text()
