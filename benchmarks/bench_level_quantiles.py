"""Coverage of the quantile intervals on declared levels (docs/numeric.md, "Declared levels"): the interval
inverted from the CDF's (``levels.quantile_intervals``, as the answers compute it: the smoothing chosen by
cross-validation seeded by the counts, :data:`~ldpsynth.shared.numeric.answering.REPLICATES` resamples) beside the
old estimate ± 1.96 SE, over ``--runs`` seeded collections of ``--n`` devices (SW's sampler with a seeded Generator,
the simulation path) per law and ε.

Laws on the levels 0, 1, ..., L − 1 (step 1): ``ratings`` (5 levels, MovieLens-like, no q at a jump), ``jumps``
(5 levels, F = 0.1, 0.25, 0.5, 0.75, 1: q = F(v_k) exactly for q ≤ 0.75) and ``twenty`` (20 levels, 0.7 ×
Binomial(19, 0.35) + 0.3 × uniform). q ∈ {0.1, 0.25, 0.5, 0.75, 0.9}, ε ∈ {1, 2}. Written to ``--out`` (default
``results/level_quantiles``) as ``bench_level_quantiles.md`` and ``.csv``.

Usage::

    python benchmarks/bench_level_quantiles.py --runs 200 --n 2000
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

import numpy as np
from arguments import require_positive  # benchmarks/arguments.py (scripts run from this folder)
from bench_numeric import RESULTS, log  # benchmarks/
from machine import machine_info  # benchmarks/machine.py
from scipy import stats

from ldpsynth.shared.attributes import NumericAttribute
from ldpsynth.shared.numeric import SquareWave
from ldpsynth.shared.numeric.answering import REPLICATES
from ldpsynth.shared.numeric.levels import LevelModel, quantile_intervals

Q = np.array([0.1, 0.25, 0.5, 0.75, 0.9])
EPSILONS = (1.0, 2.0)
LAWS = {"ratings": np.array([0.06, 0.11, 0.27, 0.34, 0.22]),
        "jumps": np.array([0.10, 0.15, 0.25, 0.25, 0.25]),
        "twenty": 0.7 * stats.binom.pmf(np.arange(20), 19, 0.35) + 0.3 / 20}


def cell(law: np.ndarray, epsilon: float, runs: int, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Per q over ``runs``: coverage of the law's quantile by the inverted and the old interval, mean width in
    levels, and how often the plain EM was chosen."""
    attribute = NumericAttribute("x", False, 0.0, float(law.size - 1), "SW", 1.0)
    assert attribute.levels is not None
    v = attribute.levels.values()
    model = LevelModel.of(SquareWave(epsilon), attribute.levels, attribute.level_units(), False)
    truth = v[np.searchsorted(np.cumsum(law), Q - 1e-12)]
    held, old, width, plain = np.zeros(Q.size), np.zeros(Q.size), np.zeros(Q.size), 0
    for _ in range(runs):
        values = rng.choice(v, size=n, p=law)
        counts = np.bincount(model.sampler.perturb(attribute.unit(attribute.encode(values)), rng),
                             minlength=model.sampler.reports)
        chosen = model.chosen(counts)
        plain += not chosen.smoothing
        qi = quantile_intervals(chosen, counts, Q, 0.95, rng, replicates=REPLICATES)
        held += (qi.low <= truth) & (truth <= qi.high)
        old += np.abs(qi.value - truth) <= 1.96 * qi.se
        width += qi.high - qi.low
    return {"truth": truth, "coverage": held / runs, "old_coverage": old / runs, "width": width / runs,
            "plain": np.array([plain / runs])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--out", type=Path, default=RESULTS / "level_quantiles")
    args = parser.parse_args(argv)
    require_positive(parser, args, ("runs", "n"))
    info = machine_info()
    rng = np.random.default_rng(args.seed)
    rows = []
    start = time.time()
    for name, law in LAWS.items():
        for eps in EPSILONS:
            got = cell(law / law.sum(), eps, args.runs, args.n, rng)
            rows.append({"law": name, "levels": law.size, "epsilon": eps, **got})
            log(f"{name} eps={eps}: coverage {np.round(got['coverage'], 3).tolist()} width "
                f"{np.round(got['width'], 2).tolist()} old {np.round(got['old_coverage'], 3).tolist()} "
                f"({time.time() - start:.0f} s)")
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "bench_level_quantiles.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["law", "levels", "epsilon", "q", "true_quantile", "coverage", "mean_width_levels",
                         "old_coverage", "plain_share"])
        for r in rows:
            for j, q in enumerate(Q):
                writer.writerow([r["law"], r["levels"], r["epsilon"], q, r["truth"][j], f"{r['coverage'][j]:.3f}",
                                 f"{r['width'][j]:.3f}", f"{r['old_coverage'][j]:.3f}", f"{r['plain'][0]:.3f}"])
    fmt = " / ".join
    lines = [f"# Quantile intervals on declared levels ({args.runs} runs, n = {args.n}, 95 %, "
             f"{REPLICATES} resamples; {time.time() - start:.0f} s)", "",
             "Per q = " + fmt(str(q) for q in Q) + ". Widths in levels (step 1).", "",
             "| law | ε | true quantiles | coverage, inverted | mean width | coverage, old ± 1.96 SE "
             "| plain EM chosen |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['law']} ({r['levels']}) | {r['epsilon']:g} | {fmt(f'{t:g}' for t in r['truth'])} | "
                     f"{fmt(f'{c:.3f}' for c in r['coverage'])} | {fmt(f'{w:.2f}' for w in r['width'])} | "
                     f"{fmt(f'{c:.3f}' for c in r['old_coverage'])} | {r['plain'][0]:.2f} |")
    lines += ["", "Machine: " + "; ".join(f"{k}: {v}" for k, v in info.items())]
    (args.out / "bench_level_quantiles.md").write_text("\n".join(lines) + "\n")
    log(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
