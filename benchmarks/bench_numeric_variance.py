"""The variance query of a numeric attribute (``ldpsynth/shared/numeric/variance``): bias, SE and coverage over
seeded repetitions, printed as a Markdown table (docs/numeric.md, "The variance").

Data: ``--n`` values ``99·Beta(3, 6)`` on [0, 99] (seed 3), fixed; each repetition sends them through the
sampler's seeded exact path (``perturb``) and estimates the population variance of these values.

* HM at ε ∈ {0.7, 1, 4} and PM at ε = 2 (``--reps`` repetitions each): the mean estimate, the z of its bias
  (mean − truth over SD/√R), the SD of the estimates, the mean delta-method SE and the coverage of the 95 %
  interval.
* SW at ε = 2 (``--sw-reps`` repetitions, ``--sw-n`` values of the same law, seed 6): the EMS histogram's variance,
  its relative bias and the coverage of its bootstrap interval (100 resamples: slow, about 100 EMS fits a
  repetition).

Command: ``cd benchmarks && ../.venv/bin/python bench_numeric_variance.py`` (defaults as in docs/numeric.md).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ldpsynth.shared.numeric.estimators import bootstrap_from_counts
from ldpsynth.shared.numeric.samplers import HybridMechanism, PiecewiseMechanism, SquareWave
from ldpsynth.shared.numeric.scale import NumericRange
from ldpsynth.shared.numeric.variance import estimate_variance_from_counts, histogram_variance

SPAN = NumericRange(0.0, 99.0, "hours")


def hm_pm(n: int, reps: int) -> None:
    values = 99.0 * np.random.default_rng(3).beta(3.0, 6.0, n)
    truth, x = float(values.var()), SPAN.to_unit(values)
    print(f"n = {n}, true variance {truth:.1f}\n")
    print("| mechanism | ε | reps | mean estimate | z of the bias | SD of estimates | mean SE | SE / SD | coverage |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, sampler in [("HM", HybridMechanism(0.7)), ("HM", HybridMechanism(1.0)), ("HM", HybridMechanism(4.0)),
                          ("PM", PiecewiseMechanism(2.0))]:
        rng = np.random.default_rng(11)
        est, se, covered = np.empty(reps), np.empty(reps), 0
        for r in range(reps):
            a = estimate_variance_from_counts(
                sampler, np.bincount(sampler.perturb(x, rng), minlength=sampler.reports), SPAN)
            est[r], se[r] = a.variance, a.standard_error
            covered += a.low <= truth <= a.high
        sd = est.std(ddof=1)
        print(f"| {name} | {sampler.epsilon_requested:g} | {reps} | {est.mean():.1f} | "
              f"{(est.mean() - truth) / (sd / np.sqrt(reps)):.2f} | {sd:.1f} | {se.mean():.1f} | "
              f"{se.mean() / sd:.3f} | {covered / reps:.3f} |", flush=True)


def square_wave(n: int, reps: int) -> None:
    sw = SquareWave(2.0)
    values = 99.0 * np.random.default_rng(6).beta(3.0, 6.0, n)
    truth, x = float(values.var()), SPAN.to_unit(values)
    rng = np.random.default_rng(8)
    est, se = np.empty(reps), np.empty(reps)
    start = time.time()
    for r in range(reps):
        counts = np.bincount(sw.perturb(x, rng), minlength=sw.reports)
        value, error = bootstrap_from_counts(sw, counts, lambda t: np.array([histogram_variance(t, SPAN)]), rng)
        est[r], se[r] = value[0], error[0]
        print(f"  SW repetition {r + 1}/{reps} ({time.time() - start:.0f} s)", flush=True)
    covered = np.mean(np.abs(est - truth) <= 1.96 * se)
    print(f"\nSW ε = 2, n = {n}, {reps} repetitions: true {truth:.1f}, mean estimate {est.mean():.1f} "
          f"(relative bias {est.mean() / truth - 1:+.3f}), SD {est.std(ddof=1):.1f}, mean bootstrap SE "
          f"{se.mean():.1f}, coverage {covered:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--sw-n", type=int, default=20_000)
    parser.add_argument("--sw-reps", type=int, default=20)
    args = parser.parse_args()
    hm_pm(args.n, args.reps)
    square_wave(args.sw_n, args.sw_reps)


if __name__ == "__main__":
    main()
