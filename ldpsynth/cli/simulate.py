"""``ldpsynth simulate``: a simulated federated deployment (what ``make demo`` runs).

::

    ldpsynth simulate [--dataset synthetic|movielens|facebook] [--target HOST:PORT] [--drop-rate P]
                      [--delay SECONDS] [--processes N] [--out DIR] [--shuffler [HOST:PORT]] ...

With ``--target`` the answers come from that aggregator's query service (shown when its collection
holds exactly this population's rows). Without ``--target`` it hosts an aggregator (Ray shards in a
temporary data directory, or ``--data-dir``) on a free loopback port; the devices of the population
submit their rows through the client SDK from worker processes; then it prints the delivery summary
and, when it hosts the aggregator, the debiased answers of a few queries with confidence intervals
against the truth.
``--shuffler`` puts a shuffler tier between the devices and the aggregator (hosted: a shuffler on
loopback and a shuffle block in the collection; with ``--target``: the shuffler at HOST:PORT) and
prints both guarantees of what was stored (:mod:`ldpsynth.simulation.federation`).
``--web`` serves the survey demo in a browser instead (:mod:`ldpsynth.simulation.web_demo`).
``--collection FILE`` runs a wide, numeric or discovery collection file instead, hosted, with ``--devices``
devices drawn from ``--dataset`` (adult, movielens or words; :mod:`ldpsynth.simulation.modes`,
docs/simulate-modes.md).

Exit status 0 when every device delivered (behind a shuffler: or waits for its pool) and (hosted) the
store holds exactly one report per distinct row delivered; 1 otherwise; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from ldpsynth.cli.options import NumberOption, add_command, add_level_argument, add_number_arguments
from ldpsynth.shared.errors import ValidationError

DATASETS = ("synthetic", "movielens", "facebook", "adult", "words")


#: The population's numeric options: (flag, type, default, help).
POPULATION_NUMBERS: tuple[NumberOption, ...] = (
    ("--epsilon", float, 1.0, "ε per row (default 1)"),
    ("--devices", int, 2000, "synthetic, and --collection: devices (default 2000)"),
    ("--movies", int, 50, "synthetic: movies (default 50)"),
    ("--ratings-per-device", int, 10, "synthetic: ratings per device (default 10)"),
    ("--top-movies", int, 128, "movielens: keep the ratings of the most-rated movies (default 128; 0: all)"),
    ("--vertices", int, 300, "facebook: induced subgraph on the first V vertices, V*V pair rows (default 300)"),
)
#: The deployment's numeric options with a default: (flag, type, default, help).
DEPLOYMENT_NUMBERS: tuple[NumberOption, ...] = (
    ("--connections", int, 8, "gRPC channels per worker process (default 8)"),
    ("--batch-size", int, 8, "reports per batch a device sends (default 8)"),
    ("--drop-rate", float, 0.05,
     "probability a device abandons its first submission mid-stream and retries (default 0.05)"),
    ("--drop-after", float, 0.05, "an abandoned submission is cancelled after U[0, this] seconds (default 0.05)"),
    ("--delay", float, 0.0, "mean of an exponential delay (seconds) before each submission (default 0)"),
    ("--seed", int, 1, "seeds the faults and the demo queries (default 1)"),
)
#: The shuffle tier's numeric options (hosted shuffler and collection).
SHUFFLE_NUMBERS: tuple[NumberOption, ...] = (
    ("--threshold", int, 100, "hosted shuffler: the fewest reports a pool leaves with (default 100)"),
    ("--max-wait", float, 2.0, "hosted shuffler: seconds a pool waits for its threshold (default 2)"),
    ("--delta", float, 1e-9, "hosted collection: the central guarantee's δ (default 1e-9)"),
    ("--min-batch", int, 100, "hosted collection: the fewest reports anything is released from (default 100)"),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``simulate`` subcommand."""
    parser = add_command(
        subparsers, "simulate", run_command,
        help="run a simulated federated deployment (devices -> E -> gRPC -> aggregator -> estimates)",
        description="Simulate a federated deployment: many devices perturb their rows with mechanism E and "
                    "stream them to an aggregator over loopback gRPC; print what was delivered and the "
                    "debiased answers of a few queries against the truth.")
    data = parser.add_argument_group("population")
    data.add_argument("--dataset", choices=DATASETS,
                      help="synthetic ratings (default, no files), MovieLens-100k ratings, or ego-Facebook vertex "
                           "pairs (read from $LDPSYNTH_DATA or ../shared/data); with --collection: adult (wide, "
                           "numeric; the default), movielens (numeric) or words (discovery)")
    data.add_argument("--collection", type=Path, metavar="FILE",
                      help="simulate this wide, numeric or discovery collection file instead (hosted; --devices "
                           "devices drawn from --dataset; docs/simulate-modes.md)")
    add_number_arguments(data, POPULATION_NUMBERS)
    run = parser.add_argument_group("deployment")
    run.add_argument("--target", help="submit to this aggregator (or several replicas: HOST:PORT,HOST:PORT) instead "
                                      "of hosting one")
    run.add_argument("--token", help="bearer token for --target")
    run.add_argument("--data-dir", type=Path, help="hosted aggregator: keep the store here (default: a temp dir)")
    run.add_argument("--shards", type=int, help="hosted aggregator: shards of a new data dir (default: one per CPU)")
    run.add_argument("--ray-address", help="hosted aggregator: join this Ray cluster (default: start a local one)")
    run.add_argument("--processes", type=int, help="worker processes running the devices (default: CPUs, <= 4)")
    add_number_arguments(run, DEPLOYMENT_NUMBERS)
    add_level_argument(run, "confidence level of the intervals (default 0.95)")
    run.add_argument("--out", type=Path, help="also write summary.json, answers.csv and answers.md here")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--verbose", action="store_true", help="hosted aggregator: also print Ray's own log lines")
    shuffle = parser.add_argument_group("shuffle model")
    shuffle.add_argument("--shuffler", nargs="?", const="", metavar="HOST:PORT",
                         help="seal every report and send it through a shuffler: hosted (no value; a shuffled "
                              "collection) or the one at HOST:PORT (with --target); prints the central (ε, δ)")
    add_number_arguments(shuffle, SHUFFLE_NUMBERS)
    web = parser.add_argument_group("survey in a browser")
    web.add_argument("--web", action="store_true",
                     help="instead of simulated devices: serve a survey page (people rate items in a browser, which "
                          "perturbs and submits them to a replica's web port) and the analyst's live answers with 95%% "
                          "intervals, on 127.0.0.1, until SIGINT/SIGTERM (make demo-web builds the SDK bundle first)")
    web.add_argument("--page-port", type=int, default=0, help="--web: port of the pages (default 0: a free one)")


@contextmanager
def _named_by_flag(args: argparse.Namespace) -> Iterator[None]:
    """A :class:`ValidationError` of a setting named like one of this command's options (``drop_rate``)
    names the option instead (``--drop-rate``)."""
    try:
        yield
    except ValidationError as exc:
        if exc.field not in vars(args):
            raise
        raise ValidationError("--" + exc.field.replace("_", "-"), exc.legal, exc.problem, exc.position) from None


def _population(args: argparse.Namespace) -> Any:
    from ldpsynth.simulation import datasets

    with _named_by_flag(args):
        if args.dataset == "movielens":
            return datasets.movielens_100k(args.epsilon, top_movies=args.top_movies or None)
        if args.dataset == "facebook":
            return datasets.facebook_graph(args.epsilon, args.vertices)
        return datasets.synthetic_ratings(args.devices, args.movies, args.ratings_per_device, args.epsilon)


def _settings(args: argparse.Namespace) -> Any:
    from ldpsynth.simulation.devices import Faults
    from ldpsynth.simulation.federation import ShuffleTier, SimulationSettings, default_processes

    with _named_by_flag(args):
        shuffle = None if args.shuffler is None else ShuffleTier(
            args.shuffler or None, threshold=args.threshold, max_wait=args.max_wait, delta=args.delta,
            min_batch=args.min_batch)
        return SimulationSettings(
            target=args.target, token=args.token, data_dir=args.data_dir, shards=args.shards,
            ray_address=args.ray_address,
            processes=args.processes or default_processes(), connections=args.connections,
            batch_size=args.batch_size, faults=Faults(args.drop_rate, args.drop_after, args.delay), seed=args.seed,
            level=args.level, progress=not args.no_progress, verbose=args.verbose, shuffle=shuffle)


def answer_rows(report: Any, prediction: Any = None) -> list[dict[str, Any]]:
    """One dict per demo query: label, truth, estimate, CI, whether the CI covers the truth, and the
    interval half-width achieved beside the one ``prediction`` (a plan for these rows) expected."""
    if report.answers is None:
        return []
    rows = []
    for j, record in enumerate(report.answers.records()):
        truth = float(report.workload.truth[j])
        expected = float("nan") if prediction is None else float(prediction.z * prediction.e.se_prior[j])
        rows.append({"query": record["label"], "truth": truth, "estimate": record["estimate"],
                     "ci_low": record["ci_low"], "ci_high": record["ci_high"], "std_error": record["std_error"],
                     "covered": bool(record["ci_low"] <= truth <= record["ci_high"]),
                     "predicted_halfwidth": expected, "achieved_halfwidth": (record["ci_high"] - record["ci_low"]) / 2})
    return rows


def summary(report: Any, prediction: Any = None) -> dict[str, Any]:
    """The report as a JSON-ready dict (``prediction``: the plan of the demo queries for these rows)."""
    o = report.outcome
    latencies = np.asarray(o.latencies) if o.latencies else np.full(1, np.nan)
    eps = np.asarray(o.epsilon_per_device) if o.epsilon_per_device else np.zeros(1)
    return {"population": report.description, "target": report.target, "hosted_aggregator": report.hosted,
            "devices": o.devices, "failed_devices": len(o.failures), "failures": o.failures[:20],
            "dropped_and_retried": o.drops, "rows": o.rows, "sent": o.sent, "acknowledged": o.acknowledged,
            "duplicates": o.duplicates, "retries": o.retries, "memoized": o.memoized,
            "stored": report.stored, "distinct_rows": report.distinct_rows, "consistent": report.consistent,
            "seconds": report.seconds, "rows_per_second": report.rows_per_second,
            "epsilon_per_device_max": float(eps.max()), "epsilon_per_device_mean": float(eps.mean()),
            "submit_latency_p50_s": float(np.percentile(latencies, 50)),
            "submit_latency_p99_s": float(np.percentile(latencies, 99)),
            "waiting_devices": o.waiting, "waiting_reports": o.waiting_reports, "withheld": report.withheld,
            "guarantees": None if report.guarantees is None else report.guarantees.to_json(),
            "answers": answer_rows(report, prediction)}


def _fmt(x: float) -> str:
    return f"{x:.6g}" if math.isfinite(x) else str(x)


def answers_table(rows: list[dict[str, Any]], level: float) -> str:
    """The answers as a Markdown table, with the half-width the plan predicted and the one achieved."""
    head = (f"| query | truth | estimate | {level:.0%} CI | covered | ± predicted | ± achieved |\n"
            "|---|---:|---:|---|:---:|---:|---:|\n")
    return head + "".join(f"| {r['query']} | {_fmt(r['truth'])} | {_fmt(r['estimate'])} | "
                          f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}] | {'yes' if r['covered'] else 'NO'} | "
                          f"{r['predicted_halfwidth']:.4g} | {r['achieved_halfwidth']:.4g} |\n"
                          for r in rows)


def render(data: dict[str, Any], level: float) -> str:
    """The human-readable summary."""
    check = {True: "yes", False: "NO", None: "n/a (not hosted)"}[data["consistent"]]
    lines = [
        f"population        {data['population']}",
        f"aggregator        {data['target']} ({'hosted here' if data['hosted_aggregator'] else 'remote'})",
        f"devices           {data['devices']} delivered, {data['failed_devices']} failed, "
        f"{data['dropped_and_retried']} dropped mid-stream and retried",
        f"rows              {data['rows']} ({data['memoized']} answered from the ledger's memo)",
        f"reports           {data['sent']} sent, {data['acknowledged']} acknowledged, "
        f"{data['duplicates']} duplicates, {data['retries']} retries",
        f"stored            {data['stored']} (distinct rows {data['distinct_rows']}; each stored once and "
        f"acknowledged or a duplicate: {check})",
        f"throughput        {data['rows_per_second']:,.0f} acknowledged reports/s over {data['seconds']:.1f} s",
        f"epsilon/device    max {data['epsilon_per_device_max']:.4g}, mean {data['epsilon_per_device_mean']:.4g} "
        "(basic composition over a device's rows)",
        f"submit latency    p50 {data['submit_latency_p50_s'] * 1e3:.0f} ms, "
        f"p99 {data['submit_latency_p99_s'] * 1e3:.0f} ms per device",
    ]
    if data["waiting_devices"]:
        lines.append(f"waiting           {data['waiting_devices']} devices, {data['waiting_reports']} reports in pools "
                     "below the shuffler's threshold (they are sent again when more devices report)")
    g = data["guarantees"]
    if g is not None and g["central"] is not None and "epsilon" not in g["central"]:
        lines.append(f"guarantees        ε0 = {g['local']['epsilon']:.4g} per report; central: "
                     f"{g['central'].get('note', 'not computed')}")
    elif g is not None and g["central"] is not None:
        c = g["central"]
        against = " and ".join(party for party in ("operator", "analysts") if c["against"][party]["central"])
        lines.append(f"guarantees        ε0 = {g['local']['epsilon']:.4g} per report against everyone; central "
                     f"(ε, δ) = ({c['epsilon']:.4g}, {c['delta']:.3g}) per device against {against or 'nobody'}"
                     f" (the pool floor: {c['min_batch'] - c['assume_injected']} honest reports of one public key, "
                     f"{c['rows_per_device']} report(s) per device; {len(g['groups'])} public-key groups stored)")
    for failure in data["failures"][:5]:
        lines.append(f"  failure: {failure}")
    text = "\n".join(lines) + "\n"
    if data["answers"]:
        covered = sum(r["covered"] for r in data["answers"])
        text += (f"\nDebiased answers from the synthetic database (WYZ eq. 17) vs the truth "
                 f"({covered}/{len(data['answers'])} intervals cover it; ± predicted: the half-width "
                 "`ldpsynth plan` gives for these rows before any device reports):\n\n"
                 + answers_table(data["answers"], level))
    elif data["withheld"]:
        text += f"\n(no answers: {data['withheld']})\n"
    elif not data["hosted_aggregator"]:
        text += ("\n(answers are shown when the remote collection holds exactly this population's rows and the "
                 "token has the query role: otherwise they would not estimate this population's truth)\n")
    return text


def write_outputs(out: Path, data: dict[str, Any], level: float) -> None:
    """summary.json, answers.csv and answers.md in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    (out / "answers.md").write_text(answers_table(data["answers"], level), encoding="utf-8")
    with open(out / "answers.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["query", "truth", "estimate", "ci_low", "ci_high", "std_error",
                                               "covered", "predicted_halfwidth", "achieved_halfwidth"])
        writer.writeheader()
        writer.writerows(data["answers"])


def web_command(args: argparse.Namespace) -> int:
    """``ldpsynth simulate --web``: the survey demo until SIGINT/SIGTERM; prints one JSON line with its URLs."""
    import signal
    import threading

    from ldpsynth.shared.validation import check_int
    from ldpsynth.simulation.web_demo import WebDemo

    check_int(args.page_port, "--page-port", 0, 65535)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    demo = WebDemo(port=args.page_port)
    try:
        urls = demo.start()
        print(json.dumps({"event": "demo", **urls}), flush=True)
        print(f"survey: {urls['survey']}\nanalyst: {urls['analyst']}\n(Ctrl-C stops)", file=sys.stderr, flush=True)
        stop.wait()
    finally:
        code = demo.stop()
    return 0 if code == 0 else 1


def collection_command(args: argparse.Namespace) -> int:
    """``ldpsynth simulate --collection FILE``: a wide, numeric or discovery collection, hosted."""
    from ldpsynth.simulation.modes.report import render as render_mode
    from ldpsynth.simulation.modes.report import write_outputs as write_mode
    from ldpsynth.simulation.modes.run import simulate_collection

    for flag, given in (("--target", args.target), ("--shuffler", args.shuffler is not None), ("--web", args.web),
                        ("--data-dir", args.data_dir is not None)):
        if given:
            raise ValidationError(flag, "not with --collection (its simulation hosts the aggregator, unshuffled)",
                                  "given")
    settings = _settings(args)
    with _named_by_flag(args):
        data = asyncio.run(simulate_collection(args.collection, args.dataset, args.devices, settings))
    sys.stdout.write(render_mode(data))
    if args.out is not None:
        write_mode(args.out, data)
    return 0 if data["delivery"]["consistent"] and data["answers"] else 1


def run_command(args: argparse.Namespace) -> int:
    """Handler of ``ldpsynth simulate``."""
    if args.collection is not None:
        return collection_command(args)
    if args.web:
        return web_command(args)
    if args.dataset in ("adult", "words"):
        raise ValidationError("--dataset", "synthetic, movielens or facebook without --collection",
                              f"{args.dataset} (its rows fit a --collection file)")
    from ldpsynth.simulation.answers import predicted
    from ldpsynth.simulation.federation import simulate

    settings = _settings(args)
    population = _population(args)
    print(f"simulating: {population.description}; epsilon {args.epsilon} per row", file=sys.stderr, flush=True)
    report = asyncio.run(simulate(population, settings))
    prediction = (None if report.answers is None or report.workload is None
                  else predicted(report.workload, population, settings.level))
    data = summary(report, prediction)
    sys.stdout.write(render(data, settings.level))
    if args.out is not None:
        write_outputs(args.out, data, settings.level)
    return 0 if not data["failures"] and data["consistent"] is not False else 1
