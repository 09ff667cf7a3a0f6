"""(a) and (b): one measured client run against the bare server or the replicas, and what is read from runs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ldpsynth.aggregator.runtime.verify import Verification
from scale.client import Drive, merge_outcomes, split_drive
from scale.common import CLIENT_TIMEOUT, SCRIPT, LineReader, load
from scale.cpu import BARE, NATS, RAY, REPLICA, WORKERS, CpuSnapshot, Roles


@dataclass
class Run:
    """One measured client run."""

    replicas: int  # how many replicas were driven (0: the bare server)
    shape: str  # "one connection per stream", "long-lived connections"
    streams: int
    reports: int
    seconds: float
    cpu: dict[str, float]  # CPU seconds per role over the measured streams
    idle: dict[str, float]  # CPU seconds per second per role while idle
    accepted: int  # reports acknowledged as new, warm-up included
    p50_ms: float
    p99_ms: float
    errors: list[str]
    load: str

    @property
    def server(self) -> str:
        return server_name(self.replicas)

    def server_cpu(self, roles: Sequence[str]) -> float:
        return sum(self.cpu.get(r, 0.0) for r in roles)

    @property
    def total_reports(self) -> int:
        return self.streams * self.reports

    @property
    def reports_per_second(self) -> float:
        return self.total_reports / self.seconds


CONNECT_EACH, LONG_LIVED = "one connection per stream", "long-lived connections"


def server_name(replicas: int) -> str:
    """``bare`` (0), ``1 replica``, ``N replicas``."""
    return "bare" if replicas == 0 else f"{replicas} replica{'s' if replicas > 1 else ''}"


def _start_client(drive: Drive, log_path: Path) -> subprocess.Popen[bytes]:
    with open(log_path, "ab") as err:
        return subprocess.Popen([sys.executable, str(SCRIPT), "--drive", json.dumps(asdict(drive))],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)


def client_run(replicas: int, drive: Drive, clients: int, roles: Roles, idle_seconds: float, scratch: Path) -> Run:
    """Start ``clients`` client processes sharing ``drive``, read the idle CPU once all are warm, send
    the go to all, read the CPU they caused up to the last one's last ack (theirs not counted)."""
    log_path = scratch / "client.log"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for part in split_drive(drive, clients):
            procs.append(_start_client(part, log_path))
        readers = [LineReader(proc, log_path) for proc in procs]
        for reader in readers:
            reader.next(CLIENT_TIMEOUT, "client warm-up")
        counted = Roles(roles.named, frozenset(proc.pid for proc in procs))
        start_load = load()
        idle_from = CpuSnapshot.take(counted)
        time.sleep(idle_seconds)
        before = CpuSnapshot.take(counted)
        go_at = time.monotonic()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
        outcome = merge_outcomes([reader.next(CLIENT_TIMEOUT, "client run") for reader in readers], go_at)
        after = CpuSnapshot.take(counted)
        for proc in procs:
            proc.wait(60)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    idle = {k: v / (before.at - idle_from.at) for k, v in before.since(idle_from).items()}
    return Run(replicas, CONNECT_EACH if drive.connect_each else LONG_LIVED, outcome.streams, drive.reports,
               outcome.seconds, after.since(before), idle, outcome.accepted, outcome.p50_ms, outcome.p99_ms,
               outcome.errors, start_load)


@dataclass
class ClusterResults:
    """Parts (a) and (b)."""

    runs: list[Run] = field(default_factory=list)
    verification: Verification | None = None
    acknowledged: int = 0
    load: str = ""
    shards: int = 0
    worker_nodes: int = 0
    replicas: int = 0
    start_failures: list[str] = field(default_factory=list)

    def best(self, replicas: int, shape: str, key: Callable[[Run], float]) -> Run:
        """The run driving ``replicas`` replicas (0: the bare server) in ``shape`` with the least ``key``."""
        return min((r for r in self.runs if r.replicas == replicas and r.shape == shape), key=key)

    @property
    def shapes(self) -> list[str]:
        """The connection shapes that were run, in order."""
        return list(dict.fromkeys(r.shape for r in self.runs))


def driven_roles(run: Run) -> list[str]:
    """The roles of the server processes ``run`` drove: the bare server or its replicas."""
    return [BARE] if run.replicas == 0 else [f"{REPLICA} {i}" for i in range(1, run.replicas + 1)]


def per_stream_cpu(run: Run) -> float:
    """CPU seconds per stream of the server that was driven (the replica(s) or the bare server)."""
    return run.server_cpu(driven_roles(run)) / run.streams


def system_cpu(run: Run) -> float:
    """CPU seconds of the whole system during ``run``: the driven server(s), shard workers, NATS, Ray."""
    return run.server_cpu([*driven_roles(run), WORKERS, NATS, RAY])


def slowness(run: Run) -> float:
    """Seconds per report (the least is the best run of (b))."""
    return 1.0 / run.reports_per_second
