"""The comparison harness: mechanism E and central mechanisms on the same data and workloads.

:func:`compare` runs every mechanism on a histogram for ``runs`` repetitions (a fresh workload
per repetition from a seeded generator, and a fresh release per mechanism), and records per
(setting, mechanism, run) the worst-case and mean absolute error against the true answers, the
worst-case squared error and the release time. :func:`summarize` averages over runs (WYZ §VI-A
reports the worst case over the queries averaged over runs); :func:`write_report` writes
``<name>.csv`` (every trial), ``<name>.md`` (the averages, one table per error measure) and
``<name>.png`` (error against the setting, one line per mechanism).

A mechanism is any value with a ``name`` (or ``str``), a ``guarantee`` and
``release(data, workload, rng) -> CentralRelease``; :class:`~.local_e.LocalE` is always included.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ldpsynth.evaluation.comparison.local_e import LocalE
from ldpsynth.evaluation.comparison.releases import CentralRelease
from ldpsynth.evaluation.comparison.workloads import Histogram, Workload
from ldpsynth.evaluation.records import write_records
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_int


class Mechanism(Protocol):
    def release(self, data: Histogram, workload: Workload, rng: np.random.Generator) -> CentralRelease: ...


@dataclass(frozen=True)
class Trial:
    """One release of one mechanism on one workload."""

    setting: str
    x: float
    mechanism: str
    run: int
    queries: int
    n: int
    worst_abs: float
    mean_abs: float
    worst_sq: float
    seconds: float
    guarantee: str


def errors(release: CentralRelease, truth: np.ndarray) -> tuple[float, float, float]:
    """Worst-case absolute, mean absolute and worst-case squared error of a release's answers."""
    diff = np.abs(np.asarray(release.answers, dtype=np.float64) - truth)
    return float(diff.max()), float(diff.mean()), float((diff**2).max())


def compare(data: Histogram, workloads: Callable[[np.random.Generator], Workload],
            mechanisms: Mapping[str, Mechanism], *, runs: int, rng: np.random.Generator, setting: str = "",
            x: float = math.nan, epsilon: float | None = None,
            progress: Callable[[str], None] | None = None) -> list[Trial]:
    """``runs`` repetitions of every mechanism (E included: added with ``epsilon`` when absent)."""
    runs = check_int(runs, "runs", 1)
    contestants = dict(mechanisms)
    if not any(isinstance(m, LocalE) for m in contestants.values()):
        if epsilon is None:
            raise ValidationError("mechanisms", "a LocalE entry, or the epsilon to add one with", "neither")
        contestants = {"E": LocalE(epsilon), **contestants}
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    trials = []
    for run in range(runs):
        workload = workloads(rng)
        truth = workload.answers(data.counts)
        for name, mechanism in contestants.items():
            started = time.perf_counter()
            release = mechanism.release(data, workload, rng)
            seconds = time.perf_counter() - started
            worst, mean, worst_sq = errors(release, truth)
            trials.append(Trial(setting, x, name, run, workload.size, data.n, worst, mean, worst_sq, seconds,
                                str(release.guarantee)))
            say(f"[compare] {setting or 'run'} {run + 1}/{runs} {name:>14}: worst |error| {worst:.5f}, "
                f"mean {mean:.5f} ({seconds:.2f} s)")
    return trials


def summarize(trials: Iterable[Trial]) -> list[dict[str, Any]]:
    """Means over runs per (setting, mechanism), in first-seen order."""
    groups: dict[tuple[str, str], list[Trial]] = {}
    for t in trials:
        groups.setdefault((t.setting, t.mechanism), []).append(t)
    rows = []
    for (setting, mechanism), ts in groups.items():
        rows.append({"setting": setting, "x": ts[0].x, "mechanism": mechanism, "runs": len(ts),
                     "queries": ts[0].queries, "n": ts[0].n,
                     "worst_abs": float(np.mean([t.worst_abs for t in ts])),
                     "worst_abs_sd": float(np.std([t.worst_abs for t in ts], ddof=1)) if len(ts) > 1 else 0.0,
                     "mean_abs": float(np.mean([t.mean_abs for t in ts])),
                     "worst_sq": float(np.mean([t.worst_sq for t in ts])),
                     "seconds": float(np.mean([t.seconds for t in ts])), "guarantee": ts[0].guarantee})
    return rows


def _table(rows: Sequence[dict[str, Any]], field: str, digits: int) -> list[str]:
    settings = list(dict.fromkeys(r["setting"] for r in rows))
    mechanisms = list(dict.fromkeys(r["mechanism"] for r in rows))
    value = {(r["setting"], r["mechanism"]): r[field] for r in rows}
    lines = ["| setting | " + " | ".join(mechanisms) + " |", "|---|" + "---:|" * len(mechanisms)]
    for s in settings:
        cells = [f"{value[(s, m)]:.{digits}g}" if (s, m) in value else "–" for m in mechanisms]
        lines.append(f"| {s.replace('|', chr(92) + '|')} | " + " | ".join(cells) + " |")  # '|' in "|Q|=64" escaped
    return lines


def write_report(out: Path, name: str, trials: Sequence[Trial], *, title: str, x_label: str,
                 y_field: str = "worst_abs", log_x: bool = False, log_y: bool = True, notes: str = "",
                 bound: Sequence[tuple[float, float]] | None = None) -> list[Path]:
    """Write ``name``.csv/.md/.png to ``out`` and return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    rows = summarize(trials)
    csv_path, md_path, png_path = out / f"{name}.csv", out / f"{name}.md", out / f"{name}.png"
    write_records(csv_path, [asdict(t) for t in trials])
    guarantees = dict.fromkeys(f"- {r['mechanism']}: {r['guarantee']}" for r in rows)
    lines = [f"# {title}", "", notes, "", "## Worst-case absolute error (mean over runs)", "",
             *_table(rows, "worst_abs", 4), "", "## Mean absolute error (mean over runs)", "",
             *_table(rows, "mean_abs", 4), "", "## Worst-case squared error (mean over runs)", "",
             *_table(rows, "worst_sq", 4), "", "## Seconds per release (mean over runs)", "",
             *_table(rows, "seconds", 3), "", "## Guarantees", "", *guarantees, ""]
    md_path.write_text("\n".join(lines), encoding="utf-8")
    _plot(rows, png_path, title=title, x_label=x_label, y_field=y_field, log_x=log_x, log_y=log_y, bound=bound)
    return [csv_path, md_path, png_path]


def _plot(rows: Sequence[dict[str, Any]], path: Path, *, title: str, x_label: str, y_field: str, log_x: bool,
          log_y: bool, bound: Sequence[tuple[float, float]] | None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.6, 4.4))
    for mechanism in dict.fromkeys(r["mechanism"] for r in rows):
        pts = sorted((r["x"], r[y_field]) for r in rows if r["mechanism"] == mechanism)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=mechanism)
    if bound:
        ax.plot([b[0] for b in bound], [b[1] for b in bound], "k--", label="bound")
    ax.set_xscale("log" if log_x else "linear")
    ax.set_yscale("log" if log_y else "linear")
    ax.set_xlabel(x_label)
    ax.set_ylabel({"worst_abs": "worst-case |error|", "worst_sq": "worst-case squared error",
                   "mean_abs": "mean |error|"}[y_field])
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
