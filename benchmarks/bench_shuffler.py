"""Cost of the shuffler tier (``ldpsynth shuffler serve``; docs/contract.md §16): its permutation, its
throughput per process, and end-to-end ingest of sealed reports with and without it.

Part a (no server), each beside its baseline in the same run (alternating repeats, the minimum kept):
the shuffler's permutation of ``n`` sealed reports (:func:`ldpsynth.shuffler.permutation.uniform_permutation`,
Fisher-Yates on ``os.urandom``, then the rows gathered) beside numpy's ``Generator.permutation`` of the
same rows (a seeded PCG64: the bare cost of a shuffle).

Part b (real processes on 127.0.0.1): a ``ldpsynth shuffler serve`` subprocess (threshold 4,096), fed
by 16 concurrent devices, each sending its next sealed batch of 512 (``SubmitSealed``; sealed
beforehand, so the devices' own cost is not counted) once the last was acknowledged, until ``n``
reports are acknowledged (the calls still waiting in the last pool are then cancelled; a pool only
leaves at its threshold, so a run is timed to ``n`` acknowledged reports, not to the last call):

* **shuffler alone**: toward a sink replica that acknowledges ``SubmitShuffled`` at once (a bare
  ``grpc.aio`` handler in this process): reports/s through the shuffler, and the shuffler process's
  CPU per report (``/proc/PID/stat``), beside the same batches sent straight to the sink;
* **end to end**: toward a real in-process aggregator (one machine, its own Ray runtime, opening on
  one thread): reports/s stored through the shuffler beside the same kind of batches sent straight to
  ``SubmitShuffled`` (no shuffler) in the same run, each into a collection of its own.

Usage::

    python benchmarks/bench_shuffler.py               # full sizes
    python benchmarks/bench_shuffler.py --quick       # small sizes (CI smoke test)
    python benchmarks/bench_shuffler.py --out DIR     # write DIR/shuffler.md and DIR/shuffler.csv

No goal is checked: the issue sets none; these are measured to be planned with.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import os
import sys
import tempfile
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
import numpy as np
from machine import machine_info  # benchmarks/machine.py (scripts run from this folder)
from sealed_workload import best, reports_of, schema  # benchmarks/sealed_workload.py

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.sealing import OpeningKey, seal_reports
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import shuffler_pb2 as spb
from ldpsynth.shuffler.permutation import uniform_permutation
from ldpsynth.simulation.local_cluster import ServerProcess

if TYPE_CHECKING:
    from ldpsynth.aggregator.ingress.server import AggregatorServer
    from ldpsynth.aggregator.runtime.config import ServerConfig

T = TypeVar("T")
RESULTS = Path(__file__).resolve().parent / "results"
VERSION = "E/1"
DEVICES, CALL_REPORTS, THRESHOLD = 16, 512, 4096
FIELDS = ["part", "measurement", "n", "seconds", "per_report_us", "reports_per_s", "baseline_seconds", "ratio"]
SHUFFLED = "/ldpsynth.v1.CollectionService/SubmitShuffled"
SEALED = "/ldpsynth.v1.ShufflerService/SubmitSealed"




def row(part: str, measurement: str, n: int, seconds: float, baseline: float | None = None) -> dict[str, object]:
    return {"part": part, "measurement": measurement, "n": n, "seconds": seconds,
            "per_report_us": 1e6 * seconds / n, "reports_per_s": n / seconds,
            "baseline_seconds": "" if baseline is None else baseline,
            "ratio": "" if baseline is None else seconds / baseline}


def part_a(sizes: list[int], repeats: int) -> list[dict[str, object]]:
    rows = []
    generator = np.random.default_rng(3)
    for n in sizes:
        sealed = np.frombuffer(os.urandom(84 * n), np.uint8).reshape(n, 84)
        seconds, base = best(lambda sealed=sealed: sealed[uniform_permutation(len(sealed))],
                             lambda sealed=sealed: sealed[generator.permutation(len(sealed))], repeats)
        rows.append(row("a", "permute sealed reports: Fisher-Yates on os.urandom / numpy Generator.permutation",
                        n, seconds, base))
    return rows


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux ``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Sink:
    """A replica stand-in on 127.0.0.1 (its own thread and event loop): GetCollection answers ``info``,
    SubmitShuffled acknowledges at once."""

    def __init__(self, collection: pb.Collection):
        self.collection = collection
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.address = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(30)

    async def _start(self) -> str:
        async def get(request: bytes, context: grpc.aio.ServicerContext) -> pb.Collection:
            return self.collection

        async def shuffled(request: pb.SealedBatch, context: grpc.aio.ServicerContext) -> pb.ShuffledAck:
            return pb.ShuffledAck(sequence=request.sequence, accepted=len(request.reports) // 84)

        self._server = grpc.aio.server(options=[("grpc.max_receive_message_length", 1 << 26)])
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("ldpsynth.v1.CollectionService", {
            "GetCollection": grpc.unary_unary_rpc_method_handler(
                get, response_serializer=pb.Collection.SerializeToString),
            "SubmitShuffled": grpc.unary_unary_rpc_method_handler(
                shuffled, request_deserializer=pb.SealedBatch.FromString,
                response_serializer=pb.ShuffledAck.SerializeToString)}),))
        port = self._server.add_insecure_port("127.0.0.1:0")
        await self._server.start()
        return f"127.0.0.1:{port}"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._server.stop(0), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)


async def send_until(target: str, method: str, batches: list[pb.SealedBatch], goal: int,
                     ack: type) -> tuple[int, float]:
    """DEVICES devices at once, each sending the next of ``batches`` as soon as its last call was
    acknowledged, until ``goal`` reports are acknowledged; then the calls still waiting are cancelled
    (in a shuffler, the last pool's calls withdraw). Returns the reports acknowledged and the wall seconds."""
    supply = iter(batches)
    done = asyncio.Event()
    acknowledged = 0
    async with grpc.aio.insecure_channel(target, options=[("grpc.max_send_message_length", 1 << 26)]) as channel:
        call = channel.unary_unary(method, request_serializer=pb.SealedBatch.SerializeToString,
                                   response_deserializer=ack.FromString)

        async def device() -> None:
            nonlocal acknowledged
            for batch in supply:
                accepted = (await call(batch, timeout=600)).accepted  # awaited before the sum is read
                acknowledged += accepted
                if acknowledged >= goal:
                    done.set()

        start = time.perf_counter()
        devices = [asyncio.ensure_future(device()) for _ in range(DEVICES)]
        everyone = asyncio.gather(*devices)  # ends if the supply runs out first
        await asyncio.wait((asyncio.ensure_future(done.wait()), everyone), return_when=asyncio.FIRST_COMPLETED)
        wall = time.perf_counter() - start
        for task in devices:
            task.cancel()
        failures = [r for r in await asyncio.gather(*devices, return_exceptions=True)
                    if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError)]
    if acknowledged < goal:
        raise RuntimeError(f"only {acknowledged} of {goal} reports acknowledged: {failures[:1]}")
    return acknowledged, wall


def device_calls(key_id: bytes, collection: str, sealed: np.ndarray) -> list[pb.SealedBatch]:
    """The sealed reports cut into calls of CALL_REPORTS."""
    return [pb.SealedBatch(collection=collection, key_id=key_id, sequence=i,
                           reports=sealed[start:start + CALL_REPORTS].tobytes())
            for i, start in enumerate(range(0, len(sealed), CALL_REPORTS))]


def through_shuffler(replica: str, n: int, calls: list[pb.SealedBatch], log: Path) -> tuple[int, float, float]:
    """Reports acknowledged, wall seconds and shuffler CPU seconds of ``n`` reports of ``calls`` through a fresh
    ``ldpsynth shuffler serve`` (after a first pool, not timed: the collection is learnt)."""
    argv = [sys.executable, "-m", "ldpsynth.cli.shuffler_cmd", "serve", "--listen", "127.0.0.1:0", "--aggregator",
            replica, "--threshold", str(THRESHOLD), "--max-wait", "60"]
    shuffler = ServerProcess(argv, log)
    try:
        warm = THRESHOLD * 5 // 4 // CALL_REPORTS + DEVICES
        asyncio.run(send_until(shuffler.address, SEALED, calls[:warm], THRESHOLD, spb.SealedAck))
        cpu = cpu_seconds(shuffler.proc.pid)
        acknowledged, wall = asyncio.run(send_until(shuffler.address, SEALED, calls[warm:], n, spb.SealedAck))
        cpu = cpu_seconds(shuffler.proc.pid) - cpu
    finally:
        shuffler.terminate()
    return acknowledged, wall, cpu


def part_b(n: int, out: Path) -> list[dict[str, object]]:
    """The shuffler toward a sink, then end to end toward a real aggregator, each beside the same calls
    sent straight to SubmitShuffled."""
    from ldpsynth.shared.protocol import CollectionInfo, Limits

    rows: list[dict[str, object]] = []
    rng = np.random.default_rng(2)
    supply = 2 * n + 4 * THRESHOLD  # sealed reports enough for the warm-up, the run and the calls cancelled
    key = OpeningKey.generate()
    sink = Sink(CollectionInfo(MechanismCard.for_schema(schema("sink")), Limits(), key.public).to_proto())
    try:
        calls = device_calls(key.key_id, "sink", seal_reports(key.public, "sink", VERSION,
                                                              reports_of(schema("sink"), supply, rng)))
        acknowledged, wall, cpu = through_shuffler(sink.address, n, calls, out / "shuffler-sink.log")
        direct, base = asyncio.run(send_until(sink.address, SHUFFLED, calls, n, pb.ShuffledAck))
    finally:
        sink.stop()
    rows.append(row("b", f"shuffler alone: {DEVICES} devices, calls of {CALL_REPORTS} -> shuffler (threshold "
                         f"{THRESHOLD:,}) -> sink / the same calls straight to the sink", acknowledged, wall,
                    base * acknowledged / direct))
    rows.append({**row("b", "shuffler process CPU per report (toward the sink)", acknowledged, cpu),
                 "reports_per_s": ""})
    from ldpsynth.aggregator.runtime.config import ServerConfig

    with tempfile.TemporaryDirectory() as tmp:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()

        def run(coroutine: Coroutine[Any, Any, T]) -> T:
            return asyncio.run_coroutine_threadsafe(coroutine, loop).result(900)

        config = ServerConfig(data_dir=Path(tmp) / "data", shards=2, collections=(
            MechanismCard.for_schema(schema("shuffled")), MechanismCard.for_schema(schema("direct"))))
        server = run(_create(config))
        try:
            run(server.start())
            opening = server.backend.opening_key
            assert opening is not None
            calls = device_calls(opening.key_id, "shuffled", seal_reports(
                opening.public, "shuffled", VERSION, reports_of(schema("shuffled"), supply, rng)))
            acknowledged, wall, cpu = through_shuffler(server.address, n, calls, out / "shuffler-e2e.log")
            stored = run(server.stored("shuffled"))
            straight = device_calls(opening.key_id, "direct", seal_reports(
                opening.public, "direct", VERSION, reports_of(schema("direct"), supply, rng)))
            asyncio.run(send_until(server.address, SHUFFLED, straight[:DEVICES], DEVICES, pb.ShuffledAck))
            direct, base = asyncio.run(send_until(server.address, SHUFFLED, straight[DEVICES:], n, pb.ShuffledAck))
            assert stored >= acknowledged, "every acknowledged report stored"
        finally:
            run(server.stop(0))
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
    rows.append(row("b", "end to end: devices -> shuffler -> aggregator (SubmitShuffled, stored) / the same calls "
                         "straight to SubmitShuffled", acknowledged, wall, base * acknowledged / direct))
    rows.append({**row("b", "shuffler process CPU per report (toward the aggregator)", acknowledged, cpu),
                 "reports_per_s": ""})
    return rows


async def _create(config: ServerConfig) -> AggregatorServer:
    """The server, made on the loop that runs it."""
    from ldpsynth.aggregator.ingress.server import AggregatorServer
    return AggregatorServer(config)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke test)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    info_ = machine_info(grpcio=grpc.__version__)
    sizes, repeats, n_b = ([1000, 10000], 2, 4 * THRESHOLD) if args.quick else ([1000, 10000, 100000], 5,
                                                                                 32 * THRESHOLD)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = part_a(sizes, repeats)
    with tempfile.TemporaryDirectory() as logs:
        rows += part_b(n_b, Path(logs))
    lines = ["# Shuffler benchmark", "", *[f"- {k}: {v}" for k, v in info_.items()],
             f"- part a: minimum over {repeats} repeats, each beside its baseline in the same run; part b: one run "
             "each, the first pool of each run not timed",
             "- sealed reports of 84 bytes (one public attribute, E/1)", "- quick run: sizes reduced"
             if args.quick else "", "",
             "| part | measurement | n | seconds | µs per report | reports/s | ratio to baseline |",
             "|---|---|---:|---:|---:|---:|---:|"]

    def fmt(value: object, spec: str) -> str:
        return "" if value == "" else format(value, spec)

    for r in rows:
        lines.append(f"| {r['part']} | {r['measurement']} | {r['n']:,} | {fmt(r['seconds'], '.4f')} | "
                     f"{fmt(r['per_report_us'], '.1f')} | {fmt(r['reports_per_s'], ',.0f')} | "
                     f"{fmt(r['ratio'], '.2f')} |")
    text = "\n".join(lines) + "\n"
    print(text)
    (args.out / "shuffler.md").write_text(text, encoding="utf-8")
    with open(args.out / "shuffler.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
