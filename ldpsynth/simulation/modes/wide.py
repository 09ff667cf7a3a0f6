"""A wide collection simulated end to end: one device per row reports its view (the SDK routes it), and each
view's marginal, answered by its sub-collection's query service, is set against the truth.

The truth of view v is the share of each cell among the devices routed to v (the SDK says which:
``SubmitResult.part``), so each interval is checked against what its reports estimate; the population's share
(all devices) is shown beside it. Per view: the total variation distance ½ Σ_u |ŝ_u − s_u| between the estimated
and the true shares, and how many cells' intervals cover the truth.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ldpsynth.shared.queries.builders import marginal
from ldpsynth.shared.queries.json_form import queries_to_json
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wide.collection import WideCard
from ldpsynth.simulation.federation import SimulationSettings, device_groups, run_groups
from ldpsynth.simulation.modes.hosting import hosted
from ldpsynth.simulation.modes.report import covered, delivery


def cell_codes(schema: Schema, columns: dict[str, np.ndarray]) -> tuple[np.ndarray, int]:
    """Each row's cell of the marginal over ``schema``'s private attributes (mixed radix in their order, as
    the query compiler numbers a marginal's cells) and the number of cells."""
    cell, cells = np.zeros(len(next(iter(columns.values()))), np.int64), 1
    for attr in schema.attributes:
        if not attr.public:
            cell = cell * attr.size + attr.encode(columns[attr.name])
            cells *= attr.size
    return cell, cells


def view_answers(target: str, card: WideCard, columns: dict[str, np.ndarray], parts: list[tuple[int, str]],
                 level: float) -> list[dict[str, Any]]:
    """Every cell of every view: its estimated share (the sub-collection's marginal, mean normalisation) and
    interval against the share among the view's devices (``parts``: device, sub-collection; device i holds
    row i)."""
    from ldpsynth.client.query import QueryClient

    part_of = dict(parts)
    routed = np.array([part_of.get(i, "") for i in range(len(next(iter(columns.values()))))])
    rows: list[dict[str, Any]] = []
    with QueryClient(target) as client:
        for name, view in zip(card.names, card.cards, strict=True):
            attrs = [a.name for a in view.schema.attributes if not a.public]
            mine = routed == name
            cell, cells = cell_codes(view.schema, columns)
            truth = np.bincount(cell[mine], minlength=cells) / max(int(mine.sum()), 1)
            population = np.bincount(cell, minlength=cells) / len(cell)
            query = marginal(*attrs, normalization="mean", label="share")
            answer = client.estimate(name, queries=queries_to_json([query]), level=level)
            for u, record in enumerate(answer.records()):
                rows.append({"view": name, "cell": record["label"], "devices": int(mine.sum()),
                             "truth": float(truth[u]), "population_share": float(population[u]),
                             "estimate": record["estimate"], "ci_low": record["ci_low"], "ci_high": record["ci_high"],
                             "std_error": record["std_error"],
                             "covered": covered(record["ci_low"], truth[u], record["ci_high"])})
    return rows


def per_view(answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per view: devices, cells, TVD of the estimated shares, intervals covering the truth."""
    out = []
    for name in dict.fromkeys(r["view"] for r in answers):
        mine = [r for r in answers if r["view"] == name]
        tvd = 0.5 * sum(abs(r["estimate"] - r["truth"]) for r in mine)
        out.append({"view": name, "devices": mine[0]["devices"], "cells": len(mine), "TVD": tvd,
                    "covered": f"{sum(r['covered'] for r in mine)}/{len(mine)}"})
    return out


async def simulate_wide(card: WideCard, columns: dict[str, np.ndarray], description: str,
                        settings: SimulationSettings) -> dict[str, Any]:
    """Host the wide collection, let one device per row submit, answer each view (module docstring)."""
    devices = np.arange(len(next(iter(columns.values()))))
    name = card.schema.name
    with tempfile.TemporaryDirectory(prefix="ldpsynth-sim-") as scratch:
        async with hosted(Path(scratch), card.cards, settings, wide=(card,)) as (server, target):
            started = time.perf_counter()
            outcome = await run_groups(device_groups(name, columns, devices, target, settings, wide=True),
                                       len(devices), settings.progress)
            seconds = time.perf_counter() - started
            stored = sum([(await server.statistics(view)).n for view in card.names])
            answers = await asyncio.to_thread(view_answers, target, card, columns, outcome.parts, settings.level)
    views = per_view(answers)
    covering = sum(r["covered"] for r in answers)
    return {"mode": "wide", "collection": name, "population": description, "seconds": seconds,
            "delivery": delivery(outcome, stored), "table": views, "answers": answers,
            "title": f"Each view's shares (its sub-collection's marginal) vs the shares among its devices "
                     f"({covering}/{len(answers)} cells' {settings.level:.0%} intervals cover them; answers.csv "
                     "has every cell)",
            "notes": [f"{len(card.names)} views; each device reports one, charged ε under {name!r}"]}
