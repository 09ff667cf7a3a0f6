"""Where the wide model's bias on Adult comes from: the model fitted to the views' *true* shares (no noise).

Command (from ``benchmarks/``, after ``bench_wide_coverage.py``)::

    python probe_wide_coverage_bias.py [--iterations 500,2000] [--exact] [--seed 1]

The problem (views' weights and the bounded junction tree's left-out pairs) is collection 0's of
``bench_wide_coverage.py``; the shares fitted are each pair view's true shares, so what remains of the error of a
query in no view is the model's: its structure (the pairs left to their margins; the all-pairs model itself is
not the joint) and stopping after a number of iterations. With ``--exact`` the same at the bound lifted (every
pair whole: minutes per fit). Per query of the benchmark: the median over its kept cells of |model − truth|
and of that over the cell's mean bootstrap SE in the benchmark's ``intervals.csv`` (``model_se``, counts), and the mean
signed error in SEs.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np
from bench_wide import NAMES, SALT, load_adult
from bench_wide_coverage import PREDICATES, RESULTS, choose_triples, predicate_truth

from ldpsynth.shared.wide import WideDomain, assign_views, pairs, simulate
from ldpsynth.shared.wide.model import Problem


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", default="500,2000")
    parser.add_argument("--exact", action="store_true", help="also lift the junction-tree bound (slow)")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--intervals", type=Path, default=RESULTS / "intervals.csv")
    args = parser.parse_args()
    rows = load_adult(8)
    n = len(rows)
    domain = WideDomain(NAMES, tuple(int(k) for k in rows.max(axis=0) + 1))
    views = list(pairs(domain))
    keys = [i.to_bytes(8, "big") for i in range(n)]
    assignment = assign_views(SALT + (0).to_bytes(4, "big"), keys, len(views))
    measured = simulate(domain, views, rows, assignment, args.epsilon,
                        np.random.default_rng([args.seed, 0, round(1000 * args.epsilon)]))
    truth = [v.histogram(rows) / n for v in views]
    with open(args.intervals, newline="") as fh:
        records = [r for r in csv.DictReader(fh) if float(r["epsilon"]) == args.epsilon]
    se: dict[str, list[float]] = {}
    counts: dict[str, tuple[str, float]] = {}
    for r in records:
        se.setdefault(r["label"], []).append(float(r["model_se"]))
        counts[r["label"]] = (r["query"], float(r["truth"]))
    triples = choose_triples(domain.width, 10, np.random.default_rng(args.seed))
    problems = [("bounded", Problem.of(domain, measured, n))]
    if args.exact:
        problems.append(("exact", Problem.of(domain, measured, n, margins=[])))
    left = sorted({"–".join(NAMES[a] for a in measured[g.measurement].view.attributes) for g in problems[0][1].margins})
    print(f"left to their margins: {left}", flush=True)
    for name, problem in problems:
        for steps in (int(s) for s in args.iterations.split(",")):
            start = time.perf_counter()
            model = problem.fit(truth, steps)
            print(f"{name}, {steps} iterations, true shares: fit {time.perf_counter() - start:.0f} s", flush=True)
            errors: dict[str, list[tuple[float, float]]] = {}
            for triple in triples:
                label = "×".join(NAMES[a] for a in triple)
                marginal = model.marginal(triple) * n
                grid = np.indices([domain.sizes[a] for a in triple]).reshape(3, -1).T
                for u, g in enumerate(grid):
                    cell = f"{label}[" + ",".join(f"{NAMES[a]}={c}" for a, c in zip(triple, g)) + "]"
                    if cell in counts:
                        errors.setdefault(label, []).append((marginal[u] - counts[cell][1], float(np.mean(se[cell]))))
            joint = model.joint * n
            for label, conditions in PREDICATES:
                mask = np.ones(domain.sizes, bool)
                for a, values in conditions.items():
                    j = NAMES.index(a)
                    keep = np.isin(np.arange(domain.sizes[j]), values)
                    mask &= keep.reshape([-1 if k == j else 1 for k in range(domain.width)])
                errors[label] = [(float(joint[mask].sum()) - predicate_truth(rows, NAMES, conditions),
                                  float(np.mean(se[label])))]
            every = [e for v in errors.values() for e in v]
            for label, pairs_ in [*errors.items(), ("all", every)]:
                err = np.array([e for e, _ in pairs_])
                ratio = np.array([e / s for e, s in pairs_])
                print(f"  {label}: median |error| {np.median(np.abs(err)):.0f}, median |error|/SE "
                      f"{np.median(np.abs(ratio)):.2f}, mean error/SE {np.mean(ratio):+.2f}, "
                      f"share |error| > 1.96 SE {np.mean(np.abs(ratio) > 1.96):.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
