"""Speed of the query service beside the same computation done in this process, in the same run.

Starts a real aggregator (``python -m ldpsynth.cli.aggregator_cmd serve``: port 0, Ray shards,
durable SQLite), fills two collections through the SDK, then times:

* **Cut queries on a Facebook-size graph** (issue 4 item 2): a collection of 4,039^2 = 16.3 M
  vertex-pair rows (public ``i``, ``j``; private edge bit; the ego-Facebook graph when
  ``$LDPSYNTH_DATA``/``../shared/data`` has it, else a random graph with its 88,234 edges), released
  through E with a seeded generator. 100 cut queries (S a uniform half of the vertices, T the
  rest) through ``QueryClient.estimate``: the first batch (cold: every shard builds its compact
  pair-count matrix) and the minimum of ``--repeats`` warm batches. Baseline: the same 100 cuts
  as ``1_S^T A 1_T`` with a dense float32 adjacency matrix already in this process's memory
  (one BLAS product). Goal: well under a second (we read it as < 0.5 s warm).
* **2^20 linear queries** over a ratings collection (|D| = 5) through the server (chunked
  request, paged answers) beside the offline estimator on the same rows in this process
  (``estimate(linear_batch(...))``) and a bare ``weights @ histogram`` matrix product.

Prints a Markdown table and writes ``query.md`` and ``query.csv`` to ``--out`` (default
``benchmarks/results``). ``--quick``: a 300-vertex graph, 2^14 queries, goals not checked (the
CI smoke test). Exit status 1 when a goal is missed (not with ``--quick``).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from machine import machine_info  # benchmarks/machine.py (scripts run from this folder)
from ratio_table import goal_met, write_ratio_table  # benchmarks/ratio_table.py

from ldpsynth.client import AsyncClient
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators import estimate
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.queries import linear_batch
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.simulation.datasets import FACEBOOK_VERTICES, DatasetNotFound, adjacency, facebook_edges
from ldpsynth.simulation.local_cluster import ServerProcess

RESULTS = Path(__file__).resolve().parent / "results"
FACEBOOK_EDGES = 88_234
GOAL_CUT_SECONDS = 0.5


def log(message: str) -> None:
    print(f"[bench_query {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def graph_schema(vertices: int) -> Schema:
    return Schema.from_json({"name": "graph", "epsilon": 1.0, "attributes": [
        {"name": "i", "type": "integer", "min": 0, "max": vertices - 1, "public": True},
        {"name": "j", "type": "integer", "min": 0, "max": vertices - 1, "public": True},
        {"name": "edge", "type": "binary"}]})


def ratings_schema() -> Schema:
    return Schema.from_json({"name": "ratings", "epsilon": 1.0, "attributes": [
        {"name": "movie", "type": "integer", "min": 1, "max": 128, "public": True},
        {"name": "rating", "type": "integer", "min": 1, "max": 5}]})


def true_graph(vertices: int, rng: np.random.Generator) -> tuple[np.ndarray, str]:
    """The (V, V) 0/1 adjacency matrix: ego-Facebook induced on the first V vertices, else random."""
    try:
        return adjacency(facebook_edges(), vertices).astype(np.int64), "ego-Facebook"
    except DatasetNotFound as exc:
        log(f"{exc}; using a random graph of the same density")
    edges = round(FACEBOOK_EDGES * (vertices / FACEBOOK_VERTICES) ** 2)
    a = np.zeros((vertices, vertices), np.int64)
    upper = np.flatnonzero(np.triu(np.ones((vertices, vertices), bool), 1))
    chosen = rng.choice(upper, edges, replace=False)
    a.flat[chosen] = 1
    return a | a.T, f"random graph with {edges} edges (Facebook data absent)"


def start_server(data_dir: Path, collections: list[Path], log_path: Path) -> ServerProcess:
    """``ldpsynth aggregator serve`` on a free loopback port with 2 shards, once it listens."""
    args = ["--data-dir", str(data_dir), "--port", "0", "--shards", "2"]
    for path in collections:
        args += ["--collection", str(path)]
    return ServerProcess.aggregator(args, log_path)


async def deliver(target: str, collection: str, reports: Reports) -> None:
    async with AsyncClient(target) as client:
        info = await client.get_collection(collection)
        result = await client.submit_reports(info, reports)
    if result.acknowledged != len(reports):
        raise RuntimeError(f"{collection}: {result.acknowledged} of {len(reports)} reports acknowledged")


def timed(function, repeats: int = 1) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = function()
        best = min(best, time.perf_counter() - start)
    return best, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, goals not checked (CI smoke test)")
    parser.add_argument("--repeats", type=int, default=3, help="warm repeats (minimum kept; default 3)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where query.md/csv go")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args(argv)
    info = machine_info()
    rng = np.random.default_rng(args.seed)
    vertices = 300 if args.quick else FACEBOOK_VERTICES
    queries = 1 << 14 if args.quick else 1 << 20
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="ldpsynth-bench-query-") as tmp:
        scratch = Path(tmp)
        graph, ratings = graph_schema(vertices), ratings_schema()
        files = []
        for schema in (graph, ratings):
            files.append(scratch / f"{schema.name}.json")
            files[-1].write_text(schema.dumps(), encoding="utf-8")
        server = start_server(scratch / "data", files, scratch / "server.log")
        target = server.address
        try:
            truth, source = true_graph(vertices, rng)
            mechanism = MechanismCard.for_schema(graph).mechanism
            i, j = np.divmod(np.arange(vertices * vertices, dtype=np.int64), vertices)
            log(f"delivering {vertices * vertices:,} vertex-pair rows ({source}) ...")
            start = time.perf_counter()
            perturbed = mechanism.perturb(truth.reshape(-1), rng)
            asyncio.run(deliver(target, "graph", Reports(new_report_ids(len(i)), perturbed, np.column_stack([i, j]))))
            log(f"delivered in {time.perf_counter() - start:.1f} s")
            halves = np.argsort(rng.random((100, vertices)), axis=1) < vertices // 2
            cuts = [{"kind": "cut", "S": np.flatnonzero(h).tolist(), "T": np.flatnonzero(~h).tolist()}
                    for h in halves]
            with QueryClient(target) as client:
                cold, first = timed(lambda: client.estimate("graph", queries=cuts))
                warm, answers = timed(lambda: client.estimate("graph", queries=cuts), args.repeats)
            dense = perturbed.reshape(vertices, vertices).astype(np.float32)
            s, t = halves.astype(np.float32), (~halves).astype(np.float32)
            bare, y1 = timed(lambda: np.einsum("qv,qv->q", s @ dense, t), args.repeats)
            m = halves.sum(axis=1).astype(np.float64) * (~halves).sum(axis=1)  # every pair has one row
            expected = (np.asarray(y1, np.float64) - mechanism.lie_probability * m) / (
                mechanism.keep_probability - mechanism.lie_probability)
            np.testing.assert_allclose(answers.estimate, expected, rtol=1e-6)  # eq. 34 from the bare sums
            size = f"100 cuts, V = {vertices:,} ({vertices * vertices / 1e6:.1f} M rows)"
            rows.append({"operation": "cut queries via the server, first batch (builds pair counts)", "size": size,
                         "seconds": cold, "baseline_seconds": bare, "goal": "", "met": ""})
            rows.append({"operation": "cut queries via the server, warm", "size": size, "seconds": warm,
                         "baseline_seconds": bare, "goal": f"< {GOAL_CUT_SECONDS} s",
                         "met": goal_met(warm, GOAL_CUT_SECONDS, not args.quick)})

            log(f"delivering 200,000 ratings and timing {queries:,} linear queries ...")
            movies, codes = rng.integers(0, 128, 200_000), rng.integers(0, 5, 200_000)
            asyncio.run(deliver(target, "ratings", Reports(new_report_ids(200_000), codes, movies[:, None])))
            weights = rng.random((queries, 5))
            with QueryClient(target) as client:
                served, _ = timed(lambda: client.estimate("ratings", linear=weights, normalization="mean"),
                                  args.repeats)
            rmech = MechanismCard.for_schema(ratings).mechanism
            stats = SufficientStatistics.from_schema(ratings, movies, codes)
            local, _ = timed(lambda: estimate(linear_batch(ratings, weights, normalization="mean"), stats, rmech),
                             args.repeats)
            histogram = stats.histogram().astype(np.float64)
            bare_q, _ = timed(lambda: weights @ histogram, args.repeats)
            size = f"{queries:,} linear queries, |D| = 5, n = 200,000"
            rows.append({"operation": "linear batch via the server (chunked request, paged answers)", "size": size,
                         "seconds": served, "baseline_seconds": bare_q, "goal": "", "met": ""})
            rows.append({"operation": "linear batch, offline estimator in this process", "size": size,
                         "seconds": local, "baseline_seconds": bare_q, "goal": "", "met": ""})
        finally:
            server.terminate(120)
    return write_ratio_table(args.out, "query", "Query service benchmark", info,
                             "minimum over warm repeats (the first cut batch: one run); baseline = bare numpy in this "
                             "process on data already in memory (cuts: 1_S^T A 1_T in float32; linear: weights @ "
                             "histogram)", args.quick, rows)


if __name__ == "__main__":
    sys.exit(main())
