"""How WYZ Fig. 2's ordering of E and sub-database MWEM depends on choices WYZ §VI-A-1 leaves open.

WYZ §VI-A-1 run MWEM on "sub-databases" but fix neither the partition nor how ε is shared
among the sub-databases, nor (beyond citing HLM12) the number of rounds T. This experiment
runs Fig. 2's protocol (:func:`~.wyz_figures.fig2`: MovieLens-100k's 128 most-rated movies, 200
random statistical queries of heterogeneity h per run, ε = 1, worst |error| over the queries
averaged over the runs) for the grid

* T ∈ {10, 30} (:data:`ROUNDS`),
* partition: one sub-database per movie (``label``) or the coarsest valid partition
  (``coarsest``: h sub-databases of 128/h movies at heterogeneity h),
* ε split: ``parallel`` (each sub-database's MWEM at the full ε; parallel composition over
  sub-databases disjoint in rows) or ``sequential`` (ε/P each for P sub-databases; basic
  composition),

with mechanism E and plain MWEM (joint domain) at each T for reference
(:class:`~.mwem.SubDatabaseMWEM`, :class:`~.mwem.MWEM`, :class:`~.local_e.LocalE`; all ε-DP).

Every contestant of a run answers the same workload (:func:`~.harness.compare`), so a
contestant's difference to E is paired per run: :func:`paired_summary` gives its mean over the
R runs with the 95 % t-interval :math:`\\bar d \\pm t_{0.975, R-1}\\, s_d/\\sqrt R`, and calls the
contestant *above* (resp. *below*) E at that h when the whole interval is above (resp. below) 0,
*tied* otherwise. Writes ``fig2_sensitivity.md`` (tables and guarantees),
``fig2_sensitivity.csv`` (the summary), ``fig2_sensitivity_trials.csv`` (every release) and
``fig2_sensitivity.png`` (one panel per T).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from ldpsynth.evaluation.comparison.harness import Mechanism, Trial, compare
from ldpsynth.evaluation.comparison.local_e import LocalE
from ldpsynth.evaluation.comparison.mwem import MWEM, PARTITIONS, SPLITS, SubDatabaseMWEM
from ldpsynth.evaluation.comparison.workloads import Histogram
from ldpsynth.evaluation.comparison.wyz_figures import HETEROGENEITY, MOVIES, K, heterogeneous_workload, ratings
from ldpsynth.evaluation.records import write_records

#: MWEM rounds of the grid.
ROUNDS = (10, 30)
#: Two-sided confidence level of the paired intervals.
CONFIDENCE = 0.95
E_NAME = "E"
PARTITION_LABELS = {"label": "one per movie", "coarsest": "coarsest"}


def mwem_name(rounds: int) -> str:
    return f"MWEM T={rounds}"


def subdb_name(rounds: int, partition: str, split: str) -> str:
    return f"sub-db T={rounds} {PARTITION_LABELS[partition]} {split}"


def contestants(epsilon: float, rounds: Sequence[int] = ROUNDS) -> dict[str, Mechanism]:
    """E, then per T plain MWEM and the four sub-database variants (partition x split), all at ``epsilon``."""
    out: dict[str, Mechanism] = {E_NAME: LocalE(epsilon)}
    for t in rounds:
        out[mwem_name(t)] = MWEM(epsilon, rounds=t)
        for partition in PARTITIONS[::-1]:                       # one per movie first, as in the experiments' table
            for split in SPLITS:
                out[subdb_name(t, partition, split)] = SubDatabaseMWEM(epsilon, rounds=t, partition=partition,
                                                                       split=split)
    return out


def paired_summary(trials: Sequence[Trial], confidence: float = CONFIDENCE) -> list[dict[str, Any]]:
    """Per (setting, contestant): mean worst |error| and its paired difference to E with a t-interval.

    Needs E's trial for every (setting, run) of another contestant; ``verdict`` is ``above``,
    ``below`` or ``tied`` (the interval contains 0; always ``tied`` with one run).
    """
    e_worst = {(t.setting, t.run): t.worst_abs for t in trials if t.mechanism == E_NAME}
    groups: dict[tuple[str, str], list[Trial]] = {}
    for t in trials:
        groups.setdefault((t.setting, t.mechanism), []).append(t)
    rows = []
    for (setting, mechanism), ts in groups.items():
        worst = np.array([t.worst_abs for t in ts])
        diff = worst - np.array([e_worst[(setting, t.run)] for t in ts])
        runs = len(ts)
        half = (float(stats.t.ppf(0.5 + confidence / 2, runs - 1) * diff.std(ddof=1) / np.sqrt(runs))
                if runs > 1 else float("inf"))
        low, high = float(diff.mean()) - half, float(diff.mean()) + half
        verdict = "above" if low > 0 else "below" if high < 0 else "tied"
        rows.append({"setting": setting, "h": int(ts[0].x), "mechanism": mechanism, "runs": runs,
                     "worst_abs": float(worst.mean()), "worst_abs_sd": float(worst.std(ddof=1)) if runs > 1 else 0.0,
                     "diff_vs_E": float(diff.mean()), "diff_low": low if mechanism != E_NAME else 0.0,
                     "diff_high": high if mechanism != E_NAME else 0.0,
                     "verdict": verdict if mechanism != E_NAME else "", "guarantee": ts[0].guarantee})
    return rows


MARK = {"above": " ▲", "below": " ▼", "tied": " ≈", "": ""}


def markdown(rows: Sequence[dict[str, Any]], guarantees: Mapping[str, str], *, notes: str, command: str) -> str:
    """The report: worst |error| per contestant (rows) and h (columns), marked against E, then the guarantees."""
    hs = sorted({r["h"] for r in rows})
    names = list(dict.fromkeys(r["mechanism"] for r in rows))
    cell = {(r["mechanism"], r["h"]): r for r in rows}
    lines = ["# WYZ Fig. 2 sensitivity: E vs sub-database MWEM under the choices WYZ §VI-A-1 leaves open", "",
             f"`{command}`", "", notes, "",
             f"Worst-case |error| over the queries, mean over runs. ▲ / ▼: above / below E at this h (the "
             f"{100 * CONFIDENCE:g} % paired t-interval of the difference to E excludes 0); ≈: not separated.", "",
             "| contestant | " + " | ".join(f"h={h}" for h in hs) + " | above E at h |",
             "|---|" + "---:|" * len(hs) + "---|"]
    for name in names:
        above = [str(h) for h in hs if (name, h) in cell and cell[(name, h)]["verdict"] == "above"]
        cells = [f"{cell[(name, h)]['worst_abs']:.4f}{MARK[cell[(name, h)]['verdict']]}" if (name, h) in cell else "–"
                 for h in hs]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {', '.join(above) if name != E_NAME else ''} |")
    lines += ["", "## Guarantees (every contestant is ε-DP; P = the number of sub-databases: 128 with one per movie, "
              "h with the coarsest partition; the CSV gives each release's P)", ""]
    lines += [f"- {name}: {guarantees[name]}" for name in names]
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[dict[str, Any]], path: Path, rounds: Sequence[int]) -> None:
    """One panel per T: E, plain MWEM and the four sub-database variants against h."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(rounds), figsize=(6.0 * len(rounds), 4.4), sharey=True, squeeze=False)
    for ax, t in zip(axes[0], rounds):
        names = [E_NAME, mwem_name(t)] + [subdb_name(t, p, s) for p in PARTITIONS[::-1] for s in SPLITS]
        for name in names:
            pts = sorted((r["h"], r["worst_abs"]) for r in rows if r["mechanism"] == name)
            if not pts:
                continue
            style = "k-o" if name == E_NAME else "--s" if name.startswith("MWEM") else "-^"
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=name, lw=2.2 if name == E_NAME else 1.4)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("heterogeneity h")
        ax.set_title(f"T = {t}", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("worst-case |error| (mean over runs)")
    fig.suptitle("WYZ Fig. 2 sensitivity (MovieLens-100k, ε = 1)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def fig2_sensitivity(out: Path, *, runs: int, epsilon: float, rng: np.random.Generator,
                     heterogeneity: Sequence[int] = HETEROGENEITY, queries: int = 200,
                     rounds: Sequence[int] = ROUNDS, command: str = "") -> list[Path]:
    """Run the grid (module docstring) and write the report; returns the paths written."""
    labels, values = ratings()
    data = Histogram.from_rows(labels, values, MOVIES, K)
    mechanisms = contestants(epsilon, rounds)
    started = time.perf_counter()
    trials: list[Trial] = []
    for h in heterogeneity:
        calls = 0

        def progress(_line: str, h: int = h) -> None:
            nonlocal calls
            calls += 1
            if calls % len(mechanisms) == 0:
                print(f"[fig2-sensitivity] h = {h}: run {calls // len(mechanisms)}/{runs} done "
                      f"({time.perf_counter() - started:.0f} s elapsed)", file=sys.stderr, flush=True)

        trials += compare(data, heterogeneous_workload(h, queries), mechanisms, runs=runs, rng=rng, setting=f"h={h}",
                          x=h, epsilon=epsilon, progress=progress)
    rows = paired_summary(trials)
    mwem = mechanisms[mwem_name(rounds[0])]
    assert isinstance(mwem, MWEM)
    notes = (f"MovieLens-100k, the {MOVIES} most-rated movies ({data.n:,} ratings, {data.group_sizes.min()}–"
             f"{data.group_sizes.max()} per movie; rating private, movie public); {queries} random statistical "
             f"queries per run (WYZ §VI-A-1 row functions, normalised by WYZ eq. 10); ε = {epsilon:g}; {runs} runs; "
             f"MWEM: {mwem.selection} selection, {mwem.replays} multiplicative-weights replays, "
             f"{mwem.iterate} iterate. "
             f"Sub-databases: "
             f"'one per movie' = {MOVIES} sub-databases at every h; 'coarsest' = h sub-databases of {MOVIES}/h movies. "
             f"Split: 'parallel' = full ε per sub-database; 'sequential' = ε/P per sub-database. "
             f"Total time {time.perf_counter() - started:.0f} s.")
    out.mkdir(parents=True, exist_ok=True)
    md, csv_path, trials_path, png = (out / "fig2_sensitivity.md", out / "fig2_sensitivity.csv",
                                      out / "fig2_sensitivity_trials.csv", out / "fig2_sensitivity.png")
    guarantees = {}                        # one line per contestant; the symbolic P where it varies with h
    for name, mechanism in mechanisms.items():
        seen = {r["guarantee"] for r in rows if r["mechanism"] == name}
        guarantees[name] = seen.pop() if len(seen) == 1 else str(mechanism.guarantee)  # type: ignore[attr-defined]
    md.write_text(markdown(rows, guarantees, notes=notes, command=command), encoding="utf-8")
    write_records(csv_path, rows)
    write_records(trials_path, [asdict(t) for t in trials])
    plot(rows, png, rounds)
    return [md, csv_path, trials_path, png]
