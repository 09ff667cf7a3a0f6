"""(c): log append throughput, a 3-server R=3 cluster beside one embedded R=1 server."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ldpsynth.aggregator.runtime.nats_process import EmbeddedNats
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import Layout, LogSettings, LogUnavailable
from ldpsynth.aggregator.storage.log_records import Section, card_digest, encode_reports
from ldpsynth.shared.reports import new_report_ids
from ldpsynth.simulation.local_cluster import LocalNatsCluster
from scale.common import CARD, SCHEMA, load, log
from scale.cpu import cpu_of


@dataclass
class AppendRun:
    """One timed run of part (c)."""

    log: str  # "3 servers, R=3" or "1 embedded server, R=1"
    shards: int
    records: int  # per shard
    record_reports: int
    record_bytes: int
    seconds: float
    nats_cpu: float  # CPU seconds of the log's server processes (all of them) during the run
    load: str

    @property
    def reports_per_second(self) -> float:
        return self.shards * self.records * self.record_reports / self.seconds

    @property
    def cpu_ms_per_record(self) -> float:
        return self.nats_cpu / (self.shards * self.records) * 1e3

    @property
    def megabytes_per_second(self) -> float:
        return self.shards * self.records * self.record_bytes / self.seconds / 1e6


async def _open_layout(settings: LogSettings, shards: int, name: str, wait: float = 120.0
                       ) -> tuple[ReplicatedLog, Layout]:
    """Connect and create (or open) the layout, waiting while a new cluster elects its leaders."""
    replicated = await ReplicatedLog.connect(settings, name)
    deadline = time.monotonic() + wait
    while True:
        try:
            return replicated, await replicated.open_layout(shards)
        except LogUnavailable:
            if time.monotonic() > deadline:
                await replicated.close()
                raise
            await asyncio.sleep(1.0)


async def open_log(settings: LogSettings, shards: int) -> tuple[ReplicatedLog, Layout]:
    """:func:`_open_layout` with the benchmark's collection registered."""
    replicated, layout = await _open_layout(settings, shards, "bench-append")
    await replicated.register_card(SCHEMA.name, CARD.dumps())
    return replicated, layout


async def _append_run(replicated: ReplicatedLog, layout: Layout, shards: int, records: int, record_reports: int,
                      rng: np.random.Generator, servers: Sequence[int]) -> tuple[float, int, float]:
    """Append ``records`` pre-encoded records to each of shards ``0 .. shards-1`` (one writer per
    shard, one append in flight each); ``(seconds, bytes of one record, CPU seconds of the server
    processes`` ``servers)``."""
    digest = card_digest(CARD.dumps())
    domains = {SCHEMA.name: (SCHEMA.public_domain_size, SCHEMA.private_domain_size, 0)}
    encoded: list[list[tuple[int, bytes]]] = []
    for shard in range(shards):
        last = (await replicated.state(shard)).last
        chain = []
        for k in range(records):
            sequence = last + 1 + k
            section = Section(SCHEMA.name, digest, new_report_ids(record_reports),
                              rng.integers(0, SCHEMA.public_domain_size, record_reports),
                              rng.integers(0, SCHEMA.private_domain_size, record_reports), {"bench": record_reports})
            chain.append((sequence, encode_reports(layout.id, shard, sequence, (sequence - 2) * record_reports,
                                                   [section], domains)))
        encoded.append(chain)

    async def writer(shard: int) -> None:
        for sequence, data in encoded[shard]:
            await replicated.append(shard, data, sequence - 1)

    cpu = cpu_of(servers)
    started = time.perf_counter()
    await asyncio.gather(*(writer(s) for s in range(shards)))
    return time.perf_counter() - started, len(encoded[0][0][1]), cpu_of(servers) - cpu


def append_part(args: argparse.Namespace, scratch: Path) -> list[AppendRun]:
    """(c); see benchmarks/bench_scale.py's docstring. Runs alternate between the two logs; every run is kept."""
    rng = np.random.default_rng(args.seed)
    shard_counts = (1, 4)
    log(f"(c) starting a 3-server NATS cluster and an embedded server (load average {load()}) ...")
    cluster = LocalNatsCluster(scratch / "append-r3")
    embedded = EmbeddedNats(scratch / "append-r1")
    runs: list[AppendRun] = []
    try:
        cluster.start()
        embedded.start()
        targets = [("3 servers, R=3", LogSettings(cluster.urls, replicas=3), [s.process for s in cluster.servers]),
                   ("1 embedded server, R=1", LogSettings((embedded.url,), replicas=1), [embedded.process])]

        async def measure() -> None:
            logs = [(name, *await open_log(settings, max(shard_counts)), [p.pid for p in processes if p is not None])
                    for name, settings, processes in targets]
            try:
                for repeat in range(args.repeats):
                    for shards in shard_counts:
                        for name, replicated, layout, servers in logs:
                            started_load = load()
                            seconds, size, cpu = await _append_run(replicated, layout, shards, args.append_records,
                                                                   args.record_reports, rng, servers)
                            run = AppendRun(name, shards, args.append_records, args.record_reports, size, seconds,
                                            cpu, started_load)
                            runs.append(run)
                            log(f"(c) repeat {repeat + 1}/{args.repeats}: {name}, {shards} shard(s): "
                                f"{run.reports_per_second:,.0f} reports/s (load {started_load})")
            finally:
                for _, replicated, _, _ in logs:
                    await replicated.close()

        asyncio.run(measure())
    finally:
        cluster.stop()
        embedded.stop()
    return runs
