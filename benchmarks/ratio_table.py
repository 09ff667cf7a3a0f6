"""The table of timed operations beside their baselines measured in the same run (``bench_plan``,
``bench_query``): printed as Markdown and written to ``<stem>.md`` and ``<stem>.csv``."""

from __future__ import annotations

import csv
from pathlib import Path

FIELDS = ["operation", "size", "seconds", "baseline_seconds", "ratio", "goal", "met"]


def goal_met(seconds: float, goal_seconds: float, checked: bool) -> str:
    """The ``met`` cell: "yes" or "NO" when goals are checked, else empty."""
    return "" if not checked else ("yes" if seconds < goal_seconds else "NO")


def write_ratio_table(out: Path, stem: str, title: str, info: dict[str, str], times: str, quick: bool,
                      rows: list[dict[str, object]]) -> int:
    """Add each row's ``ratio`` (seconds / baseline_seconds), print the table under ``title``, the
    machine ``info`` and the ``times`` note, write it to ``out``; exit status 1 when a goal is missed."""
    for row in rows:
        row["ratio"] = row["seconds"] / row["baseline_seconds"]
    lines = [f"# {title}", "", *[f"- {k}: {v}" for k, v in info.items()], f"- times: {times}",
             "- quick run: sizes reduced, goals not checked" if quick else "", "",
             "| operation | size | time (s) | baseline (s) | ratio | goal | met |", "|---|---|---:|---:|---:|---|---|"]
    for row in rows:
        lines.append(f"| {row['operation']} | {row['size']} | {row['seconds']:.4f} | {row['baseline_seconds']:.4f} | "
                     f"{row['ratio']:.1f}x | {row['goal']} | {row['met']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.md").write_text(text, encoding="utf-8")
    with open(out / f"{stem}.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return 0 if all(row["met"] != "NO" for row in rows) else 1
