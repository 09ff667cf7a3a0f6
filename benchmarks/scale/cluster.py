"""(a) and (b): the local cluster started, driven in alternating runs beside the bare server, its log checked."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from ldpsynth.aggregator.runtime.verify import Verification, verify_log
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import LogSettings, LogUnavailable
from ldpsynth.simulation.local_cluster import LocalCluster, ServerProcess
from scale.client import Drive
from scale.common import BARE_METHOD, SCHEMA, SCRIPT, SUBMIT_METHOD, load, log
from scale.cpu import BARE, REPLICA, Roles
from scale.runs import ClusterResults, client_run, per_stream_cpu


def run_plan(replicas: int, connections: str) -> list[tuple[int, bool]]:
    """One repeat of (a) and (b): ``(replicas driven, one connection per stream)`` in order: the bare
    server and 1 replica alternating in each connection shape, then all ``replicas`` (long-lived)."""
    plan = [(n, each) for each in ((True, False) if connections == "both" else (False,)) for n in (0, 1)]
    return plan + ([(replicas, False)] if replicas > 1 else [])


def cluster_part(args: argparse.Namespace, scratch: Path) -> ClusterResults:
    """(a) and (b); see benchmarks/bench_scale.py's docstring."""
    results = ClusterResults(load=load(), shards=args.shards, worker_nodes=args.worker_nodes, replicas=args.replicas)
    collection = scratch / "ratings.json"
    collection.write_text(SCHEMA.dumps(), encoding="utf-8")
    log(f"(a, b) starting the local cluster: Ray head + {args.worker_nodes} worker nodes, 3 NATS servers (R=3), "
        f"{args.replicas} replica(s), {args.shards} shards (load average {results.load}) ...")
    system = start_cluster(args, scratch, collection, results.start_failures)
    try:
        bare = ServerProcess([sys.executable, str(SCRIPT), "--serve-bare"], scratch / "bare.log")
        try:
            addresses = [replica.address for replica in system.replicas]
            roles = Roles({**{replica.proc.pid: f"{REPLICA} {i}" for i, replica in enumerate(system.replicas, 1)},
                           bare.proc.pid: BARE})
            log(f"(a, b) replicas at {', '.join(addresses)}, bare server at {bare.address}; "
                f"{args.clients} client process(es)")
            for repeat in range(args.repeats):
                for replicas, connect_each in run_plan(args.replicas, args.connections):
                    target = bare.address if replicas == 0 else ",".join(addresses[:replicas])
                    drive = Drive(target, BARE_METHOD if replicas == 0 else SUBMIT_METHOD, args.streams,
                                  args.reports, args.concurrency, connect_each, args.warmup, replicas > 0)
                    run = client_run(replicas, drive, args.clients, roles, args.idle_seconds, scratch)
                    results.runs.append(run)
                    log(f"(a, b) repeat {repeat + 1}/{args.repeats}: {run.server}, {run.shape}: {run.streams:,} "
                        f"streams in {run.seconds:.2f} s, {per_stream_cpu(run) * 1e3:.3f} ms server CPU per stream, "
                        f"p50 {run.p50_ms:.1f} ms, {len(run.errors)} errors (load {run.load})")
                    results.acknowledged += run.accepted  # 0 from the bare server
        finally:
            bare.terminate()
        log("(b) reading back and checking every record of the cluster's log ...")
        results.verification = asyncio.run(_verify_cluster(system))
    finally:
        log("(a, b) stopping the local cluster ...")
        system.stop()
    return results


def start_cluster(args: argparse.Namespace, scratch: Path, collection: Path, failures: list[str],
                  attempts: int = 3) -> LocalCluster:
    """A started :class:`LocalCluster` with ``--replicas`` replicas. A start that fails (a loaded machine
    can miss Ray's start-up deadlines) is noted in ``failures`` and tried again on a fresh cluster, up
    to ``attempts`` times."""
    for attempt in range(1, attempts + 1):
        system = LocalCluster(scratch / f"cluster-{attempt}", [collection], shards=args.shards,
                              worker_nodes=args.worker_nodes)
        try:
            return system.start(replicas=args.replicas)
        except (RuntimeError, LogUnavailable) as exc:
            system.stop()
            reason = str(exc).strip().splitlines()[-1][:300]
            failures.append(reason)
            log(f"(a, b) the cluster did not start (attempt {attempt}/{attempts}): {reason}")
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


async def _verify_cluster(system: LocalCluster) -> Verification:
    assert system.nats is not None
    replicated = await ReplicatedLog.connect(LogSettings(system.nats.urls, replicas=3), "bench-verify")
    try:
        return await verify_log(replicated)
    finally:
        await replicated.close()
