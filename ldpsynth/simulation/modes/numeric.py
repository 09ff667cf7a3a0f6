"""A numeric collection simulated end to end: each device submits its values (HM or SW reports through the
SDK), the simulation exports the collection from the query service (which answers categorical queries only,
docs/numeric.md) and answers offline: an HM attribute's mean (overall and per value of the first public
attribute) with its interval, an SW attribute's quartiles with bootstrap intervals, against the truth: the
rows delivered, i.e. each device's distinct rows (identical rows of a device share one report)."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.mechanisms.registry import name_of
from ldpsynth.shared.numeric.collection import release_means, release_quantiles
from ldpsynth.simulation.federation import SimulationSettings, device_groups, run_groups
from ldpsynth.simulation.modes.hosting import hosted
from ldpsynth.simulation.modes.report import covered, delivery

QUARTILES = (0.25, 0.5, 0.75)


#: A public attribute with more values than this is not grouped by (MovieLens' movies).
MAX_GROUPS = 20


def distinct_rows(columns: dict[str, np.ndarray], devices: np.ndarray) -> np.ndarray:
    """The first of each device's identical rows (they share one memoized report, docs/contract.md §5, so the
    release holds each once): a row mask."""
    codes = [np.unique(col, return_inverse=True)[1].reshape(-1) for col in columns.values()]
    first = np.unique(np.stack([devices, *codes], axis=1), axis=0, return_index=True)[1]
    mask = np.zeros(len(devices), bool)
    mask[first] = True
    return mask


def _group(columns: dict[str, np.ndarray], by: str | None, value: Any) -> tuple[str, np.ndarray]:
    """The label and row mask of an answer's group (``value`` None: all rows)."""
    if value is None:
        return "all", np.ones(len(next(iter(columns.values()))), bool)
    assert by is not None
    return f"{by}={value}", columns[by] == value


def numeric_answers(target: str, card: MechanismCard, columns: dict[str, np.ndarray], devices: np.ndarray,
                    level: float, seed: int) -> list[dict[str, Any]]:
    """The export's answers against the truth over the rows delivered (:func:`distinct_rows`), one dict per
    (group, statistic); groups: all rows, and each value of the first public attribute of at most
    :data:`MAX_GROUPS` values."""
    from ldpsynth.client.query import QueryClient

    delivered = distinct_rows(columns, devices)
    columns = {name: col[delivered] for name, col in columns.items()}
    attr = next(a for a in card.schema.attributes if not a.public)
    values = np.asarray(columns[attr.name], np.float64)
    by = next((a.name for a in card.schema.attributes if a.public and a.size <= MAX_GROUPS), None)
    with QueryClient(target) as client:
        release = client.export(card.schema.name)
    rows: list[dict[str, Any]] = []
    if name_of(card.mechanism) == "HM":
        answers = release_means(release, level=level) + (release_means(release, by, level) if by else [])
        for group in answers:
            label, mask = _group(columns, by, group.value)
            e, truth = group.estimate, float(values[mask].mean())
            rows.append({"group": label, "statistic": "mean", "n": e.n, "truth": truth, "estimate": e.mean,
                         "ci_low": e.low, "ci_high": e.high, "std_error": e.standard_error,
                         "covered": covered(e.low, truth, e.high)})
        return rows
    rng = np.random.default_rng(seed)
    found = (release_quantiles(release, QUARTILES, rng, level=level)
             + (release_quantiles(release, QUARTILES, rng, by, level=level) if by else []))
    for quant in found:
        label, mask = _group(columns, by, quant.value)
        truth_q = np.quantile(values[mask], QUARTILES)
        qe = quant.estimate
        for j, q in enumerate(QUARTILES):
            rows.append({"group": label, "statistic": f"quantile {q:g}", "n": quant.n, "truth": float(truth_q[j]),
                         "estimate": float(qe.value[j]), "ci_low": float(qe.low[j]), "ci_high": float(qe.high[j]),
                         "std_error": float(qe.standard_error[j]),
                         "covered": covered(qe.low[j], truth_q[j], qe.high[j])})
    return rows


async def simulate_numeric(card: MechanismCard, columns: dict[str, np.ndarray], devices: np.ndarray,
                           description: str, settings: SimulationSettings) -> dict[str, Any]:
    """Host the numeric collection, let the devices submit, answer from the export (module docstring)."""
    name = card.schema.name
    with tempfile.TemporaryDirectory(prefix="ldpsynth-sim-") as scratch:
        async with hosted(Path(scratch), (card,), settings) as (server, target):
            started = time.perf_counter()
            outcome = await run_groups(device_groups(name, columns, devices, target, settings), len(devices),
                                       settings.progress)
            seconds = time.perf_counter() - started
            stored = (await server.statistics(name)).n
            answers = await asyncio.to_thread(numeric_answers, target, card, columns, devices, settings.level,
                                              settings.seed)
    hits = sum(r["covered"] for r in answers)
    return {"mode": "numeric", "collection": name, "population": description, "seconds": seconds,
            "delivery": delivery(outcome, stored), "table": answers, "answers": answers,
            "title": f"{name_of(card.mechanism)} estimates from the export vs the truth ({hits}/{len(answers)} "
                     f"{settings.level:.0%} intervals cover it)",
            "notes": ["answered offline from the collection's export: the server's query engine answers "
                      "categorical collections only (docs/numeric.md)"]}
