"""The wide model's answers on the measured pairs themselves: shrunk toward independence, bootstrap SE too small.

Collection r of ``bench_wide_coverage.py`` (same salt, reports and database seed; Adult's 28 pair views at ε,
the database's default fit). For every cell of the 28 pair marginals with a true share of at least
``--min-share``, two answers of the same quantity: the model's marginal, with the standard error of the database's
parametric bootstrap (B refits, :func:`~ldpsynth.shared.wide.model.bootstrap_marginals`), and the view's analytic
estimate with its exact standard error (:func:`~ldpsynth.shared.wide.answers.analytic_marginal`, unbiased). Printed:
each one's mean and RMS standardized error (estimate − truth) / SE, the share inside its 95 % interval (t with
B − 1 degrees of freedom for the model, normal for the views), and the median ratio of the two standard errors.
A mean z well below 0 with the model's SE far below the view's says the model borrows strength by shrinking
the pair's dependence, and the bootstrap (refits around the shrunk model) reports the variance of that shrunk
estimator, not its error.

Usage (from ``benchmarks/``)::

    python probe_wide_shrinkage.py [--collections 0,1] [--epsilon 1] [--replicates 10] [--min-share 0.02]
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_wide import NAMES, SALT, load_adult
from scipy.stats import t as student

from ldpsynth.shared.wide import WideDomain, assign_views, pairs, simulate
from ldpsynth.shared.wide.answers import Z95, analytic_marginal
from ldpsynth.shared.wide.database import WideDatabase
from ldpsynth.shared.wide.model import DEFAULT_ITERATIONS, bootstrap_marginals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--collections", default="0,1")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--replicates", type=int, default=10)
    parser.add_argument("--min-share", type=float, default=0.02)
    parser.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rows = load_adult()
    n = len(rows)
    domain = WideDomain(NAMES, tuple(int(k) for k in rows.max(axis=0) + 1))
    views = list(pairs(domain))
    keys = [i.to_bytes(8, "big") for i in range(n)]
    t95 = float(student.ppf(0.975, args.replicates - 1))
    for r in (int(c) for c in args.collections.split(",")):
        assignment = assign_views(SALT + r.to_bytes(4, "big"), keys, len(views))
        measured = simulate(domain, views, rows, assignment, args.epsilon,
                            np.random.default_rng([args.seed, r, round(1000 * args.epsilon)]))
        db = WideDatabase.fit(domain, measured, n, iterations=args.iterations, replicates=args.replicates)
        attributes = [v.attributes for v in views]
        replicates = bootstrap_marginals(db.problem, db.model, attributes, args.replicates,
                                         np.random.default_rng(args.seed * 100_003 + r), args.iterations)
        model_z, view_z, ratio = [], [], []
        for attrs, draws in zip(attributes, replicates):
            truth = domain.view(attrs).histogram(rows) / n
            large = truth >= args.min_share
            model_se = draws.std(axis=0, ddof=1)
            analytic = analytic_marginal(measured, attrs, n)
            model_z.append(((db.model.marginal(attrs) - truth) / model_se)[large])
            view_z.append(((analytic.shares - truth) / analytic.standard_errors)[large])
            ratio.append((analytic.standard_errors / model_se)[large])
        mz, vz = np.concatenate(model_z), np.concatenate(view_z)
        print(f"collection {r}, ε = {args.epsilon}, {db.model.steps} steps, {mz.size} pair cells ≥ {args.min_share}:")
        print(f"  model (bootstrap SE, B = {args.replicates}): mean z {mz.mean():+.2f}, RMS z "
              f"{np.sqrt(np.mean(mz ** 2)):.2f}, inside its 95 % interval {np.mean(np.abs(mz) <= t95):.3f}")
        print(f"  views (analytic SE): mean z {vz.mean():+.2f}, RMS z {np.sqrt(np.mean(vz ** 2)):.2f}, "
              f"inside its 95 % interval {np.mean(np.abs(vz) <= Z95):.3f}")
        print(f"  the view's SE / the model's bootstrap SE: median {np.median(np.concatenate(ratio)):.2f}", flush=True)


if __name__ == "__main__":
    main()
