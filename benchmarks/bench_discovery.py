"""The discovery collection's server path against the library's simulation, on the same population.

``collection``: :class:`~ldpsynth.shared.heavy_hitters.collection.DiscoveryState` closes each round from its
support counts (what the aggregator tallies) and estimates the population as R·n₀ (it is not told N), the
devices split by their keys' HMAC under the discovery's salt. ``simulate``:
:func:`~ldpsynth.shared.heavy_hitters.simulate.simulate`, told N, with its own salt. Population: Zipf(1.1) over
Debian's ``wamerican`` a-z words (``bench_heavy_hitters.load_words``), truncated to 10 letters; schedule
b₀ = 20, g = 15, cap min(2k, 63) (the benchmark's). Scores as ``bench_heavy_hitters.scores``.

Usage: ``python benchmarks/bench_discovery.py`` (n = 10^5 and 10^6, ε = 2, top 10 and 50; about a minute);
``--quick``: n = 20,000, ε = 4, top 10.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
from bench_heavy_hitters import ALPHABET, MAX_LENGTH, WORDS, load_words, population, scores

from ldpsynth.shared.heavy_hitters.collection import DiscoverySchema, DiscoveryState
from ldpsynth.shared.heavy_hitters.rounds import RoundSchedule, assign_rounds
from ldpsynth.shared.heavy_hitters.server import support_counts
from ldpsynth.shared.heavy_hitters.simulate import simulate

RESULTS = Path(__file__).parent / "results"
FIRST, STEP = 20, 15
COLUMNS = ("n", "epsilon", "k", "method", "f1", "rel_error", "ci_coverage", "population", "seconds")


def collection(codes: np.ndarray, schema: DiscoverySchema, rng: np.random.Generator) -> DiscoveryState:
    """Every round: its devices' cells randomized by the round's mechanism, the support counts close it."""
    n = len(codes)
    rounds = assign_rounds([f"device-{i}".encode() for i in range(n)], schema.discovery.salt,
                           schema.schedule.rounds)
    state = DiscoveryState(schema)
    while not state.finished:
        spec = state.spec()
        reports = spec.mechanism.perturb(spec.cells_of(codes[rounds == spec.index]), rng)
        state.close_round(*support_counts(spec, reports))
    return state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--eps", type=float, nargs="+", default=[2.0])
    parser.add_argument("--k", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="n = 20,000, eps = 4, top 10")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder of bench_discovery.md")
    args = parser.parse_args()
    if args.quick:
        args.n, args.eps, args.k = [20_000], [4.0], [10]
    if not WORDS.exists():
        sys.exit(f"{WORDS} is missing: apt-get install -y wamerican")
    words = load_words(1)
    rows = []
    for n in args.n:
        for eps in args.eps:
            for k in args.k:
                rng = np.random.default_rng(args.seed)
                values = [words[i][:MAX_LENGTH] for i in population(words, n, rng)]
                truth = Counter(values)
                schema = DiscoverySchema.from_json({
                    "name": "words", "epsilon": eps,
                    "attributes": [{"name": "word", "type": "string", "max_length": MAX_LENGTH, "alphabet": ALPHABET}],
                    "discovery": {"first_bits": FIRST, "fragment_bits": STEP, "top_k": k, "cap": min(2 * k, 63),
                                  "salt": rng.bytes(16).hex(), "min_reports_per_round": 1}})
                codes = schema.encoding.encode(values)
                start = time.perf_counter()
                state = collection(codes, schema, rng)
                middle = time.perf_counter()
                r = state.result()
                rows.append({"n": n, "epsilon": eps, "k": k, "method": "collection", "population":
                             state.result_json()["population"], "seconds": middle - start,
                             **scores(r.values, r.counts, truth, k, r.ci_low, r.ci_high)})
                sim = simulate(codes, schema.encoding, RoundSchedule(schema.encoding.bits, FIRST, STEP), eps, rng,
                               top_k=k, cap=min(2 * k, 63))
                s = sim.result
                rows.append({"n": n, "epsilon": eps, "k": k, "method": "simulate (N known)", "population": n,
                             "seconds": time.perf_counter() - middle,
                             **scores(s.values, s.counts, truth, k, s.ci_low, s.ci_high)})
                for row in rows[-2:]:
                    print(" ".join(f"{c}={row[c]:.3f}" if isinstance(row[c], float) else f"{c}={row[c]}"
                                   for c in COLUMNS), flush=True)
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(f"{r[c]:.3f}" if isinstance(r[c], float) else f"{r[c]:,}" if isinstance(r[c], int)
                                else str(r[c]) for c in COLUMNS) + " |" for r in rows]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_discovery.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
