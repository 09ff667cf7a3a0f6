"""What the wide database's answers cost on Adult: analytic and model answers, the bootstrap, synthetic rows.

Adult's 8 attributes (bench_wide.py), all 32,561 rows as devices at ``--epsilon``, the 1-way views and the pairs
of a Chow-Liu tree (chosen here from the rows' exact scores, ``prior_scores``: a cost probe, not an accuracy
one), views assigned by key; the values are the codes. Prints the seconds of: ``--queries`` marginal queries
over one measured pair (analytic), as many predicates over it, the model's fit, as many 3-way marginal queries
outside the views with a bootstrap of ``--replicates`` refits, the same again (replicates kept), and
``sample_rows`` of every row.

Usage::

    python benchmarks/probe_wide_answers.py [--epsilon 1] [--queries 1000] [--replicates 20] [--iterations 1000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from bench_wide import NAMES, SALT, load_adult

from ldpsynth.shared.queries.model import Condition, MarginalQuery, PredicateQuery
from ldpsynth.shared.wide import WideDatabase, WideDomain, assign_views, simulate
from ldpsynth.shared.wide.selection import chow_liu, prior_scores, tree_views


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--replicates", type=int, default=20)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rows = load_adult()
    domain = WideDomain(NAMES, tuple(int(k) for k in rows.max(axis=0) + 1))
    edges = chow_liu(domain.width, prior_scores(domain, rows))
    views = tree_views(domain, edges)
    keys = [i.to_bytes(8, "big") for i in range(len(rows))]
    rng = np.random.default_rng(args.seed)
    measured = simulate(domain, views, rows, assign_views(SALT, keys, len(views)), args.epsilon, rng)
    db = WideDatabase.fit(domain, measured, len(rows), iterations=args.iterations, replicates=args.replicates,
                          seed=args.seed)
    a, b = edges[0]
    print(f"tree pairs {[(NAMES[x], NAMES[y]) for x, y in edges]}; {len(views)} views", flush=True)

    def timed(what: str, run: Callable[[], object]) -> None:
        start = time.perf_counter()
        run()
        print(f"{what}: {time.perf_counter() - start:.3f} s", flush=True)

    q = args.queries
    pair = (NAMES[a], NAMES[b])
    timed(f"{q} marginal queries over the measured pair {pair} (analytic)",
          lambda: db.answer([MarginalQuery(pair, label=f"q{j}") for j in range(q)]))
    timed(f"{q} predicates over {pair} (analytic)",
          lambda: db.answer([PredicateQuery((Condition(pair[0], "==", j % domain.sizes[a]),
                                             Condition(pair[1], "==", j % domain.sizes[b]))) for j in range(q)]))
    timed(f"the model's fit ({args.iterations} iterations, with JAX's compile)", lambda: db.model)
    triple = ("age", "education", "occupation")          # 2,016 cells, in no view
    queries = [MarginalQuery(triple, label=f"q{j}") for j in range(q)]
    timed(f"{q} marginal queries over {triple} (model; bootstrap of {args.replicates} refits)",
          lambda: db.answer(queries))
    timed("the same again (replicates kept)", lambda: db.answer(queries))
    timed(f"sample_rows({len(rows)})", lambda: db.sample_rows(len(rows), rng))


if __name__ == "__main__":
    main()
