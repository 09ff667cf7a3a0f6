"""Web port benchmark: the per-report cost of a batch submitted over the web port (Connect unary and
gRPC-Web ``SubmitBatch``, HTTP/1.1) beside the same batches over the gRPC port (the ``SubmitReports``
stream, and the unary ``SubmitBatch`` over gRPC).

Starts a real ``ldpsynth aggregator serve`` (its own process, port 0, ``--web-port 0``, a temporary
data directory, one shard, the durable one-machine default) and, for each batch size, sends the same
number of fresh reports (new random ids: every report is committed) through each path from this
process, one call or stream at a time (then many small clients at once, each on its own connection,
as browsers are: 4 reports per call): the batches are serialized before the clock starts. Measured:
wall time per report, and the **replica process's CPU time per report** (user + system of the
``aggregator serve`` process from ``/proc``; the shard worker and the log run in other processes and
do the same work for every path), which is the ingress's own cost. The stream overlaps up to four
batches' commits; the unary calls wait for each ack, so their wall time includes a commit's latency
per batch and the CPU time is the fair comparison.

Writes ``web.md`` and ``web.csv`` to ``--out`` (default ``benchmarks/results``); ``--quick`` is the
CI smoke test (small sizes). Exit status 0 when every report was acknowledged as new.
"""

from __future__ import annotations

import argparse
import csv
import http.client
import os
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import numpy as np
from machine import machine_info  # benchmarks/machine.py (scripts run from this folder)

from ldpsynth.shared.protocol import reports_to_proto
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from ldpsynth.simulation.local_cluster import ServerProcess

RESULTS = Path(__file__).resolve().parent / "results"
SCHEMA = Schema.from_json({"name": "ratings", "epsilon": 1.0, "attributes": [
    {"name": "movie", "type": "integer", "min": 1, "max": 1682, "public": True},
    {"name": "rating", "type": "integer", "min": 1, "max": 5}]})
PATH = "/ldpsynth.v1.CollectionService/SubmitBatch"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def batches(rng: np.random.Generator, total: int, size: int) -> list[pb.ReportBatch]:
    """``total`` fresh reports in batches of ``size``."""
    out = []
    for seq, start in enumerate(range(0, total, size)):
        n = min(size, total - start)
        reports = Reports(new_report_ids(n), rng.integers(0, 5, n), rng.integers(0, 1682, (n, 1)))
        out.append(reports_to_proto(reports, SCHEMA.name, "E/1", seq))
    return out


def grpc_stream(stub: pb_grpc.CollectionServiceStub, messages: list[pb.ReportBatch]) -> list[pb.BatchAck]:
    return list(stub.SubmitReports(iter(messages), timeout=600))


def grpc_unary(stub: pb_grpc.CollectionServiceStub, messages: list[pb.ReportBatch]) -> list[pb.BatchAck]:
    return [stub.SubmitBatch(message, timeout=600) for message in messages]


def web_calls(address: str, grpc_web: bool) -> Callable[[list[pb.ReportBatch]], list[pb.BatchAck]]:
    """Sequential SubmitBatch calls over one HTTP/1.1 keep-alive connection (Connect, or gRPC-Web)."""
    host, port = address.rsplit(":", 1)

    def send(messages: list[pb.ReportBatch]) -> list[pb.BatchAck]:
        bodies = [m.SerializeToString() for m in messages]
        if grpc_web:
            bodies = [struct.pack(">BI", 0, len(b)) + b for b in bodies]
        headers = {"content-type": "application/grpc-web+proto"} if grpc_web else \
            {"content-type": "application/proto", "connect-protocol-version": "1"}
        conn = http.client.HTTPConnection(host, int(port), timeout=600)
        acks = []
        try:
            for body in bodies:
                conn.request("POST", PATH, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                if answer.status != 200 or (grpc_web and answer.getheader("grpc-status") not in (None, "0")):
                    raise RuntimeError(f"HTTP {answer.status}: {data[:200]!r} {answer.getheaders()}")
                acks.append(pb.BatchAck.FromString(data[5:5 + struct.unpack(">I", data[1:5])[0]] if grpc_web else data))
        finally:
            conn.close()
        return acks

    return send


def concurrently(clients: int, make: Callable[[], Callable[[list[pb.ReportBatch]], list[pb.BatchAck]]],
                 work: list[list[pb.ReportBatch]]) -> Callable[[list[pb.ReportBatch]], list[pb.BatchAck]]:
    """A path that sends ``work[i]`` from client ``i`` (its own connection), all clients at once."""
    def send(_: list[pb.ReportBatch]) -> list[pb.BatchAck]:
        paths = [make() for _ in range(clients)]
        with ThreadPoolExecutor(clients) as pool:
            return [ack for acks in pool.map(lambda i: paths[i](work[i]), range(clients)) for ack in acks]
    return send


def measure(pid: int, path: Callable[[list[pb.ReportBatch]], list[pb.BatchAck]],
            messages: list[pb.ReportBatch]) -> tuple[float, float, int]:
    """Wall seconds, replica CPU seconds, reports acknowledged as new."""
    cpu, start = cpu_seconds(pid), time.perf_counter()
    acks = path(messages)
    wall = time.perf_counter() - start
    return wall, cpu_seconds(pid) - cpu, sum(a.accepted for a in acks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke test)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where web.md/csv go")
    args = parser.parse_args(argv)
    info = machine_info(grpcio=grpc.__version__)
    plan = [(64, 512), (1024, 4096)] if args.quick else [(1, 2_000), (64, 32_768), (1024, 131_072), (16_384, 262_144)]
    rng = np.random.default_rng(2026)
    rows, ok = [], True
    with tempfile.TemporaryDirectory(prefix="ldpsynth-bench-web-") as scratch:
        collection = Path(scratch) / "ratings.json"
        collection.write_text(SCHEMA.dumps())
        server = ServerProcess.aggregator(["--data-dir", str(Path(scratch) / "data"), "--collection", str(collection),
                                           "--port", "0", "--web-port", "0", "--shards", "1"],
                                          Path(scratch) / "server.log")
        try:
            channel = grpc.insecure_channel(server.address, options=[("grpc.max_send_message_length", 1 << 30)])
            stub = pb_grpc.CollectionServiceStub(channel)
            paths: dict[str, Callable[[list[pb.ReportBatch]], list[pb.BatchAck]]] = {
                "gRPC SubmitReports stream": lambda m: grpc_stream(stub, m),
                "gRPC SubmitBatch (unary)": lambda m: grpc_unary(stub, m),
                "web Connect SubmitBatch, HTTP/1.1": web_calls(server.web_address, grpc_web=False),
                "web gRPC-Web SubmitBatch, HTTP/1.1": web_calls(server.web_address, grpc_web=True),
            }
            measure(server.proc.pid, paths["gRPC SubmitReports stream"], batches(rng, 2048, 256))  # warm up
            for size, total in plan:
                for name, path in paths.items():
                    wall, cpu, accepted = measure(server.proc.pid, path, batches(rng, total, size))
                    ok &= accepted == total
                    rows.append({"path": name, "batch_reports": size, "reports": total, "seconds": wall,
                                 "reports_per_s": total / wall, "wall_us_per_report": 1e6 * wall / total,
                                 "replica_cpu_us_per_report": 1e6 * cpu / total})
                    print(f"{name:38s} batch {size:6d}: {total / wall:12,.0f} reports/s, "
                          f"{1e6 * cpu / total:8.2f} us CPU/report", flush=True)
            # Many small clients at once, as browsers are: each its own connection, a few reports per call.
            clients, calls, size = (8, 4, 4) if args.quick else (32, 25, 4)

            def grpc_client() -> Callable[[list[pb.ReportBatch]], list[pb.BatchAck]]:
                own = pb_grpc.CollectionServiceStub(grpc.insecure_channel(server.address))
                return lambda m: grpc_unary(own, m)

            concurrent_paths = {"gRPC SubmitBatch (unary)": grpc_client,
                                "web Connect SubmitBatch, HTTP/1.1": lambda: web_calls(server.web_address, False)}
            for name, make in concurrent_paths.items():
                work = [batches(rng, calls * size, size) for _ in range(clients)]
                total = clients * calls * size
                wall, cpu, accepted = measure(server.proc.pid, concurrently(clients, make, work), [])
                ok &= accepted == total
                rows.append({"path": f"{name}, {clients} clients at once", "batch_reports": size, "reports": total,
                             "seconds": wall, "reports_per_s": total / wall, "wall_us_per_report": 1e6 * wall / total,
                             "replica_cpu_us_per_report": 1e6 * cpu / total})
                print(f"{name}, {clients} clients: {total / wall:12,.0f} reports/s, "
                      f"{1e6 * cpu / total:8.2f} us CPU/report", flush=True)
            channel.close()
        finally:
            ok &= server.terminate() == 0
    write(args.out, info, rows)
    return 0 if ok else 1


def table(rows: list[dict[str, float | int | str]]) -> Iterator[str]:
    yield "| path | reports per batch | reports | seconds | reports/s | wall µs/report | replica CPU µs/report |"
    yield "|---|---:|---:|---:|---:|---:|---:|"
    for r in rows:
        yield (f"| {r['path']} | {r['batch_reports']:,} | {r['reports']:,} | {r['seconds']:.3f} | "
               f"{r['reports_per_s']:,.0f} | {r['wall_us_per_report']:.2f} | {r['replica_cpu_us_per_report']:.2f} |")


def write(out: Path, info: dict[str, str], rows: list[dict[str, float | int | str]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    header = ", ".join(f"{k} {v}" for k, v in info.items())
    text = ["# Web port benchmark", "", f"`python benchmarks/bench_web.py {' '.join(sys.argv[1:])}`", "", header, "",
            "One client in this process, one call or stream at a time, then (last rows) many clients at once, each "
            "on its own connection; fresh reports (every one committed); the "
            "replica's own CPU from /proc (the shard worker and the log are other processes and do the same work "
            "for every path).", "", *table(rows), ""]
    (out / "web.md").write_text("\n".join(text), encoding="utf-8")
    with open(out / "web.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    sys.exit(main())
