"""Where and when a benchmark ran: the header every benchmark writes beside its numbers."""

from __future__ import annotations

import datetime as dt
import os
import platform
import sys
from pathlib import Path

import numpy as np


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine() or "unknown"


def _blas() -> str:
    try:
        config = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{config.get('name')} {config.get('version')}"
    except Exception:  # noqa: BLE001 -- informational only; older numpy has no dict mode
        return "unknown"


def machine_info(**versions: str) -> dict[str, str]:
    """Date (UTC), CPU, usable cores, load average, Python, numpy and its BLAS, the platform, the
    command line, then ``versions`` (e.g. ``grpcio=grpc.__version__``)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    return {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "cpu": _cpu(),
            "usable cores": str(cores), "load average at start": load, "python": platform.python_version(),
            "numpy": np.__version__, "blas": _blas(), "platform": platform.platform(),
            "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]), **versions}
