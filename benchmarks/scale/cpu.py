"""CPU accounting: utime + stime of the benchmark's descendant processes, each classified by role."""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ldpsynth.aggregator.runtime.reaper import descendants

CLK_TCK = os.sysconf("SC_CLK_TCK")
#: The roles CPU is counted by (a replica's role is numbered: "replica 1", ...).
REPLICA, BARE, WORKERS, NATS, RAY = "replica", "bare", "shard workers", "NATS", "Ray system"


@dataclass(frozen=True)
class Roles:
    """What the benchmark's descendants are: ``named`` pids (replicas, the bare server) by role;
    ``exclude``: pids not counted (the load client)."""

    named: dict[int, str]
    exclude: frozenset[int] = frozenset()


def proc_stat(pid: int) -> tuple[int, float] | None:
    """``(start time, utime + stime in seconds)`` of ``pid`` (``None``: gone)."""
    try:
        fields = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[19]), (int(fields[11]) + int(fields[12])) / CLK_TCK


def _role(pid: int) -> str:
    """The role of a process that is not named: NATS, a shard worker, or part of Ray's runtime."""
    try:
        comm = (Path("/proc") / str(pid) / "comm").read_text().strip()
        cmdline = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return RAY
    if comm == "nats-server":
        return NATS
    if cmdline.startswith("ray::_WorkerActor"):
        return WORKERS
    return RAY


@dataclass(frozen=True)
class CpuSnapshot:
    """CPU seconds of every counted process at one moment: ``{pid: (start, role, seconds)}``."""

    at: float
    processes: dict[int, tuple[int, str, float]]

    @classmethod
    def take(cls, roles: Roles) -> CpuSnapshot:
        owners = {}
        for pid, role in roles.named.items():  # a named process and its descendants
            owners.update(dict.fromkeys([pid, *descendants(pid)], role))
        found = {}
        for pid in descendants(os.getpid()):
            stat = None if pid in roles.exclude else proc_stat(pid)
            if stat is not None:
                found[pid] = (stat[0], owners.get(pid) or _role(pid), stat[1])
        return cls(time.perf_counter(), found)

    def since(self, before: CpuSnapshot) -> dict[str, float]:
        """CPU seconds per role from ``before`` to this snapshot (a process born since counts whole)."""
        spent: dict[str, float] = defaultdict(float)
        for pid, (start, role, seconds) in self.processes.items():
            old = before.processes.get(pid)
            spent[role] += seconds - (old[2] if old is not None and old[0] == start else 0.0)
        return dict(spent)


def cpu_of(pids: Sequence[int]) -> float:
    return sum(stat[1] for stat in map(proc_stat, pids) if stat is not None)
