"""The report: Markdown tables of every part (``scale.md``) and every run as a CSV row (``scale.csv``)."""

from __future__ import annotations

import argparse
import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ldpsynth.aggregator.storage.shard_worker import DEFAULT_FLUSH_IDS
from scale.appends import AppendRun
from scale.common import SCHEMA
from scale.cpu import BARE, NATS, RAY, WORKERS
from scale.goals import best_pair, goals
from scale.restart import SEGMENT_REPORTS, SEGMENTS_PER_COMMIT, Restart
from scale.runs import (
    CONNECT_EACH,
    LONG_LIVED,
    ClusterResults,
    Run,
    driven_roles,
    per_stream_cpu,
    server_name,
    slowness,
    system_cpu,
)


def _vs(value: float, base: float, digits: int = 1) -> str:
    """``value`` beside its ratio to the bare handler's ``base``."""
    return f"{value:,.{digits}f} ({value / base:.2f}x)"


def _us(run: Run, roles: Sequence[str]) -> float:
    """CPU µs per report of ``roles`` during ``run``."""
    return run.server_cpu(roles) / run.total_reports * 1e6


def role_cells(run: Run, bare: Run) -> str:
    """CPU µs per report of each role during ``run`` and in all, each beside ``bare``'s handler's
    (the bare run's rest of the system is not its cost: ``-``)."""
    base = _us(bare, [BARE])
    if run.replicas == 0:
        return f"{_vs(base, base)} | - | - | - | {_vs(base, base)}"
    parts = [driven_roles(run), [WORKERS], [NATS], [RAY], [*driven_roles(run), WORKERS, NATS, RAY]]
    return " | ".join(_vs(_us(run, roles), base) for roles in parts)


ROLE_HEADER = ("driven server(s) CPU (µs/report) | shard workers (µs/report) | NATS, 3 servers (µs/report) | "
               "Ray system (µs/report) | total CPU (µs/report)")


def table_a(cluster: ClusterResults) -> tuple[str, str]:
    lines = ["| shape | server | streams | reports | wall (s) | reports/s | p50 (ms) | p99 (ms) | "
             "server process CPU (s) | CPU per stream (ms) | idle CPU (ms/s) | load avg at start |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    rest = [f"| shape | server | {ROLE_HEADER} |", "|---|---|---:|---:|---:|---:|---:|"]
    for shape in cluster.shapes:
        replica, bare = best_pair(cluster, shape)
        for run in (bare, replica):
            cpu = run.server_cpu(driven_roles(run))
            idle = sum(run.idle.get(r, 0.0) for r in driven_roles(run))
            lines.append(f"| {shape} | {run.server} | {run.streams:,} | {run.total_reports:,} | {run.seconds:.2f} | "
                         f"{_vs(run.reports_per_second, bare.reports_per_second, 0)} | "
                         f"{_vs(run.p50_ms, bare.p50_ms)} | {_vs(run.p99_ms, bare.p99_ms)} | {cpu:.2f} | "
                         f"{_vs(per_stream_cpu(run) * 1e3, per_stream_cpu(bare) * 1e3, 3)} | {idle * 1e3:.1f} | "
                         f"{run.load} |")
            rest.append(f"| {shape} | {run.server} | {role_cells(run, bare)} |")
    return "\n".join(lines) + "\n", "\n".join(rest) + "\n"


def table_b(cluster: ClusterResults) -> str:
    lines = ["| server | streams | reports | wall (s) | streams/s | reports/s | vs 1 replica | p50 (ms) | p99 (ms) | "
             f"{ROLE_HEADER} | errors | load avg at start |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    bare, one = cluster.best(0, LONG_LIVED, slowness), cluster.best(1, LONG_LIVED, slowness)
    for run in [bare, one] + ([cluster.best(cluster.replicas, LONG_LIVED, slowness)] if cluster.replicas > 1 else []):
        lines.append(f"| {run.server} | {run.streams:,} | {run.total_reports:,} | {run.seconds:.2f} | "
                     f"{run.streams / run.seconds:,.0f} | {_vs(run.reports_per_second, bare.reports_per_second, 0)} | "
                     f"{run.reports_per_second / one.reports_per_second:.2f}x | {_vs(run.p50_ms, bare.p50_ms)} | "
                     f"{_vs(run.p99_ms, bare.p99_ms)} | {role_cells(run, bare)} | {len(run.errors)} | {run.load} |")
    return "\n".join(lines) + "\n"


def best_appends(appends: list[AppendRun]) -> list[AppendRun]:
    keys = sorted({(r.shards, r.log) for r in appends}, key=lambda k: (k[0], not k[1].startswith("3")))
    return [max((r for r in appends if (r.shards, r.log) == k), key=lambda r: r.reports_per_second) for k in keys]


def table_c(appends: list[AppendRun]) -> str:
    lines = ["| log | shards written at once | records per shard | reports per record | bytes per record | "
             "seconds | records/s | reports/s | MB/s | vs R=1 | NATS CPU per record (ms, all servers) | "
             "load avg at start |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    best = best_appends(appends)
    for run in best:
        base = next(r for r in best if r.shards == run.shards and not r.log.startswith("3"))
        lines.append(f"| {run.log} | {run.shards} | {run.records:,} | {run.record_reports:,} | {run.record_bytes:,} | "
                     f"{run.seconds:.3f} | {run.shards * run.records / run.seconds:,.0f} | "
                     f"{run.reports_per_second:,.0f} | {run.megabytes_per_second:,.1f} | "
                     f"{run.reports_per_second / base.reports_per_second:.2f}x | {run.cpu_ms_per_record:.3f} | "
                     f"{run.load} |")
    return "\n".join(lines) + "\n"


def table_d(restarts: list[Restart]) -> str:
    lines = ["| stored reports | restart (s, min) | restart (s, all) | records replayed | reports replayed | "
             "snapshot at sequence | log ends at | id runs | fill (s) | vs smallest | load avg at start |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    first = min(restarts[0].seconds)
    for r in restarts:
        lines.append(f"| {r.stored:,} | {min(r.seconds):.3f} | {', '.join(f'{s:.3f}' for s in r.seconds)} | "
                     f"{r.replayed:,} | {r.replayed_reports:,} | {r.snapshot_offset:,} | {r.offset:,} | {r.runs} | "
                     f"{r.fill_seconds:.1f} | {min(r.seconds) / first:.2f}x | {r.load} |")
    return "\n".join(lines) + "\n"


def table_goals(rows: list[tuple[str, str, bool]], checked: bool) -> str:
    lines = ["| goal | measured | met |", "|---|---:|---|"]
    for goal, measured, met in rows:
        lines.append(f"| {goal} | {measured} | {('yes' if met else 'NO') if checked else 'not checked (--quick)'} |")
    return "\n".join(lines) + "\n"


def start_note(cluster: ClusterResults) -> str:
    if not cluster.start_failures:
        return ""
    return (f" It started at attempt {len(cluster.start_failures) + 1}; the earlier attempt(s) failed with: "
            + "; ".join(f"`{f}`" for f in cluster.start_failures) + ".")


def write_results(args: argparse.Namespace, command: str, info: dict[str, str], cluster: ClusterResults,
                  appends: list[AppendRun], restarts: list[Restart], problems: list[str]) -> str:
    """Write ``scale.md`` and ``scale.csv``; return the Markdown."""
    machine_line = ", ".join(f"{k} {v}" for k, v in info.items())
    a_table, a_rest = table_a(cluster)
    v = cluster.verification
    stored = "not verified" if v is None else (
        f"{v.rows.get(SCHEMA.name, 0):,} reports stored, {cluster.acknowledged:,} acknowledged as new; log checked: "
        f"{'no problem' if v.ok else '; '.join(v.problems[:5])}")
    text = (
        f"# Scale benchmark\n\n`{command}`\n\n{machine_line}\n\n"
        "A shared machine: every timing below is wall-clock or CPU time taken while other engineers' jobs ran "
        "(the load average at the start of each run is beside it); the load clients run on the same cores."
        f"{' **Quick run: sizes reduced, goals not checked.**' if args.quick else ''}\n\n"
        f"Deployment (`LocalCluster`, all on 127.0.0.1): Ray head + {cluster.worker_nodes} worker node(s), "
        f"{cluster.shards} shard workers, 3 NATS servers (streams R=3, file storage, sync_interval always), "
        f"{cluster.replicas} ingress replica(s) (`aggregator serve --nats ... --ray-address ...`). Load average when "
        f"it started: {cluster.load}."
        f"{start_note(cluster)}\n\n"
        f"## (a) server CPU per device stream, one replica\n\n"
        f"{args.streams:,} device streams per run, each one `SubmitReports` call with one batch of {args.reports} "
        f"fresh reports, {args.concurrency} at a time, from {args.clients} separate client process(es) sharing the "
        f"streams and lanes; best (least CPU per stream) of {args.repeats} alternating runs. Wall time: from the go "
        "(sent to every client at once) to the last ack; p50/p99: one call's latency, all clients' streams merged. "
        "CPU = utime + stime (/proc/PID/stat) of the driven server process over that window; idle CPU read over "
        f"{args.idle_seconds:g} s just before (included, not subtracted). Bare: a grpc.aio stream-stream handler "
        "reading the same ReportBatch bytes and writing a 2-byte ack per batch, in its own process. In brackets: "
        f"the ratio to the bare handler's run of the same shape.\n\n{a_table}\n"
        "Where the system's CPU goes during the same runs (CPU per report; NATS: all 3 servers; Ray system: GCS, "
        "raylets, agents, idle workers, monitors), each beside the bare handler's CPU per report:"
        f"\n\n{a_rest}\n"
        f"## (b) 1 replica vs {server_name(cluster.replicas)} (long-lived connections, round robin over the replicas "
        "driven)\n\n"
        f"Driven like (a); best (most reports/s) of {args.repeats} runs each; in brackets: the ratio to the bare "
        f"handler's best run.\n\n{table_b(cluster)}\n"
        f"After the runs: {stored}.\n\n"
        f"## (c) log append throughput\n\nOne writer per shard, one append in flight each (a shard worker's pattern), "
        f"pre-encoded records; best of {args.repeats} alternating runs. NATS CPU: utime + stime of the log's server "
        f"processes (the 3, or the 1) during the run, per record appended.\n\n{table_c(appends)}\n"
        f"## (d) shard worker restart (kill without close, default snapshot interval {DEFAULT_FLUSH_IDS:,} reports)\n\n"
        f"Filled with commits of {SEGMENTS_PER_COMMIT} x {SEGMENT_REPORTS:,} reports; each restart in a new process, "
        f"`ShardWorker(spec).start()` timed, {args.restart_repeats} restart(s) per size.\n\n{table_d(restarts)}\n"
        f"## Goals (issue 17 item 9, issue 29)\n\n{table_goals(goals(cluster, appends, restarts), not args.quick)}")
    if problems:
        text += "\n**Integrity problems:**\n\n" + "\n".join(f"- {p}" for p in problems[:20]) + "\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.md").write_text(text, encoding="utf-8")
    write_csv(args.out / "scale.csv", info, cluster, appends, restarts)
    return text


CSV_FIELDS = ["part", "measurement", "shape", "streams", "reports", "seconds", "reports_per_s", "server_cpu_s",
              "cpu_ms_per_stream", "cpu_us_per_report", "workers_us_per_report", "nats_us_per_report",
              "ray_us_per_report", "total_us_per_report", "vs_baseline", "p50_ms", "p99_ms", "errors", "replayed",
              "replayed_reports", "load_at_start"]


def write_csv(path: Path, info: dict[str, str], cluster: ClusterResults, appends: list[AppendRun],
              restarts: list[Restart]) -> None:
    rows: list[dict[str, Any]] = []
    for run in cluster.runs:
        shape_bare = cluster.best(0, run.shape, per_stream_cpu)
        cpu, n = run.server_cpu(driven_roles(run)), run.total_reports
        part = "a" if run.replicas == 0 or run.shape == CONNECT_EACH else "a+b" if run.replicas == 1 else "b"
        rows.append({"part": part, "measurement": run.server, "shape": run.shape,
                     "streams": run.streams, "reports": n, "seconds": f"{run.seconds:.6f}",
                     "reports_per_s": f"{run.reports_per_second:.1f}", "server_cpu_s": f"{cpu:.3f}",
                     "cpu_ms_per_stream": f"{cpu / run.streams * 1e3:.4f}", "cpu_us_per_report": f"{cpu / n * 1e6:.2f}",
                     "workers_us_per_report": f"{run.cpu.get(WORKERS, 0) / n * 1e6:.2f}",
                     "nats_us_per_report": f"{run.cpu.get(NATS, 0) / n * 1e6:.2f}",
                     "ray_us_per_report": f"{run.cpu.get(RAY, 0) / n * 1e6:.2f}",
                     "total_us_per_report": f"{system_cpu(run) / n * 1e6:.2f}",
                     "vs_baseline": f"{per_stream_cpu(run) / per_stream_cpu(shape_bare):.4f}",
                     "p50_ms": f"{run.p50_ms:.2f}", "p99_ms": f"{run.p99_ms:.2f}", "errors": len(run.errors),
                     "load_at_start": run.load})
    for run in appends:
        base = max((r for r in appends if r.shards == run.shards and not r.log.startswith("3")),
                   key=lambda r: r.reports_per_second)
        rows.append({"part": "c", "measurement": run.log, "shape": f"{run.shards} shard(s)",
                     "reports": run.shards * run.records * run.record_reports, "seconds": f"{run.seconds:.6f}",
                     "reports_per_s": f"{run.reports_per_second:.1f}", "server_cpu_s": f"{run.nats_cpu:.3f}",
                     "nats_us_per_report":
                         f"{run.nats_cpu / (run.shards * run.records * run.record_reports) * 1e6:.3f}",
                     "vs_baseline": f"{run.reports_per_second / base.reports_per_second:.4f}",
                     "load_at_start": run.load})
    for r in restarts:
        for seconds in r.seconds:
            rows.append({"part": "d", "measurement": "shard worker restart", "reports": r.stored,
                         "seconds": f"{seconds:.6f}", "vs_baseline": f"{seconds / min(restarts[0].seconds):.4f}",
                         "replayed": r.replayed, "replayed_reports": r.replayed_reports, "load_at_start": r.load})
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*CSV_FIELDS, *info])
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, **info})
