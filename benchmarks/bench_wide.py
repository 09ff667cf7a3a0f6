"""Wide rows on Adult: views + one model (``ldpsynth.shared.wide``) beside splitting ε and the full-domain oracles.

Adult (``$LDPSYNTH_DATA/adult/adult.csv.gz`` or ``../shared/data``; 32,561 rows, all of them devices) with
``--attributes 8``: age in 9 buckets (<25, 25-29, ..., 50-54, 55-64, 65+), workclass 8 (Never-worked merged into
Without-pay; "?" kept), education 16, marital status 7, occupation 14 (Armed-Forces merged into "?"), race 5,
sex 2, income 2: |D| = 2,257,920; or ``--attributes 14``: those and education-num 16, relationship 6,
capital-gain 4 (0, ≤ 5,000, ≤ 10,000, more), capital-loss 3 (0, ≤ 1,800, more), hours-per-week 7 (< 25, 25-34,
35-39, 40, 41-49, 50-59, 60+), native-country 16 (the 15 most frequent, the rest merged): |D| ≈ 2.9·10^11
(fnlwgt, a sampling weight, is left out). With 14 attributes the all-pairs model is not fitted (its junction
tree is one clique of the whole row domain) and the full-domain oracles' expected TVD is computed where the
oracle takes a domain that large. Per ε, measured in the same run:

* **views + model**: each device assigned one of the 28 pair views from its key (HMAC-SHA256 of the row
  number under a fixed salt), its cell reported with the full ε by the view's best oracle; Private-PGM
  (``mbi``) fitted to the 28 noisy views; the views themselves after Norm-Sub (``views``);
* **tree views + model** (``ldpsynth.shared.wide.selection``): a pilot of ``--pilot`` of the devices (by key)
  reports one of the 28 pairs; a Chow-Liu forest of their debiased dependence scores chooses the pairs; the
  other devices report one of the 8 1-way views and the chosen pairs (by key; a pair is chosen only when its
  debiased dependence exceeds the noise of measuring it with the main phase's devices per view,
  ``selection.pair_gain``); Private-PGM fitted to those
  views and the pilot's views of the chosen pairs (``--tree-iterations``);
* **split ε**: every device reports all d attributes at ε/d each (best oracle per attribute), Norm-Sub,
  then the product of the 1-way estimates;
* **SMP** (multi-freq-ldpy's ``SMP_ADP``, Wang2019ICDE's sampling): each device reports one attribute, chosen at
  random, with the full ε (GRR or OUE by the attribute's size), then the product of the 1-way estimates
  (its non-negative, normalised frequencies);
* **HDG** (YWLCS21), run by its authors' code when ``--privmdr DIR`` names a checkout of privmdr
  (``benchmarks/wide_hdg.py`` says how it is driven and how the padded domain is cut back): with its
  granularity guideline, and with the grids at full resolution (``HDG g=16``); 2-way only (HDG answers
  3-way queries by a weighted update of its 2-way answers, left out);
* **E / best oracle over the full domain**: not simulated (decoding 2.26 M values per report); their expected
  TVD from the exact variance of each marginal cell (a sum of |D|/|V| cells),
  :math:`\\tfrac12\\sum_u \\sqrt{2/\\pi}\\,\\sigma_u/n` (the mean absolute value of a normal error).

Reported: the mean total-variation distance to the truth of all 28 2-way marginals and of 50 random 3-way
marginals, the fit time, and the coverage of 95 % intervals from the views' exact standard errors
(:meth:`~ldpsynth.shared.wide.measure.ViewMeasurement.share_variance`) on the 2-way cells.

Usage::

    python benchmarks/bench_wide.py [--epsilons 0.5,1,2,4] [--iterations 500] [--seed 1] [--pilot 0.2]
        [--tree-iterations 1000] [--no-all-pairs] [--privmdr DIR] [--attributes 8|14]
"""

from __future__ import annotations

import argparse
import csv
import gzip
import itertools
import math
import sys
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path

import numba
import numpy as np
from machine import machine_info  # benchmarks/machine.py (scripts run from this folder)
from multi_freq_ldpy.mdim_freq_est.SMP_solution import SMP_ADP_Aggregator_MI, SMP_ADP_Client
from wide_hdg import hdg_marginals, padded_size

from ldpsynth.shared.mechanisms.registry import make_mechanism, max_domain_size, protocol_of
from ldpsynth.shared.wide import WideDomain, assign_views, best_mechanism, norm_sub, pairs, simulate
from ldpsynth.shared.wide.measure import support_counts
from ldpsynth.shared.wide.model import fit, total_variation
from ldpsynth.shared.wide.selection import chow_liu, pair_gain, pilot_devices, tree_views
from ldpsynth.simulation.datasets import DatasetNotFound, dataset_path

RESULTS = Path(__file__).resolve().parent / "results"
AGE_EDGES = (25, 30, 35, 40, 45, 50, 55, 65)
NAMES = ("age", "workclass", "education", "marital", "occupation", "race", "sex", "income")
NAMES_14 = (*NAMES, "education-num", "relationship", "capital-gain", "capital-loss", "hours-per-week", "native-country")
#: Bucket edges of Adult's numeric attributes (``np.digitize``: a value below the first edge is bucket 0).
CAPITAL_GAIN_EDGES = (1, 5001, 10001)
CAPITAL_LOSS_EDGES = (1, 1801)
HOURS_EDGES = (25, 35, 40, 41, 50, 60)
COUNTRIES = 15
SALT = b"bench-wide-salt-0001"


def load_adult(width: int = 8) -> np.ndarray:
    """Adult's 8 or 14 attributes as codes (module docstring), int64 (32,561, width)."""
    with gzip.open(dataset_path("adult/adult.csv.gz"), "rt") as fh:
        reader = csv.reader(fh, skipinitialspace=True)
        header = [h.strip() for h in next(reader)]
        data = [row for row in reader if row]
    col = {h: i for i, h in enumerate(header)}

    def column(name: str) -> list[str]:
        return [row[col[name]].strip() for row in data]

    def codes(name: str, merge: dict[str, str] | None = None) -> np.ndarray:
        values = [(merge or {}).get(v, v) for v in column(name)]
        levels = sorted(set(values))
        return np.array([levels.index(v) for v in values], np.int64)

    def bucketed(name: str, edges: tuple[int, ...]) -> np.ndarray:
        return np.digitize(np.array([int(v) for v in column(name)]), edges).astype(np.int64)

    eight = [bucketed("age", AGE_EDGES), codes("workclass", {"Never-worked": "Without-pay"}), codes("education"),
             codes("marital-status"), codes("occupation", {"Armed-Forces": "?"}), codes("race"), codes("sex"),
             codes("Salary")]
    if width == 8:
        return np.stack(eight, axis=1)
    common = {c for c, _ in Counter(column("native-country")).most_common(COUNTRIES)}
    return np.stack([*eight, codes("education-num"), codes("relationship"),
                     bucketed("capital-gain", CAPITAL_GAIN_EDGES), bucketed("capital-loss", CAPITAL_LOSS_EDGES),
                     bucketed("hours-per-week", HOURS_EDGES),
                     codes("native-country", {c: "other" for c in set(column("native-country")) - common})], axis=1)


def marginal_tvd_analytic(name: str, epsilon: float, domain: WideDomain, rows: np.ndarray, views: list) -> float:
    """Expected mean TVD of ``views`` summed from a full-domain oracle's unbiased counts (normal errors):
    a marginal cell u sums m = |D|/|V| cells, variance n(a2 m + a1 m^2) + (b2 + b1 m) c(u)."""
    if domain.size > max_domain_size(name):
        return float("nan")
    mechanism = make_mechanism(name, epsilon, domain.size)
    a2, a1, b2, b1 = protocol_of(mechanism)._coefficients()
    n = len(rows)
    out = []
    for view in views:
        m = domain.size // view.size
        var = n * (a2 * m + a1 * m * m) + (b2 + b1 * m) * view.histogram(rows)
        out.append(0.5 * math.sqrt(2 / math.pi) * np.sqrt(np.maximum(var, 0)).sum() / n)
    return float(np.mean(out))


def split_epsilon(domain: WideDomain, rows: np.ndarray, epsilon: float, rng: np.random.Generator) -> list[np.ndarray]:
    """Each attribute's shares from every device at ε/d (Norm-Sub'd)."""
    out = []
    for j, k in enumerate(domain.sizes):
        mechanism = best_mechanism(epsilon / domain.width, k)
        n, support = support_counts(mechanism, mechanism.perturb(rows[:, j], rng))
        counts = protocol_of(mechanism).count_estimates(support, n)
        out.append(norm_sub(counts, n) / n)
    return out


@numba.njit
def _seed_numba(seed: int) -> None:
    """Seed numba's own generator (a jitted function's ``np.random`` is not numpy's global one)."""
    np.random.seed(seed)


def smp(domain: WideDomain, rows: np.ndarray, epsilon: float, seed: int) -> list[np.ndarray]:
    """multi-freq-ldpy's SMP with its adaptive oracle: each attribute's frequencies. It draws from numpy's global
    generator and, in its OUE client (``UE_Client``, numba-jitted), from numba's; both are seeded here."""
    np.random.seed(seed)
    _seed_numba(seed)
    sizes = list(domain.sizes)
    reports = [SMP_ADP_Client(row, sizes, domain.width, epsilon) for row in rows.tolist()]
    return [np.asarray(f, np.float64) for f in SMP_ADP_Aggregator_MI(reports, sizes, domain.width, epsilon)]


def tree_method(domain: WideDomain, rows: np.ndarray, pilot: np.ndarray, pilot_views: np.ndarray, views: list,
                triples: list, eps: float, rng: np.random.Generator,
                iterations: int) -> tuple[float, float, float, list]:
    """The tree views + model (module docstring): mean TVD of the 2-way and 3-way marginals, fit seconds, pairs."""
    n = len(rows)
    piloted = simulate(domain, views, rows[pilot], pilot_views, eps, rng)
    devices = (n - len(pilot_views)) / (2 * domain.width - 1)       # per view of the main phase, at most
    edges = chow_liu(domain.width, {m.view.attributes: pair_gain(m, n, devices) for m in piloted})
    chosen = tree_views(domain, edges)
    main_keys = [int(i).to_bytes(8, "big") for i in np.flatnonzero(~pilot)]
    main = simulate(domain, chosen, rows[~pilot], assign_views(SALT, main_keys, len(chosen)), eps, rng)
    measured = [*main, *(m for m in piloted if m.view.attributes in edges)]
    start = time.perf_counter()
    model = fit(domain, measured, n, iterations=iterations)
    seconds = time.perf_counter() - start
    tvd2 = np.mean([total_variation(model.marginal(v.attributes), v.histogram(rows) / n) for v in views])
    tvd3 = np.mean([total_variation(model.marginal(v.attributes), v.histogram(rows) / n) for v in triples])
    return float(tvd2), float(tvd3), seconds, edges


def product(ones: list[np.ndarray], attributes: tuple[int, ...]) -> np.ndarray:
    out = np.ones(1)
    for a in attributes:
        out = np.outer(out, ones[a]).ravel()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epsilons", default="0.5,1,2,4")
    parser.add_argument("--iterations", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--triples", type=int, default=50)
    parser.add_argument("--pilot", type=float, default=0.2, help="the tree method's pilot fraction")
    parser.add_argument("--tree-iterations", type=int, default=1000)
    parser.add_argument("--no-all-pairs", action="store_true", help="skip the all-pairs model (minutes per fit)")
    parser.add_argument("--attributes", type=int, choices=(8, 14), default=8, help="Adult's 8 or 14 attributes")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where bench_wide[_14].md/csv/png go")
    parser.add_argument("--privmdr", type=Path, help="a checkout of privmdr: run its HDG side by side")
    args = parser.parse_args()
    try:
        rows = load_adult(args.attributes)
    except DatasetNotFound as exc:
        print(f"bench_wide: {exc}", file=sys.stderr)
        return 2
    domain = WideDomain(NAMES if args.attributes == 8 else NAMES_14, tuple(int(k) for k in rows.max(axis=0) + 1))
    all_pairs = not args.no_all_pairs and args.attributes == 8
    n = len(rows)
    views = list(pairs(domain))
    rng = np.random.default_rng(args.seed)
    all_triples = list(itertools.combinations(range(domain.width), 3))
    triples = [domain.view(all_triples[i]) for i in rng.choice(len(all_triples), args.triples, replace=False)]
    truth2 = [v.histogram(rows) / n for v in views]
    truth3 = [v.histogram(rows) / n for v in triples]
    keys = [i.to_bytes(8, "big") for i in range(n)]
    assignment = assign_views(SALT, keys, len(views))
    pilot = pilot_devices(SALT, keys, args.pilot)
    pilot_views = assign_views(SALT, [k for k, p in zip(keys, pilot) if p], len(views))
    tree_rng = np.random.default_rng([args.seed, 2])     # its own stream: the other columns are as before
    print(f"Adult: n = {n:,}, |D| = {domain.size:,}, sizes {domain.sizes}; views per device: "
          f"{np.bincount(assignment).min()}-{np.bincount(assignment).max()}", flush=True)
    table = []
    for eps in (float(e) for e in args.epsilons.split(",")):
        print(f"eps = {eps}: measuring the views", flush=True)
        measured = simulate(domain, views, rows, assignment, eps, rng)
        view_tvd = np.mean([total_variation(norm_sub(m.shares(), 1.0), f) for m, f in zip(measured, truth2)])
        covered = [np.abs(m.shares() - f) <= 1.959964 * np.sqrt(m.share_variance(n)) for m, f in zip(measured, truth2)]
        coverage = float(np.mean(np.concatenate(covered)))
        tree2, tree3, tree_seconds, edges = tree_method(domain, rows, pilot, pilot_views, views, triples, eps,
                                                        tree_rng, args.tree_iterations)
        print(f"  tree views: pairs {edges}, fit {tree_seconds:.1f} s, TVD {tree2:.4f} / {tree3:.4f}", flush=True)
        model2 = model3 = fit_seconds = float("nan")
        if all_pairs:
            print(f"  fitting the all-pairs model ({args.iterations} iterations)", flush=True)
            start = time.perf_counter()
            model = fit(domain, measured, n, iterations=args.iterations)
            fit_seconds = time.perf_counter() - start
            model2 = np.mean([total_variation(model.marginal(v.attributes), f) for v, f in zip(views, truth2)])
            model3 = np.mean([total_variation(model.marginal(v.attributes), f) for v, f in zip(triples, truth3)])
        ones = split_epsilon(domain, rows, eps, rng)
        split2 = np.mean([total_variation(product(ones, v.attributes), f) for v, f in zip(views, truth2)])
        split3 = np.mean([total_variation(product(ones, v.attributes), f) for v, f in zip(triples, truth3)])
        print("  SMP (multi-freq-ldpy)", flush=True)
        sampled = smp(domain, rows, eps, args.seed)
        smp2 = np.mean([total_variation(product(sampled, v.attributes), f) for v, f in zip(views, truth2)])
        smp3 = np.mean([total_variation(product(sampled, v.attributes), f) for v, f in zip(triples, truth3)])
        hdg2 = hdg_full2 = float("nan")
        if args.privmdr is not None:
            print("  HDG (privmdr)", flush=True)
            hdg2, hdg_full2 = (np.mean([total_variation(hdg[v.attributes], f) for v, f in zip(views, truth2)])
                               for hdg in (hdg_marginals(args.privmdr, rows, domain.sizes, eps, args.seed)[0],
                                           hdg_marginals(args.privmdr, rows, domain.sizes, eps, args.seed,
                                                         padded_size(domain.sizes))[0]))
        e2 = marginal_tvd_analytic("E", eps, domain, rows, views)
        olh2 = marginal_tvd_analytic("OLH", eps, domain, rows, views)
        best = float(np.nanmin([split2, smp2, e2, olh2]))
        row = {"epsilon": eps, "tree_tvd2": tree2, "tree_tvd3": tree3, "tree_to_best_baseline": tree2 / best,
               "tree_fit_seconds": tree_seconds,
               "model_tvd2": model2, "model_tvd3": model3, "views_tvd2": view_tvd,
               "split_tvd2": split2, "split_tvd3": split3,
               "smp_tvd2": smp2, "smp_tvd3": smp3, "hdg_tvd2": hdg2, "hdg_full_tvd2": hdg_full2,
               "E_full_tvd2_expected": e2,
               "OLH_full_tvd2_expected": olh2, "ratio_to_best_baseline": model2 / best,
               "coverage_views_2way": coverage, "fit_seconds": fit_seconds}
        print("  " + ", ".join(f"{k} {v:.4g}" for k, v in row.items()), flush=True)
        table.append(row)
        write(table, args, domain)                                # after each ε: a partial run still leaves its rows
    return 0


def write(table: list[dict[str, float]], args: argparse.Namespace, domain: WideDomain) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    stem = "bench_wide" if domain.width == 8 else f"bench_wide_{domain.width}"
    with open(args.out / f"{stem}.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    head = ("| ε | tree views+model 2-way | tree 3-way | tree / best baseline | tree fit s "
            "| all-pairs views+model 2-way | all-pairs 3-way | views (Norm-Sub) 2-way | split ε 2-way | split ε 3-way "
            "| SMP 2-way | SMP 3-way | HDG 2-way | HDG full-resolution 2-way | E full domain 2-way (expected) "
            "| OLH full domain 2-way (expected) | all-pairs / best baseline "
            "| 95% coverage (views, 2-way cells) | all-pairs fit s |")
    lines = [head, "|" + "---|" * 19]
    for r in table:
        lines.append("| " + " | ".join(f"{r[k]:.3g}" for k in r) + " |")
    machine = machine_info(mbi=version("mbi"), jax=version("jax"))
    pairs_count = domain.width * (domain.width - 1) // 2
    text = [f"# Wide rows on Adult ({domain.width} attributes, |D| = {domain.size:,})", "",
            f"Command: `python benchmarks/bench_wide.py --attributes {domain.width} --epsilons {args.epsilons} "
            f"--iterations {args.iterations} "
            f"--seed {args.seed} --pilot {args.pilot} --tree-iterations {args.tree_iterations}"
            f"{' --no-all-pairs' if args.no_all_pairs else ''}{' --privmdr DIR' if args.privmdr else ''}` "
            "(benchmarks/bench_wide.py's docstring says what each column is). "
            f"Mean total-variation distance to the truth of all {pairs_count} 2-way marginals and of "
            f"{args.triples} random 3-way marginals.", "", *lines, "", *(f"- {k}: {v}" for k, v in machine.items()), ""]
    (args.out / f"{stem}.md").write_text("\n".join(text))
    plot(table, args.out / f"{stem}.png", f"Adult, {domain.width} attributes, 32,561 devices")


def plot(table: list[dict[str, float]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = sorted(table, key=lambda r: r["epsilon"])
    eps = [r["epsilon"] for r in table]
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, label in (("tree_tvd2", "tree views + model"), ("model_tvd2", "all-pairs views + model"),
                       ("views_tvd2", "views (Norm-Sub)"),
                       ("split_tvd2", "split ε, product"),
                       ("smp_tvd2", "SMP (multi-freq-ldpy), product"),
                       ("hdg_tvd2", "HDG (privmdr)"),
                       ("OLH_full_tvd2_expected", "OLH full domain (expected)"),
                       ("E_full_tvd2_expected", "E full domain (expected)")):
        ax.plot(eps, [r[key] for r in table], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("ε")
    ax.set_ylabel("mean TVD of the 2-way marginals")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
