"""Probe: why our SW + EMS trails the SW authors' EMS on MovieLens (issue 42).

Each repetition draws two sets of reports of the same values: ours (``SquareWave.perturb``: the exact output grid
of M + w − 1 cells, transition ``SquareWave.transition``) and the reference's (``sw.py``'s ``sw()``: a continuous
report histogrammed into M randomized bins, its own M x M transform; both captured by swapping its ``EM`` for the
call). Each is then fitted by one EMS loop whose two parts can be switched independently:

* smoothing ``ours``: (1, 2, 1)/4, cut to (2, 1)/3 at *both* end buckets; ``theirs``: ``sw.py``'s smoothing
  matrix, whose last row is cut to (0, 1) (the top bucket is not smoothed) while its first is (2, 1)/3;
  ``both ends kept`` leaves both end buckets unsmoothed (not either implementation: a what-if);
* stopping ``ours``: the log-likelihood test from the first iteration; ``theirs``: from the third (``r > 1``).

``--mirror`` fits ``lo + hi − v`` instead, which swaps which end of the range is left unsmoothed by ``theirs``.
The W1 distance (value scale) of each fit to the true distribution, mean and standard error over the repetitions,
and the paired difference to ``ours/ours`` on our reports. The two corner fits are checked against
``estimators.ems`` and ``sw.EMS`` themselves (they must agree to 1e-9), so the loop is the code it stands for.

    cd benchmarks && ../.venv/bin/python probe_sw_ems.py --sw-reference /tmp/swref --reps 20
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
from bench_numeric import load  # benchmarks/
from numeric_references import load_sw_reference
from scipy import stats

from ldpsynth.shared.numeric.closed_form import square_wave_b
from ldpsynth.shared.numeric.estimators import ems
from ldpsynth.shared.numeric.samplers import SquareWave
from ldpsynth.shared.numeric.scale import NumericRange

Smoother = Callable[[np.ndarray], np.ndarray]


def smooth_ours(theta: np.ndarray) -> np.ndarray:
    """(1, 2, 1)/4 inside, (2, 1)/3 at both ends, normalised (``estimators._smooth``)."""
    out = 2.0 * theta
    out[1:] += theta[:-1]
    out[:-1] += theta[1:]
    weights = np.full(theta.size, 4.0)
    weights[[0, -1]] = 3.0
    out /= weights
    return out / out.sum()


def smooth_theirs(theta: np.ndarray) -> np.ndarray:
    """``sw.py``'s smoothing matrix: (2, 1)/3 on the first bucket, (1, 2, 1)/4 inside, but its last row is (0, 1):
    the top bucket is left unsmoothed; normalised."""
    out = 2.0 * theta
    out[1:] += theta[:-1]
    out[:-1] += theta[1:]
    weights = np.full(theta.size, 4.0)
    weights[0] = 3.0
    out /= weights
    out[-1] = theta[-1]
    return out / out.sum()


def smooth_ends_kept(theta: np.ndarray) -> np.ndarray:
    """(1, 2, 1)/4 inside, both end buckets left unsmoothed (``sw.py``'s last row at both ends); normalised."""
    out = smooth_ours(theta)
    out[[0, -1]] = theta[[0, -1]]
    return out / out.sum()


def fit(p: np.ndarray, counts: np.ndarray, smooth: Smoother, late_stop: bool) -> tuple[np.ndarray, int]:
    """EMS on transition ``p`` (reports x buckets); ``late_stop``: the likelihood test from the third iteration
    (``sw.py``'s ``r > 1``), else from the first. Returns the fit and its number of iterations."""
    c = counts.astype(np.float64)
    theta = np.full(p.shape[1], 1.0 / p.shape[1])
    previous = 0.0 if late_stop else -math.inf
    for r in range(10_000):
        old = theta
        theta = theta * (p.T @ (c / (p @ theta)))
        theta = smooth(theta / theta.sum())
        likelihood = float(c @ np.log(p @ theta))
        if (r > 1 or not late_stop) and abs(likelihood - previous) < 1e-3:
            return theta, r + 1
        if np.abs(theta - old).sum() <= 1.0 / c.sum():
            return theta, r + 1
        previous = likelihood
    return theta, 10_000


def reference_reports(module: ModuleType, values: np.ndarray, value_range: NumericRange, eps: float, bins: int,
                      seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The reference's randomized-bin counts and its transform for one run of ``sw()`` (its EM swapped out)."""
    captured: dict[str, np.ndarray] = {}

    def capture(n: int, hist: np.ndarray, transform: np.ndarray, *_: object) -> np.ndarray:
        captured["counts"], captured["p"] = np.asarray(hist), np.asarray(transform)
        return np.full(n, 1.0 / n)

    np.random.seed(seed)
    shipped = module.EM
    module.EM = capture
    try:
        module.sw(values, value_range.lo, value_range.hi, eps, randomized_bins=bins, domain_bins=bins)
    finally:
        module.EM = shipped
    return captured["counts"], captured["p"]


VARIANTS = (("ours/ours", smooth_ours, False), ("smooth theirs", smooth_theirs, False),
            ("stop theirs", smooth_ours, True), ("theirs/theirs", smooth_theirs, True),
            ("both ends kept", smooth_ends_kept, False))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sw-reference", type=Path, required=True, help="checkout holding sw.py")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    parser.add_argument("--data", nargs="+", default=["movielens rating", "adult age"])
    parser.add_argument("--seed", type=int, default=20261207)
    parser.add_argument("--mirror", action="store_true", help="fit lo + hi − v instead of v (the ends swapped)")
    args = parser.parse_args()
    module = load_sw_reference(args.sw_reference)
    rng = np.random.default_rng(args.seed)
    print("| data | ε | reports | " + " | ".join(v[0] for v in VARIANTS) + " |")
    print("|---|---|---|" + "---|" * len(VARIANTS))
    for name, data_values, value_range, _ in (d for d in load() if d[0] in args.data):
        values = value_range.lo + value_range.hi - data_values if args.mirror else data_values
        name = f"{name} (mirrored)" if args.mirror else name
        x = value_range.to_unit(values)
        for eps in args.eps:
            sw = SquareWave(eps)
            centres = value_range.from_unit(-1 + (2 * np.arange(sw.buckets) + 1) / sw.buckets)
            p_ours = sw.transition()
            w1: dict[tuple[str, str], list[float]] = {}
            iters: dict[tuple[str, str], list[int]] = {}
            t0 = time.perf_counter()
            for rep in range(args.reps):
                ours = np.bincount(sw.perturb(x, rng), minlength=sw.reports)
                theirs, p_theirs = reference_reports(module, values, value_range, eps, sw.buckets,
                                                     int(rng.integers(2**32)))
                for source, p, counts in (("ours", p_ours, ours), ("theirs", p_theirs, theirs)):
                    for label, smooth, late in VARIANTS:
                        theta, r = fit(p, counts, smooth, late)
                        if rep == 0 and label == "ours/ours" and source == "ours":
                            assert np.allclose(theta, ems(sw, counts), atol=1e-9), "ours/ours is not ems()"
                        if rep == 0 and label == "theirs/theirs":
                            ref = module.EMS(sw.buckets, counts, p, 10_000, 1e-3)
                            assert np.allclose(theta, ref, atol=1e-9), "theirs/theirs is not sw.EMS"
                        w1.setdefault((source, label), []).append(
                            stats.wasserstein_distance(values, centres, v_weights=theta))
                        iters.setdefault((source, label), []).append(r)
            base = np.array(w1[("ours", "ours/ours")])
            for source in ("ours", "theirs"):
                cells = []
                for label, _, _ in VARIANTS:
                    got = np.array(w1[(source, label)])
                    diff = got - base
                    z = diff.mean() / (diff.std(ddof=1) / math.sqrt(diff.size)) if diff.std() > 0 else 0.0
                    cells.append(f"{got.mean():.5f} ± {got.std(ddof=1) / math.sqrt(got.size):.5f} "
                                 f"({100 * diff.mean() / base.mean():+.1f} %, z {z:+.1f}; "
                                 f"{np.mean(iters[(source, label)]):.0f} it)")
                print(f"| {name} | {eps} | {source} | " + " | ".join(cells) + " |", flush=True)
            print(f"<!-- {name} ε={eps}: window {sw.reports - sw.buckets + 1} cells, 2bM = "
                  f"{2 * square_wave_b(eps) * sw.buckets:.2f}; {time.perf_counter() - t0:.0f} s -->", flush=True)
    print(f"\nW1 mean ± SE over {args.reps} repetitions; in brackets the paired difference to ours/ours on our "
          "reports and its z, and the mean number of EMS iterations.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
