"""SW's distribution on declared levels (docs/numeric.md, "Declared levels") beside SW + EMS over 2^8 buckets and the
reference SW (vvv214/LDP_Protocols ``sw.py``: its EMS and the EM its ``sw()`` ships), in the same run.

Data as ``bench_numeric.py``: MovieLens-100K's ratings on [1, 5] and Adult's age on [17, 90] and hours-per-week on
[1, 99], every one declared with step 1 (5, 74 and 99 levels). ε ∈ {0.5, 1, 2, 4}; ``--reps`` repetitions. Per
repetition, one set of our SW reports (seeded exact path) is fitted four ways: EMS over the buckets (today's SW
path), EM on the levels without smoothing, EM on the levels with EMS's smoothing on the level grid, and the rule the
library uses (smoothed unless the plain EM is clearly better in ``FOLDS``-fold cross-validation); the reference
draws its own reports (numpy's global generator, seeded from a generator of its own) and fits them by its EMS and its
EM, on 2^8 input and randomized bins as in ``bench_numeric.py``. W1: Wasserstein-1 on the value scale between the
true values and the fit (the levels' atoms, or the buckets' centres). Written to ``--out`` (default
``results/numeric_levels``) as ``bench_numeric_levels.md`` and ``.csv``.

Usage::

    python benchmarks/bench_numeric_levels.py --reps 10 --sw-reference DIR   # DIR holds sw.py
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path
from types import ModuleType

import numpy as np
from arguments import require_positive  # benchmarks/arguments.py (scripts run from this folder)
from bench_numeric import EPSILONS, RESULTS, load, log, no_worse  # benchmarks/
from machine import machine_info  # benchmarks/machine.py
from numeric_references import load_sw_reference, reference_sw  # benchmarks/
from scipy import stats

from ldpsynth.shared.attributes import NumericAttribute
from ldpsynth.shared.numeric import SquareWave
from ldpsynth.shared.numeric.estimators import ems
from ldpsynth.shared.numeric.levels import FOLDS, PLAIN_ABOVE, LevelModel
from ldpsynth.simulation.datasets import DatasetNotFound

#: The fits compared (key: column title).
FITS = {"buckets_ems": "ours: EMS on 2^8 buckets", "levels_em": "ours: EM on levels", "levels_ems":
        "ours: EMS on levels", "levels_rule": "ours: levels, the rule", "ref_ems": "reference EMS",
        "ref_em": "reference EM (as shipped)"}


def run(data: list, reps: int, rng: np.random.Generator, ref_rng: np.random.Generator,
        sw_module: ModuleType | None) -> list[dict]:
    """One row per (data set, ε): every fit's W1, mean and sd over ``reps`` (module docstring)."""
    rows = []
    for name, values, value_range, _ in data:
        attribute = NumericAttribute(value_range.field.replace(" ", "_").replace("-", "_"), False, value_range.lo,
                                     value_range.hi, "SW", 1.0)
        levels = attribute.levels
        assert levels is not None
        units = attribute.unit(attribute.encode(levels.values()))
        x = attribute.unit(attribute.encode(values))
        for eps in EPSILONS:
            sw = SquareWave(eps)
            centres = value_range.from_unit(-1 + (2 * np.arange(sw.buckets) + 1) / sw.buckets)
            models = {key: LevelModel.of(sw, levels, units, smoothing)
                      for key, smoothing in (("levels_em", False), ("levels_ems", True))}
            smoothed = 0
            got: dict[str, list[float]] = {key: [] for key in FITS}
            t0 = time.perf_counter()
            for _ in range(reps):
                counts = np.bincount(sw.perturb(x, rng), minlength=sw.reports)
                got["buckets_ems"].append(stats.wasserstein_distance(values, centres, v_weights=ems(sw, counts)))
                rule = models["levels_em"].chosen(counts, rng)
                smoothed += rule.smoothing
                for key, model in (*models.items(), ("levels_rule", rule)):
                    got[key].append(stats.wasserstein_distance(values, levels.values(), v_weights=model.fit(counts)))
                for key, smoothing in (("ref_ems", True), ("ref_em", False)) if sw_module else ():
                    ref = reference_sw(sw_module, values, value_range, eps, sw.buckets, sw.buckets,
                                       int(ref_rng.integers(2**32)), smoothing=smoothing)
                    got[key].append(stats.wasserstein_distance(values, centres, v_weights=ref))
            row: dict = {"data": name, "levels": levels.count, "epsilon": eps, "reps": reps,
                         "rule_smoothed": smoothed}
            for key, w in got.items():
                row[key], row[f"{key}_sd"] = (float(np.mean(w)), float(np.std(w))) if w else (math.nan, math.nan)
            rows.append(row)
            log(f"{name:22s} eps={eps:<4} " + "  ".join(f"{k} {row[k]:.4f}" for k in FITS)
                + f" ({time.perf_counter() - t0:.1f} s)")
    return rows


def write(out: Path, info: dict, rows: list[dict], command: str, seconds: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "bench_numeric_levels.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["data", "levels", "epsilon", "fit", "w1_mean", "w1_sd", "reps"])
        for r in rows:
            for key in FITS:
                w.writerow([r["data"], r["levels"], r["epsilon"], key, f"{r[key]:.6g}", f"{r[key + '_sd']:.6g}",
                            r["reps"]])
    ref = not math.isnan(rows[0]["ref_ems"])
    head = "| data | L | ε | " + " | ".join(FITS.values()) + " |"
    if ref:
        head += " rule no worse than reference EMS | rule no worse than reference EM |"
    lines = [f"Command: `{command}`", "", "# SW on declared levels: Wasserstein-1 to the true distribution", "",
             head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        line = f"| {r['data']} | {r['levels']} | {r['epsilon']} | " + " | ".join(
            f"{r[k]:.4f} ± {r[k + '_sd']:.4f}" for k in FITS) + " |"
        if ref:
            line += "".join(f" {no_worse(r['levels_rule'], r['levels_rule_sd'], r[k], r[k + '_sd'], r['reps'])} |"
                            for k in ("ref_ems", "ref_em"))
        lines.append(line)
    lines += ["", f"Mean ± sd over {rows[0]['reps']} repetitions (value scale). The rule: EM on the levels, smoothed "
              f"on the level grid unless the plain EM's {FOLDS}-fold held-out log-likelihood is larger with paired t > "
              f"{PLAIN_ABOVE}; it smoothed in "
              + ", ".join(f"{r['data']} ε = {r['epsilon']}: {r['rule_smoothed']}/{r['reps']}" for r in rows) + ". "
              "\"No worse\": the rule's mean W1 <= theirs; \"no, within noise\": larger by under 2 standard errors "
              "√((sd₁² + sd₂²)/reps) (z); \"NO\": by more.", "", f"Run time {seconds:.0f} s.", "", "## Machine", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    (out / "bench_numeric_levels.md").write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--out", type=Path, default=RESULTS / "numeric_levels")
    parser.add_argument("--sw-reference", type=Path, metavar="DIR",
                        help="a checkout of vvv214/LDP_Protocols (its sw.py): run its SW side by side")
    args = parser.parse_args()
    require_positive(parser, args, ("reps",))
    try:
        sw_module = load_sw_reference(args.sw_reference) if args.sw_reference else None
    except FileNotFoundError as err:
        parser.error(str(err))
    try:
        data = load()
    except DatasetNotFound as err:
        print(f"skipped: {err}")
        return 0
    start = time.perf_counter()
    info = machine_info()
    info["seed"] = "20261208 (ours), 20261209 (the reference)"
    rows = run(data, args.reps, np.random.default_rng(20261208), np.random.default_rng(20261209), sw_module)
    command = "cd benchmarks && ../.venv/bin/python " + " ".join(["bench_numeric_levels.py", *sys.argv[1:]])
    write(args.out, info, rows, command, time.perf_counter() - start)
    log(f"written to {args.out}/bench_numeric_levels.{{md,csv}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
