"""E against the frequency oracles on MovieLens-100K through a real server: served errors, error bars, bytes.

For epsilon = 1, 2, 4 and each mechanism (E, OUE, OLH, HR, SS) one collection of the 100,000 MovieLens
ratings with (movie, rating) private (|D| = 1,682 x 5 = 8,410), all on one ``ldpsynth aggregator serve``
(loopback, port 0, 2 shards, its own log). Each rating is perturbed with the collection's sampler on a
seeded numpy Generator (``perturb``: this is a benchmark, not a device; ``perturb_secure`` draws the
same law from ``os.urandom``), delivered through ``AsyncClient.submit_reports`` (batches sized to the
server's message limit) and then queried through ``QueryClient.estimate``:

* ``movies``: the 1,682 movie counts (a marginal over movie);
* ``ratings``: the 5 rating counts (a marginal over rating);
* ``cells``: the 1,000 (movie, rating) counts of the 200 most-rated movies (predicate queries).

Per (epsilon, mechanism, query set): the RMSE of the served estimates against the true counts, the root
mean square of the standard errors the server reported with them, the share of true counts inside the
served 95 % intervals, and the wire bytes per report (a ``ReportBatch`` of every report, serialised, over
the reports: the 16-byte id and the private part, no public attribute here). Written to
``oracle_server.md`` / ``oracle_server.csv`` in ``--out``. Skipped with a message (exit 0) where MovieLens
is absent. ``--quick``: the first 5,000 ratings, epsilon = 1 only (the CI smoke test).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import gzip
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from machine import machine_info  # benchmarks/machine.py (scripts run from this folder)

from ldpsynth.client import AsyncClient
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.mechanisms.registry import MECHANISMS, name_of, private_wire
from ldpsynth.shared.protocol import reports_to_proto
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.simulation.datasets import MOVIELENS_FILE, DatasetNotFound, dataset_path
from ldpsynth.simulation.local_cluster import ServerProcess

RESULTS = Path(__file__).resolve().parent / "results"
MOVIES, RATINGS, TOP = 1682, 5, 200
LEVEL = 0.95


def schema(mechanism: str, epsilon: float) -> Schema:
    return Schema.from_json({"name": f"movielens-{mechanism.lower()}-{epsilon:g}", "epsilon": epsilon,
                             "mechanism": mechanism, "attributes": [
                                 {"name": "movie", "type": "integer", "min": 1, "max": MOVIES},
                                 {"name": "rating", "type": "integer", "min": 1, "max": RATINGS}]})


def movielens(limit: int | None) -> np.ndarray:
    """The private codes (movie - 1) * 5 + rating - 1 of the ratings, in the file's order."""
    raw = np.loadtxt(gzip.open(dataset_path(MOVIELENS_FILE), "rt"), dtype=np.int64)
    return ((raw[:, 1] - 1) * RATINGS + (raw[:, 2] - 1))[:limit]


def query_sets(codes: np.ndarray) -> dict[str, tuple[list[dict], np.ndarray]]:
    """Each query set and its true answers."""
    counts = np.bincount(codes, minlength=MOVIES * RATINGS).reshape(MOVIES, RATINGS)
    top = np.argsort(-counts.sum(axis=1), kind="stable")[:TOP]
    cells = [{"kind": "predicate", "where": [{"attribute": "movie", "op": "==", "value": int(m) + 1},
                                             {"attribute": "rating", "op": "==", "value": r + 1}]}
             for m in top.tolist() for r in range(RATINGS)]
    return {"movies": ([{"kind": "marginal", "attributes": ["movie"]}], counts.sum(axis=1)),
            "ratings": ([{"kind": "marginal", "attributes": ["rating"]}], counts.sum(axis=0)),
            "cells": (cells, counts[top].reshape(-1))}


async def deliver(target: str, card: MechanismCard, reports: Reports) -> None:
    async with AsyncClient(target, deadline=600.0) as client:
        info = await client.get_collection(card.schema.name)
        result = await client.submit_reports(info, reports)
    if result.acknowledged != len(reports):
        raise RuntimeError(f"{card.schema.name}: {result.acknowledged} of {len(reports)} reports acknowledged")


def measure(target: str, card: MechanismCard, codes: np.ndarray, sets: dict, seed: int) -> list[dict[str, object]]:
    mechanism = card.mechanism
    started = time.perf_counter()
    perturbed = mechanism.perturb(codes, np.random.default_rng(seed))
    reports = Reports(new_report_ids(len(codes)), perturbed if perturbed.ndim == 2 else perturbed.astype(np.int64),
                      np.zeros((len(codes), 0), np.int64))
    perturb_seconds = time.perf_counter() - started
    wire = reports_to_proto(reports, card.schema.name, card.version, 0, mechanism).ByteSize() / len(reports)
    started = time.perf_counter()
    asyncio.run(deliver(target, card, reports))
    submit_seconds = time.perf_counter() - started
    rows = []
    with QueryClient(target, deadline=600.0) as client:
        for name, (queries, truth) in sets.items():
            started = time.perf_counter()
            answers = client.estimate(card.schema.name, queries=queries, level=LEVEL)
            seconds = time.perf_counter() - started
            error = answers.estimate - truth
            rows.append({"epsilon": card.mechanism.epsilon, "mechanism": name_of(mechanism), "queries": name,
                         "answers": len(truth),
                "RMSE": float(np.sqrt(np.mean(error**2))),
                "served SE (RMS)": float(np.sqrt(np.mean(answers.std_error**2))),
                "95% coverage": float(np.mean((answers.ci_low <= truth) & (truth <= answers.ci_high))),
                "wire bytes per report": round(wire, 2), "private bytes": private_wire(mechanism)[0],
                "perturb s": round(perturb_seconds, 3), "submit s": round(submit_seconds, 3),
                "query s": round(seconds, 3), "n": answers.n})
            print(f"[bench] eps={card.schema.epsilon:g} {rows[-1]['mechanism']} {name}: RMSE {rows[-1]['RMSE']:.4g}, "
                  f"SE {rows[-1]['served SE (RMS)']:.4g}, coverage {rows[-1]['95% coverage']:.3f}", file=sys.stderr,
                  flush=True)
    return rows


def table(rows: list[dict[str, object]]) -> list[str]:
    head = list(rows[0])

    def cell(value: object) -> str:
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    return ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|",
            *("| " + " | ".join(cell(r[h]) for h in head) + " |" for r in rows)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5,000 ratings at epsilon = 1 (CI smoke test)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where oracle_server.md/csv go")
    parser.add_argument("--seed", type=int, default=2027)
    args = parser.parse_args(argv)
    try:
        codes = movielens(5000 if args.quick else None)
    except DatasetNotFound as exc:
        print(f"[bench] skipped: MovieLens-100K is not on this machine ({exc})", file=sys.stderr)
        return 0
    epsilons = (1.0,) if args.quick else (1.0, 2.0, 4.0)
    cards = [MechanismCard.for_schema(schema(m, eps)) for eps in epsilons for m in MECHANISMS]
    sets = query_sets(codes)
    info = machine_info()
    started = time.perf_counter()
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="ldpsynth-bench-oracle-server-") as tmp:
        scratch = Path(tmp)
        files = []
        for card in cards:
            files += ["--collection", str(scratch / f"{card.schema.name}.json")]
            (scratch / f"{card.schema.name}.json").write_text(card.schema.dumps(), encoding="utf-8")
        server = ServerProcess.aggregator(["--data-dir", str(scratch / "data"), "--port", "0", "--shards", "2",
                                           *files], scratch / "server.log")
        try:
            for n, card in enumerate(cards):
                rows += measure(server.address, card, codes, sets, args.seed + n)
        finally:
            server.terminate()
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "oracle_server.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = ["# E against the frequency oracles on MovieLens-100K, through a real server", "",
             *(f"- {key}: {value}" for key, value in info.items()),
             f"- ratings: {len(codes):,}; (movie, rating) private, |D| = 8,410; run time "
             f"{time.perf_counter() - started:.0f} s", "",
             "Served by `ldpsynth aggregator serve` (2 shards) after `AsyncClient.submit_reports`; reports drawn by "
             "each collection's exact sampler on a seeded Generator. `RMSE`: of the served estimates against the "
             "true counts; `served SE (RMS)`: root mean square of the standard errors served with them; "
             "`95% coverage`: true counts inside the served intervals; `wire bytes per report`: a ReportBatch "
             "of every report, serialised, over the reports (16-byte id + private part); `private bytes`: the "
             "private part alone. `epsilon` is the delivered one.", "", *table(rows), ""]
    (args.out / "oracle_server.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
