"""How much Adult's pair tables leave its 3-way answers undetermined, beside the width of the served intervals.

Every device reports one cell of one pair view, so the reports' law depends on the rows' law only through the
28 pair marginals: a quantity the pair marginals do not determine cannot be learned from the views, whatever
the estimator. For a target T over attributes A (a cell of a 3-way marginal, or a predicate's conditions) this
bounds the range of T over every nonnegative table on A whose pair tables equal the population's:

.. math::  \\min / \\max \\; \\sum_{u \\in T} x_u \\quad \\text{s.t.} \\quad x \\ge 0,\\;
           M_{ij} x = M_{ij} c \\;\\; (\\text{every pair } i < j \\text{ of } A),

c the population's counts on A and :math:`M_{ij}` the sum onto the pair (a linear program, HiGHS). It drops the
condition that the table extend to all eight attributes with the other pair tables, so the true range is
inside ``[low, high]``: an upper bound on how undetermined T is. Compared with the served model interval of
``bench_wide_coverage.py`` (its ``intervals.csv``: per target the mean width of its 95 % intervals over the
collections, and their mean SE). Where ``high − low`` is below that width, identification does not
limit the interval: pair tables known exactly would pin T closer than the interval claims to.

Usage (from ``benchmarks/``)::

    python probe_wide_identified.py [--intervals results/wide_coverage/intervals.csv] [--out results/wide_coverage]
"""

from __future__ import annotations

import argparse
import csv
import itertools
from collections import defaultdict
from pathlib import Path

import numpy as np
from bench_wide import NAMES, load_adult
from bench_wide_coverage import PREDICATES, RESULTS
from scipy import sparse
from scipy.optimize import linprog


def pair_range(rows: np.ndarray, sizes: tuple[int, ...], conditions: dict[int, np.ndarray]) -> tuple[float, float]:
    """``(low, high)``: the least and greatest count of rows meeting ``conditions`` (attribute -> mask of its
    levels) over the nonnegative tables on those attributes with the population's pair tables (module docstring)."""
    attrs = sorted(conditions)
    shape = [sizes[a] for a in attrs]
    cells = int(np.prod(shape))
    counts = np.bincount(np.ravel_multi_index(tuple(rows[:, a] for a in attrs), shape), minlength=cells)
    grid = np.stack(np.unravel_index(np.arange(cells), shape), axis=1)
    sums = [sparse.csr_matrix((np.ones(cells), (grid[:, i] * shape[j] + grid[:, j], np.arange(cells))),
                              shape=(shape[i] * shape[j], cells))
            for i, j in itertools.combinations(range(len(attrs)), 2)]
    a_eq = sparse.vstack(sums).tocsr()
    b_eq = a_eq @ counts.astype(np.float64)
    inside = np.ones(cells, bool)
    for k, a in enumerate(attrs):
        inside &= conditions[a][grid[:, k]]
    weights = inside.astype(np.float64)
    ends = []
    for sign in (1.0, -1.0):
        result = linprog(sign * weights, A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs")
        if result.status != 0:
            raise RuntimeError(f"linear program failed: {result.message}")
        ends.append(sign * result.fun)
    return ends[0], ends[1]


def conditions_of(label: str, sizes: tuple[int, ...]) -> dict[int, np.ndarray]:
    """A label of ``intervals.csv`` as attribute -> mask of levels: a predicate of :data:`PREDICATES`, or a
    3-way cell ``name×name×name[a=1,b=2,c=3]``."""
    for name, conditions in PREDICATES:
        if name == label:
            return {NAMES.index(a): np.isin(np.arange(sizes[NAMES.index(a)]), v) for a, v in conditions.items()}
    out = {}
    for part in label[label.index("[") + 1:-1].split(","):
        name, value = part.split("=")
        j = NAMES.index(name)
        out[j] = np.arange(sizes[j]) == int(value)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--intervals", type=Path, default=RESULTS / "intervals.csv")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rows = load_adult()
    sizes = tuple(int(k) for k in rows.max(axis=0) + 1)
    served: dict[str, list[dict[str, str]]] = defaultdict(list)
    with args.intervals.open() as f:
        for record in csv.DictReader(f):
            served[record["label"]].append(record)
    table = []
    for label, records in served.items():
        se = float(np.mean([float(r["standard_error"]) for r in records]))
        width = float(np.mean([float(r["high"]) - float(r["low"]) for r in records]))
        low, high = pair_range(rows, sizes, conditions_of(label, sizes))
        table.append({"query": records[0]["query"], "label": label, "truth": float(records[0]["truth"]),
                      "low": low, "high": high, "mean_se": se, "interval_width": width,
                      "range_over_width": (high - low) / width})
        print(f"{label}: truth {table[-1]['truth']:.0f}, pair tables allow [{low:.0f}, {high:.0f}], "
              f"served width {width:.0f}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "identified.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    lines = ["# How much the pair tables leave the coverage run's targets undetermined (issue 39)", "",
             "`cd benchmarks && python probe_wide_identified.py` (its docstring states the linear program). Per "
             "query over the targets of `intervals.csv`: the range high − low of the target over nonnegative tables "
             "with the population's pair tables (an upper bound on what exact pair tables leave open), against the "
             "served intervals' mean width.", "",
             "| query | targets | median range / served width | share with range > served width | "
             "median range (rows) | median served width (rows) |", "|---|---|---|---|---|---|"]
    for name in [*dict.fromkeys(r["query"] for r in table), "all"]:
        chosen = table if name == "all" else [r for r in table if r["query"] == name]
        ratio = [r["range_over_width"] for r in chosen]
        lines.append(f"| {name} | {len(chosen)} | {np.median(ratio):.2f} | {np.mean([x > 1 for x in ratio]):.3f} | "
                     f"{np.median([r['high'] - r['low'] for r in chosen]):.0f} | "
                     f"{np.median([r['interval_width'] for r in chosen]):.0f} |")
    (args.out / "identified.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
