"""Cost of sealed reports (docs/contract.md §16): sealing on the device, opening on the replica, bytes.

Part a (no server), each timed beside its bare baseline in the same run (alternating repeats, the
minimum kept):

* **seal** ``n`` reports (:func:`ldpsynth.shared.sealing.seal_reports`: the plaintexts laid out with
  numpy, one HPKE single-shot seal each) beside a bare loop of ``Suite.encrypt`` over plaintexts
  already laid out; the floor is two X25519 scalar multiplications per report (the ephemeral key and
  the shared secret), timed as bare ``exchange`` calls;
* **open** ``n`` sealed reports and check them (:meth:`OpeningKey.open_all` +
  :func:`decode_plaintexts`, what ``SubmitShuffled`` does before admission) beside a bare loop of
  ``Suite.decrypt``; the floor is one X25519 multiplication per report;
* **open** through ``SubmitShuffled``'s opener on one thread (the default) and on two worker processes
  (``--open-processes 2``);
* **bytes** per report: a sealed report, a ``SealedBatch`` of 4,096 per report, and the same reports
  in clear (``ReportBatch``).

Part b (an in-process one-machine aggregator, its own Ray runtime; skipped with ``--no-server``):
the same reports stored through ``SubmitShuffled`` (sealed beforehand, batches of 4,096; opened on one
thread, then on a second aggregator with ``--open-processes 2``) and through ``SubmitReports`` (the
SDK's stream), each into a collection of its own: reports/s end to end and the replica process's CPU
per report (the shard workers, and the opening processes, run in processes of their own and are not
counted).

Usage::

    python benchmarks/bench_sealing.py               # full sizes
    python benchmarks/bench_sealing.py --quick       # small sizes (CI smoke test)
    python benchmarks/bench_sealing.py --out DIR     # write DIR/sealing.md and DIR/sealing.csv

No goal is checked: the issue sets none for these costs; they are measured to be planned with.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from machine import machine_info  # benchmarks/machine.py (scripts run from this folder)
from sealed_workload import best, reports_of, schema  # benchmarks/sealed_workload.py

from ldpsynth.client.submit import report_bytes
from ldpsynth.shared.protocol import reports_to_proto
from ldpsynth.shared.sealing import (
    OpeningKey,
    decode_plaintexts,
    encode_plaintexts,
    info,
    plaintext_bytes,
    seal_reports,
    sealed_report_bytes,
)
from ldpsynth.shared.wire import collection_pb2 as pb

RESULTS = Path(__file__).resolve().parent / "results"
VERSION = "E/1"
FIELDS = ["part", "measurement", "n", "seconds", "per_report_us", "reports_per_s", "baseline_seconds", "ratio",
          "bytes_per_report"]




def row(part: str, measurement: str, n: int, seconds: float, baseline: float | None = None,
        nbytes: float | None = None) -> dict[str, object]:
    return {"part": part, "measurement": measurement, "n": n, "seconds": seconds,
            "per_report_us": 1e6 * seconds / n, "reports_per_s": n / seconds,
            "baseline_seconds": "" if baseline is None else baseline,
            "ratio": "" if baseline is None else seconds / baseline,
            "bytes_per_report": "" if nbytes is None else nbytes}


def part_a(sizes: list[int], repeats: int) -> list[dict[str, object]]:
    from cryptography.hazmat.primitives import hpke
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    suite = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_128_GCM)
    s, rng, key = schema("ratings"), np.random.default_rng(1), OpeningKey.generate()
    public, context = key.public._pyca(), info("ratings")
    length = plaintext_bytes(s, VERSION)
    rows: list[dict[str, object]] = []
    for n in sizes:
        reports = reports_of(s, n, rng)
        plain = encode_plaintexts(reports, VERSION)
        seconds, base = best(lambda reports=reports: seal_reports(key.public, "ratings", VERSION, reports),
                             lambda plain=plain: [suite.encrypt(p.data, public, info=context) for p in plain], repeats)
        rows.append(row("a", "seal (device): seal_reports / bare Suite.encrypt loop", n, seconds, base))
        sealed = seal_reports(key.public, "ratings", VERSION, reports)

        def open_and_check(sealed: np.ndarray = sealed) -> None:
            plaintexts, _ = key.open_all(sealed, "ratings", length)
            decode_plaintexts(plaintexts, s, VERSION)

        def bare_open(sealed: np.ndarray = sealed) -> None:
            for r in sealed:
                suite.decrypt(r.data, key._key, info=context)

        seconds, base = best(open_and_check, bare_open, repeats)
        rows.append(row("a", "open + check (replica): open_all + decode_plaintexts / bare Suite.decrypt loop",
                        n, seconds, base))
    n = sizes[-1]
    from ldpsynth.aggregator.ingress.shuffled import ShuffledIngest
    sealed = seal_reports(key.public, "ratings", VERSION, reports_of(s, n, rng))
    for processes in (0, 2):
        pool = ShuffledIngest(None, None, key, processes=processes)  # type: ignore[arg-type]  # only its opener
        try:
            asyncio.run(pool._open(key, sealed[:64], "ratings", length))  # the processes start (spawn) here
            seconds, _ = best(lambda pool=pool: asyncio.run(pool._open(key, sealed, "ratings", length)),
                              lambda: None, repeats)
        finally:
            pool.close()
        where = "one thread (the default)" if not processes else f"{processes} worker processes (--open-processes)"
        rows.append(row("a", f"open (replica, SubmitShuffled's opener): {where}", n, seconds))
    a, b = X25519PrivateKey.generate(), X25519PrivateKey.generate().public_key()
    seconds, _ = best(lambda: [a.exchange(b) for _ in range(n)], lambda: None, repeats)
    rows.append(row("a", "floor: one X25519 exchange (opening needs 1, sealing 2)", n, seconds))
    reports = reports_of(s, 4096, rng)
    sealed = seal_reports(key.public, "ratings", VERSION, reports)
    batch = pb.SealedBatch(collection="ratings", key_id=key.key_id, sequence=1, reports=sealed.tobytes())
    clear = reports_to_proto(reports, "ratings", VERSION, 1)
    for what, nbytes in (("bytes: one sealed report (enc 32 + plaintext + tag 16)", sealed_report_bytes(s, VERSION)),
                         ("bytes: a SealedBatch of 4,096, per report", batch.ByteSize() / 4096),
                         ("bytes: the same report in clear (ReportBatch columns)", report_bytes(1)),
                         ("bytes: a ReportBatch of 4,096, per report", clear.ByteSize() / 4096)):
        rows.append({"part": "a", "measurement": what, "n": 4096, "seconds": "", "per_report_us": "",
                     "reports_per_s": "", "baseline_seconds": "", "ratio": "", "bytes_per_report": nbytes})
    return rows


def part_b(n: int, batch: int) -> list[dict[str, object]]:
    """Reports/s and replica CPU through SubmitShuffled (opening on one thread, then on 2 worker
    processes) and SubmitReports, each on a fresh in-process aggregator."""
    import grpc

    from ldpsynth.aggregator.ingress.server import AggregatorServer
    from ldpsynth.aggregator.runtime.config import ServerConfig
    from ldpsynth.client import AsyncClient
    from ldpsynth.shared.card import MechanismCard

    sealed_s, clear_s, rng = schema("sealed"), schema("clear"), np.random.default_rng(2)

    async def run(data_dir: Path, processes: int) -> list[dict[str, object]]:
        config = ServerConfig(data_dir=data_dir, collections=(MechanismCard.for_schema(sealed_s),
                                                              MechanismCard.for_schema(clear_s)), shards=2,
                              open_processes=processes)
        server = AggregatorServer(config)
        await server.start()
        try:
            key = server.backend.opening_key
            assert key is not None
            reports = reports_of(sealed_s, n, rng)
            sealed = seal_reports(key.public, "sealed", VERSION, reports)
            batches = [pb.SealedBatch(collection="sealed", key_id=key.key_id, sequence=i,
                                      reports=sealed[start:start + batch].tobytes())
                       for i, start in enumerate(range(0, n, batch))]
            where = "one opening thread" if not processes else f"--open-processes {processes}"
            async with grpc.aio.insecure_channel(server.address, options=[
                    ("grpc.max_send_message_length", 1 << 26)]) as channel:
                call = channel.unary_unary("/ldpsynth.v1.CollectionService/SubmitShuffled",
                                           request_serializer=pb.SealedBatch.SerializeToString,
                                           response_deserializer=pb.ShuffledAck.FromString)
                await call(batches[0], timeout=600)  # the first batch (and any process start) is not timed
                cpu, wall = time.process_time(), time.perf_counter()
                acks = await asyncio.gather(*(call(b, timeout=600) for b in batches[1:]))
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            timed = n - len(batches[0].reports) // sealed.shape[1]
            assert sum(a.accepted for a in acks) == timed, "every sealed report stored once"
            out = [row("b", f"end to end: SubmitShuffled, batches of {batch:,} (sealed beforehand), {where}", timed,
                       wall),
                   {**row("b", f"replica process CPU per report: SubmitShuffled, {where}", timed, cpu),
                    "reports_per_s": ""}]
            if processes:
                return out
            clear = reports_of(clear_s, n, rng)
            client = AsyncClient(server.address)
            info_ = await client.get_collection("clear")
            cpu, wall = time.process_time(), time.perf_counter()
            result = await client.submit_reports(info_, clear, batch_size=batch)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            await client.close()
            assert result.acknowledged == n
            out += [row("b", f"end to end: SubmitReports (the SDK's stream), batches of {batch:,}", n, wall),
                    {**row("b", "replica + client process CPU per report: SubmitReports", n, cpu),
                     "reports_per_s": ""}]
            return out
        finally:
            await server.stop(0)

    out: list[dict[str, object]] = []
    for processes in (0, 2):
        with tempfile.TemporaryDirectory() as tmp:
            out += asyncio.run(run(Path(tmp) / "data", processes))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke test)")
    parser.add_argument("--no-server", action="store_true", help="part a only")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    import cryptography

    info_ = machine_info(cryptography=cryptography.__version__)
    sizes, repeats, n_b = ([1, 64, 512], 2, 2048) if args.quick else ([1, 64, 4096, 65536], 3, 131072)
    rows = part_a(sizes, repeats)
    if not args.no_server:
        rows += part_b(n_b, 4096 if not args.quick else 512)
    lines = ["# Sealed reports benchmark", "", *[f"- {k}: {v}" for k, v in info_.items()],
             f"- part a: minimum over {repeats} repeats, each beside its bare baseline in the same run; "
             "part b: one run",
             "- suite: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM (cryptography's hpke); one public "
             "attribute, mechanism version E/1", "- quick run: sizes reduced" if args.quick else "", "",
             "| part | measurement | n | seconds | µs per report | reports/s | ratio to bare | bytes per report |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]

    def fmt(value: object, spec: str) -> str:
        return "" if value == "" else format(value, spec)

    for r in rows:
        lines.append(f"| {r['part']} | {r['measurement']} | {r['n']:,} | {fmt(r['seconds'], '.4f')} | "
                     f"{fmt(r['per_report_us'], '.1f')} | {fmt(r['reports_per_s'], ',.0f')} | "
                     f"{fmt(r['ratio'], '.2f')} | {fmt(r['bytes_per_report'], '.1f')} |")
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sealing.md").write_text(text, encoding="utf-8")
    with open(args.out / "sealing.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    sys.exit(main())
