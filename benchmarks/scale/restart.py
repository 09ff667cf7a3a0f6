"""(d): shard worker restart time at growing stored sizes, each fill and restart in a process that SIGKILLs itself."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ldpsynth.aggregator.runtime.nats_process import EmbeddedNats
from ldpsynth.aggregator.storage.log_layout import Layout, LogSettings
from ldpsynth.aggregator.storage.segments import Segment
from ldpsynth.aggregator.storage.shard_worker import ShardWorker, WorkerSpec
from ldpsynth.shared.reports import new_report_ids
from scale.appends import open_log
from scale.common import CLIENT_TIMEOUT, SCHEMA, SCRIPT, LineReader, load, log

#: (d) commits: this many segments of SEGMENT_REPORTS reports per call (one group commit).
SEGMENT_REPORTS = 1 << 16
SEGMENTS_PER_COMMIT = 4


async def worker_run(job: dict[str, Any]) -> None:
    """Start a shard worker (timed), fill it up to ``fill_to`` reports, print what it found, and die
    by SIGKILL: no ``close``, no final snapshot, a snapshot being written is cut short."""
    layout = Layout(*job["layout"])
    spec = WorkerSpec(layout, 0, LogSettings((job["url"],), replicas=1), job["directory"])
    worker = ShardWorker(spec)
    started = time.perf_counter()
    await worker.start()
    seconds = time.perf_counter() - started
    status = await worker.status()
    stored = sum(status.rows.values())
    rng = np.random.default_rng()
    next_report = 0.0
    while stored < job["fill_to"]:
        segments = []
        for _ in range(SEGMENTS_PER_COMMIT):
            n = min(SEGMENT_REPORTS, job["fill_to"] - stored - sum(map(len, segments)))
            if n > 0:
                segments.append(Segment(SCHEMA.name, "bench", new_report_ids(n),
                                        rng.integers(0, SCHEMA.public_domain_size, n),
                                        rng.integers(0, SCHEMA.private_domain_size, n)))
        outcome = await worker.commit(segments)
        stored += sum(accepted for accepted, _ in outcome.results)
        if stored >= next_report:
            print(json.dumps({"event": "progress", "stored": stored}), flush=True)
            next_report = stored + job["fill_to"] / 10
    print(json.dumps({"event": "done", "start_seconds": seconds, "status": dataclasses.asdict(status),
                      "stored": stored}), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class Restart:
    """One stored size of part (d)."""

    stored: int
    seconds: list[float]
    replayed: int
    replayed_reports: int
    snapshot_offset: int
    offset: int
    runs: int
    fill_seconds: float
    load: str


def _worker_process(job: dict[str, Any], what: str, scratch: Path) -> dict[str, Any]:
    with open(scratch / "worker.log", "ab") as err:
        proc = subprocess.Popen([sys.executable, str(SCRIPT), "--worker-run", json.dumps(job)],
                                stdout=subprocess.PIPE, stderr=err)
    lines = LineReader(proc, scratch / "worker.log")
    while True:
        event = lines.next(CLIENT_TIMEOUT, what)
        if event["event"] == "done":
            break
        log(f"(d) {what}: {event['stored']:,} reports stored")
    code = proc.wait(60)
    if code != -signal.SIGKILL:
        raise RuntimeError(f"{what}: the worker process exited with status {code}, not by SIGKILL; "
                           f"{lines.tail()}")
    return event


def restart_part(args: argparse.Namespace, scratch: Path) -> list[Restart]:
    """(d); see benchmarks/bench_scale.py's docstring."""
    log(f"(d) starting an embedded NATS server for one shard (load average {load()}) ...")
    embedded = EmbeddedNats(scratch / "restart-log")
    results: list[Restart] = []
    try:
        url = embedded.start()

        async def open_layout() -> Layout:
            replicated, layout = await open_log(LogSettings((url,), replicas=1), 1)
            await replicated.close()
            return layout

        layout = asyncio.run(open_layout())
        job = {"url": url, "layout": [layout.id, layout.shards, layout.replicas],
               "directory": str(scratch / "restart-worker")}
        for size in args.restart_sizes:
            started = time.perf_counter()
            _worker_process({**job, "fill_to": size}, f"fill to {size:,}", scratch)
            fill_seconds = time.perf_counter() - started
            size_load = load()
            restarts = [_worker_process({**job, "fill_to": 0}, f"restart at {size:,}", scratch)
                        for _ in range(args.restart_repeats)]
            status = restarts[-1]["status"]
            stored = sum(status["rows"].values())
            if stored != size:
                raise RuntimeError(f"(d) the restarted worker holds {stored:,} reports, {size:,} were stored")
            result = Restart(size, [r["start_seconds"] for r in restarts], int(status["replayed"]),
                             int(status["memory_ids"]), int(status["snapshot_offset"]), int(status["offset"]),
                             int(status["runs"]), fill_seconds, size_load)
            results.append(result)
            log(f"(d) {size:,} stored: restart {min(result.seconds):.3f} s, {result.replayed} records "
                f"({result.replayed_reports:,} reports) replayed (load {size_load})")
    finally:
        embedded.stop()
    return results
