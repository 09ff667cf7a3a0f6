"""A discovery of heavy hitters simulated over its rounds: the devices (one word each, with its own in-memory
ledger for the whole run, which fixes its round) check in every round and only the open round's report; between
rounds an operator closes the round on the running server (``QueryService.AdvanceRound``, as ``aggregator advance
--server`` does; docs/heavy-hitters.md, "The lifecycle on a running server"). The heavy hitters found are set
against the true ones.

The devices run in this process (their ledgers must outlive each round's server); each round they share
``settings.connections`` channels.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from ldpsynth.client import AsyncClient, PrivacyLedger, SubmitError
from ldpsynth.client.errors import QueryError
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.heavy_hitters.collection import DiscoverySchema
from ldpsynth.simulation.devices import GroupOutcome
from ldpsynth.simulation.federation import SimulationSettings
from ldpsynth.simulation.modes.hosting import hosted
from ldpsynth.simulation.modes.report import covered, delivery


async def check_in(target: str, schema: DiscoverySchema, words: np.ndarray, ledgers: list[PrivacyLedger],
                   connections: int, outcome: GroupOutcome) -> Counter[str]:
    """Every device submits its word once; the statuses counted (``sent``, not your round yet, passed)."""
    clients = [AsyncClient(target) for _ in range(connections)]
    statuses: Counter[str] = Counter()

    async def one(i: int) -> None:
        try:
            result = await clients[i % connections].submit(schema.name, {schema.word: [str(words[i])]},
                                                           ledger=ledgers[i])
        except SubmitError as exc:
            outcome.failures.append(f"device {i}: {exc}")
            return
        statuses[result.status] += 1
        if result.status == "sent":
            outcome.devices += 1
            outcome.rows += result.rows
            outcome.sent += result.sent
            outcome.acknowledged += result.acknowledged
            outcome.duplicates += result.duplicates
            outcome.retries += result.retries

    try:
        await asyncio.gather(*(one(i) for i in range(len(words))))
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    return statuses


def advance_round(target: str, name: str) -> dict[str, Any]:
    """Close the open round of the discovery ``name`` on the server at ``target``, as its operator."""
    with QueryClient(target) as operator:
        return operator.advance_round(name)


def found_vs_truth(results: dict[str, Any], schema: DiscoverySchema, words: np.ndarray) -> tuple[
        list[dict[str, Any]], dict[str, Any]]:
    """Each heavy hitter found (estimated count and CI vs its true count and rank), and precision, recall and
    F1 against the true top k (or the words above the threshold's share of the devices)."""
    values, counts = np.unique(words, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    rank = {str(values[j]): r + 1 for r, j in enumerate(order)}
    true_count = dict(zip(values.tolist(), counts.tolist(), strict=True))
    d = schema.discovery
    if d.top_k is not None:
        heavy = {str(values[j]) for j in order[:d.top_k]}
    else:
        share = float(d.threshold or 0.0)
        heavy = {str(v) for v, c in true_count.items() if c >= share * len(words)}
    rows = [{"value": h["value"], "true_rank": rank.get(h["value"], 0), "truth": int(true_count.get(h["value"], 0)),
             "estimate": h["count"], "ci_low": h["ci_low"], "ci_high": h["ci_high"], "std_error": h["std_error"],
             "covered": covered(h["ci_low"], true_count.get(h["value"], 0), h["ci_high"]),
             "truly_heavy": h["value"] in heavy} for h in results["heavy_hitters"]]
    hits = sum(r["truly_heavy"] for r in rows)
    precision, recall = hits / max(len(rows), 1), hits / max(len(heavy), 1)
    f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
    missed = sorted(heavy - {r["value"] for r in rows}, key=lambda v: rank[v])
    return rows, {"true_heavy_hitters": len(heavy), "found": len(rows), "precision": precision, "recall": recall,
                  "f1": f1, "missed": missed, "population_estimate": results["population"],
                  "reports_per_round": results["rounds"]}


async def simulate_discovery(schema: DiscoverySchema, words: np.ndarray, description: str,
                             settings: SimulationSettings) -> dict[str, Any]:
    """Run every round of the discovery (module docstring); stops at a round below its minimum of reports."""
    from ldpsynth.aggregator.runtime.discovery import expand

    ledgers = [PrivacyLedger.for_simulation() for _ in words]
    outcome = GroupOutcome()
    rounds: list[dict[str, Any]] = []
    notes: list[str] = []
    results: dict[str, Any] | None = None
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ldpsynth-sim-") as scratch:
        data = Path(scratch)
        cards, discoveries = expand([schema], data)
        async with hosted(data, cards, settings, discoveries=discoveries) as (_, target):
            while results is None:
                statuses = await check_in(target, schema, words, ledgers, settings.connections, outcome)
                try:
                    done = await asyncio.to_thread(advance_round, target, schema.name)
                except QueryError as exc:
                    if exc.status != "FAILED_PRECONDITION":
                        raise
                    notes.append(f"stopped: {exc.details}")   # too few reports: the round stays open
                    break
                rounds.append({"round": done["closed_round"], "reports": done["reports"], **dict(statuses)})
                if settings.progress:
                    print(f"round {done['closed_round']} closed with {done['reports']} reports", file=sys.stderr,
                          flush=True)
                results = done.get("results")
    seconds = time.perf_counter() - started
    outcome.epsilon_per_device = [ledger.spent(schema.name) for ledger in ledgers]
    for ledger in ledgers:
        ledger.close()
    rows, quality = ([], {}) if results is None else found_vs_truth(results, schema, words)
    stored = sum(r["reports"] for r in rounds)
    return {"mode": "discovery", "collection": schema.name, "population": description, "seconds": seconds,
            "delivery": delivery(outcome, stored), "rounds": rounds, "quality": quality, "table": rows,
            "answers": rows,
            "title": (f"Heavy hitters found vs the truth: precision {quality['precision']:.2f}, recall "
                      f"{quality['recall']:.2f}, F1 {quality['f1']:.2f} against the {quality['true_heavy_hitters']} "
                      f"true ones; rounds' reports {quality['reports_per_round']}" if quality
                      else "No heavy hitters: the discovery did not finish"),
            "notes": notes + [f"round {r['round']}: " + ", ".join(f"{k} {v}" for k, v in r.items() if k != "round")
                              for r in rounds]}
