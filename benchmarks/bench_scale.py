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
    ``grpc.aio`` server in its own process (defined here) whose stream-stream handler reads each
    request's bytes and writes one ack-sized message (the 2 bytes of ``BatchAck(accepted=10)``),
    driven the same way in the same run, alternating with the replica. CPU is ``utime + stime``
    from ``/proc/<pid>/stat`` (every thread of the process) read just before the go and just after
    the last process has its last ack:

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
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import dataclasses
import json
import math
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import google.protobuf
import grpc
import numpy as np
from arguments import require_positive  # benchmarks/arguments.py (scripts run from this folder)
from bare_grpc import serve_until_stopped  # benchmarks/bare_grpc.py
from machine import machine_info  # benchmarks/machine.py

from ldpsynth.aggregator.runtime.nats_process import EmbeddedNats
from ldpsynth.aggregator.runtime.reaper import descendants
from ldpsynth.aggregator.runtime.verify import Verification, verify_log
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import Layout, LogSettings, LogUnavailable
from ldpsynth.aggregator.storage.log_records import Section, card_digest, encode_reports
from ldpsynth.aggregator.storage.segments import Segment
from ldpsynth.aggregator.storage.shard_worker import DEFAULT_FLUSH_IDS, ShardWorker, WorkerSpec
from ldpsynth.client.transport import DEFAULT_MAX_MESSAGE_BYTES, grpc_target
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.protocol import reports_to_proto
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.simulation.local_cluster import LocalCluster, LocalNatsCluster, ServerProcess

ROOT = Path(__file__).resolve().parent
SCRIPT = Path(__file__).resolve()
SCHEMA = Schema.from_json({
    "name": "ratings", "epsilon": 1.0,
    "attributes": [{"name": "movie", "type": "integer", "min": 0, "max": 99, "public": True},
                   {"name": "rating", "type": "integer", "min": 1, "max": 5}]})
CARD = MechanismCard.for_schema(SCHEMA)
SUBMIT_METHOD = "/" + pb.DESCRIPTOR.services_by_name["CollectionService"].full_name + "/SubmitReports"
BARE_METHOD = "/ldpsynth.bench.Bare/SubmitReports"
#: The bare server's answer to every batch: an ack's size (2 bytes), not parsed from the batch.
BARE_ACK = pb.BatchAck(sequence=0, accepted=10).SerializeToString()
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
#: (d) commits: this many segments of SEGMENT_REPORTS reports per call (one group commit).
SEGMENT_REPORTS = 1 << 16
SEGMENTS_PER_COMMIT = 4
CLIENT_TIMEOUT = 900.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(message: str) -> None:
    """A progress line on stderr."""
    print(f"[bench_scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# ----- CPU accounting -------------------------------------------------------------------------
REPLICA, BARE, WORKERS, NATS, RAY = "replica", "bare", "shard workers", "NATS", "Ray system"


@dataclass(frozen=True)
class Roles:
    """What the benchmark's descendants are: ``named`` pids (replicas, the bare server) by role;
    ``exclude``: pids not counted (the load client)."""

    named: dict[int, str]
    exclude: frozenset[int] = frozenset()


def _proc_stat(pid: int) -> tuple[int, float] | None:
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
            stat = None if pid in roles.exclude else _proc_stat(pid)
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


# ----- the bare server --------------------------------------------------------------------------
async def _ack_each(requests: Any, context: grpc.aio.ServicerContext) -> None:
    """The bare server's one stream-stream method: reads each request's bytes and writes an ack-sized
    message for it."""
    async for _ in requests:
        await context.write(BARE_ACK)


# ----- the load client (its own process) -----------------------------------------------------------
@dataclass(frozen=True)
class Drive:
    """What one client process sends (JSON on its command line)."""

    target: str
    method: str
    streams: int
    reports: int
    concurrency: int
    connect_each: bool
    warmup: int
    replica: bool  # acks are BatchAcks to check (else the bare server's fixed reply)


def _channel(target: str) -> grpc.aio.Channel:
    """The SDK's channel settings (message limits; round robin over several targets), each channel
    with connections of its own (gRPC would otherwise share one per target across channels)."""
    resolved, balancing = grpc_target(target)
    return grpc.aio.insecure_channel(resolved, options=[
        ("grpc.max_send_message_length", DEFAULT_MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", DEFAULT_MAX_MESSAGE_BYTES),
        ("grpc.use_local_subchannel_pool", 1), *balancing])


def _batches(count: int, reports: int, rng: np.random.Generator) -> list[bytes]:
    """``count`` serialized one-batch device streams of ``reports`` fresh reports each."""
    out = []
    for _ in range(count):
        batch = Reports(new_report_ids(reports), rng.integers(0, SCHEMA.private_domain_size, reports),
                        rng.integers(0, SCHEMA.public_domain_size, (reports, 1)))
        out.append(reports_to_proto(batch, SCHEMA.name, CARD.version, 0).SerializeToString())
    return out


async def _drive(drive: Drive) -> dict[str, Any]:
    """The client process: warm up, say ready, wait for "go" on stdin, send the measured streams;
    the outcome (when the last ack came, reports acknowledged as new, each stream's latency, errors)."""
    rng = np.random.default_rng()  # codes only (data); ids come from the OS CSPRNG
    warm, measured = _batches(drive.warmup, drive.reports, rng), _batches(drive.streams, drive.reports, rng)
    lanes = [] if drive.connect_each else [_channel(drive.target) for _ in range(drive.concurrency)]
    outcome: dict[str, Any] = {"accepted": 0, "errors": [], "latencies": []}

    async def stream(channel: grpc.aio.Channel, data: bytes) -> None:
        started = time.perf_counter()
        try:
            answers = [a async for a in channel.stream_stream(drive.method)(iter([data]))]
        except grpc.aio.AioRpcError as exc:
            outcome["errors"].append(f"{exc.code().name}: {exc.details()}")
            return
        outcome["latencies"].append(time.perf_counter() - started)
        if len(answers) != 1:
            outcome["errors"].append(f"{len(answers)} answers to one batch")
        elif drive.replica:
            outcome["accepted"] += pb.BatchAck.FromString(answers[0]).accepted
        elif answers[0] != BARE_ACK:
            outcome["errors"].append("unexpected answer from the bare server")

    async def lane(index: int, batches: list[bytes]) -> None:
        for data in batches[index::drive.concurrency]:
            if drive.connect_each:
                async with _channel(drive.target) as channel:
                    await stream(channel, data)
            else:
                await stream(lanes[index], data)

    try:
        await asyncio.gather(*(lane(i, warm) for i in range(drive.concurrency)))
        warm_errors = list(outcome["errors"])
        outcome.update(accepted=0, errors=[], latencies=[], warm_accepted=outcome["accepted"])
        if warm_errors:
            outcome["errors"] = [f"warm-up: {e}" for e in warm_errors[:5]]
        print(json.dumps({"event": "ready"}), flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        await asyncio.gather(*(lane(i, measured) for i in range(drive.concurrency)))
        outcome["finished"] = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process on Linux
    finally:
        await asyncio.gather(*(channel.close() for channel in lanes))
    outcome["event"] = "done"
    return outcome


def split_drive(drive: Drive, clients: int) -> list[Drive]:
    """``drive`` shared by ``clients`` processes: each takes its share of the streams, the warm-up
    streams and the lanes (``clients <= drive.concurrency``)."""
    return [dataclasses.replace(drive, streams=s, warmup=w, concurrency=c) for s, w, c in
            zip(shares(drive.streams, clients), shares(drive.warmup, clients), shares(drive.concurrency, clients))]


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal integers (the larger ones first)."""
    return [total // parts + (i < total % parts) for i in range(parts)]


@dataclass(frozen=True)
class Outcome:
    """What the client processes of one run did, merged."""

    streams: int  # acknowledged measured streams
    seconds: float  # from the go to the last process's last ack
    accepted: int  # reports acknowledged as new, warm-up included
    p50_ms: float
    p99_ms: float
    errors: list[str]


def merge_outcomes(outcomes: Sequence[dict[str, Any]], go_at: float) -> Outcome:
    """Merge the ``done`` lines of the client processes of one run, sent the go at ``go_at``
    (``time.monotonic()``): the latencies of all of them, the wall time to the last ack."""
    latencies = np.asarray([x for o in outcomes for x in o["latencies"]] or [math.nan]) * 1e3
    errors = [e for o in outcomes for e in o["errors"]]
    return Outcome(sum(len(o["latencies"]) for o in outcomes), max(o["finished"] for o in outcomes) - go_at,
                   sum(o["accepted"] + o["warm_accepted"] for o in outcomes),
                   float(np.percentile(latencies, 50)), float(np.percentile(latencies, 99)),
                   errors[:20] + ([f"... {len(errors) - 20} more"] if len(errors) > 20 else []))


class LineReader:
    """JSON lines of a child's stdout, read with a deadline; its stderr goes to ``log_path``."""

    def __init__(self, proc: subprocess.Popen[bytes], log_path: Path):
        self.proc = proc
        self.log_path = log_path
        self._lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(b"")

    def next(self, timeout: float, what: str) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.proc.kill()
            raise RuntimeError(f"{what}: no answer within {timeout:g} s; {self.tail()}") from None
        if not line:
            raise RuntimeError(f"{what}: the process exited with status {self.proc.wait()}; {self.tail()}")
        return json.loads(line)

    def tail(self) -> str:
        return f"its log ends:\n{self.log_path.read_text(errors='replace')[-3000:]}"


# ----- (a) and (b): runs against the bare server and the replicas -------------------------------
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


def run_plan(replicas: int, connections: str) -> list[tuple[int, bool]]:
    """One repeat of (a) and (b): ``(replicas driven, one connection per stream)`` in order: the bare
    server and 1 replica alternating in each connection shape, then all ``replicas`` (long-lived)."""
    plan = [(n, each) for each in ((True, False) if connections == "both" else (False,)) for n in (0, 1)]
    return plan + ([(replicas, False)] if replicas > 1 else [])


def cluster_part(args: argparse.Namespace, scratch: Path) -> ClusterResults:
    """(a) and (b); see the module docstring."""
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


# ----- (c) log append throughput -----------------------------------------------------------------
@dataclass
class AppendRun:
    """One timed run of part (c)."""

    log: str  # "3 servers, R=3" or "1 embedded server, R=1"
    shards: int
    records: int  # per shard
    record_reports: int
    record_bytes: int
    seconds: float
    nats_cpu: float  # CPU seconds of the log's server processes (all of them) during the run
    load: str

    @property
    def reports_per_second(self) -> float:
        return self.shards * self.records * self.record_reports / self.seconds

    @property
    def cpu_ms_per_record(self) -> float:
        return self.nats_cpu / (self.shards * self.records) * 1e3

    @property
    def megabytes_per_second(self) -> float:
        return self.shards * self.records * self.record_bytes / self.seconds / 1e6


async def _open_layout(settings: LogSettings, shards: int, name: str, wait: float = 120.0
                       ) -> tuple[ReplicatedLog, Layout]:
    """Connect and create (or open) the layout, waiting while a new cluster elects its leaders."""
    replicated = await ReplicatedLog.connect(settings, name)
    deadline = time.monotonic() + wait
    while True:
        try:
            return replicated, await replicated.open_layout(shards)
        except LogUnavailable:
            if time.monotonic() > deadline:
                await replicated.close()
                raise
            await asyncio.sleep(1.0)


async def _open_log(settings: LogSettings, shards: int) -> tuple[ReplicatedLog, Layout]:
    """:func:`_open_layout` with the benchmark's collection registered."""
    replicated, layout = await _open_layout(settings, shards, "bench-append")
    await replicated.register_card(SCHEMA.name, CARD.dumps())
    return replicated, layout


def _cpu_of(pids: Sequence[int]) -> float:
    return sum(stat[1] for stat in map(_proc_stat, pids) if stat is not None)


async def _append_run(replicated: ReplicatedLog, layout: Layout, shards: int, records: int, record_reports: int,
                      rng: np.random.Generator, servers: Sequence[int]) -> tuple[float, int, float]:
    """Append ``records`` pre-encoded records to each of shards ``0 .. shards-1`` (one writer per
    shard, one append in flight each); ``(seconds, bytes of one record, CPU seconds of the server
    processes`` ``servers)``."""
    digest = card_digest(CARD.dumps())
    domains = {SCHEMA.name: (SCHEMA.public_domain_size, SCHEMA.private_domain_size, 0)}
    encoded: list[list[tuple[int, bytes]]] = []
    for shard in range(shards):
        last = (await replicated.state(shard)).last
        chain = []
        for k in range(records):
            sequence = last + 1 + k
            section = Section(SCHEMA.name, digest, new_report_ids(record_reports),
                              rng.integers(0, SCHEMA.public_domain_size, record_reports),
                              rng.integers(0, SCHEMA.private_domain_size, record_reports), {"bench": record_reports})
            chain.append((sequence, encode_reports(layout.id, shard, sequence, (sequence - 2) * record_reports,
                                                   [section], domains)))
        encoded.append(chain)

    async def writer(shard: int) -> None:
        for sequence, data in encoded[shard]:
            await replicated.append(shard, data, sequence - 1)

    cpu = _cpu_of(servers)
    started = time.perf_counter()
    await asyncio.gather(*(writer(s) for s in range(shards)))
    return time.perf_counter() - started, len(encoded[0][0][1]), _cpu_of(servers) - cpu


def append_part(args: argparse.Namespace, scratch: Path) -> list[AppendRun]:
    """(c); see the module docstring. Runs alternate between the two logs; every run is kept."""
    rng = np.random.default_rng(args.seed)
    shard_counts = (1, 4)
    log(f"(c) starting a 3-server NATS cluster and an embedded server (load average {load()}) ...")
    cluster = LocalNatsCluster(scratch / "append-r3")
    embedded = EmbeddedNats(scratch / "append-r1")
    runs: list[AppendRun] = []
    try:
        cluster.start()
        embedded.start()
        targets = [("3 servers, R=3", LogSettings(cluster.urls, replicas=3), [s.process for s in cluster.servers]),
                   ("1 embedded server, R=1", LogSettings((embedded.url,), replicas=1), [embedded.process])]

        async def measure() -> None:
            logs = [(name, *await _open_log(settings, max(shard_counts)), [p.pid for p in processes if p is not None])
                    for name, settings, processes in targets]
            try:
                for repeat in range(args.repeats):
                    for shards in shard_counts:
                        for name, replicated, layout, servers in logs:
                            started_load = load()
                            seconds, size, cpu = await _append_run(replicated, layout, shards, args.append_records,
                                                                   args.record_reports, rng, servers)
                            run = AppendRun(name, shards, args.append_records, args.record_reports, size, seconds,
                                            cpu, started_load)
                            runs.append(run)
                            log(f"(c) repeat {repeat + 1}/{args.repeats}: {name}, {shards} shard(s): "
                                f"{run.reports_per_second:,.0f} reports/s (load {started_load})")
            finally:
                for _, replicated, _, _ in logs:
                    await replicated.close()

        asyncio.run(measure())
    finally:
        cluster.stop()
        embedded.stop()
    return runs


# ----- (d) shard worker restart ---------------------------------------------------------------
async def _worker_run(job: dict[str, Any]) -> None:
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
    """(d); see the module docstring."""
    log(f"(d) starting an embedded NATS server for one shard (load average {load()}) ...")
    embedded = EmbeddedNats(scratch / "restart-log")
    results: list[Restart] = []
    try:
        url = embedded.start()

        async def open_layout() -> Layout:
            replicated, layout = await _open_log(LogSettings((url,), replicas=1), 1)
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


# ----- goals and output ---------------------------------------------------------------------------
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


# ----- main -----------------------------------------------------------------------------------
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
        return serve_until_stopped(BARE_METHOD, grpc.stream_stream_rpc_method_handler(_ack_each))
    if args.drive:
        print(json.dumps(asyncio.run(_drive(Drive(**json.loads(args.drive))))), flush=True)
        return 0
    if args.worker_run:
        asyncio.run(_worker_run(json.loads(args.worker_run)))  # ends by SIGKILL
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
