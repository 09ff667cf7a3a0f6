"""A simulated federated deployment: an aggregator and many devices over loopback gRPC.

:func:`simulate` hosts an aggregator (a real :class:`AggregatorServer` with Ray shards, on a
free port) unless it is given a ``target``, splits the population's devices over worker
processes (:mod:`.devices`: each runs its devices as asyncio tasks through the real client
SDK), shows progress, and returns a :class:`SimulationReport`: what the devices were told
(sent, acknowledged, duplicates, retries, ε per device) and, when it hosts the aggregator, what
the aggregator stored and the companion estimates of a few queries against the truth
(:mod:`.answers`).

Consistency check in the report (:attr:`SimulationReport.consistent`): with a fresh data
directory the aggregator stores exactly one report per distinct row, and every report a device
sent was acknowledged or already held (a duplicate of what an abandoned attempt delivered).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import queue
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.formulas import Answers
from ldpsynth.shared.queries.json_form import queries_to_json
from ldpsynth.shared.queries.wire import AnswerTable
from ldpsynth.shared.validation import check_int, check_probability
from ldpsynth.simulation.answers import Workload, answer, workload
from ldpsynth.simulation.datasets import Population
from ldpsynth.simulation.devices import DeviceGroup, Faults, GroupOutcome, run_device_group


@dataclass(frozen=True)
class SimulationSettings:
    """How to run the deployment (``ldpsynth simulate`` flags)."""

    target: str | None = None
    token: str | None = None
    data_dir: Path | None = None
    shards: int | None = None
    ray_address: str | None = None
    processes: int = 2
    connections: int = 8
    batch_size: int | None = 8
    faults: Faults = Faults()
    seed: int = 1
    level: float = 0.95
    progress: bool = True
    verbose: bool = False

    def __post_init__(self) -> None:
        check_int(self.processes, "processes", 1, 256)
        check_int(self.connections, "connections", 1, 1024)
        if self.batch_size is not None:
            check_int(self.batch_size, "batch_size", 1)
        check_probability(self.level, "level")
        if self.target is not None and (self.data_dir, self.shards, self.ray_address) != (None, None, None):
            raise ValidationError("target", "no data_dir, shards or ray_address with a target (they configure the "
                                  "hosted aggregator)", "given with a target")


@dataclass(frozen=True)
class SimulationReport:
    """The outcome of one simulated deployment."""

    description: str
    target: str
    hosted: bool
    seconds: float
    outcome: GroupOutcome
    stored: int | None
    distinct_rows: int
    workload: Workload | None
    answers: Answers | AnswerTable | None

    @property
    def rows_per_second(self) -> float:
        return self.outcome.acknowledged / self.seconds if self.seconds > 0 else float("nan")

    @property
    def consistent(self) -> bool | None:
        """Every distinct row stored once and accounted for (hosted aggregator), else None.

        With a fresh data directory: stored == distinct rows == reports sent, and every report
        sent was either newly acknowledged or already held (stored by an abandoned attempt):
        acknowledged + duplicates == sent.
        """
        if self.stored is None:
            return None
        o = self.outcome
        return (self.stored == self.distinct_rows == o.sent == o.acknowledged + o.duplicates
                and not o.failures)


def _distinct_rows(population: Population) -> int:
    """Rows that get their own report: identical rows of one device share a memoized one."""
    keys, codes = population.true_codes()
    table = np.stack([population.devices, keys, codes], axis=1)
    return int(len(np.unique(table, axis=0)))


def _groups(population: Population, target: str, settings: SimulationSettings) -> list[DeviceGroup]:
    """Devices dealt round-robin over the worker processes, each with its own rows."""
    per_device = population.rows_by_device()
    name = population.schema.name
    groups = []
    for p in range(settings.processes):
        devices = tuple(d for d in range(p, len(per_device), settings.processes) if len(per_device[d]))
        rows = tuple({attr: col[per_device[d]] for attr, col in population.columns.items()} for d in devices)
        groups.append(DeviceGroup(target, name, settings.token, devices, rows, settings.connections,
                                  settings.batch_size, settings.faults, settings.seed))
    return [g for g in groups if g.devices]


def _progress_printer(total: int, updates: queue.Queue[int | None], enabled: bool) -> threading.Thread:
    """A thread that shows rows submitted (tqdm on stderr) until it reads ``None``."""
    def run() -> None:
        from tqdm import tqdm

        with tqdm(total=total, unit="row", desc="devices submitting", disable=not enabled, mininterval=0.5,
                  smoothing=0.1) as bar:
            while (done := updates.get()) is not None:
                bar.update(done)

    thread = threading.Thread(target=run, name="simulation-progress", daemon=True)
    thread.start()
    return thread


async def _run_devices(population: Population, target: str, settings: SimulationSettings) -> GroupOutcome:
    groups = _groups(population, target, settings)
    context = multiprocessing.get_context("spawn")  # grpc and Ray state must not be forked
    with context.Manager() as manager:
        updates = manager.Queue()
        printer = _progress_printer(len(population), updates, settings.progress)
        loop = asyncio.get_running_loop()
        try:
            with ProcessPoolExecutor(max_workers=len(groups), mp_context=context) as pool:
                outcomes = await asyncio.gather(*(loop.run_in_executor(pool, run_device_group, g, updates)
                                                  for g in groups))
        finally:
            updates.put(None)
            printer.join()
    total = GroupOutcome()
    for outcome in outcomes:
        total.add(outcome)
    return total


async def simulate(population: Population, settings: SimulationSettings = SimulationSettings()) -> SimulationReport:
    """Run the deployment; see the module docstring."""
    from ldpsynth.aggregator.ingress.server import AggregatorServer
    from ldpsynth.aggregator.runtime.config import ServerConfig

    distinct = _distinct_rows(population)
    if settings.target is not None:
        started = time.perf_counter()
        outcome = await _run_devices(population, settings.target, settings)
        seconds = time.perf_counter() - started
        work = workload(population, settings.seed)
        remote = await asyncio.to_thread(_remote_answers, population, work, settings.target, settings)
        shown = remote if remote is not None and remote.n == distinct else None
        return SimulationReport(population.description, settings.target, False, seconds, outcome, None, distinct,
                                work if shown is not None else None, shown)
    card = MechanismCard.for_schema(population.schema)
    with tempfile.TemporaryDirectory(prefix="ldpsynth-sim-") as scratch:
        data_dir = settings.data_dir if settings.data_dir is not None else Path(scratch)
        server = AggregatorServer(ServerConfig(data_dir=data_dir, collections=(card,), shards=settings.shards,
                                               ray_address=settings.ray_address, verbose=settings.verbose))
        target = await server.start()
        try:
            started = time.perf_counter()
            outcome = await _run_devices(population, target, settings)
            seconds = time.perf_counter() - started
            stats = await server.statistics(population.schema.name)
        finally:
            await server.stop()
    work = workload(population, settings.seed)
    answers = answer(work, population, stats, card.mechanism_e, settings.level) if stats.n else None
    return SimulationReport(population.description, target, True, seconds, outcome, stats.n, distinct, work,
                            answers)


def _remote_answers(population: Population, work: Workload, target: str,
                    settings: SimulationSettings) -> AnswerTable | None:
    """The demo workload answered by the remote aggregator's query service (None if it refuses, e.g.
    without the query role). The caller shows them only when the remote collection holds exactly this
    population's rows: otherwise they do not estimate this population's truth."""
    from ldpsynth.client.errors import QueryError
    from ldpsynth.client.query import QueryClient

    try:
        with QueryClient(target, token=settings.token) as client:
            return client.estimate(population.schema.name, queries=queries_to_json(work.queries),
                                   level=settings.level)
    except (QueryError, ValidationError):  # refused, or the workload does not fit the server's message limit
        return None


def default_processes() -> int:
    """Worker processes for the devices: the usable CPUs, at most 4."""
    return max(1, min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))
