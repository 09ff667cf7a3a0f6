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

Behind a shuffler (``settings.shuffle``: :class:`ShuffleTier`): the hosted collection gets a shuffle
block (δ, the minimum batch, the most rows a device reports) and a shuffler process between the
devices and the aggregator (``ldpsynth.shuffler``, in this process on 127.0.0.1; or a remote one),
the devices seal every report to the aggregator's key, and the report states the guarantees of what
was stored per party (:mod:`ldpsynth.shared.guarantees`): ε0 per report against everyone and the central
(ε, δ) at the pool floor against analysts and (independent shuffler) the aggregator's operator. The
shuffler's pools (one per public key) leave only at their threshold, so the population's last reports may
wait for traffic that never comes: they are counted as *waiting*, and the check becomes: every
acknowledged report stored once, nothing stored that was not sent.
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
from typing import TYPE_CHECKING

import numpy as np

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.formulas import Answers
from ldpsynth.shared.guarantees import RELEASE, Guarantees, key_names, of_card, withhold
from ldpsynth.shared.queries.json_form import queries_to_json
from ldpsynth.shared.queries.wire import AnswerTable
from ldpsynth.shared.schema import Schema, ShuffleSpec
from ldpsynth.shared.validation import check_int, check_probability, check_seconds
from ldpsynth.simulation.answers import Workload, answer, workload
from ldpsynth.simulation.datasets import Population
from ldpsynth.simulation.devices import DeviceGroup, Faults, GroupOutcome, run_device_group

if TYPE_CHECKING:
    from ldpsynth.shuffler.server import ShufflerServer


@dataclass(frozen=True)
class ShuffleTier:
    """A shuffler between the devices and the aggregator (``ldpsynth simulate --shuffler``).

    ``address``: a running shuffler's (with a ``target``), or None to host one with ``threshold`` and
    ``max_wait`` (its ``--threshold``, ``--max-wait``); ``delta`` and ``min_batch`` go into the hosted
    collection's shuffle block (docs/contract.md §2).
    """

    address: str | None = None
    threshold: int = 100
    max_wait: float = 2.0
    delta: float = 1e-9
    min_batch: int = 100

    def __post_init__(self) -> None:
        check_int(self.threshold, "threshold", 1)
        check_seconds(self.max_wait, "max_wait")
        check_int(self.min_batch, "min_batch", 1)

    def spec(self, rows_per_device: int) -> ShuffleSpec:
        """The hosted collection's shuffle block."""
        return ShuffleSpec(self.delta, self.min_batch, rows_per_device, "independent")


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
    shuffle: ShuffleTier | None = None

    def __post_init__(self) -> None:
        check_int(self.processes, "processes", 1, 256)
        check_int(self.connections, "connections", 1, 1024)
        if self.batch_size is not None:
            check_int(self.batch_size, "batch_size", 1)
        check_probability(self.level, "level")
        if self.target is not None and (self.data_dir, self.shards, self.ray_address) != (None, None, None):
            raise ValidationError("target", "no data_dir, shards or ray_address with a target (they configure the "
                                  "hosted aggregator)", "given with a target")
        if self.shuffle is not None and (self.shuffle.address is None) != (self.target is None):
            raise ValidationError("shuffler", "a shuffler's address with a target, none without (one is hosted)",
                                  "given without a target" if self.target is None else "no address with a target")


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
    guarantees: Guarantees | None = None
    withheld: str = ""

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
        if self.guarantees is not None:  # behind a shuffler: the last pool's reports may wait
            return (o.acknowledged <= self.stored <= o.acknowledged + o.waiting_reports
                    and self.stored + o.waiting_reports >= self.distinct_rows >= self.stored and not o.failures)
        return (self.stored == self.distinct_rows == o.sent == o.acknowledged + o.duplicates
                and not o.failures)


def _distinct_rows(population: Population) -> int:
    """Rows that get their own report: identical rows of one device share a memoized one."""
    keys, codes = population.true_codes()
    table = np.stack([population.devices, keys, codes], axis=1)
    return int(len(np.unique(table, axis=0)))


def device_groups(name: str, columns: dict[str, np.ndarray], devices: np.ndarray, target: str,
                  settings: SimulationSettings, shuffler: str | None = None, *, wide: bool = False
                  ) -> list[DeviceGroup]:
    """Devices dealt round-robin over the worker processes, each with its own rows (``devices[i]``: the
    0-based device of row i; ``wide``: ``name`` is a wide collection's)."""
    order = np.argsort(devices, kind="stable")
    count = int(devices.max()) + 1 if len(devices) else 0
    bounds = np.searchsorted(devices[order], np.arange(count + 1))
    groups = []
    for p in range(settings.processes):
        mine = tuple(d for d in range(p, count, settings.processes) if bounds[d + 1] > bounds[d])
        rows = tuple({attr: col[order[bounds[d]:bounds[d + 1]]] for attr, col in columns.items()} for d in mine)
        groups.append(DeviceGroup(target, name, settings.token, mine, rows, settings.connections,
                                  settings.batch_size, settings.faults, settings.seed, shuffler, wide))
    return [g for g in groups if g.devices]


def _groups(population: Population, target: str, settings: SimulationSettings,
            shuffler: str | None = None) -> list[DeviceGroup]:
    return device_groups(population.schema.name, population.columns, population.devices, target, settings, shuffler)


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


async def _run_devices(population: Population, target: str, settings: SimulationSettings,
                       shuffler: str | None = None) -> GroupOutcome:
    return await run_groups(_groups(population, target, settings, shuffler), len(population), settings.progress)


async def run_groups(groups: list[DeviceGroup], rows: int, progress: bool) -> GroupOutcome:
    """Run each group of devices in its own worker process (spawned) with a progress bar over ``rows``; the
    groups' outcomes summed."""
    context = multiprocessing.get_context("spawn")  # grpc and Ray state must not be forked
    with context.Manager() as manager:
        updates = manager.Queue()
        printer = _progress_printer(rows, updates, progress)
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
    shuffle = settings.shuffle
    if settings.target is not None:
        started = time.perf_counter()
        outcome = await _run_devices(population, settings.target, settings, shuffle.address if shuffle else None)
        seconds = time.perf_counter() - started
        work = workload(population, settings.seed)
        remote = await asyncio.to_thread(_remote_answers, population, work, settings.target, settings)
        shown = remote if remote is not None and remote.n == distinct else None
        return SimulationReport(population.description, settings.target, False, seconds, outcome, None, distinct,
                                work if shown is not None else None, shown)
    schema = population.schema
    if shuffle is not None:
        most = max((len(rows) for rows in population.rows_by_device()), default=1)
        schema = Schema(schema.name, schema.epsilon, schema.attributes, shuffle.spec(max(most, 1)))
    card = MechanismCard.for_schema(schema)
    with tempfile.TemporaryDirectory(prefix="ldpsynth-sim-") as scratch:
        data_dir = settings.data_dir if settings.data_dir is not None else Path(scratch)
        server = AggregatorServer(ServerConfig(data_dir=data_dir, collections=(card,), shards=settings.shards,
                                               ray_address=settings.ray_address, verbose=settings.verbose))
        target = await server.start()
        shuffler = None
        try:
            if shuffle is not None:
                shuffler = await _host_shuffler(target, shuffle)
            started = time.perf_counter()
            outcome = await _run_devices(population, target, settings, shuffler.address if shuffler else None)
            seconds = time.perf_counter() - started
            stats = await server.statistics(population.schema.name)
        finally:
            if shuffler is not None:
                await shuffler.stop(0)
            await server.stop()
    work = workload(population, settings.seed)
    answers = answer(work, population, stats, card.mechanism_e, settings.level) if stats.n else None
    guarantees, withheld = None, ""
    if shuffle is not None and stats.n:
        rule = withhold(schema.minimum_batch[0], stats.group_sizes)
        guarantees = of_card(card, RELEASE, key_names(schema, stats.present_keys[rule.kept]),
                             stats.group_sizes[rule.kept], withheld=rule)
        if rule.groups:  # the query service would leave them out, and the demo's truth is over every row
            answers, withheld = None, (f"{rule.groups} public-key groups ({rule.reports} reports) are below the "
                                       f"collection's minimum batch of {schema.minimum_batch[0]}: the query service "
                                       "leaves them out of every answer, so no answer is set against the truth")
    return SimulationReport(population.description, target, True, seconds, outcome, stats.n, distinct, work,
                            answers, guarantees, withheld)


async def _host_shuffler(target: str, tier: ShuffleTier) -> ShufflerServer:
    """A shuffler on a free loopback port in front of ``target`` (no tokens: the simulation's loopback, its devices
    anonymous; the simulation knows every device is honest)."""
    from ldpsynth.shuffler.config import ShufflerConfig
    from ldpsynth.shuffler.server import ShufflerServer

    shuffler = ShufflerServer(ShufflerConfig(listen="127.0.0.1:0", aggregator=target, token=None,
                                             threshold=tier.threshold, max_wait=tier.max_wait,
                                             anonymous_devices=True))
    await shuffler.start()
    return shuffler


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
