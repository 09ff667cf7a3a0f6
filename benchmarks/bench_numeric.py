"""Numeric attributes on real data: Duchi, PM, HM and SW + EMS (``ldpsynth/shared/numeric``) beside E over buckets.

Data: MovieLens-100K's ratings (range [1, 5], n = 100,000) and UCI Adult's ``age`` ([17, 90]) and
``hours-per-week`` ([1, 99]), n = 32,561 each, from ``$LDPSYNTH_DATA`` or ``../shared/data`` (skipped with a
message where absent). ε ∈ {0.5, 1, 2, 4}. All in one run, written to ``results/bench_numeric.md``,
``.csv`` and ``.png``:

1. **Mean.** ``--reps`` repetitions (default 500) of the whole data set through each sampler's seeded
   exact path. Per-report variance on [−1, 1] (n x the variance of the mean over the repetitions) against
   Wang2019ICDE's closed form at the data (the mean over the rows of Var[x̂ | x]); the ratio's 95 % sampling
   band is ±1.96 √(2/(R − 1)). "pooled" is the mean of (x̂ − x)² over all n R reports: the same
   per-report variance, measured to ~0.1 %. Coverage: the share of the repetitions whose 95 % interval
   holds the true mean. E over buckets: the values bucketed (MovieLens: its 5 ratings; Adult: 2^k equal
   buckets, k = ``bits_for_rows(n)`` as the WYZ continuous path chooses), released with E, the mean
   estimated from E's unbiased bucket frequencies at the bucket centres; its variance the same way (its
   bucketing bias is listed apart). Goals: empirical within 5 % of HM's closed form; HM <= 0.5x E at ε = 1;
   coverage 93-97 %.
2. **Distribution.** Wasserstein-1 distance (value scale) between the true empirical distribution and
   SW + EMS's histogram (2^8 buckets, at the bucket centres), beside E over the same buckets as in 1 (its
   frequencies clipped at 0 and renormalised), mean ± sd over ``--dist-reps`` repetitions.
3. **Quantiles.** SW + EMS's median of Adult's age at ε = 2: the bootstrap SE (``--boot`` resamples)
   against the median's SD over ``--quantile-reps`` repetitions, and the coverage of its 95 % interval.
4. **Device cost** per value at ε = 1: ``perturb_secure`` (the OS CSPRNG) on one value per call (blocks of
   ``--calls`` calls) and on a batch of 100,000: CPU time, the best of ``--cost-repeats`` alternating repeats
   of the sampler and of a bare ``os.urandom`` read of the bytes it reads (as ``bench_mechanism.py``), and
   their ratio. Goal: <= 50 µs of CPU per value.

Beside the reference implementations (neither is on PyPI; ``numeric_references.py`` loads them from checkouts):
``--sok DIR`` (mad-lab-fau/sok-ldp-data-analysis) adds the SoK's Wang2019 PM, HM and Duchi and its Duchi2018
(d = 1) to 1, with the same repetitions, their reports mapped to [−1, 1], beside ours and the closed form (1b),
and their per-value CPU time beside our seeded path to 4; ``--sw-reference DIR`` (vvv214/LDP_Protocols, its
``sw.py``) adds its SW on the same values and buckets, fitted by its EMS and by the EM its ``sw()`` ships, to 2,
and whether our SW + EMS is no worse. Their draws come from a generator of their own, so our rows are the same
with or without them. Extract the checkouts with ``git -C MIRROR archive HEAD | tar -x -C DIR`` (for
LDP_Protocols ``git -C MIRROR archive HEAD sw.py | tar -x -C DIR``: its data files may be absent from a mirror).

Usage::

    python benchmarks/bench_numeric.py             # full run (a few minutes on 2 cores)
    python benchmarks/bench_numeric.py --sok DIR1 --sw-reference DIR2   # beside the reference implementations
    python benchmarks/bench_numeric.py --quick     # small sizes, a smoke test (results not written)
    python benchmarks/bench_numeric.py --quick --out DIR   # the same, tables written to DIR
"""

from __future__ import annotations

import argparse
import csv
import gc
import gzip
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np
import scipy
from arguments import require_positive  # benchmarks/arguments.py (scripts run from this folder)
from machine import machine_info  # benchmarks/machine.py
from numeric_references import SOK_MEANS, SokMean, load_sok, load_sw_reference, reference_sw  # benchmarks/
from scipy import stats

from ldpsynth.shared.attributes import bits_for_rows
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms import coins
from ldpsynth.shared.numeric import Duchi, HybridMechanism, NumericRange, PiecewiseMechanism, SquareWave
from ldpsynth.shared.numeric import closed_form as cf
from ldpsynth.shared.numeric.estimators import bootstrap_quantiles, ems, estimate_mean
from ldpsynth.shared.numeric.samplers import NumericSampler
from ldpsynth.simulation.datasets import DatasetNotFound, dataset_path

EPSILONS = (0.5, 1.0, 2.0, 4.0)
MEAN_SAMPLERS: dict[str, Callable[[float], Duchi | PiecewiseMechanism | HybridMechanism]] = {
    "duchi": Duchi, "pm": PiecewiseMechanism, "hm": HybridMechanism}
RESULTS = Path(__file__).parent / "results"
SokMaker = Callable[[float, NumericRange, np.random.Generator], SokMean]
#: The cost table's CSV metrics (key of a cost row: its name in the CSV).
COST_METRICS = {"single_cpu_us": "cpu us per value, one per call", "single_base_us": "os.urandom cpu us, one per call",
                "single_ratio": "ratio to os.urandom, one per call", "single_wall_us": "best wall us, one per call",
                "batched_us": "cpu us per value, batch of 1e5", "batched_base_us": "os.urandom cpu us per value, batch",
                "batched_ratio": "ratio to os.urandom, batch"}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def load() -> list[tuple[str, np.ndarray, NumericRange, np.ndarray]]:
    """``(name, values, range, E's bucket centres)`` of each data set."""
    ratings = np.loadtxt(gzip.open(dataset_path("movielens-100k/u.data.gz"), "rt"), dtype=np.int64)[:, 2]
    with gzip.open(dataset_path("adult/adult.csv.gz"), "rt") as f:
        rows = list(csv.reader(f, skipinitialspace=True))
    header, body = rows[0], [r for r in rows[1:] if r]
    age = np.array([float(r[header.index("age")]) for r in body])
    hours = np.array([float(r[header.index("hours-per-week")]) for r in body])
    out = [("movielens rating", ratings.astype(float), NumericRange(1, 5, "rating"), np.arange(1.0, 6.0))]
    for name, values, lo, hi in (("adult age", age, 17, 90), ("adult hours-per-week", hours, 1, 99)):
        k = 1 << bits_for_rows(values.size)
        width = (hi - lo) / k
        out.append((name, values, NumericRange(lo, hi, name), lo + width * (np.arange(k) + 0.5)))
    return out


def bucket(values: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """The code of the nearest centre (equal buckets, or MovieLens's five ratings)."""
    return np.abs(values[:, None] - centres[None, :]).argmin(axis=1)


def e_frequencies(m: MechanismE, reports: np.ndarray) -> np.ndarray:
    """E's unbiased frequencies (WYZ eq. 17): (count/n − q)/(p − q)."""
    share = np.bincount(reports, minlength=m.domain_size) / reports.size
    return (share - m.lie_probability) / (m.keep_probability - m.lie_probability)


def sok_mean_row(name: str, values: np.ndarray, x: np.ndarray, value_range: NumericRange, eps: float, mech: str,
                 make: SokMaker, reps: int, rng: np.random.Generator) -> dict:
    """The SoK's estimator ``mech`` (``numeric_references``) through the same measurement as ours (no intervals:
    the SoK's 1-D mean classes give none)."""
    t0 = time.perf_counter()
    model = make(eps, value_range, rng)
    means, pooled = np.empty(reps), 0.0
    for r in range(reps):
        est = model.unit_estimates(model.reports(values))
        means[r] = est.mean()
        pooled += float(np.mean((est - x) ** 2))
    closed = float(cf.variance(SOK_MEANS[mech][3], eps, x).mean())
    empirical = x.size * means.var(ddof=1)
    log(f"mean  {name:22s} eps={eps:<4} {mech:13s} var {empirical:8.4f} closed {closed:8.4f} "
        f"ratio {empirical / closed:.3f} pooled {pooled / reps / closed:.4f} ({time.perf_counter() - t0:.1f} s)")
    return {"data": name, "n": x.size, "epsilon": eps, "mechanism": mech, "reps": reps, "empirical": empirical,
            "pooled": pooled / reps, "closed_form": closed, "grid_exact": math.nan, "ratio": empirical / closed,
            "pooled_ratio": pooled / reps / closed, "coverage": math.nan, "bias": 0.0}


def mean_table(data: list, reps: int, rng: np.random.Generator, sok: dict[str, SokMaker] | None = None,
               ref_rng: np.random.Generator | None = None) -> list[dict]:
    """Section 1; the SoK's estimators (if given) draw from ``ref_rng``, so ours draw the same with or without."""
    rows = []
    for name, values, rng_range, centres in data:
        x = rng_range.to_unit(values)
        n = x.size
        codes = bucket(values, centres)
        unit_centres = rng_range.to_unit(centres)
        for eps in EPSILONS:
            for mech, make in MEAN_SAMPLERS.items():
                t0 = time.perf_counter()
                m = make(eps)
                means, pooled, covered = np.empty(reps), 0.0, 0
                for r in range(reps):
                    reports = m.perturb(x, rng)
                    est = m.estimates(reports)
                    means[r] = est.mean()
                    pooled += float(np.mean((est - x) ** 2))
                    fit = estimate_mean(m, reports, rng_range)
                    covered += fit.low <= values.mean() <= fit.high
                closed = float(cf.variance(mech, eps, x).mean())
                v = m.variance_coefficients()
                empirical = n * means.var(ddof=1)
                rows.append({"data": name, "n": n, "epsilon": eps, "mechanism": mech, "reps": reps,
                             "empirical": empirical, "pooled": pooled / reps, "closed_form": closed,
                             "grid_exact": v.a * float(np.mean(x * x)) + v.c,
                             "ratio": empirical / closed, "pooled_ratio": pooled / reps / closed,
                             "coverage": covered / reps, "bias": 0.0})
                log(f"mean  {name:22s} eps={eps:<4} {mech:5s} var {empirical:8.4f} closed {closed:8.4f} "
                    f"ratio {empirical / closed:.3f} pooled {pooled / reps / closed:.4f} "
                    f"coverage {covered / reps:.3f} ({time.perf_counter() - t0:.1f} s)")
            for mech, make in (sok or {}).items():
                rows.append(sok_mean_row(name, values, x, rng_range, eps, mech, make, reps, ref_rng or rng))
            e = MechanismE(eps, centres.size)
            means = np.array([e_frequencies(e, e.perturb(codes, rng)) @ unit_centres for _ in range(reps)])
            rows.append({"data": name, "n": n, "epsilon": eps, "mechanism": f"E/{centres.size}", "reps": reps,
                         "empirical": n * means.var(ddof=1), "pooled": math.nan, "closed_form": math.nan,
                         "grid_exact": math.nan, "ratio": math.nan, "pooled_ratio": math.nan, "coverage": math.nan,
                         "bias": float(np.mean(unit_centres[codes]) - x.mean())})
            log(f"mean  {name:22s} eps={eps:<4} E/{centres.size:<3} var {rows[-1]['empirical']:8.4f}")
    return rows


def distribution_table(data: list, reps: int, rng: np.random.Generator, sw_module: ModuleType | None = None,
                       ref_rng: np.random.Generator | None = None) -> list[dict]:
    """W1 of SW + EMS and of E over buckets; with ``sw_module`` (``numeric_references``) also the reference SW's,
    on as many input and randomized bins as our input buckets, fitted by its EMS and by its EM as ``sw()`` ships
    (seeded from ``ref_rng``)."""
    rows = []
    for name, values, rng_range, centres in data:
        codes = bucket(values, centres)
        x = rng_range.to_unit(values)
        for eps in EPSILONS:
            sw, e = SquareWave(eps), MechanismE(eps, centres.size)
            sw_centres = rng_range.from_unit(-1 + (2 * np.arange(sw.buckets) + 1) / sw.buckets)
            t0 = time.perf_counter()
            d: dict[str, list[float]] = {"sw_ems": [], "e_buckets": [], "ref_ems": [], "ref_em": []}
            for _ in range(reps):
                theta = ems(sw, np.bincount(sw.perturb(x, rng), minlength=sw.reports))
                d["sw_ems"].append(stats.wasserstein_distance(values, sw_centres, v_weights=theta))
                f = np.clip(e_frequencies(e, e.perturb(codes, rng)), 0, None)
                d["e_buckets"].append(stats.wasserstein_distance(values, centres, v_weights=f / f.sum()))
                for key, smoothing in (("ref_ems", True), ("ref_em", False)) if sw_module else ():
                    ref = reference_sw(sw_module, values, rng_range, eps, sw.buckets, sw.buckets,
                                       int((ref_rng or rng).integers(2**32)), smoothing=smoothing)
                    d[key].append(stats.wasserstein_distance(values, sw_centres, v_weights=ref))
            row: dict = {"data": name, "epsilon": eps, "reps": reps, "e_k": centres.size}
            for key, got in d.items():
                row[key], row[f"{key}_sd"] = (np.mean(got), np.std(got)) if got else (math.nan, math.nan)
            rows.append(row)
            log(f"dist  {name:22s} eps={eps:<4} W1 SW+EMS {row['sw_ems']:.4f}  E/{centres.size} "
                f"{row['e_buckets']:.4f}  reference SW+EMS {row['ref_ems']:.4f} SW+EM {row['ref_em']:.4f} "
                f"({time.perf_counter() - t0:.1f} s)")
    return rows


def quantile_table(data: list, reps: int, boot: int, rng: np.random.Generator) -> dict:
    name, values, rng_range, _ = data[1]
    x = rng_range.to_unit(values)
    sw = SquareWave(2.0)
    truth = float(np.median(values))
    medians, ses, covered = [], [], 0
    t0 = time.perf_counter()
    for _ in range(reps):
        fit = bootstrap_quantiles(sw, sw.perturb(x, rng), rng_range, [0.5], rng, replicates=boot)
        medians.append(fit.value[0])
        ses.append(fit.standard_error[0])
        covered += fit.low[0] <= truth <= fit.high[0]
    out = {"data": name, "epsilon": 2.0, "truth": truth, "mean_estimate": float(np.mean(medians)),
           "sd": float(np.std(medians, ddof=1)), "mean_bootstrap_se": float(np.mean(ses)),
           "coverage": covered / reps, "reps": reps, "boot": boot}
    log(f"quant {name} median {truth} est {out['mean_estimate']:.3f} sd {out['sd']:.3f} "
        f"boot se {out['mean_bootstrap_se']:.3f} coverage {out['coverage']:.3f} ({time.perf_counter() - t0:.1f} s)")
    return out


def read_bytes(run: Callable[[], object]) -> int:
    """The bytes ``run`` reads from the OS CSPRNG (``coins.secure_words`` counted while it runs)."""
    seen = [0]

    def counting(count: int) -> np.ndarray:
        seen[0] += 8 * count
        return original(count)

    original = coins.secure_words
    coins.secure_words = counting
    try:
        run()
    finally:
        coins.secure_words = original
    return seen[0]


def best_cpu(run: Callable[[], object], baseline: Callable[[], object], repeats: int) -> tuple[float, float, float]:
    """Best CPU seconds of ``run`` and of ``baseline`` over ``repeats`` alternating runs (after a warm-up),
    and ``run``'s best wall seconds."""
    run(), baseline()
    op = base = wall = math.inf
    for _ in range(repeats):
        gc.collect()
        c0 = time.process_time()
        baseline()
        base = min(base, time.process_time() - c0)
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        run()
        op, wall = min(op, time.process_time() - c0), min(wall, time.perf_counter() - t0)
    return op, base, wall


def cost_table(calls: int, repeats: int) -> list[dict]:
    """Per-value CPU cost of ``perturb_secure`` at ε = 1 beside a bare ``os.urandom`` of the bytes it reads,
    one value per call (blocks of ``calls`` calls) and in a batch of 10^5."""
    rows = []
    batch = np.random.default_rng(0).uniform(-1, 1, 100_000)
    samplers: dict[str, NumericSampler] = {"duchi": Duchi(1.0), "pm": PiecewiseMechanism(1.0),
                                           "hm": HybridMechanism(1.0), "sw": SquareWave(1.0)}
    one = np.array([0.3])
    for name, m in samplers.items():
        def singles(sample: Callable[[np.ndarray], object] = m.perturb_secure) -> None:
            for _ in range(calls):
                sample(one)

        def batched(sample: Callable[[np.ndarray], object] = m.perturb_secure) -> None:
            sample(batch)

        per_call = math.ceil(read_bytes(singles) / calls)
        per_batch = read_bytes(batched)

        def bare_singles(size: int = per_call) -> None:
            for _ in range(calls):
                os.urandom(size)

        def bare_batch(size: int = per_batch) -> None:
            os.urandom(size)

        single, single_base, single_wall = best_cpu(singles, bare_singles, repeats)
        many, many_base, _ = best_cpu(batched, bare_batch, repeats)
        rows.append({"mechanism": name, "bytes_per_call": per_call, "single_cpu_us": single / calls * 1e6,
                     "single_base_us": single_base / calls * 1e6, "single_ratio": single / single_base,
                     "single_wall_us": single_wall / calls * 1e6, "bytes_per_value": per_batch / batch.size,
                     "batched_us": many / batch.size * 1e6, "batched_base_us": many_base / batch.size * 1e6,
                     "batched_ratio": many / many_base, "calls": calls, "repeats": repeats})
        r = rows[-1]
        log(f"cost  {name:5s} one per call {r['single_cpu_us']:.1f} µs CPU (os.urandom({per_call}) "
            f"{r['single_base_us']:.2f} µs, x{r['single_ratio']:.1f}; wall {r['single_wall_us']:.1f} µs); batch "
            f"{r['batched_us']:.3f} µs per value (os.urandom {r['batched_base_us']:.3f}, x{r['batched_ratio']:.1f})")
    return rows


def sok_cost_table(sok: dict[str, SokMaker], calls: int, repeats: int) -> list[dict]:
    """Per-value CPU cost at ε = 1 of the SoK's ``mechanism`` beside our sampler's seeded ``perturb`` (both on a
    numpy Generator: the SoK has no CSPRNG path), alternating, best of ``repeats``: one value per call and 10^5."""
    rows = []
    rng = np.random.default_rng(1)
    unit = NumericRange(-1, 1)
    batch, one = rng.uniform(-1, 1, 100_000), np.array([0.3])
    for mech, make in sok.items():
        model, ours = make(1.0, unit, rng), MEAN_SAMPLERS[SOK_MEANS[mech][3]](1.0)
        out: dict = {"mechanism": mech, "ours": SOK_MEANS[mech][3], "calls": calls, "repeats": repeats}
        for key, values, times in (("single", one, calls), ("batched", batch, 1)):
            def theirs(v: np.ndarray = values, k: int = times, sample: Callable = model.reports) -> None:
                for _ in range(k):
                    sample(v)

            def mine(v: np.ndarray = values, k: int = times, sample: Callable = ours.perturb) -> None:
                for _ in range(k):
                    sample(v, rng)

            their_cpu, our_cpu, _ = best_cpu(theirs, mine, repeats)
            per = times * values.size
            out[f"{key}_sok_us"], out[f"{key}_ours_us"] = their_cpu / per * 1e6, our_cpu / per * 1e6
        rows.append(out)
        log(f"cost  {mech:13s} one per call {out['single_sok_us']:.1f} µs CPU (ours seeded "
            f"{out['single_ours_us']:.1f}); batch {out['batched_sok_us']:.3f} µs per value (ours seeded "
            f"{out['batched_ours_us']:.3f})")
    return rows


def plot(mean_rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = sorted({r["data"] for r in mean_rows})
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), sharey=True)
    for ax, name in zip(np.atleast_1d(axes), names):
        for mech, colour in (("duchi", "C0"), ("pm", "C1"), ("hm", "C2")):
            rows = [r for r in mean_rows if r["data"] == name and r["mechanism"] == mech]
            ax.plot([r["epsilon"] for r in rows], [r["closed_form"] for r in rows], "-", color=colour,
                    label=f"{mech} closed form")
            ax.plot([r["epsilon"] for r in rows], [r["empirical"] for r in rows], "o", color=colour,
                    label=f"{mech} measured")
        rows = [r for r in mean_rows if r["data"] == name and r["mechanism"].startswith("E/")]
        ax.plot([r["epsilon"] for r in rows], [r["empirical"] for r in rows], "s--", color="C3",
                label=f"{rows[0]['mechanism']} measured")
        ax.set(xscale="log", yscale="log", xlabel="ε", title=name)
        ax.set_xticks(EPSILONS, [str(e) for e in EPSILONS])
        ax.minorticks_off()
        ax.legend(fontsize=7)
    np.atleast_1d(axes)[0].set_ylabel("per-report variance of the mean on [−1, 1]")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def sok_lines(mean_rows: list[dict]) -> list[str]:
    """Section 1b: each SoK estimator beside ours (the same mechanism) and the closed form."""
    ours = {(r["data"], r["epsilon"], r["mechanism"]): r for r in mean_rows}
    lines = ["", "### 1b. Beside the SoK's implementations (mad-lab-fau/sok-ldp-data-analysis)", "",
             "The same data, ε and repetitions; their reports mapped to [−1, 1] through their own `mean` "
             "(`numeric_references.py`). `sok duchi2018` is DJW18's d-dimensional sampler at d = 1 (the same law as "
             "Duchi's).", "",
             "| data | ε | SoK mechanism | SoK measured / closed | ours measured / closed | SoK pooled / closed | "
             "ours pooled / closed | closed form |", "|---|---|---|---|---|---|---|---|"]
    for r in mean_rows:
        if r["mechanism"] in SOK_MEANS:
            o = ours[(r["data"], r["epsilon"], SOK_MEANS[r["mechanism"]][3])]
            lines.append(f"| {r['data']} | {r['epsilon']} | {r['mechanism']} | {r['ratio']:.3f} | {o['ratio']:.3f} | "
                         f"{r['pooled_ratio']:.4f} | {o['pooled_ratio']:.4f} | {r['closed_form']:.4f} |")
    sok = [r for r in mean_rows if r["mechanism"] in SOK_MEANS]
    lines += ["", f"SoK pooled / closed: {min(r['pooled_ratio'] for r in sok):.4f} to "
              f"{max(r['pooled_ratio'] for r in sok):.4f}; measured / closed: {min(r['ratio'] for r in sok):.3f} to "
              f"{max(r['ratio'] for r in sok):.3f}."]
    return lines


def no_worse(ours: float, ours_sd: float, theirs: float, theirs_sd: float, reps: int) -> str:
    """Whether our mean W1 is no worse than theirs: "yes" (ours <= theirs), "no, within noise" (the difference
    under 2 standard errors √((sd₁² + sd₂²)/reps)) or "NO"; with the relative difference and z."""
    diff = ours - theirs
    se = math.sqrt((ours_sd ** 2 + theirs_sd ** 2) / reps)
    z = diff / se if se > 0 else math.copysign(math.inf, diff)
    verdict = "yes" if diff <= 0 else "no, within noise" if z < 2 else "NO"
    return f"{verdict} ({diff / theirs:+.1%}, z {z:+.1f})"


def distribution_lines(dist_rows: list[dict]) -> list[str]:
    """Section 2's table; with the reference SW, its columns and whether ours is no worse than each of its fits."""
    ref = not math.isnan(dist_rows[0]["ref_ems"])
    head = "| data | ε | SW + EMS (2^8 buckets) | E over buckets | k of E |"
    if ref:
        head += (" reference SW + EMS | reference SW + EM (as `sw()` ships) | ours no worse than reference EMS | "
                 "ours no worse than reference EM |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in dist_rows:
        line = (f"| {r['data']} | {r['epsilon']} | {r['sw_ems']:.4f} ± {r['sw_ems_sd']:.4f} | "
                f"{r['e_buckets']:.4f} ± {r['e_buckets_sd']:.4f} | {r['e_k']} |")
        if ref:
            line += (f" {r['ref_ems']:.4f} ± {r['ref_ems_sd']:.4f} | {r['ref_em']:.4f} ± {r['ref_em_sd']:.4f} | "
                     f"{no_worse(r['sw_ems'], r['sw_ems_sd'], r['ref_ems'], r['ref_ems_sd'], r['reps'])} | "
                     f"{no_worse(r['sw_ems'], r['sw_ems_sd'], r['ref_em'], r['ref_em_sd'], r['reps'])} |")
        lines.append(line)
    lines += ["", f"Mean ± sd over {dist_rows[0]['reps']} repetitions."]
    if ref:
        lines += ["The reference (vvv214/LDP_Protocols `sw.py`) runs on the same values with 2^8 input and 2^8 "
                  "randomized bins (its default is 1024 and 1024: ~250 s per fit at ε = 0.5 here), fitted by its own "
                  "EMS (swapped in for the EM its `sw()` calls) and by that EM. \"No worse\": our mean W1 <= theirs; "
                  "\"no, within noise\": larger by under 2 standard errors √((sd₁² + sd₂²)/reps) (z); \"NO\": by more."]
    return lines


def write(out: Path, info: dict, mean_rows: list[dict], dist_rows: list[dict], quant: dict, cost: list[dict],
          sok_cost: list[dict], seconds: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "bench_numeric.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["table", "data", "epsilon", "mechanism", "metric", "value"])
        for r in mean_rows:
            for key in ("empirical", "pooled", "closed_form", "grid_exact", "coverage", "bias"):
                w.writerow(["mean", r["data"], r["epsilon"], r["mechanism"], key, f"{r[key]:.6g}"])
        for r in dist_rows:
            w.writerow(["distribution", r["data"], r["epsilon"], "sw+ems", "w1", f"{r['sw_ems']:.6g}"])
            w.writerow(["distribution", r["data"], r["epsilon"], f"E/{r['e_k']}", "w1", f"{r['e_buckets']:.6g}"])
            for key, mech in (("ref_ems", "reference sw+ems"), ("ref_em", "reference sw+em")):
                if not math.isnan(r[key]):
                    w.writerow(["distribution", r["data"], r["epsilon"], mech, "w1", f"{r[key]:.6g}"])
        for key in ("truth", "mean_estimate", "sd", "mean_bootstrap_se", "coverage"):
            w.writerow(["quantile", quant["data"], quant["epsilon"], "sw+ems", f"median {key}", f"{quant[key]:.6g}"])
        for r in cost:
            for key, metric in COST_METRICS.items():
                w.writerow(["cost", "", 1.0, r["mechanism"], metric, f"{r[key]:.4g}"])
        for r in sok_cost:
            for key in ("single_sok_us", "single_ours_us", "batched_sok_us", "batched_ours_us"):
                w.writerow(["sok cost", "", 1.0, r["mechanism"], f"{key} (seeded generator)", f"{r[key]:.4g}"])
    band = 1.96 * math.sqrt(2 / (mean_rows[0]["reps"] - 1))
    lines = ["# Numeric attributes: variance of the mean, distribution, quantiles, device cost", ""]
    lines += [f"- {k}: {v}" for k, v in info.items()]
    lines += [f"- run time {seconds:.0f} s", "", "## 1. Mean: per-report variance on [−1, 1]", "",
              f"n × Var of the mean over {mean_rows[0]['reps']} repetitions (\"measured\"; the ratio to the closed "
              f"form has a 95 % sampling band of ±{band:.1%}), the pooled mean of (x̂ − x)² over all reports, "
              "Wang2019ICDE's closed form at the data (eq. 4, Lemma 1, §III-C), the grid-exact variance of our "
              "sampler, the coverage of the 95 % intervals. E/k: E over k buckets (its bucketing bias on [−1, 1] "
              "in the last column).", "",
              "| data | ε | mechanism | measured | pooled | closed form | grid exact | measured / closed | "
              "pooled / closed | coverage | E bias |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in mean_rows:
        def fmt(v: float, spec: str = ".4f") -> str:
            return "" if isinstance(v, float) and math.isnan(v) else format(v, spec)
        lines.append(f"| {r['data']} | {r['epsilon']} | {r['mechanism']} | {r['empirical']:.4f} | {fmt(r['pooled'])} | "
                     f"{fmt(r['closed_form'])} | {fmt(r['grid_exact'])} | {fmt(r['ratio'], '.3f')} | "
                     f"{fmt(r['pooled_ratio'], '.4f')} | {fmt(r['coverage'], '.3f')} | "
                     f"{fmt(r['bias'], '.4f') if r['mechanism'].startswith('E/') else ''} |")
    hm = [r for r in mean_rows if r["mechanism"] == "hm"]
    worst = max(hm, key=lambda r: abs(r["ratio"] - 1))
    lines += ["", "Goals: HM's measured variance within 5 % of its closed form at every ε: largest deviation "
              f"{worst['ratio'] - 1:+.1%} ({worst['data']}, ε = {worst['epsilon']}); pooled within "
              f"{max(abs(r['pooled_ratio'] - 1) for r in hm):.2%}. Coverage of HM's 95 % intervals (goal 93-97 %): "
              f"{min(r['coverage'] for r in hm):.3f} to {max(r['coverage'] for r in hm):.3f} (binomial SD at "
              f"{hm[0]['reps']} repetitions: {math.sqrt(0.95 * 0.05 / hm[0]['reps']):.3f}); Duchi's, whose SE is "
              "an upper bound, up to "
              f"{max(r['coverage'] for r in mean_rows if r['mechanism'] == 'duchi'):.3f}."]
    if any(r["mechanism"] in SOK_MEANS for r in mean_rows):
        lines += sok_lines(mean_rows)
    lines += ["", "HM against E over buckets (measured per-report variance, HM / E; goal <= 0.5 at ε = 1):", "",
              "| data | ε | HM / E |", "|---|---|---|"]
    for r in mean_rows:
        if r["mechanism"] == "hm":
            e = next(s for s in mean_rows if s["data"] == r["data"] and s["epsilon"] == r["epsilon"]
                     and s["mechanism"].startswith("E/"))
            lines.append(f"| {r['data']} | {r['epsilon']} | {r['empirical'] / e['empirical']:.3f} |")
    lines += ["", "## 2. Distribution: Wasserstein-1 distance to the true distribution (value scale)", "",
              *distribution_lines(dist_rows), "", "## 3. Quantile: SW + EMS median with a bootstrap SE", "",
              f"{quant['data']}, ε = {quant['epsilon']}, {quant['reps']} repetitions, {quant['boot']} bootstrap "
              f"resamples each: true median {quant['truth']:g}, mean estimate {quant['mean_estimate']:.3f}, SD over "
              f"repetitions {quant['sd']:.3f}, mean bootstrap SE {quant['mean_bootstrap_se']:.3f}, coverage of the "
              f"95 % interval {quant['coverage']:.3f}.", "",
              "## 4. Device cost per value at ε = 1 (perturb_secure, OS CSPRNG)", "",
              f"CPU time of this process, the best of {cost[0]['repeats']} alternating repeats of the sampler and "
              "of a bare `os.urandom` read of the bytes it reads (counted), so the ratio is stable on a shared "
              f"machine. One value per call: blocks of {cost[0]['calls']} calls, one `os.urandom(bytes)` call per "
              "value as the baseline; batch: 10^5 values in one call beside one read of all their bytes. Goal: "
              "<= 50 µs of CPU per value.", "",
              "| mechanism | bytes per call | one per call, CPU (µs) | os.urandom (µs) | ratio | one per call, best "
              "wall (µs) | batch, bytes per value | batch, CPU (µs per value) | os.urandom (µs per value) | ratio |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['mechanism']} | {r['bytes_per_call']} | {r['single_cpu_us']:.1f} | {r['single_base_us']:.2f} | "
              f"{r['single_ratio']:.1f} | {r['single_wall_us']:.1f} | {r['bytes_per_value']:.1f} | "
              f"{r['batched_us']:.3f} | {r['batched_base_us']:.3f} | {r['batched_ratio']:.1f} |" for r in cost]
    worst = max(cost, key=lambda r: r["single_cpu_us"])
    verdict = "met" if worst["single_cpu_us"] <= 50 else "MISSED"
    lines += ["", f"Goal <= 50 µs of CPU per value, one value per call: {verdict} (largest "
              f"{worst['single_cpu_us']:.1f} µs, {worst['mechanism']})."]
    if sok_cost:
        lines += ["", "The SoK's `mechanism` beside our seeded `perturb` (both on a numpy Generator: the SoK has no "
                  "CSPRNG path), ε = 1, CPU µs per value, the best of alternating repeats as above. The reference "
                  "SW's perturbation is not timed: its `sw()` perturbs and fits in one call.", "",
                  "| SoK mechanism | ours | SoK, one per call | ours, one per call | SoK, batch of 10^5 | "
                  "ours, batch of 10^5 |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['mechanism']} | {r['ours']} | {r['single_sok_us']:.1f} | {r['single_ours_us']:.1f} | "
                  f"{r['batched_sok_us']:.3f} | {r['batched_ours_us']:.3f} |" for r in sok_cost]
    ran = [name for name, done in (("the SoK (mad-lab-fau/sok-ldp-data-analysis)", bool(sok_cost)),
                                   ("the reference SW (vvv214/LDP_Protocols)", not math.isnan(dist_rows[0]["ref_ems"])))
           if done]
    lines += ["", "Plot: `bench_numeric.png`. " + (f"Run beside ours from checkouts: {' and '.join(ran)}." if ran else
              "The SoK repository (mad-lab-fau/sok-ldp-data-analysis) and vvv214/LDP_Protocols were not run "
              "(`--sok DIR`, `--sw-reference DIR`)."), ""]
    (out / "bench_numeric.md").write_text("\n".join(lines))
    plot(mean_rows, out / "bench_numeric.png")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=500)
    parser.add_argument("--dist-reps", type=int, default=10)
    parser.add_argument("--quantile-reps", type=int, default=40)
    parser.add_argument("--boot", type=int, default=50)
    parser.add_argument("--calls", type=int, default=1000, help="calls per timed block of the device cost")
    parser.add_argument("--cost-repeats", type=int, default=7, help="alternating repeats of the device cost")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes (smoke test); results written only with --out")
    parser.add_argument("--out", type=Path, default=None, help=f"output folder (default {RESULTS})")
    parser.add_argument("--sok", type=Path, metavar="DIR",
                        help="a checkout of mad-lab-fau/sok-ldp-data-analysis: run its mean estimators side by side")
    parser.add_argument("--sw-reference", type=Path, metavar="DIR",
                        help="a checkout of vvv214/LDP_Protocols (its sw.py): run its SW side by side")
    args = parser.parse_args()
    try:
        sok = load_sok(args.sok) if args.sok else None
        sw_module = load_sw_reference(args.sw_reference) if args.sw_reference else None
    except FileNotFoundError as err:
        parser.error(str(err))
    require_positive(parser, args, ("reps", "dist_reps", "quantile_reps", "boot", "calls", "cost_repeats"))
    if args.quick:
        args.reps, args.dist_reps, args.quantile_reps, args.boot, args.calls, args.cost_repeats = 5, 1, 2, 5, 100, 2
    try:
        data = load()
    except DatasetNotFound as err:
        print(f"skipped: {err}")
        return 0
    start = time.perf_counter()
    info = machine_info(scipy=scipy.__version__)
    info["seed"] = "20261206" + (" (the references: 20261207)" if sok or sw_module else "")
    rng = np.random.default_rng(20261206)
    log("1. mean")
    ref_rng = np.random.default_rng(20261207)  # the references' draws: ours are the same with or without them
    mean_rows = mean_table(data, args.reps, rng, sok, ref_rng)
    log("2. distribution")
    dist_rows = distribution_table(data, args.dist_reps, rng, sw_module, ref_rng)
    log("3. quantile")
    quant = quantile_table(data, args.quantile_reps, args.boot, rng)
    log("4. device cost")
    cost = cost_table(args.calls, args.cost_repeats)
    sok_cost = sok_cost_table(sok, args.calls, args.cost_repeats) if sok else []
    if not args.quick or args.out is not None:
        out = args.out or RESULTS
        if args.quick:
            info["quick run"] = "sizes reduced (smoke test)"
        write(out, info, mean_rows, dist_rows, quant, cost, sok_cost, time.perf_counter() - start)
        log(f"written to {out}/bench_numeric.{{md,csv,png}}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
