"""The goals of the scale benchmark and the integrity of what the cluster stored."""

from __future__ import annotations

from ldpsynth.aggregator.storage.shard_worker import DEFAULT_FLUSH_IDS
from scale.appends import AppendRun
from scale.common import SCHEMA
from scale.restart import Restart
from scale.runs import LONG_LIVED, ClusterResults, Run, per_stream_cpu, system_cpu

#: Goal of issue 17 item 9 (a) and issue 29: a device stream costs one replica at most this times the
#: bare handler's CPU.
GOAL_STREAM_RATIO = 1.5
#: Goals of issue 29, one replica beside the bare handler (long-lived connections): its p50 stream
#: latency at most this times the bare handler's ...
GOAL_LATENCY_RATIO = 2.0
#: ... and the whole system's CPU per report (replica, shard workers, NATS, Ray) at most this times.
GOAL_SYSTEM_RATIO = 5.0
#: The capacity plan's peak (issue 17 item 9); the R=3 log must take it (our reading of item 2).
PEAK_REPORTS_PER_SECOND = 1e5


def best_pair(cluster: ClusterResults, shape: str) -> tuple[Run, Run]:
    """The (a) runs of ``shape`` compared: ``(1 replica, bare)``, each its least CPU per stream."""
    return cluster.best(1, shape, per_stream_cpu), cluster.best(0, shape, per_stream_cpu)


def goals(cluster: ClusterResults, appends: list[AppendRun], restarts: list[Restart]) -> list[tuple[str, str, bool]]:
    """``(goal, measured, met)`` rows."""
    rows = []
    for shape in cluster.shapes:
        replica, bare = best_pair(cluster, shape)
        ratio = per_stream_cpu(replica) / per_stream_cpu(bare)
        rows.append((f"(a) {shape}: replica CPU per device stream <= {GOAL_STREAM_RATIO}x the bare handler's "
                     "(issues 17, 29)", f"{ratio:.2f}x", ratio <= GOAL_STREAM_RATIO))
    replica, bare = best_pair(cluster, LONG_LIVED)
    latency = replica.p50_ms / bare.p50_ms
    rows.append((f"(a) {LONG_LIVED}: one replica's p50 stream latency <= {GOAL_LATENCY_RATIO:g}x the bare "
                 "handler's (issue 29)", f"{latency:.2f}x", latency <= GOAL_LATENCY_RATIO))
    system = system_cpu(replica) / replica.streams / per_stream_cpu(bare)
    rows.append((f"(a) {LONG_LIVED}: whole-system CPU per report (one replica, shard workers, NATS, Ray) <= "
                 f"{GOAL_SYSTEM_RATIO:g}x the bare handler's (issue 29)",
                 f"{system:.2f}x", system <= GOAL_SYSTEM_RATIO))
    r3 = max((r for r in appends if r.log.startswith("3") and r.shards == 4), key=lambda r: r.reports_per_second)
    rows.append((f"(c) R=3 log, 4 writers: >= {PEAK_REPORTS_PER_SECOND:,.0f} reports/s (the planned peak)",
                 f"{r3.reports_per_second:,.0f} reports/s", r3.reports_per_second >= PEAK_REPORTS_PER_SECOND))
    worst = max(restarts, key=lambda r: r.replayed_reports)
    rows.append((f"(d) a restart replays <= 2 x the snapshot interval ({2 * DEFAULT_FLUSH_IDS:,} reports) "
                 "at every size",
                 f"at most {worst.replayed_reports:,} (at {worst.stored:,} stored)",
                 worst.replayed_reports <= 2 * DEFAULT_FLUSH_IDS))
    return rows


def integrity(cluster: ClusterResults) -> list[str]:
    """What went wrong with the data (empty: every stream acknowledged, every report stored once)."""
    problems = [f"{r.server}, {r.shape}: {e}" for r in cluster.runs for e in r.errors]
    v = cluster.verification
    if v is None:
        return problems + ["the log was not verified"]
    problems += v.problems
    stored = v.rows.get(SCHEMA.name, 0)
    if stored != cluster.acknowledged:
        problems.append(f"{stored:,} reports stored, {cluster.acknowledged:,} acknowledged as new")
    return problems
