"""The floor of issue 39's design on Adult without privacy noise: how close the 28 pair views can come to the true
2-way marginals when each device answers one view and nothing is randomized.

Adult's 8 attributes as ``bench_wide.py`` reads them (32,561 rows, all devices), each device assigned one of the 28
pair views by the same HMAC assignment (``bench_wide.SALT``). Mean total-variation distance to the true 2-way
marginals of:

* **views, no noise**: each view's empirical shares among its own devices (1,104-1,221 of them): the error of
  sampling alone, the views' error at ε = ∞;
* **views + model, ε = --model-epsilon** (default 30: E flips a cell with probability below 10^-10): Private-PGM
  fitted to those views with the database's rule (at least ``--iterations``, then on until within the views'
  noise, which here is the sampling term of each view's variance; ``model.Problem.fit``);
* **tree views + model, ε = --model-epsilon**: the other design the views offer, fewer views with more devices
  each: the 8 1-way views and the 7 pairs of the Chow-Liu tree of the population's exact pair scores (the best
  tree for these rows, which no collection can know), each device one of the 15 views by the same HMAC
  assignment, the model fitted as above; the 21 pairs off the tree come from the model alone;
* **SMP, no noise**: each device answers one attribute (seeded uniform choice, as SMP samples), the product of
  the 1-way empirical shares;
* **independence, exact**: the product of the population's exact 1-way marginals (the limit of SMP and of split ε
  at any n and ε: their estimate is a product of 1-way marginals);
* **the goal**: 0.2x the best baseline's mean 2-way TVD at ε = 1 in ``results/bench_wide.csv`` (its SMP or split ε
  column, whichever is less).

Written to ``--out`` (default ``results/wide_floor``) as ``wide_floor.md`` and ``.csv``.

Usage::

    python wide_floor.py [--seed 1] [--iterations 500] [--model-epsilon 30]
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np
from arguments import require_positive  # benchmarks/arguments.py (scripts run from this folder)
from bench_wide import NAMES, RESULTS, SALT, load_adult, product
from machine import machine_info  # benchmarks/machine.py

from ldpsynth.shared.wide import WideDomain, assign_views, pairs, simulate
from ldpsynth.shared.wide.model import fit, total_variation
from ldpsynth.shared.wide.selection import chow_liu, prior_scores, tree_views
from ldpsynth.simulation.datasets import DatasetNotFound


def goal_from(results: Path) -> float:
    """0.2x the best of SMP and split ε at ε = 1 in ``bench_wide.csv`` (NaN when absent)."""
    try:
        with open(results, newline="") as handle:
            for row in csv.DictReader(handle):
                if float(row["epsilon"]) == 1.0:
                    return 0.2 * min(float(row["smp_tvd2"]), float(row["split_tvd2"]))
    except FileNotFoundError:
        pass
    return float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--model-epsilon", type=float, default=30.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "wide_floor")
    given = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(given)
    require_positive(parser, args, ("iterations",))
    if not args.model_epsilon > 0:
        parser.error(f"--model-epsilon: a number > 0, got {args.model_epsilon}")
    try:
        rows = load_adult(8)
    except DatasetNotFound as exc:
        print(f"skipped: {exc}")
        return 0
    info = machine_info()
    domain = WideDomain(NAMES, tuple(int(k) for k in rows.max(axis=0) + 1))
    n = len(rows)
    views = list(pairs(domain))
    truth = [v.histogram(rows) / n for v in views]
    assignment = assign_views(SALT, [i.to_bytes(8, "big") for i in range(n)], len(views))
    rng = np.random.default_rng(args.seed)

    def mean_tvd(estimates: list[np.ndarray]) -> float:
        return float(np.mean([total_variation(e, f) for e, f in zip(estimates, truth, strict=True)]))

    sampled = [v.histogram(rows[assignment == i]) / (assignment == i).sum() for i, v in enumerate(views)]
    start = time.perf_counter()
    model = fit(domain, simulate(domain, views, rows, assignment, args.model_epsilon, rng), n,
                iterations=args.iterations)
    seconds = time.perf_counter() - start
    tree = tree_views(domain, chow_liu(domain.width, prior_scores(domain, rows)))
    on_tree = assign_views(SALT, [i.to_bytes(8, "big") for i in range(n)], len(tree))
    tree_model = fit(domain, simulate(domain, tree, rows, on_tree, args.model_epsilon, rng), n,
                     iterations=args.iterations)
    attribute_of = rng.integers(0, domain.width, n)
    ones = [np.bincount(rows[attribute_of == j, j], minlength=k) / (attribute_of == j).sum()
            for j, k in enumerate(domain.sizes)]
    exact = [np.bincount(rows[:, j], minlength=k) / n for j, k in enumerate(domain.sizes)]
    table = [("views, no noise", mean_tvd(sampled)),
             (f"views + model, ε = {args.model_epsilon:g} ({model.steps} steps, 2L/m {model.discrepancy:.2f}, "
              f"{seconds:.0f} s)", mean_tvd([model.marginal(v.attributes) for v in views])),
             (f"tree views + model, ε = {args.model_epsilon:g} (the exact data's Chow-Liu tree, {len(tree)} views, "
              f"{tree_model.steps} steps)", mean_tvd([tree_model.marginal(v.attributes) for v in views])),
             ("SMP, no noise", mean_tvd([product(ones, v.attributes) for v in views])),
             ("independence, exact 1-way marginals", mean_tvd([product(exact, v.attributes) for v in views])),
             ("the goal: 0.2x the best baseline at ε = 1 (results/bench_wide.csv)",
              goal_from(RESULTS / "bench_wide.csv"))]
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "wide_floor.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["method", "mean_tvd2"])
        writer.writerows((name, f"{value:.4f}") for name, value in table)
    lines = ["# Issue 39's design on Adult without privacy noise: mean 2-way TVD", "",
             f"32,561 devices, 28 pair views ({np.bincount(assignment).min():,}-{np.bincount(assignment).max():,} "
             "devices each), 8 attributes.", "", "| method | mean 2-way TVD |", "|---|---|",
             *(f"| {name} | {value:.4f} |" for name, value in table), "",
             "Command: `cd benchmarks && " + " ".join(["python wide_floor.py", *given]) + "`", "",
             "Machine: " + "; ".join(f"{k}: {v}" for k, v in info.items())]
    (args.out / "wide_floor.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[4:11]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
