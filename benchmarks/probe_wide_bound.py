"""Adult's all-pairs model with the junction tree bounded: pairs kept, TVD and seconds by iterations.

Same views and measurements as bench_wide.py's all-pairs column at its first ε (same seed and assignment). The
pairs that would push the junction tree's largest clique above ``--limit`` cells are fitted through their 1-way
margins (``ldpsynth.shared.wide.bounded``). Prints the pairs kept and the junction tree's cliques, then for each
``--iterations`` (cold fits in one process: the first includes JAX's compile) the fit seconds and the mean TVD
of the 28 2-way marginals and of the 50 random 3-way marginals.

Usage::

    python benchmarks/probe_wide_bound.py [--epsilon 1] [--limit 262144] [--iterations 50,500,500]
"""

from __future__ import annotations

import argparse
import itertools
import time

import numpy as np
from bench_wide import NAMES, SALT, load_adult

from ldpsynth.shared.wide import WideDomain, assign_views, pairs, simulate
from ldpsynth.shared.wide.bounded import bounded_margins
from ldpsynth.shared.wide.model import Problem, total_variation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--limit", type=int, default=1 << 18)
    parser.add_argument("--iterations", default="50,500,500")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rows = load_adult()
    domain = WideDomain(NAMES, tuple(int(k) for k in rows.max(axis=0) + 1))
    n = len(rows)
    views = list(pairs(domain))
    rng = np.random.default_rng(args.seed)                   # bench_wide.py's order of draws
    all_triples = list(itertools.combinations(range(domain.width), 3))
    triples = [domain.view(all_triples[i]) for i in rng.choice(len(all_triples), 50, replace=False)]
    keys = [i.to_bytes(8, "big") for i in range(n)]
    measured = simulate(domain, views, rows, assign_views(SALT, keys, len(views)), args.epsilon, rng)
    exact = Problem.of(domain, measured, n, margins=())
    margins = bounded_margins(measured, n, exact.mbi_domain, args.limit)
    left = sorted({measured[i].view.attributes for i, _ in margins})
    print(f"limit {args.limit:,}: {len(views) - len(left)} pairs whole, through their margins {left}", flush=True)
    problem = Problem.of(domain, measured, n, margins)
    for iterations in (int(i) for i in args.iterations.split(",")):
        start = time.perf_counter()
        model = problem.fit([m.shares() for m in measured], iterations)
        seconds = time.perf_counter() - start
        tvd2 = np.mean([total_variation(model.marginal(v.attributes), v.histogram(rows) / n) for v in views])
        tvd3 = np.mean([total_variation(model.marginal(v.attributes), v.histogram(rows) / n) for v in triples])
        print(f"  {iterations} iterations: {seconds:.1f} s, TVD 2-way {tvd2:.4f}, 3-way {tvd3:.4f}", flush=True)


if __name__ == "__main__":
    main()
