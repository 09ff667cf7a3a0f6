"""The tree views' model on Adult at one ε: TVD and seconds by mirror-descent iterations, and warm-started refits.

Same views and measurements as bench_wide.py's tree column at the first ε (same seed, pilot, assignment). Prints
the mean TVD of the 28 2-way marginals and the fit seconds for each ``--iterations`` (cold, from zero
potentials), then the seconds of a bootstrap replicate's refit cold (the largest count) and warm-started from
the fitted model (``--warm``).

Usage::

    python benchmarks/probe_wide_fit.py [--epsilon 1] [--iterations 250,500,1000,2000] [--warm 50,100]
        [--margins | --pairs-only]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_wide import NAMES, SALT, load_adult

from ldpsynth.shared.wide import WideDomain, assign_views, pairs, simulate
from ldpsynth.shared.wide.model import Problem, total_variation
from ldpsynth.shared.wide.selection import chow_liu, pair_gain, pilot_devices, tree_views


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--iterations", default="250,500,1000,2000")
    parser.add_argument("--warm", default="50,100")
    parser.add_argument("--pilot", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--pairs-only", action="store_true",
                        help="no pilot: all devices report the 28 pairs, the tree's pairs fitted whole, the others "
                             "as 1-way margins")
    parser.add_argument("--margins", action="store_true",
                        help="also fit the 1-way margins of the pilot's pairs left out of the tree")
    args = parser.parse_args()
    rows = load_adult()
    domain = WideDomain(NAMES, tuple(int(k) for k in rows.max(axis=0) + 1))
    n = len(rows)
    views = list(pairs(domain))
    keys = [i.to_bytes(8, "big") for i in range(n)]
    rng = np.random.default_rng([args.seed, 2])
    if args.pairs_only:     # every device reports a pair; the tree from all of them; the rest as 1-way margins
        measured = simulate(domain, views, rows, assign_views(SALT, keys, len(views)), args.epsilon, rng)
        edges = chow_liu(domain.width, {m.view.attributes: pair_gain(m, n, n / len(views)) for m in measured})
        margins = [(i, (a,)) for i, m in enumerate(measured) if m.view.attributes not in edges
                   for a in m.view.attributes]
        problem = Problem.of(domain, measured, n, margins)
    else:
        pilot = pilot_devices(SALT, keys, args.pilot)
        piloted = simulate(domain, views, rows[pilot], assign_views(SALT, [k for k, p in zip(keys, pilot) if p],
                                                                    len(views)), args.epsilon, rng)
        devices = (n - int(pilot.sum())) / (2 * domain.width - 1)
        edges = chow_liu(domain.width, {m.view.attributes: pair_gain(m, n, devices) for m in piloted})
        chosen = tree_views(domain, edges)
        main_keys = [k for k, p in zip(keys, pilot) if not p]
        main = simulate(domain, chosen, rows[~pilot], assign_views(SALT, main_keys, len(chosen)), args.epsilon,
                        rng)
        measured = [*main, *(m for m in piloted if m.view.attributes in edges)]
        if args.margins:        # the pilot's other pairs, as their two 1-way margins
            others = [m for m in piloted if m.view.attributes not in edges]
            margins = [(len(measured) + i, (a,)) for i, m in enumerate(others) for a in m.view.attributes]
            measured = [*measured, *others]
            problem = Problem.of(domain, measured, n, margins)
        else:
            problem = Problem.of(domain, measured, n)
    shares = [m.shares() for m in measured]
    truth = [v.histogram(rows) / n for v in views]
    print(f"eps {args.epsilon}: pairs {edges}, {len(measured)} measurements", flush=True)
    model = None
    for its in (int(i) for i in args.iterations.split(",")):
        start = time.perf_counter()
        model = problem.fit(shares, its)
        seconds = time.perf_counter() - start
        tvd = np.mean([total_variation(model.marginal(v.attributes), f) for v, f in zip(views, truth)])
        print(f"  cold, {its} iterations: {seconds:.1f} s, mean 2-way TVD {tvd:.4f}", flush=True)
    assert model is not None
    draw = [model.marginal(m.view.attributes) + s * rng.standard_normal(m.view.size) / n
            for m, s in zip(measured, problem.sigmas)]
    reference = problem.fit(draw, its)
    for w in (int(i) for i in args.warm.split(",")):
        start = time.perf_counter()
        refit = problem.fit(draw, w, warm_start=model)
        seconds = time.perf_counter() - start
        gap = np.mean([total_variation(refit.marginal(v.attributes), reference.marginal(v.attributes))
                       for v in views])
        print(f"  bootstrap refit warm, {w} iterations: {seconds:.1f} s, mean 2-way TVD to the cold "
              f"{its}-iteration refit {gap:.4f}", flush=True)


if __name__ == "__main__":
    main()
