"""What bench_sealing.py and bench_shuffler.py both measure with: a ratings collection (movie 1..1682
public, rating 1..5 private), random reports of one movie (the shuffler pools per public key, and a forwarded
batch holds one: pool key 0), and alternate timing against a baseline."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema


def schema(name: str) -> Schema:
    """The ratings collection ``name``."""
    return Schema.from_json({"name": name, "epsilon": 1.0, "attributes": [
        {"name": "movie", "type": "integer", "min": 1, "max": 1682, "public": True},
        {"name": "rating", "type": "integer", "min": 1, "max": 5}]})


def reports_of(s: Schema, n: int, rng: np.random.Generator) -> Reports:
    """``n`` reports of ``s`` with random private codes, the first movie (public key 0) and fresh ids."""
    return Reports(new_report_ids(n), rng.integers(0, s.private_domain_size, n), np.zeros((n, 1), np.int64))


def best(call: Callable[[], object], baseline: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Minimum seconds of ``call`` and of ``baseline``, timed alternately."""
    times, bases = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
        start = time.perf_counter()
        baseline()
        bases.append(time.perf_counter() - start)
    return min(times), min(bases)
