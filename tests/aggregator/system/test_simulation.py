"""The simulated federated deployment (``ldpsynth simulate``): devices → E → gRPC → shards → estimates."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys

import numpy as np
import pytest

from ldpsynth.aggregator.ingress.server import AggregatorServer
from ldpsynth.aggregator.runtime.config import ServerConfig
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.simulation.answers import answer, workload
from ldpsynth.simulation.datasets import Population, graph_schema, synthetic_ratings
from ldpsynth.simulation.devices import Faults, device_budget
from ldpsynth.simulation.federation import SimulationSettings, simulate


def small_population() -> Population:
    return synthetic_ratings(devices=120, movies=20, ratings_per_device=5, seed=3)


@pytest.mark.timeout(300)
def test_hosted_run_with_drops_stores_every_row_once(ray_address, tmp_path, caplog):
    # Every device abandons its first submission mid-stream (the stream is cancelled; this used
    # to hang in the client's writer) and submits again from its ledger's memo.
    caplog.set_level(logging.ERROR, logger="asyncio")
    population = small_population()
    settings = SimulationSettings(data_dir=tmp_path / "store", shards=2, ray_address=ray_address, processes=1,
                                  connections=4, batch_size=2, faults=Faults(drop_rate=1.0, drop_after=0.02),
                                  progress=False)
    report = asyncio.run(simulate(population, settings))
    o = report.outcome
    assert o.failures == []
    assert (o.devices, o.drops, o.rows) == (120, 120, 600)
    assert report.stored == report.distinct_rows == o.sent == 600
    assert o.acknowledged + o.duplicates == 600
    assert o.memoized > 0  # the second submissions reused the memoized reports (same ids)
    assert report.consistent is True
    assert o.epsilon_per_device == pytest.approx([5.0] * 120)  # charged once per row, not per attempt
    assert report.answers is not None and len(report.answers) == len(report.workload.truth)
    # The replica observed every abandoned stream's last read (nothing "never retrieved" in its loop).
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]


@pytest.mark.timeout(300)
def test_target_mode_submits_to_a_running_aggregator(ray_address, tmp_path):
    population = small_population()
    card = MechanismCard.for_schema(population.schema)

    async def run() -> tuple[object, int]:
        server = AggregatorServer(ServerConfig(data_dir=tmp_path, collections=(card,), shards=1,
                                               ray_address=ray_address))
        target = await server.start()
        try:
            report = await simulate(population, SimulationSettings(target=target, processes=2, progress=False))
            return report, (await server.statistics(card.schema.name)).n
        finally:
            await server.stop()

    report, stored = asyncio.run(run())
    assert report.stored is None and report.consistent is None
    assert report.outcome.acknowledged == stored == 600
    # the remote aggregator answered the demo workload through its query service
    assert report.answers.n == 600 and len(report.answers) == len(report.workload.truth)
    again = asyncio.run(run())[0]        # 1,200 rows now: answers would not estimate this population
    assert again.answers is None and again.workload is None
    with pytest.raises(ValueError, match="target"):
        SimulationSettings(target="localhost:1", data_dir=tmp_path)


def test_device_budget_admits_exactly_its_rows():
    from fractions import Fraction

    for rows, eps in [(1, 1.0), (10, 0.1), (943, 0.7), (4039, 1.0)]:
        budget = Fraction(device_budget(rows, eps))
        assert rows * Fraction(MechanismE(eps, 5).epsilon) <= budget < (rows + 1) * Fraction(MechanismE(eps, 5).epsilon)


@pytest.mark.parametrize("kind", ["ratings", "graph"])
def test_workload_truth_matches_estimates_when_e_is_nearly_the_identity(kind):
    # With eps = 30, E keeps the true value except with probability ~e^-30: the debiased answers on
    # the true rows equal the independently computed truth (checks both, and the query wording).
    if kind == "ratings":
        population = synthetic_ratings(devices=300, movies=15, ratings_per_device=4, epsilon=30.0)
    else:
        rng = np.random.default_rng(5)
        v = 40
        edge = (rng.random((v, v)) < 0.2).astype(np.int64)
        i, j = np.divmod(np.arange(v * v), v)
        population = Population(graph_schema(30.0, v), {"i": i, "j": j, "edge": edge.reshape(-1)}, i, "random graph")
    work = workload(population)
    keys, codes = population.true_codes()
    stats = SufficientStatistics.from_schema(population.schema, keys, codes)
    answers = answer(work, population, stats, MechanismCard.for_schema(population.schema).mechanism)
    np.testing.assert_allclose(answers.estimate, work.truth, rtol=1e-9, atol=1e-9)


@pytest.mark.timeout(300)
def test_cli_prints_the_summary_and_writes_the_tables(ray_address, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "ldpsynth.cli", "simulate", "--devices", "60", "--movies", "10",
         "--ratings-per-device", "3", "--processes", "1", "--no-progress", "--ray-address", ray_address,
         "--out", str(out)],
        capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Debiased answers" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stored"] == summary["acknowledged"] + summary["duplicates"] == 180
    assert summary["consistent"] is True
    assert len(summary["answers"]) == 8
    assert all(r["predicted_halfwidth"] > 0 and r["achieved_halfwidth"] > 0 for r in summary["answers"])
    assert "± predicted | ± achieved" in proc.stdout
    assert (out / "answers.csv").read_text().count("\n") == 9
    assert (out / "answers.md").read_text().startswith("| query |")


def test_cli_bad_flag_names_it(capsys):
    from ldpsynth.cli import main

    assert main.main(["simulate", "--drop-rate", "1.5"]) == 2
    assert "--drop-rate" in capsys.readouterr().err


@pytest.mark.timeout(300)
def test_behind_a_hosted_shuffler_what_is_stored_was_acknowledged_and_both_guarantees_are_stated(ray_address,
                                                                                                 tmp_path):
    """--shuffler: 1,200 devices x 1 rating of 2 movies at ε0 = 2, threshold and min_batch 200. Every report
    is either stored (acknowledged once) or waits in a pool below the threshold (pools are per movie); the
    central ε is the accountant's at the pool floor (200 less one report assumed injected), below ε0."""
    from ldpsynth.shared.guarantees import central_at
    from ldpsynth.simulation.federation import ShuffleTier

    population = synthetic_ratings(devices=1200, movies=2, ratings_per_device=1, epsilon=2.0, seed=5)
    settings = SimulationSettings(data_dir=tmp_path / "store", shards=1, ray_address=ray_address, processes=1,
                                  connections=4, faults=Faults(drop_rate=0.05, drop_after=0.02), progress=False,
                                  shuffle=ShuffleTier(threshold=200, max_wait=1.0, min_batch=200))
    report = asyncio.run(simulate(population, settings))
    o = report.outcome
    assert o.failures == [] and o.devices + o.waiting == 1200
    assert report.stored is not None and report.stored >= 1200 - 2 * 250  # the last pool: < 250 reports wait
    assert o.acknowledged <= report.stored <= o.acknowledged + o.waiting_reports
    assert report.stored + o.waiting_reports >= report.distinct_rows == 1200 and report.consistent is True
    g = report.guarantees
    assert g is not None and g.local_epsilon <= 2.0 and g.analysts.delta <= 1e-9
    assert g.analysts.epsilon == pytest.approx(central_at(g.local_epsilon, 5, 199, 1e-9, 1), rel=1e-9)
    assert g.analysts.epsilon < g.local_epsilon and g.evaluated_at == 199
    assert report.answers is not None


def test_a_shuffler_address_needs_a_target_and_a_target_a_shuffler_address():
    from ldpsynth.shared.errors import ValidationError
    from ldpsynth.simulation.federation import ShuffleTier

    with pytest.raises(ValidationError, match="shuffler"):
        SimulationSettings(shuffle=ShuffleTier("127.0.0.1:1"))
    with pytest.raises(ValidationError, match="shuffler"):
        SimulationSettings(target="127.0.0.1:1", shuffle=ShuffleTier())
