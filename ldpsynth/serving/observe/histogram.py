"""A latency histogram kept where Prometheus cannot scrape (a shard worker's process) and read by
the replica, which exposes it as a Prometheus histogram (cumulative buckets, sum, count).

Plain Python, picklable: a worker's :class:`~ldpsynth.aggregator.storage.segments.WorkerStatus`
carries :class:`HistogramSnapshot` values over Ray.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

#: Upper bounds (seconds) of the latency buckets of commits and log appends: 1 ms to 10 s.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True)
class HistogramSnapshot:
    """Observations so far: ``cumulative[i]`` of them were at most ``bounds[i]``; ``count`` in all
    (the +Inf bucket), adding up to ``total`` seconds."""

    bounds: tuple[float, ...]
    cumulative: tuple[int, ...]
    count: int
    total: float


class LatencyHistogram:
    """Counts observations into :data:`LATENCY_BUCKETS` (or ``bounds``)."""

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS):
        self.bounds = tuple(sorted(bounds))
        self._counts = [0] * (len(self.bounds) + 1)
        self._total = 0.0

    def observe(self, seconds: float) -> None:
        self._counts[bisect.bisect_left(self.bounds, seconds)] += 1
        self._total += seconds

    def snapshot(self) -> HistogramSnapshot:
        """
        >>> h = LatencyHistogram((0.1, 1.0))
        >>> for s in (0.05, 0.1, 0.5, 3.0):
        ...     h.observe(s)
        >>> h.snapshot()
        HistogramSnapshot(bounds=(0.1, 1.0), cumulative=(2, 3), count=4, total=3.65)
        """
        cumulative, running = [], 0
        for count in self._counts[:-1]:
            running += count
            cumulative.append(running)
        return HistogramSnapshot(self.bounds, tuple(cumulative), running + self._counts[-1], self._total)
