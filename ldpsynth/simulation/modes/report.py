"""What a collection-mode simulation reports: a JSON-ready dict with the delivery, a summary table and the
answers against the truth, rendered as text and written as summary.json, answers.csv and answers.md."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ldpsynth.simulation.devices import GroupOutcome


def delivery(outcome: GroupOutcome, stored: int | None) -> dict[str, Any]:
    """The devices' totals (what they were told) and what the aggregator stored."""
    eps = np.asarray(outcome.epsilon_per_device) if outcome.epsilon_per_device else np.zeros(1)
    return {"devices": outcome.devices, "failed_devices": len(outcome.failures), "failures": outcome.failures[:20],
            "dropped_and_retried": outcome.drops, "rows": outcome.rows, "sent": outcome.sent,
            "acknowledged": outcome.acknowledged, "duplicates": outcome.duplicates, "retries": outcome.retries,
            "stored": stored, "epsilon_per_device_max": float(eps.max()),
            "consistent": stored is not None and stored == outcome.sent == outcome.acknowledged + outcome.duplicates
            and not outcome.failures}


def covered(low: float, truth: float, high: float) -> bool:
    return bool(low <= truth <= high)


def _cell(x: Any) -> str:
    if isinstance(x, bool):
        return "yes" if x else "NO"
    if isinstance(x, float):
        return f"{x:.4g}" if math.isfinite(x) else str(x)
    return str(x).replace("|", "/")


def table(rows: list[dict[str, Any]]) -> str:
    """``rows`` (dicts with the same keys) as a Markdown table."""
    if not rows:
        return ""
    keys = list(rows[0])
    return ("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys) + "\n"
            + "".join("| " + " | ".join(_cell(r[k]) for k in keys) + " |\n" for r in rows))


def render(data: dict[str, Any]) -> str:
    """The human-readable summary of a collection-mode run."""
    d = data["delivery"]
    lines = [f"collection        {data['collection']} ({data['mode']})",
             f"population        {data['population']}",
             f"devices           {d['devices']} delivered, {d['failed_devices']} failed, "
             f"{d['dropped_and_retried']} dropped mid-stream and retried",
             f"reports           {d['sent']} sent, {d['acknowledged']} acknowledged, {d['duplicates']} duplicates, "
             f"{d['stored']} stored (consistent: {'yes' if d['consistent'] else 'NO'})",
             f"epsilon/device    max {d['epsilon_per_device_max']:.4g}",
             f"seconds           {data['seconds']:.1f}"]
    lines += [f"  failure: {f}" for f in d["failures"][:5]]
    lines += [f"note              {n}" for n in data["notes"]]
    return "\n".join(lines) + f"\n\n{data['title']}:\n\n" + table(data["table"])


def write_outputs(out: Path, data: dict[str, Any]) -> None:
    """summary.json (everything), answers.csv (every answer against its truth) and answers.md (the table)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    (out / "answers.md").write_text(table(data["table"]), encoding="utf-8")
    with open(out / "answers.csv", "w", newline="", encoding="utf-8") as f:
        if data["answers"]:
            writer = csv.DictWriter(f, fieldnames=list(data["answers"][0]))
            writer.writeheader()
            writer.writerows(data["answers"])
