"""Coverage of the wide model's intervals on Adult: queries in no view, answered by the database's model.

Command (from ``benchmarks/``)::

    python bench_wide_coverage.py [--collections 10] [--replicates 20] [--epsilons 1] [--triples 10]
        [--min-share 0.02] [--iterations 500] [--seed 1] [--out results/wide_coverage]

Adult's 8 attributes (``bench_wide.load_adult``: 32,561 rows, all of them devices, |D| = 2,257,920). Each of R
independent collections (generator ``[seed, r, 1000 ε]``; salt ``SALT ‖ r``: every collection draws its own view
assignment and its own reports) measures the 28 pair views at ε, each device reporting its view's cell with the
full ε; :class:`~ldpsynth.shared.wide.database.WideDatabase` (the default path: the bounded junction tree,
``--iterations`` mirror-descent iterations of the fit and of each refit, default ``DEFAULT_ITERATIONS``; B
bootstrap replicates seeded by r) answers in one call

* ``--triples`` 3-way marginals (seeded choice among the 56; with all pairs measured no triple lies in a view),
  kept: the cells whose true share is at least ``--min-share``;
* :data:`PREDICATES`: counts of rows meeting conditions on 3 or 4 attributes (codes; see their labels),

every one by the ``"model"`` method: the one-step estimate (the model's answer corrected by the views of its
attributes, :mod:`ldpsynth.shared.wide.onestep`) with its standard error and Student-t interval (Welch-Satterthwaite
degrees of freedom). The truth is the population's own count (all rows are devices). Reported per query and overall:
the share of 95 % intervals holding the truth, with a Clopper-Pearson 95 % interval (which treats the intervals as
independent: cells of one collection share its noise, so it is too narrow); the ratio of the empirical standard
deviation of the estimates across the R collections to their mean standard error (per cell, then the median of a
query's cells); the mean and RMS standardized error :math:`(\\hat c - c)/\\widehat{SE}`; the root mean squared
error of the estimate over that of the model's own answer (the proper estimate). Beside it, in the same run, the
interval the database served before the correction: the model's own answer ± t_{B−1} × the standard deviation of
its B bootstrap refits (read from the replicates the database keeps), its coverage and mean z.
Written after each collection: ``intervals.csv`` (one row per interval), ``coverage.csv`` / ``coverage.md``
(the summary) and ``coverage.png``.
"""

from __future__ import annotations

import argparse
import csv
import functools
import itertools
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
from bench_wide import NAMES, SALT, load_adult
from machine import machine_info  # benchmarks/machine.py (scripts run from this folder)
from scipy.stats import beta
from scipy.stats import t as student

from ldpsynth.shared.queries.model import Condition, MarginalQuery, PredicateQuery
from ldpsynth.shared.wide import WideDomain, assign_views, pairs, simulate
from ldpsynth.shared.wide.database import MODEL, WideDatabase
from ldpsynth.shared.wide.model import DEFAULT_ITERATIONS
from ldpsynth.simulation.datasets import DatasetNotFound

RESULTS = Path(__file__).resolve().parent / "results" / "wide_coverage"

#: Predicates over codes (``bench_wide.load_adult``: sorted levels; age buckets 0 = <25, 1 = 25-29, ...,
#: 6 = 50-54; sex 1 = Male; income 1 = >50K; marital 2 = Married-civ-spouse, 4 = Never-married; race 4 = White;
#: education 9 = Bachelors, 10 = Doctorate, 12 = Masters, 14 = Prof-school; occupation 3 = Exec-managerial,
#: 9 = Prof-specialty).
PREDICATES: tuple[tuple[str, dict[str, tuple[int, ...]]], ...] = (
    ("male 25-54 >50K", {"age": (1, 2, 3, 4, 5, 6), "sex": (1,), "income": (1,)}),
    ("married white male", {"marital": (2,), "race": (4,), "sex": (1,)}),
    ("non-white female <=50K", {"race": (0, 1, 2, 3), "sex": (0,), "income": (0,)}),
    ("degree, exec/prof, >50K", {"education": (9, 10, 12, 14), "occupation": (3, 9), "income": (1,)}),
    ("<30 never-married female <=50K", {"age": (0, 1), "marital": (4,), "sex": (0,), "income": (0,)}),
)


@dataclass(frozen=True)
class Target:
    """One interval's estimand: ``query`` its query's name, ``label`` the answer's label, ``truth`` the count."""

    query: str
    label: str
    truth: float


def predicate(conditions: dict[str, tuple[int, ...]], label: str) -> PredicateQuery:
    """The count of rows whose codes lie in every ``conditions[name]``."""
    return PredicateQuery(where=tuple(Condition(a, "in", list(v)) for a, v in conditions.items()), label=label)


def predicate_truth(rows: np.ndarray, names: Sequence[str], conditions: dict[str, tuple[int, ...]]) -> float:
    """How many ``rows`` (codes, columns ``names``) meet every condition."""
    keep = np.ones(len(rows), bool)
    for a, values in conditions.items():
        keep &= np.isin(rows[:, list(names).index(a)], values)
    return float(keep.sum())


def choose_triples(width: int, count: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """``count`` distinct triples of attribute indices, sorted, drawn without replacement."""
    every = list(itertools.combinations(range(width), 3))
    return sorted(every[i] for i in rng.choice(len(every), count, replace=False))


def large_cells(counts: np.ndarray, population: int, min_share: float) -> np.ndarray:
    """The cells (indices, ascending) whose true share ``counts / population`` is at least ``min_share``."""
    return np.flatnonzero(np.asarray(counts) >= min_share * population)


def clopper_pearson(hits: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """The exact binomial interval of a share ``hits / trials`` (Clopper-Pearson)."""
    tail = (1 - level) / 2
    low = 0.0 if hits == 0 else float(beta.ppf(tail, hits, trials - hits + 1))
    high = 1.0 if hits == trials else float(beta.ppf(1 - tail, hits + 1, trials - hits))
    return low, high


def summarize(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (ε, query) and per ε overall: intervals, coverage and its Clopper-Pearson interval, the median over
    cells of SD(estimate across collections) / mean(bootstrap SE), and the mean standardized error."""
    out: list[dict[str, Any]] = []
    for eps in sorted({float(r["epsilon"]) for r in records}):
        rows = [r for r in records if float(r["epsilon"]) == eps]
        queries = list(dict.fromkeys(str(r["query"]) for r in rows))
        for name in [*queries, "all"]:
            chosen = rows if name == "all" else [r for r in rows if r["query"] == name]
            hits = sum(bool(r["covered"]) for r in chosen)
            low, high = clopper_pearson(hits, len(chosen))
            ratios = []
            for label in dict.fromkeys(str(r["label"]) for r in chosen):
                cell = [r for r in chosen if r["label"] == label]
                if len(cell) >= 2:
                    estimates = np.array([float(r["estimate"]) for r in cell])
                    errors = np.array([float(r["standard_error"]) for r in cell])
                    ratios.append(float(np.std(estimates, ddof=1) / np.mean(errors)))
            truth = np.array([float(r["truth"]) for r in chosen])
            z = (np.array([float(r["estimate"]) for r in chosen]) - truth) / \
                np.array([float(r["standard_error"]) for r in chosen])
            model = np.array([float(r["model"]) for r in chosen])
            model_z = (model - truth) / np.array([float(r["model_se"]) for r in chosen])
            estimate_error = np.array([float(r["estimate"]) for r in chosen]) - truth
            out.append({"epsilon": eps, "query": name, "intervals": len(chosen),
                        "collections": len({r["collection"] for r in chosen}), "coverage": hits / len(chosen),
                        "coverage_low": low, "coverage_high": high,
                        "sd_over_se": float(np.median(ratios)) if ratios else float("nan"),
                        "mean_z": float(np.mean(z)), "rms_z": float(np.sqrt(np.mean(np.square(z)))),
                        "rmse_over_model": float(np.sqrt(np.mean(estimate_error ** 2) / np.mean((model - truth) ** 2))),
                        "model_coverage": float(np.mean([bool(r["model_covered"]) for r in chosen])),
                        "model_mean_z": float(np.mean(model_z))})
    return out


def queries_and_targets(domain: WideDomain, rows: np.ndarray, triples: Sequence[tuple[int, ...]],
                        min_share: float) -> tuple[list[MarginalQuery | PredicateQuery], list[list[Target]],
                                                   list[np.ndarray]]:
    """The batch of queries, per query its kept targets, and per query the kept answers' indices."""
    n = len(rows)
    queries: list[MarginalQuery | PredicateQuery] = []
    targets: list[list[Target]] = []
    kept: list[np.ndarray] = []
    for triple in triples:
        name = "×".join(domain.names[a] for a in triple)
        view = domain.view(triple)
        counts = view.histogram(rows).astype(np.float64)
        cells = large_cells(counts, n, min_share)
        grid = np.stack(np.unravel_index(cells, view.sizes), axis=1)
        queries.append(MarginalQuery(attributes=tuple(domain.names[a] for a in triple), label=name))
        targets.append([Target(name, f"{name}[" + ",".join(f"{domain.names[a]}={c}" for a, c in zip(triple, g)) + "]",
                               float(counts[u])) for u, g in zip(cells, grid)])
        kept.append(cells)
    for label, conditions in PREDICATES:
        queries.append(predicate(conditions, label))
        targets.append([Target(label, label, predicate_truth(rows, domain.names, conditions))])
        kept.append(np.zeros(1, np.int64))
    return queries, targets, kept


def one_collection(domain: WideDomain, rows: np.ndarray, r: int, eps: float, args: argparse.Namespace,
                   queries: list, targets: list[list[Target]], kept: list[np.ndarray]) -> list[dict[str, Any]]:
    """Collection r at ``eps``: measure, fit, answer; one record per kept interval."""
    n = len(rows)
    views = list(pairs(domain))
    keys = [i.to_bytes(8, "big") for i in range(n)]
    assignment = assign_views(SALT + r.to_bytes(4, "big"), keys, len(views))
    measured = simulate(domain, views, rows, assignment, eps, np.random.default_rng([args.seed, r, round(1000 * eps)]))
    db = WideDatabase.fit(domain, measured, n, iterations=args.iterations, replicates=args.replicates,
                          seed=args.seed * 100_003 + r)
    answers = db.answer(queries)
    left_out = sorted({"–".join(domain.names[a] for a in measured[g.measurement].view.attributes)
                       for g in db.problem.margins})
    t_boot = float(student.ppf(0.975, args.replicates - 1))
    records = []
    for q, (tgts, cells) in enumerate(zip(targets, kept)):
        mine = [a for a in answers if a.query == q]
        spread = n * replicate_answers(db, queries[q], cells).std(axis=0, ddof=1)
        for target, u, sd in zip(tgts, cells, spread):
            a = mine[int(u)]
            if a.method != MODEL or (len(tgts) > 1 and a.label != target.label):
                raise RuntimeError(f"answer {a.label} ({a.method}) is not the model's answer of {target.label}")
            records.append({"epsilon": eps, "collection": r, "replicates": args.replicates, "query": target.query,
                            "label": target.label, "truth": target.truth, "estimate": a.estimate,
                            "standard_error": a.standard_error, "df": a.df, "low": a.low, "high": a.high,
                            "covered": a.low <= target.truth <= a.high, "model": a.proper_estimate,
                            "model_se": float(sd),
                            "model_covered": abs(a.proper_estimate - target.truth) <= t_boot * sd,
                            "left_out": " ".join(left_out)})
    return records


def replicate_answers(db: WideDatabase, query: MarginalQuery | PredicateQuery, cells: np.ndarray) -> np.ndarray:
    """The B bootstrap refits' answers (shares, B × targets) of ``query`` at ``cells`` (a predicate: its one
    answer), from the replicates the database kept when it answered (no refit; a diagnostic, so it reads the
    database's private cache). A triple's cells are in its sorted attributes' order, as the database's."""
    if isinstance(query, MarginalQuery):
        attrs = tuple(sorted(db.domain.names.index(a) for a in query.attributes))
        return db._replicates([attrs])[0][:, cells]
    masks = {db.domain.names.index(c.attribute): np.isin(np.arange(db.domain.sizes[db.domain.names.index(c.attribute)]),
                                                         c.value) for c in query.where}
    attrs = tuple(sorted(masks))
    weights = np.ravel(functools.reduce(np.multiply.outer, [masks[a].astype(np.float64) for a in attrs]))
    return (db._replicates([attrs])[0] @ weights)[:, None]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--collections", type=int, default=10, help="R independent collections per ε")
    parser.add_argument("--replicates", type=int, default=20, help="B bootstrap refits per collection")
    parser.add_argument("--epsilons", default="1")
    parser.add_argument("--triples", type=int, default=10)
    parser.add_argument("--min-share", type=float, default=0.02)
    parser.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS, help="mirror-descent iterations")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    try:
        rows = load_adult(8)
    except DatasetNotFound as exc:
        print(f"bench_wide_coverage: {exc}", file=sys.stderr)
        return 2
    domain = WideDomain(NAMES, tuple(int(k) for k in rows.max(axis=0) + 1))
    triples = choose_triples(domain.width, args.triples, np.random.default_rng(args.seed))
    queries, targets, kept = queries_and_targets(domain, rows, triples, args.min_share)
    print(f"Adult: n = {len(rows):,}, |D| = {domain.size:,}; {sum(map(len, targets))} intervals per collection "
          f"({len(triples)} triples, {len(PREDICATES)} predicates); R = {args.collections}, B = {args.replicates}",
          flush=True)
    records: list[dict[str, Any]] = []
    start = time.perf_counter()
    for eps in (float(e) for e in args.epsilons.split(",")):
        for r in range(args.collections):
            began = time.perf_counter()
            records.extend(one_collection(domain, rows, r, eps, args, queries, targets, kept))
            took = time.perf_counter() - began
            done = [x for x in records if x["epsilon"] == eps]
            print(f"eps {eps} collection {r + 1}/{args.collections}: {took:.0f} s (left out: "
                  f"{done[-1]['left_out']}); coverage so far {np.mean([bool(x['covered']) for x in done]):.3f} "
                  f"of {len(done)}; elapsed {(time.perf_counter() - start) / 60:.1f} min", flush=True)
            if r == 0:
                print(f"  estimate for this ε: {took * args.collections / 60:.0f} min", flush=True)
            write(records, args)
    return 0


def write(records: list[dict[str, Any]], args: argparse.Namespace) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "intervals.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    summary = summarize(records)
    with open(args.out / "coverage.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(summary[0]))
        writer.writeheader()
        writer.writerows(summary)
    lines = ["| ε | query | intervals | collections | coverage | 95 % CI (independent) | SD / mean SE (median cell) "
             "| mean z | RMS z | RMSE / the model's | before: the model ± bootstrap, coverage | before: mean z |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summary:
        lines.append(f"| {s['epsilon']:g} | {s['query']} | {s['intervals']} | {s['collections']} | "
                     f"{s['coverage']:.3f} | {s['coverage_low']:.3f}–{s['coverage_high']:.3f} | "
                     f"{s['sd_over_se']:.2f} | {s['mean_z']:+.2f} | {s['rms_z']:.2f} | {s['rmse_over_model']:.2f} | "
                     f"{s['model_coverage']:.3f} | {s['model_mean_z']:+.2f} |")
    left = sorted({str(r["left_out"]) for r in records})
    machine = machine_info(mbi=version("mbi"), jax=version("jax"))
    text = [f"# The wide model's interval coverage on Adult (8 attributes, all pairs, {args.iterations} iterations)",
            "",
            f"Command: `cd benchmarks && python bench_wide_coverage.py --collections {args.collections} "
            f"--replicates {args.replicates} --epsilons {args.epsilons} --triples {args.triples} "
            f"--min-share {args.min_share} --iterations {args.iterations} --seed {args.seed}` "
            "(the script's docstring says what each column is). "
            "Every interval is the database's `model` answer (the one-step estimate, Student-t with the "
            "Welch-Satterthwaite degrees of freedom); z = (estimate − truth) / SE. The last two columns: the model's "
            "own answer ± t_{B−1} × its bootstrap SE (the interval served before the one-step correction).", "",
            *lines, "",
            "Pairs the bounded junction tree left to their margins, per collection: "
            + "; ".join(f"`{x}`" for x in left), "", *(f"- {k}: {v}" for k, v in machine.items()), ""]
    (args.out / "coverage.md").write_text("\n".join(text))
    plot(summary, args.out / "coverage.png")


def plot(summary: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 5), sharey=True)
    for eps in sorted({float(s["epsilon"]) for s in summary}):
        rows = [s for s in summary if s["epsilon"] == eps]
        y = np.arange(len(rows)) + (0.15 if eps != 1 else 0.0)
        cov = np.array([float(s["coverage"]) for s in rows])
        err = np.array([[c - float(s["coverage_low"]), float(s["coverage_high"]) - c]
                        for c, s in zip(cov, rows)]).T
        axes[0].errorbar(cov, y, xerr=err, fmt="o", label=f"ε = {eps:g}")
        axes[1].plot([float(s["sd_over_se"]) for s in rows], y, "o", label=f"ε = {eps:g}")
    labels = [str(s["query"]) for s in summary if s["epsilon"] == summary[0]["epsilon"]]
    axes[0].set_yticks(range(len(labels)), labels, fontsize=7)
    axes[0].axvspan(0.93, 0.97, color="green", alpha=0.15)
    axes[0].axvline(0.95, color="green")
    axes[0].set_xlabel("coverage of 95 % intervals")
    axes[1].axvline(1.0, color="green")
    axes[1].set_xlabel("SD across collections / mean bootstrap SE")
    axes[0].legend(fontsize=8)
    fig.suptitle("Adult, all-pairs views + bounded model: queries in no view")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
