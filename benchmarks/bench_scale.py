"""Scale benchmark (issue 17 item 9, issue 29 item 4): what one ingress replica, the replicated log
and a shard worker restart cost on the multi-node aggregator, each beside a baseline measured in the
same run.

Runs a whole multi-node deployment on this machine (:class:`~ldpsynth.simulation.local_cluster.LocalCluster`:
a Ray head and ``--worker-nodes`` worker nodes, 3 NATS servers with R=3 streams, ``--replicas``
ingress replicas (default 2), ``--shards`` shard workers; everything on 127.0.0.1) and measures:

(a) **Server CPU per device stream and per report, one replica.** ``--clients`` client processes
    (default 1; their own, not counted) send ``--streams`` device streams, each one
    ``SubmitReports`` call carrying one batch of ``--reports`` fresh reports and reading its one
    ``BatchAck``, ``--concurrency`` at a time; each process takes its share of the streams, the
    warm-up streams and the lanes. The go is sent to all of them at once; the wall time runs from
    the go to the last process's last ack, and p50/p99 are of every process's stream latencies
    merged. Two connection shapes (``--connections both``, the default; ``long-lived``: the second
    only): *one connection per stream* (a new channel, hence a new TCP + HTTP/2 connection, per
    stream: what devices do) and *long-lived connections* (one channel per lane, each carrying its
    streams one after the other). The clients send pre-serialized ``ReportBatch`` bytes through
    the SDK's channel settings, so they do the same work for every server. Baseline: a bare
    ``grpc.aio`` server in its own process (its handler: ``scale/client.py``) whose stream-stream
    handler reads each request's bytes and writes one ack-sized message (the 2 bytes of
    ``BatchAck(accepted=10)``), driven the same way in the same run, alternating with the replica.
    CPU is ``utime + stime`` from ``/proc/<pid>/stat`` (every thread of the process) read just
    before the go and just after the last process has its last ack:

    * **replica**: the ``aggregator serve`` process that was driven (and its descendants: none
      in cluster mode) -- the ingress cost a replica is sized by; the goal is checked on it;
    * **bare**: the bare server process;
    * beside it, for the replica runs, the rest of the system on the ingest path: the **shard
      workers** (Ray worker processes titled ``ray::_WorkerActor``), the **NATS** servers (all 3)
      and **Ray system** processes (GCS, raylets, agents, idle workers, monitors: background,
      not per stream). Processes are the benchmark's descendants classified by
      ``/proc/<pid>/comm`` and ``cmdline``; a process that exits within the window is missed.

    The CPU each process spends while idle is read over ``--idle-seconds`` before every run and
    shown as ms per second (it is included in the per-stream figures, not subtracted). The tables
    show, for the bare handler and the replica runs driven the same way, reports/s, p50/p99 stream
    latency and CPU per report per role (driven server(s), shard workers, NATS, Ray system, total),
    each beside the bare handler's with the ratio.

(b) **1 vs ``--replicas`` replicas side by side** (with ``--replicas 1``: one replica only): the
    long-lived-connection shape through one replica (target ``A``) and through all of them
    (``A,B,...``: gRPC client-side round robin), alternating in one run with (a); the same columns
    as (a) beside the bare handler's long-lived run, and reports/s beside one replica's.
    Afterwards every record of the log is read back and checked
    (:func:`~ldpsynth.aggregator.runtime.verify.verify_log`): each acknowledged report stored exactly once.

(c) **Log append throughput**: :meth:`~ldpsynth.aggregator.storage.jetstream.ReplicatedLog.append` of
    pre-encoded records of ``--record-reports`` reports
    (:func:`~ldpsynth.aggregator.storage.log_records.encode_reports`),
    each writer appending its shard's records one after the other (a shard worker's pattern: one
    append in flight per shard), for 1 and 4 shards written concurrently; to a fresh 3-server
    R=3 :class:`~ldpsynth.aggregator.runtime.nats_process.LocalNatsCluster` and, as the baseline, to one
    embedded R=1 server (the one-machine log). File storage, ``sync_interval: always`` on both.
    Beside it, the CPU (utime + stime) of the log's server processes (all 3, or the 1) per record.

(d) **Shard worker restart time** at ``--restart-sizes`` stored reports (default 10^5, 10^6,
    10^7): a process fills one shard's worker (:class:`~ldpsynth.aggregator.storage.shard_worker.ShardWorker`
    on an embedded NATS log, default snapshot interval, commits of 4 segments of 2^16 reports)
    up to the size and SIGKILLs itself (no ``close``: no final snapshot). Then, ``--restart-repeats``
    times, a new process times ``ShardWorker(spec).start()`` (restore the last snapshot, replay
    the log after it) and reads ``status()``: ``replayed`` records and the ids replayed into
    memory, then SIGKILLs itself too. Goal: what a restart replays does not grow with the stored
    count (at most twice the snapshot interval of reports at every size).

``--shape`` picks a run shape, i.e. defaults of the options above (an option given explicitly
wins): ``default`` (the defaults as listed) or ``concurrent256`` (issue 29 item 4: ``--shards 16
--concurrency 256 --reports 10 --connections long-lived``: 256 concurrent streams of one 10-report
batch each on long-lived connections, 16 shards).

Timings are wall-clock or CPU time on a machine shared with other work: the load average is
printed at the start of every part and written beside the numbers. The clients run on the same
cores as the servers.

Goals: (a) in each shape run, the replica's CPU per device stream at most 1.5x the bare handler's
(issue 17 item 9, issue 29); with long-lived connections, one replica's p50 stream latency at most
2x the bare handler's and the whole system's CPU per report (the replica, shard workers, NATS, Ray)
at most 5x the bare handler's (issue 29); (c) the R=3 log takes at least the planned peak, 10^5
reports/s, with 4 writers; (d) as above. The tables keep the best of ``--repeats`` alternating runs
(least CPU per stream in (a) and its goals, most reports/s in (b) and (c)); the CSV has every run.

Prints Markdown tables and writes ``scale.md`` and ``scale.csv`` to ``--out`` (default
``benchmarks/results``). ``--quick``: small sizes, goals not checked (the smoke test). Exit
status 1 when a goal is missed (not with ``--quick``), and always when a stream failed or an
acknowledged report was not stored exactly once.

The parts live in ``benchmarks/scale/``, one module per job (the client, the runs, the cluster, the log
appends, the restarts, the goals, the report); this script parses the options and runs them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import google.protobuf
import grpc
from arguments import require_positive  # benchmarks/arguments.py (scripts run from this folder)
from bare_grpc import serve_until_stopped  # benchmarks/bare_grpc.py
from machine import machine_info  # benchmarks/machine.py
from scale.appends import append_part
from scale.client import Drive, ack_each, drive_streams
from scale.cluster import cluster_part
from scale.common import BARE_METHOD, load, log
from scale.goals import goals, integrity
from scale.report import write_results
from scale.restart import restart_part, worker_run

ROOT = Path(__file__).resolve().parent

#: Run shapes (``--shape``): defaults of other options; an option given explicitly wins.
SHAPES: dict[str, dict[str, Any]] = {
    "default": {},
    # issue 29 item 4: 16 shards, 256 streams in flight, one 10-report batch each, long-lived connections
    "concurrent256": {"shards": 16, "concurrency": 256, "reports": 10, "connections": "long-lived"},
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="default",
                        help="a run shape: defaults of the options below (concurrent256: --shards 16 "
                             "--concurrency 256 --reports 10 --connections long-lived)")
    parser.add_argument("--streams", type=int, default=2000, help="(a, b) device streams per run (default 2000)")
    parser.add_argument("--reports", type=int, default=10, help="(a, b) reports in each stream's batch (default 10)")
    parser.add_argument("--concurrency", type=int, default=100, help="(a, b) streams in flight (default 100)")
    parser.add_argument("--warmup", type=int, default=200,
                        help="(a, b) unmeasured streams before each run (default 200)")
    parser.add_argument("--idle-seconds", type=float, default=2.0,
                        help="(a, b) idle CPU window before a run (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="(a, b, c) alternating repeats, best kept (default 3)")
    parser.add_argument("--connections", choices=["both", "long-lived"], default="both",
                        help="(a) the connection shapes run: one per stream and long-lived, or long-lived only "
                             "(default both)")
    parser.add_argument("--replicas", type=int, default=2,
                        help="(a, b) ingress replicas started; (b) drives 1 and all of them (default 2)")
    parser.add_argument("--clients", type=int, default=1,
                        help="(a, b) client processes sharing each run's streams and lanes, 1 to --concurrency "
                             "(default 1)")
    parser.add_argument("--shards", type=int, default=4, help="(a, b) shard workers (default 4)")
    parser.add_argument("--worker-nodes", type=int, default=2, help="(a, b) Ray worker nodes (default 2)")
    parser.add_argument("--append-records", type=int, default=200, help="(c) records per shard and run (default 200)")
    parser.add_argument("--record-reports", type=int, default=4096, help="(c) reports per record (default 4096)")
    parser.add_argument("--restart-sizes", type=int, nargs="+", default=[10**5, 10**6, 10**7],
                        help="(d) stored reports at each restart, increasing (default 10^5 10^6 10^7)")
    parser.add_argument("--restart-repeats", type=int, default=3, help="(d) restarts per size (default 3)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 200 streams, 1 repeat, 10 records, restarts at 10^4 and 10^5")
    parser.add_argument("--out", type=Path, default=ROOT / "results", help="where scale.md/csv go")
    parser.add_argument("--seed", type=int, default=2026, help="seeds the codes of (c) (data only)")
    parser.add_argument("--serve-bare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--drive", help=argparse.SUPPRESS)
    parser.add_argument("--worker-run", help=argparse.SUPPRESS)
    parser.set_defaults(**SHAPES[parser.parse_known_args(argv)[0].shape])
    args = parser.parse_args(argv)
    if args.quick:
        args.streams, args.concurrency, args.warmup, args.idle_seconds, args.repeats = 200, 20, 20, 0.5, 1
        args.append_records, args.restart_sizes, args.restart_repeats = 10, [10**4, 10**5], 1
    require_positive(parser, args, ("streams", "reports", "concurrency", "replicas", "clients", "repeats", "shards",
                                    "worker_nodes", "append_records", "record_reports", "restart_repeats"))
    if args.clients > args.concurrency:
        parser.error(f"--clients: an integer from 1 to --concurrency ({args.concurrency}), got {args.clients}")
    if args.warmup < 0 or args.idle_seconds <= 0:
        parser.error("--warmup: >= 0; --idle-seconds: > 0")
    if any(s < 1 for s in args.restart_sizes) or args.restart_sizes != sorted(set(args.restart_sizes)):
        parser.error(f"--restart-sizes: increasing integers >= 1, got {args.restart_sizes}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_bare:  # the bare server's own process (started by cluster_part), until SIGTERM
        return serve_until_stopped(BARE_METHOD, grpc.stream_stream_rpc_method_handler(ack_each))
    if args.drive:
        print(json.dumps(asyncio.run(drive_streams(Drive(**json.loads(args.drive))))), flush=True)
        return 0
    if args.worker_run:
        asyncio.run(worker_run(json.loads(args.worker_run)))  # ends by SIGKILL
    command = " ".join(["python benchmarks/bench_scale.py", *(sys.argv[1:] if argv is None else argv)])
    info = machine_info(grpcio=grpc.__version__, protobuf=google.protobuf.__version__)
    with tempfile.TemporaryDirectory(prefix="ldpsynth-bench-scale-") as tmp:
        scratch = Path(tmp)
        cluster = cluster_part(args, scratch)
        appends = append_part(args, scratch)
        restarts = restart_part(args, scratch)
    info["load average at end"] = load()
    problems = integrity(cluster)
    text = write_results(args, command, info, cluster, appends, restarts, problems)
    print(text)
    log(f"wrote {args.out / 'scale.md'} and {args.out / 'scale.csv'}")
    met = args.quick or all(met for _, _, met in goals(cluster, appends, restarts))
    return 0 if met and not problems else 1


if __name__ == "__main__":
    sys.exit(main())
