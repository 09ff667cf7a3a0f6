"""Ingest benchmark: how fast perturbed rows reach durable storage, against a bare gRPC stream.

Starts a real aggregator (``python -m ldpsynth.cli.aggregator_cmd serve``: port 0, a temporary
data directory, the one-machine default with its durable settings unchanged) and measures, in the
same run. The durable path of a batch: the ingress replica (validation, routing by report id) ->
the Ray shard worker of each shard it touches (deduplication, one group commit) -> an append to
that shard's NATS JetStream stream (the embedded ``nats-server``, file storage,
``sync_interval: always``: fsynced before JetStream confirms it) -> the worker applies the
reports -> the replica acknowledges the batch once every part is confirmed.

(a) **One client streaming many rows** (``--rows``, default 10^6) of a vertex-pair collection
    (public ``i``, ``j``; private ``edge`` bit: WYZ §VI-B; every row distinct, so every row
    gets its own report):

    * ``SDK submit``: :meth:`AsyncClient.submit` end to end, what ``ldpsynth client submit`` does
      (validate and encode the rows, HMAC memo keys, perturb with :meth:`MechanismE.perturb_secure`
      (OS CSPRNG), charge ε in a durable on-disk ledger, cut into batches, stream, wait for every
      acknowledgement);
    * the same path split in two, on a second device (fresh ledger, fresh ids): ``client prepare``
      (:func:`load_rows` + :func:`prepare_reports`) and ``stream + durable commit``
      (:meth:`AsyncClient.submit_reports`: encode the batches, send, server validation, the
      durable path above, acks);
    * ``bare gRPC stream``: the very bytes of the second device's batches, pre-serialized, sent
      over a client-streaming RPC of a minimal ``grpc.aio`` server defined here (its own process,
      like the aggregator) whose handler only counts and discards them: the transport's ceiling.
      Median of ``--bare-repeats`` runs;
    * ``write + fsync``: the same bytes written to a new file beside the aggregator's data
      directory and fsynced, the disk's share of any durable commit of them (the log writes at
      least these reports, re-encoded, before an acknowledgement). Median of ``--bare-repeats``
      runs. Not a goal: it says how much of the bare stream's time a durable path spends on the
      disk alone.

(b) **Many small clients**: ``--clients`` devices (default 1,000), each with its own channel and
    in-memory ledger, run as asyncio tasks spread over ``--processes`` worker processes; once all
    are connected they start together and each submits ``--reports-per-client`` single-row
    reports one after the other (one ``SubmitReports`` stream each). Errors (must be 0),
    acknowledged reports/s over the wall time, p50/p99 latency of one report (submit to ack).

After the server stopped, every record of its log is read back and checked
(:func:`~ldpsynth.aggregator.runtime.verify.verify_data_dir`: checksums, positions, no report id twice,
quota charges) and the stored reports are counted.

Prints Markdown tables and writes ``ingest.md`` and ``ingest.csv`` (with the machine: cores,
load, Python, grpcio, date) to ``--out`` (default ``benchmarks/results``). Exit status 0 when every
report was acknowledged and stored exactly once, the log verified, and (except with ``--quick``)
every goal of issue 3 item 7 was met, 1 otherwise: the goals table says which.

Randomness: the raw rows come from a seeded numpy Generator (data only); every perturbation
goes through the device path, i.e. the OS CSPRNG, as on a real device.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import math
import multiprocessing
import os
import queue
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import google.protobuf
import grpc
import numpy as np
from arguments import require_positive  # benchmarks/arguments.py (scripts run from this folder)
from bare_grpc import serve_until_stopped  # benchmarks/bare_grpc.py
from machine import machine_info  # benchmarks/machine.py

from ldpsynth.aggregator.runtime.verify import Verification, verify_data_dir
from ldpsynth.client import AsyncClient, PrivacyLedger
from ldpsynth.client.device import prepare_reports
from ldpsynth.client.retry import RetryPolicy
from ldpsynth.client.rows import load_rows
from ldpsynth.client.submit import batch_capacity
from ldpsynth.client.transport import DEFAULT_MAX_MESSAGE_BYTES, open_channel
from ldpsynth.shared.protocol import CollectionInfo, reports_to_proto
from ldpsynth.shared.schema import Schema
from ldpsynth.simulation.local_cluster import ServerProcess

ROOT = Path(__file__).resolve().parent
COLLECTION = "pairs"
EPSILON = 1.0
DISCARD_METHOD = "/ldpsynth.bench.Discard/Drain"


def log(message: str) -> None:
    """A progress line on stderr."""
    print(f"[bench_ingest {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# ----- the collection and its rows ------------------------------------------------------------
def pair_schema(vertices: int) -> Schema:
    """Vertex pairs ``(i, j)`` in clear, the private ``edge`` bit perturbed (WYZ §VI-B)."""
    return Schema.from_json({
        "name": COLLECTION, "epsilon": EPSILON,
        "attributes": [{"name": "i", "type": "integer", "min": 0, "max": vertices - 1, "public": True},
                       {"name": "j", "type": "integer", "min": 0, "max": vertices - 1, "public": True},
                       {"name": "edge", "type": "binary"}]})


def pair_rows(first: int, count: int, vertices: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Raw rows ``first .. first+count-1`` of the pair enumeration (distinct pairs), edges ~ Bernoulli(0.05)."""
    i, j = np.divmod(np.arange(first, first + count, dtype=np.int64), vertices)
    return {"i": i, "j": j, "edge": (rng.random(count) < 0.05).astype(np.int64)}


def exact_budget(reports: int) -> float:
    """A ledger budget admitting exactly ``reports`` reports at ``EPSILON`` each (rounded up)."""
    return math.nextafter(reports * EPSILON * (1.0 + 1e-12), math.inf)


# ----- servers --------------------------------------------------------------------------------
def start_aggregator(data_dir: Path, collection_file: Path, scratch: Path, shards: int | None,
                     ray_address: str | None) -> ServerProcess:
    argv = [sys.executable, "-m", "ldpsynth.cli.aggregator_cmd", "serve", "--data-dir", str(data_dir),
            "--port", "0", "--collection", str(collection_file)]
    if shards is not None:
        argv += ["--shards", str(shards)]
    if ray_address:
        argv += ["--ray-address", ray_address]
    return ServerProcess(argv, scratch / "aggregator.log")


async def _drain(requests: Any, context: grpc.aio.ServicerContext) -> bytes:
    """The discard server's one client-streaming method: reads and drops every message and answers
    the byte count (8 bytes, little-endian)."""
    received = 0
    async for raw in requests:
        received += len(raw)
    return received.to_bytes(8, "little")


def start_discard_server(scratch: Path) -> ServerProcess:
    argv = [sys.executable, str(Path(__file__).resolve()), "--serve-discard"]
    return ServerProcess(argv, scratch / "discard.log")


def verify_stored(data_dir: Path) -> Verification:
    """Every record of the stopped aggregator's log read back and checked; ``rows[COLLECTION]``
    is the number of reports stored."""
    return asyncio.run(verify_data_dir(str(data_dir)))


# ----- (a) one client, many rows ----------------------------------------------------------------
@dataclass(frozen=True)
class Measurement:
    """One row of table (a)."""

    name: str
    rows: int
    seconds: float
    wire_bytes: int

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds

    @property
    def megabytes_per_second(self) -> float:
        return self.wire_bytes / self.seconds / 1e6


async def _bare_stream(target: str, messages: list[bytes]) -> float:
    """Seconds to stream ``messages`` to the discard server and get its answer."""
    retry = RetryPolicy()
    channel = open_channel(target, None, max_message_bytes=DEFAULT_MAX_MESSAGE_BYTES, retry=retry)
    drain = channel.stream_unary(DISCARD_METHOD)
    try:
        warm = drain()
        await warm.write(b"")
        await warm.done_writing()
        await warm
        started = time.perf_counter()
        call = drain()
        for message in messages:
            await call.write(message)
        await call.done_writing()
        received = int.from_bytes(await call, "little")
        seconds = time.perf_counter() - started
    finally:
        await channel.close()
    if received != sum(map(len, messages)):
        raise RuntimeError(f"discard server received {received} bytes, {sum(map(len, messages))} sent")
    return seconds


def _write_and_sync(path: Path, messages: list[bytes]) -> float:
    """Seconds to write ``messages`` to a new file at ``path`` and fsync it (the file is removed)."""
    started = time.perf_counter()
    with open(path, "wb") as out:
        for message in messages:
            out.write(message)
        out.flush()
        os.fsync(out.fileno())
    seconds = time.perf_counter() - started
    path.unlink()
    return seconds


async def one_client(target: str, discard_target: str, rows: int, vertices: int, scratch: Path, repeats: int,
                     rng: np.random.Generator) -> list[Measurement]:
    """Part (a); see the module docstring. The two devices hold pairs ``0 .. 2 rows - 1``."""
    columns = pair_rows(0, rows, vertices, rng)
    async with AsyncClient(target) as client:
        info = await client.get_collection(COLLECTION)
        capacity = batch_capacity(info, DEFAULT_MAX_MESSAGE_BYTES)
        batches = math.ceil(rows / capacity)

        log(f"(a) SDK submit: {rows:,} rows in {batches} batches of <= {capacity:,} reports ...")
        with PrivacyLedger(scratch / "device-1.sqlite", budget=exact_budget(rows)) as ledger:
            started = time.perf_counter()
            result = await client.submit(info, columns, ledger=ledger)
            total = time.perf_counter() - started
        if (result.sent, result.acknowledged) != (rows, rows):
            raise RuntimeError(f"SDK submit: {result.acknowledged} of {rows} rows acknowledged ({result})")
        log(f"(a) SDK submit: {total:.2f} s")

        log("(a) the same path split in two, on a second device ...")
        second = pair_rows(rows, rows, vertices, rng)
        with PrivacyLedger(scratch / "device-2.sqlite", budget=exact_budget(rows)) as ledger:
            started = time.perf_counter()
            prepared = await asyncio.to_thread(lambda: prepare_reports(info, load_rows(info.schema, second), ledger))
            prepare = time.perf_counter() - started
        started = time.perf_counter()
        streamed = await client.submit_reports(info, prepared.reports)
        stream = time.perf_counter() - started
        if streamed.acknowledged != rows:
            raise RuntimeError(f"submit_reports: {streamed.acknowledged} of {rows} rows acknowledged")
        log(f"(a) client prepare {prepare:.2f} s, stream + durable commit {stream:.2f} s")

    # The bytes the SDK sent for the second device: its batches, serialized as the stub does.
    reports = prepared.reports
    messages = [reports_to_proto(reports.slice(start, start + capacity), info.schema.name, info.card.version,
                                 sequence).SerializeToString()
                for sequence, start in enumerate(range(0, rows, capacity))]
    wire = sum(map(len, messages))
    log(f"(a) bare gRPC stream of the same {wire / 1e6:.1f} MB, {repeats} runs ...")
    bare = statistics.median([await _bare_stream(discard_target, messages) for _ in range(repeats)])
    log(f"(a) bare gRPC stream: {bare:.3f} s (median)")
    disk = statistics.median([_write_and_sync(scratch / "same-bytes.bin", messages) for _ in range(repeats)])
    log(f"(a) write + fsync of the same bytes: {disk:.3f} s (median)")
    return [Measurement("SDK submit (prepare + stream + durable commit)", rows, total, wire),
            Measurement("  client prepare (validate, encode, ledger, perturb_secure)", rows, prepare, 0),
            Measurement("  stream + durable commit (submit_reports)", rows, stream, wire),
            Measurement("write + fsync of the same bytes (disk only, no network)", rows, disk, wire),
            Measurement("bare gRPC stream, same bytes, server discards", rows, bare, wire)]


# ----- (b) many clients, single-row reports ------------------------------------------------------
@dataclass
class ManyOutcome:
    """Totals of part (b) (summed over worker processes)."""

    clients: int = 0
    reports: int = 0
    acknowledged: int = 0
    errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    first_start: float = math.inf
    last_end: float = -math.inf

    def add(self, other: ManyOutcome) -> None:
        self.clients += other.clients
        self.reports += other.reports
        self.acknowledged += other.acknowledged
        self.errors += other.errors
        self.latencies += other.latencies
        self.first_start = min(self.first_start, other.first_start)
        self.last_end = max(self.last_end, other.last_end)


async def _many_clients(target: str, group: tuple[int, ...], k: int, vertices: int, ready: Any, start: Any,
                        progress: Any) -> ManyOutcome:
    outcome = ManyOutcome(clients=len(group))
    clients: list[AsyncClient] = []
    try:
        clients = [AsyncClient(target) for _ in group]
        infos: list[CollectionInfo] = list(await asyncio.gather(*(c.get_collection(COLLECTION) for c in clients)))
        ready.put(len(clients))
        await asyncio.to_thread(start.wait)
        outcome.first_start = time.monotonic()

        async def device(c: int, client: AsyncClient, info: CollectionInfo) -> None:
            # Client c reports the pairs (c mod V, r) for r < k: distinct rows, one report each.
            with PrivacyLedger.for_simulation(budget=exact_budget(k)) as ledger:
                for r in range(k):
                    row = {"i": [c % vertices], "j": [r], "edge": [(c + r) % 2]}
                    started = time.monotonic()
                    try:
                        result = await client.submit(info, row, ledger=ledger, batch_size=1)
                    except Exception as exc:  # noqa: BLE001 - every failure is counted and shown
                        outcome.errors.append(f"client {c} report {r}: {type(exc).__name__}: {exc}")
                        continue
                    outcome.latencies.append(time.monotonic() - started)
                    outcome.reports += 1
                    outcome.acknowledged += result.acknowledged
                    progress.put(1)

        await asyncio.gather(*(device(c, client, info) for c, client, info in zip(group, clients, infos)))
        outcome.last_end = time.monotonic()
    finally:
        await asyncio.gather(*(client.close() for client in clients))
    return outcome


def run_client_group(target: str, group: tuple[int, ...], reports_per_client: int, vertices: int, ready: Any,
                     start: Any, progress: Any) -> ManyOutcome:
    """Worker process entry point of part (b): the clients numbered in ``group`` each send
    ``reports_per_client`` single-row reports to ``target``."""
    return asyncio.run(_many_clients(target, group, reports_per_client, vertices, ready, start, progress))


def many_clients(target: str, clients: int, reports_per_client: int, processes: int, vertices: int) -> ManyOutcome:
    """Part (b); see the module docstring. ``time.monotonic`` is system-wide, so the wall time
    spans the first start and the last acknowledgement over all processes."""
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("spawn")  # grpc state must not be forked
    groups = [group for group in (tuple(range(p, clients, processes)) for p in range(processes)) if group]
    total = clients * reports_per_client
    log(f"(b) {clients} clients x {reports_per_client} single-row reports over {len(groups)} processes ...")
    with context.Manager() as manager, ProcessPoolExecutor(len(groups), mp_context=context) as pool:
        ready, progress, start = manager.Queue(), manager.Queue(), manager.Event()
        futures = [pool.submit(run_client_group, target, g, reports_per_client, vertices, ready, start, progress)
                   for g in groups]
        connected = 0
        while connected < clients:
            try:
                connected += ready.get(timeout=1.0)
            except queue.Empty:
                failed = [f for f in futures if f.done()]
                if failed:
                    failed[0].result()  # raises the worker's error
        log(f"(b) {connected} clients connected; go")
        start.set()
        done, last = 0, time.monotonic()
        while not all(f.done() for f in futures):
            try:
                done += progress.get(timeout=0.5)
            except queue.Empty:
                pass
            if time.monotonic() - last > 2.0:
                log(f"(b) {done:,}/{total:,} reports acknowledged")
                last = time.monotonic()
        outcome = ManyOutcome()
        for future in futures:
            outcome.add(future.result())
    log(f"(b) {outcome.acknowledged:,}/{total:,} reports acknowledged, {len(outcome.errors)} errors")
    return outcome


# ----- output ---------------------------------------------------------------------------------
def table_a(measurements: list[Measurement]) -> str:
    bare = measurements[-1].rows_per_second
    lines = ["| measurement | rows | seconds | rows/s | MB/s on the wire | vs bare stream |",
             "|---|---:|---:|---:|---:|---:|"]
    for m in measurements:
        mb = f"{m.megabytes_per_second:,.1f}" if m.wire_bytes else "–"
        lines.append(f"| {m.name.strip()} | {m.rows:,} | {m.seconds:.3f} | {m.rows_per_second:,.0f} | {mb} | "
                     f"{m.rows_per_second / bare:.3f}x |")
    return "\n".join(lines) + "\n"


def table_b(outcome: ManyOutcome, reports_per_client: int, processes: int) -> str:
    seconds = outcome.last_end - outcome.first_start
    lat = np.asarray(outcome.latencies) * 1e3 if outcome.latencies else np.full(1, np.nan)
    return ("| clients | reports each | processes | errors | acknowledged | seconds | acknowledged reports/s "
            "| p50 latency (ms) | p99 latency (ms) |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
            f"| {outcome.clients:,} | {reports_per_client} | {processes} | {len(outcome.errors)} | "
            f"{outcome.acknowledged:,} | {seconds:.2f} | {outcome.acknowledged / seconds:,.0f} | "
            f"{np.percentile(lat, 50):.1f} | {np.percentile(lat, 99):.1f} |\n")


#: Goals of issue 3 item 7 (a), checked on the streaming path (``submit_reports``: encode, send,
#: validate, group commit, acknowledge) against the bare stream of the same bytes.
GOAL_RATIO = 0.5
GOAL_ROWS_PER_SECOND = 1e6


def goals(measurements: list[Measurement], many: ManyOutcome) -> list[tuple[str, str, bool]]:
    """``(goal, measured, met)`` rows."""
    stream, bare = measurements[2], measurements[-1]
    ratio = stream.rows_per_second / bare.rows_per_second
    return [(f"(a) stream + durable commit >= {GOAL_ROWS_PER_SECOND:,.0f} rows/s",
             f"{stream.rows_per_second:,.0f} rows/s", stream.rows_per_second >= GOAL_ROWS_PER_SECOND),
            (f"(a) stream + durable commit >= {GOAL_RATIO}x the bare stream", f"{ratio:.3f}x", ratio >= GOAL_RATIO),
            ("(b) no errors", f"{len(many.errors)} errors", not many.errors)]


def table_goals(rows: list[tuple[str, str, bool]], checked: bool) -> str:
    lines = ["| goal | measured | met |", "|---|---:|---|"]
    for goal, measured, met in rows:
        lines.append(f"| {goal} | {measured} | {('yes' if met else 'NO') if checked else 'not checked (--quick)'} |")
    return "\n".join(lines) + "\n"


def write_results(out: Path, command: str, info: dict[str, str], measurements: list[Measurement],
                  many: ManyOutcome, reports_per_client: int, processes: int, verification: Verification,
                  expected: int, checked: bool) -> str:
    """Write ``ingest.md`` and ``ingest.csv``; return the Markdown."""
    stored = verification.rows.get(COLLECTION, 0)
    seconds = many.last_end - many.first_start
    lat = np.asarray(many.latencies) * 1e3 if many.latencies else np.full(1, np.nan)
    machine_line = ", ".join(f"{k} {v}" for k, v in info.items())
    text = (f"# Ingest benchmark\n\n`{command}`\n\n{machine_line}\n\n"
            "Aggregator: `ldpsynth aggregator serve` in its own process, the one-machine default (replica -> "
            "Ray shard worker -> append to the embedded NATS JetStream log, file storage, sync_interval always -> "
            "ack); bare stream: a minimal grpc.aio server in its own process "
            "that discards what it reads; clients in this process (a) or in worker processes (b).\n\n"
            f"## (a) one client streaming {measurements[0].rows:,} rows\n\n{table_a(measurements)}\n"
            f"## (b) {many.clients:,} concurrent clients, single-row reports\n\n"
            f"{table_b(many, reports_per_client, processes)}\n"
            f"Stored in the aggregator after the run: {stored:,} reports (expected {expected:,}: "
            f"{'each stored once' if stored == expected else 'MISMATCH'}); every record of the log read back "
            f"and checked: {'no problem' if verification.ok else '; '.join(verification.problems[:5])}.\n\n"
            f"## Goals (issue 3 item 7)\n\n{table_goals(goals(measurements, many), checked)}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "ingest.md").write_text(text, encoding="utf-8")
    fields = ["part", "measurement", "rows", "seconds", "rows_per_s", "mb_per_s", "vs_bare", "clients", "errors",
              "p50_ms", "p99_ms", *info]
    bare = measurements[-1].rows_per_second
    with open(out / "ingest.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for m in measurements:
            writer.writerow({"part": "a", "measurement": m.name.strip(), "rows": m.rows, "seconds": f"{m.seconds:.6f}",
                             "rows_per_s": f"{m.rows_per_second:.0f}",
                             "mb_per_s": f"{m.megabytes_per_second:.2f}" if m.wire_bytes else "",
                             "vs_bare": f"{m.rows_per_second / bare:.4f}", "clients": 1, "errors": 0,
                             "p50_ms": "", "p99_ms": "", **info})
        writer.writerow({"part": "b",
                         "measurement": f"{many.clients} clients x {reports_per_client} single-row reports",
                         "rows": many.acknowledged, "seconds": f"{seconds:.6f}",
                         "rows_per_s": f"{many.acknowledged / seconds:.0f}", "mb_per_s": "", "vs_bare": "",
                         "clients": many.clients, "errors": len(many.errors),
                         "p50_ms": f"{np.percentile(lat, 50):.2f}", "p99_ms": f"{np.percentile(lat, 99):.2f}", **info})
    return text


# ----- main -----------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="(a) rows the one client streams (default 10^6)")
    parser.add_argument("--clients", type=int, default=1000, help="(b) concurrent clients (default 1000)")
    parser.add_argument("--reports-per-client", type=int, default=5, help="(b) single-row reports each (default 5)")
    parser.add_argument("--processes", type=int, default=2, help="(b) worker processes running the clients (default 2)")
    parser.add_argument("--bare-repeats", type=int, default=3, help="(a) runs of the bare stream (median; default 3)")
    parser.add_argument("--shards", type=int, help="aggregator shards (default: its own, one per CPU)")
    parser.add_argument("--ray-address", help="the aggregator joins this Ray cluster (default: it starts one)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 4,000 rows, 20 clients x 3 reports")
    parser.add_argument("--out", type=Path, default=ROOT / "results", help="where ingest.md/csv go")
    parser.add_argument("--seed", type=int, default=2026, help="seeds the raw rows (data only)")
    parser.add_argument("--serve-discard", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.clients, args.reports_per_client, args.bare_repeats = 4000, 20, 3, 1
    require_positive(parser, args, ("rows", "clients", "reports_per_client", "processes", "bare_repeats"))
    if args.clients * args.reports_per_client > 2 ** 20:
        parser.error("--clients x --reports-per-client: at most 2^20 reports")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve_discard:  # the discard server's own process (start_discard_server), until SIGTERM
        return serve_until_stopped(DISCARD_METHOD, grpc.stream_unary_rpc_method_handler(_drain))
    command = "python benchmarks/bench_ingest.py " + " ".join(sys.argv[1:] if argv is None else argv)
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory(prefix="ldpsynth-bench-ingest-") as tmp:
        scratch = Path(tmp)
        # Enough vertices for 2 x rows distinct pairs in (a) and reports_per_client pairs per client in (b).
        vertices = max(math.isqrt(2 * args.rows - 1) + 1, args.reports_per_client)
        collection_file = scratch / "pairs.json"
        collection_file.write_text(pair_schema(vertices).dumps(), encoding="utf-8")
        data_dir = scratch / "data"
        log("starting the aggregator (embedded NATS log, Ray shard workers) and the discard server ...")
        aggregator = start_aggregator(data_dir, collection_file, scratch, args.shards, args.ray_address)
        try:
            discard = start_discard_server(scratch)
            try:
                log(f"aggregator at {aggregator.address}, discard server at {discard.address}")
                measurements = asyncio.run(one_client(aggregator.address, discard.address, args.rows, vertices, scratch,
                                                      args.bare_repeats, rng))
            finally:
                discard.terminate()
            many = many_clients(aggregator.address, args.clients, args.reports_per_client, args.processes, vertices)
        finally:
            code = aggregator.terminate(120.0)
        if code != 0:
            raise RuntimeError(f"the aggregator exited with status {code}")
        log("reading back and checking every record of the aggregator's log ...")
        verification = verify_stored(data_dir)
    expected = 2 * args.rows + args.clients * args.reports_per_client
    text = write_results(args.out, command, machine_info(grpcio=grpc.__version__, protobuf=google.protobuf.__version__),
                         measurements, many, args.reports_per_client,
                         args.processes, verification, expected, checked=not args.quick)
    print(text)
    for error in many.errors[:5]:
        print(f"error: {error}")
    log(f"wrote {args.out / 'ingest.md'} and {args.out / 'ingest.csv'}")
    met = args.quick or all(met for _, _, met in goals(measurements, many))
    stored = verification.rows.get(COLLECTION, 0)
    return 0 if not many.errors and stored == expected and verification.ok and met else 1


if __name__ == "__main__":
    sys.exit(main())
