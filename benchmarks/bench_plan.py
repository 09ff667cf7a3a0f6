"""Speed of the planner (``ldpsynth plan``, issue 20) beside bare baselines, in the same run.

* **2^20 linear queries** (|D| = 5, mean normalisation, 100,000 rows) through
  ``shared.planning.plan``: worst case only, then with a uniform prior, a target half-width (the
  inverse questions) and every schema change. Baseline: the least any planner must do, one bare numpy
  pass computing each query's centred squares and their sum and maximum over D. Goal: "2^20 queries
  plan in seconds" (we read it as < 5 s with everything).
* **The user guide's example** (``docs/plan/ratings.json``, ``docs/plan/queries.json``, prior uniform,
  a target half-width): the wall time of the ``ldpsynth plan`` command, beside the start-up of a
  Python interpreter that imports numpy. Goal: under a second.

Prints a Markdown table and writes ``plan.md`` and ``plan.csv`` to ``--out`` (default
``benchmarks/results``). ``--quick``: 2^14 queries, one repeat, goals not checked (the CI smoke
test). Exit status 1 when a goal is missed (not with ``--quick``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from machine import machine_info  # benchmarks/machine.py (scripts run from this folder)
from ratio_table import goal_met, write_ratio_table  # benchmarks/ratio_table.py

from ldpsynth.shared.planning.planner import plan
from ldpsynth.shared.planning.row_distribution import UniformRows
from ldpsynth.shared.planning.schema_changes import schema_changes
from ldpsynth.shared.queries import linear_batch
from ldpsynth.shared.schema import Schema

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
GOAL_BATCH_SECONDS = 5.0
GOAL_COMMAND_SECONDS = 1.0
COMMAND = ["plan", "--collection", "docs/plan/ratings.json", "--devices", "100000", "--queries",
           "docs/plan/queries.json", "--prior-uniform", "--target-halfwidth", "0.01"]


def timed(function, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def bare_pass(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    centred = weights - weights.mean(axis=1, keepdims=True)
    np.square(centred, out=centred)
    return centred.sum(axis=1), centred.max(axis=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, goals not checked (CI smoke test)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats (minimum kept; default 3)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where plan.md/csv go")
    args = parser.parse_args(argv)
    info = machine_info()
    repeats = 1 if args.quick else args.repeats
    size = 1 << 14 if args.quick else 1 << 20
    schema = Schema.load(ROOT / "docs" / "plan" / "ratings.json")
    weights = np.random.default_rng(2026).random((size, 5))
    batch = linear_batch(schema, weights, normalization="mean")
    changes = schema_changes(schema)
    bare = timed(lambda: bare_pass(weights), repeats)
    worst = timed(lambda: plan(schema, batch, 100_000), repeats)
    full = timed(lambda: plan(schema, batch, 100_000, prior=UniformRows(schema), target_halfwidth=0.01,
                              changes=changes), repeats)
    command = [sys.executable, "-m", "ldpsynth.cli", *COMMAND]
    cli = timed(lambda: subprocess.run(command, cwd=ROOT, check=True, capture_output=True), repeats)
    floor = timed(lambda: subprocess.run([sys.executable, "-c", "import numpy"], check=True), repeats)
    label = f"{size:,} linear queries, k = 5"
    check = not args.quick
    rows = [
        {"operation": "plan, worst case only", "size": label, "seconds": worst, "baseline_seconds": bare,
         "goal": "", "met": ""},
        {"operation": "plan, prior + target half-width + 2 schema changes", "size": label, "seconds": full,
         "baseline_seconds": bare, "goal": f"< {GOAL_BATCH_SECONDS:g} s",
         "met": goal_met(full, GOAL_BATCH_SECONDS, check)},
        {"operation": "ldpsynth plan, user guide example (wall, incl. start-up)", "size": "3 queries (7 compiled)",
         "seconds": cli, "baseline_seconds": floor, "goal": f"< {GOAL_COMMAND_SECONDS:g} s",
         "met": goal_met(cli, GOAL_COMMAND_SECONDS, check)},
    ]
    return write_ratio_table(args.out, "plan", "Planner benchmark", info,
                             "minimum over repeats; baselines: one bare numpy pass over the weights (centred squares, "
                             "their sum and maximum), and `python -c 'import numpy'` for the command", args.quick, rows)


if __name__ == "__main__":
    sys.exit(main())
