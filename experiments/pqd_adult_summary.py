"""The DP-PQD Adult experiment over seeds: per-seed cell means, 95 % t-intervals, paired comparisons, tables, plots.

One *seed* runs the whole pipeline of ``experiments/pqd_adult.py`` once (the E releases, the MWEM
table and every decider's executions all draw from ``numpy.random.default_rng(seed)``), so seeds
are independent replications. A summary cell (synthetic side, query family, decider, relation of
q(D) to I, the relations of DP-PQD Table 4) is first reduced per seed to :math:`x_s`, the mean
error over the cell's (query, setting) pairs in seed s; which pairs fall into a relation depends
on the seed (q(D_s) does), so a cell may be empty in some seeds. Over the k seeds in which it is
not,

.. math::  \\bar x = \\frac1k\\sum_s x_s, \\qquad \\bar x \\pm t_{0.975,\\,k-1}\\,\\frac{s}{\\sqrt k},

s the sample standard deviation of the :math:`x_s` (Student t over the per-seed means; k = 1 gives
no interval), clipped to [0, 1], the range of an error. Two deciders of one family are compared on
the same seeds and the same pairs (every pair is decided by every decider of its family):
:math:`d_s = x_s(A) - x_s(B)` with the same t-interval on the :math:`d_s` (clipped to [-1, 1]); the
verdict names the lower decider only when that interval excludes 0. The intervals are per cell /
per comparison at 95 %, with no correction for the number of comparisons.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
from scipy import stats

from ldpsynth.evaluation.records import write_records

RELATIONS = ("q(D) = q(D_s)", "q(D) in I", "q(D) not in I", "all")
LEVEL = 0.95

Row = Mapping[str, object]
Cell = tuple[str, str, str, str]  # (side, family, decider, relation)
T = TypeVar("T")


@dataclass(frozen=True)
class Interval:
    """Mean of ``seeds`` per-seed values and its two-sided t-interval (NaN bounds when seeds = 1)."""

    mean: float
    low: float
    high: float
    seeds: int

    def excludes(self, value: float = 0.0) -> bool:
        """The interval lies entirely above or below ``value``."""
        return self.high < value or self.low > value

    def disjoint(self, other: Interval) -> bool:
        return self.high < other.low or other.high < self.low

    def clipped(self, low: float, high: float) -> Interval:
        """The interval intersected with the range ``[low, high]`` its mean is known to lie in."""
        return Interval(self.mean, max(low, self.low), min(high, self.high), self.seeds)


def t_interval(values: Sequence[float], level: float = LEVEL) -> Interval:
    """:math:`\\bar x \\pm t_{(1+level)/2,\\,k-1}\\, s/\\sqrt{k}` over the k values (s: sample standard deviation)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        raise ValueError("t_interval: no values")
    mean = float(x.mean())
    if x.size == 1:
        return Interval(mean, math.nan, math.nan, 1)
    half = float(stats.t.ppf(0.5 + level / 2.0, x.size - 1)) * float(x.std(ddof=1)) / math.sqrt(x.size)
    return Interval(mean, mean - half, mean + half, int(x.size))


def _errors_by_cell(rows: Iterable[Row]) -> dict[Cell, dict[int, list[float]]]:
    """The errors of every cell per seed (each row counts in its relation and in "all")."""
    errors: dict[Cell, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        for relation in (str(r["relation"]), "all"):
            cell = (str(r["side"]), str(r["family"]), str(r["decider"]), relation)
            errors[cell][int(r["seed"])].append(float(r["error"]))
    return errors


def per_seed_means(rows: Iterable[Row]) -> dict[Cell, dict[int, float]]:
    """:math:`x_s` of every cell: the mean error of its (query, setting) pairs in seed s (relation "all" included)."""
    return {cell: {seed: float(np.mean(v)) for seed, v in by_seed.items()}
            for cell, by_seed in _errors_by_cell(rows).items()}


def _ordered(values: Iterable[T]) -> list[T]:
    """Distinct values in order of first appearance."""
    return list(dict.fromkeys(values))


def summarize(rows: Sequence[Row]) -> list[dict[str, object]]:
    """One record per cell: seeds in which it occurs, (query, setting) pairs, mean and 95 % t-interval."""
    errors = _errors_by_cell(rows)
    out = []
    for cell in _cells(rows):
        if cell in errors:
            interval = t_interval([float(np.mean(v)) for v in errors[cell].values()]).clipped(0.0, 1.0)
            pairs = sum(len(v) for v in errors[cell].values())
            out.append({"side": cell[0], "family": cell[1], "decider": cell[2], "relation": cell[3],
                        "seeds": interval.seeds, "pairs": pairs, "mean": interval.mean, "low": interval.low,
                        "high": interval.high})
    return out


def _cells(rows: Sequence[Row]) -> list[Cell]:
    """Every (side, family, decider) of the rows, in order of appearance, with every relation."""
    return [(side, family, decider, relation) for side, family, decider in _deciders(rows) for relation in RELATIONS]


def _deciders(rows: Sequence[Row]) -> list[tuple[str, str, str]]:
    """Every (side, family, decider), ordered by side, aggregate, family, decider, each in order of first appearance."""
    found = _ordered((str(r["side"]), str(r["aggregate"]), str(r["family"]), str(r["decider"])) for r in rows)
    ranks = [{value: i for i, value in enumerate(_ordered(key[field] for key in found))} for field in range(4)]
    found.sort(key=lambda key: tuple(ranks[field][key[field]] for field in range(4)))
    return [(side, family, decider) for side, _, family, decider in found]


def compare(rows: Sequence[Row]) -> list[dict[str, object]]:
    """Every pair of deciders of a family, per side and relation: the paired per-seed differences' t-interval."""
    means = per_seed_means(rows)
    deciders = defaultdict(list)
    for side, family, decider in _deciders(rows):
        deciders[(side, family)].append(decider)
    out = []
    for (side, family), names in deciders.items():
        for relation in RELATIONS:
            for a, b in itertools.combinations(names, 2):
                xa, xb = means.get((side, family, a, relation)), means.get((side, family, b, relation))
                if not xa or not xb:
                    continue
                seeds = sorted(set(xa) & set(xb))
                diff = t_interval([xa[s] - xb[s] for s in seeds]).clipped(-1.0, 1.0)
                ia, ib = (t_interval([x[s] for s in seeds]).clipped(0.0, 1.0) for x in (xa, xb))
                out.append({"side": side, "family": family, "relation": relation, "a": a, "b": b, "seeds": diff.seeds,
                            "mean_a": ia.mean, "mean_b": ib.mean, "difference": diff.mean, "low": diff.low,
                            "high": diff.high, "verdict": verdict(diff, a, b), "marginals_disjoint": ia.disjoint(ib)})
    return out


def verdict(difference: Interval, a: str, b: str) -> str:
    """``"a < b"`` or ``"a > b"`` when the interval of mean(a) - mean(b) excludes 0, else ``"not separated"``."""
    if difference.high < 0:
        return f"{a} < {b}"
    if difference.low > 0:
        return f"{a} > {b}"
    return "not separated"


def format_interval(interval: Interval, of: int) -> str:
    """``mean [low, high]``, with ``(k of n seeds)`` when the cell is missing in some seeds."""
    text = f"{interval.mean:.3f}"
    if interval.seeds > 1:
        text += f" [{interval.low:.3f}, {interval.high:.3f}]"
    return text if interval.seeds == of else f"{text} ({interval.seeds} of {of} seeds)"


def write_summary(rows: Sequence[Row], seeds: Sequence[int], trials: int, out: Path) -> None:
    """``summary.md``/``summary.csv`` (cells) and ``comparisons.md``/``comparisons.csv`` (paired differences)."""
    cells = summarize(rows)
    write_records(out / "summary.csv", cells)
    by_cell = {(c["side"], c["family"], c["decider"], c["relation"]): c for c in cells}
    lines = ["| synthetic | family | decider | " + " | ".join(RELATIONS) + " |",
             "|---|---|---|" + "---:|" * len(RELATIONS)]
    for side, family, decider in _deciders(rows):
        entries = []
        for relation in RELATIONS:
            c = by_cell.get((side, family, decider, relation))
            entries.append("-" if c is None else format_interval(
                Interval(float(c["mean"]), float(c["low"]), float(c["high"]), int(c["seeds"])), len(seeds)))
        lines.append(f"| {side} | {family} | {decider} | " + " | ".join(entries) + " |")
    header = (f"Mean error (fraction of wrong outcomes over {trials} executions) per decider, by where q(D) lies "
              f"relative to I, over {len(seeds)} seeds of the whole pipeline ({', '.join(map(str, seeds))}). "
              f"Each cell: the mean over seeds of the per-seed mean over the cell's (query, setting) pairs, and in "
              f"brackets its {LEVEL:.0%} Student-t interval (t_{{0.975, k-1}} s / sqrt(k) over the k per-seed means, "
              "clipped to [0, 1]); "
              "'(k of n seeds)' when the relation does not occur in every seed; '-' when it never occurs. "
              "Pairs per cell: `summary.csv`.\n\n")
    (out / "summary.md").write_text(header + "\n".join(lines) + "\n", encoding="utf-8")

    comparisons = compare(rows)
    write_records(out / "comparisons.csv", comparisons)
    lines = ["| synthetic | family | relation | A | B | mean A | mean B | A - B [95 % interval] | seeds | verdict | "
             "marginal intervals disjoint |", "|---|---|---|---|---|---:|---:|---:|---:|---|---|"]
    for c in comparisons:
        diff = (f"{c['difference']:+.3f}" if c["seeds"] == 1
                else f"{c['difference']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}]")
        lines.append(f"| {c['side']} | {c['family']} | {c['relation']} | {c['a']} | {c['b']} | {c['mean_a']:.3f} | "
                     f"{c['mean_b']:.3f} | {diff} | {c['seeds']} | {c['verdict']} | "
                     f"{'yes' if c['marginals_disjoint'] else 'no'} |")
    header = ("Paired comparisons of the deciders of each family: per seed, the difference of the two deciders' mean "
              "errors over the same (query, setting) pairs; mean over seeds and its 95 % Student-t interval. "
              "Verdict: which decider has the lower error when the interval excludes 0, else 'not separated'. "
              "Last column: whether the two per-decider intervals of `summary.md` are disjoint as well.\n\n")
    (out / "comparisons.md").write_text(header + "\n".join(lines) + "\n", encoding="utf-8")


COLOURS = {"LM_count": "tab:blue", "EM_count": "tab:orange", "EM_count_legacy": "tab:red", "LM_sum": "tab:blue",
           "R2T_sum": "tab:purple", "SVT_sum": "tab:brown", "EM_med": "tab:orange", "Hist_med": "tab:green"}


def write_plots(rows: Sequence[Row], out: Path, titles: Mapping[int, str]) -> None:
    """One PNG per (aggregate, sweep, side): per query, mean error over seeds with its 95 % t-band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    errors: dict[tuple, list[float]] = defaultdict(list)
    for r in rows:
        x = r["tau"] if r["sweep"] == "tau" else r["epsilon"]
        key = (r["side"], r["aggregate"], r["sweep"], int(r["query"]), r["decider"], float(x))
        errors[key].append(float(r["error"]))
    seeds = len({r["seed"] for r in rows})
    for side, aggregate, sweep in _ordered((r["side"], r["aggregate"], r["sweep"]) for r in rows):
        numbers = sorted({int(r["query"]) for r in rows if (r["side"], r["aggregate"]) == (side, aggregate)})
        deciders = _ordered(r["decider"] for r in rows if r["aggregate"] == aggregate)
        ticks = sorted({k[5] for k in errors if k[2] == sweep})
        cols, lines = 4, -(-len(numbers) // 4)
        fig, axes = plt.subplots(lines, cols, figsize=(14, 3.0 * lines), squeeze=False)
        for ax, k in zip(axes.flat, numbers):
            for name in deciders:
                xs = [x for x in ticks if (side, aggregate, sweep, k, name, x) in errors]
                if not xs:
                    continue
                bands = [t_interval(errors[(side, aggregate, sweep, k, name, x)]).clipped(0.0, 1.0) for x in xs]
                ax.plot(xs, [b.mean for b in bands], marker="o", color=COLOURS[name], label=name)
                if seeds > 1:
                    ax.fill_between(xs, [b.low for b in bands], [b.high for b in bands], color=COLOURS[name],
                                    alpha=0.2, linewidth=0)
            ax.set_xscale("log", base=2)
            ax.set_xticks(ticks, [f"{t * 100:g}%" if sweep == "tau" else f"{t:g}" for t in ticks], fontsize=7)
            ax.minorticks_off()
            ax.set_ylim(-0.03, 1.03)
            ax.set_title(titles.get(k, f"q{k}"), fontsize=9)
            ax.set_xlabel("tau (fraction of q(D_s))" if sweep == "tau" else "epsilon", fontsize=8)
        for ax in list(axes.flat)[len(numbers):]:
            ax.axis("off")
        axes.flat[0].set_ylabel("error")
        axes.flat[0].legend(fontsize=7)
        fixed = ", ".join(sorted({f"epsilon = {float(r['epsilon']):g}" if sweep == "tau"
                                  else f"tau = {float(r['tau']) * 100:g} %" for r in rows if r["sweep"] == sweep}))
        fig.suptitle(f"Adult, {aggregate.upper()} queries, synthetic side {side}: error vs {sweep} ({fixed}); "
                     f"mean over {seeds} seeds" + (", band: 95 % t-interval" if seeds > 1 else ""))
        fig.tight_layout()
        fig.savefig(out / f"{aggregate}_{sweep}_{side}.png", dpi=90)
        plt.close(fig)
