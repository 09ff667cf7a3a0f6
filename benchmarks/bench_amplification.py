"""Speed and values of the shuffle accountant (``shared/amplification.py``).

For n = 10^4 ... 10^9 shuffled reports and local ε0 = 1, 2, 4, 8 (k = 8,410, δ = 1e-9): the time
of one ``central_epsilon`` call (default bound, the exact privacy blanket; minimum over repeats)
and its ε, beside the lower bound (``central_epsilon_lower_bound``: the variation-ratio formula,
what the issue's reference numbers compute) and FMT21's numerical bound. Goal (issue): at most
one second per call for any n <= 10^9.

Prints a Markdown table and writes ``amplification.md`` and ``amplification.csv`` to ``--out``
(default ``benchmarks/results``). ``--quick``: n up to 10^6, one repeat, goal not checked (the
CI smoke test). Exit status 1 when the goal is missed (not with ``--quick``).
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

from machine import machine_info  # benchmarks/machine.py (scripts run from this folder)

from ldpsynth.shared.amplification import central_epsilon, central_epsilon_lower_bound

RESULTS = Path(__file__).resolve().parent / "results"
GOAL_SECONDS = 1.0
DOMAIN = 8_410
DELTA = 1e-9
EPS0 = (1.0, 2.0, 4.0, 8.0)
FIELDS = ["n", "epsilon0", "epsilon", "seconds", "lower_bound", "fmt21_numerical", "goal", "met"]


def timed(function, repeats: int) -> tuple[float, float]:
    """(the value, the minimum time over ``repeats`` calls)."""
    best, value = float("inf"), 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        value = function()
        best = min(best, time.perf_counter() - start)
    return value, best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="n up to 10^6, goal not checked (CI smoke test)")
    parser.add_argument("--repeats", type=int, default=3, help="repeats (minimum kept; default 3)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where amplification.md/csv go")
    args = parser.parse_args(argv)
    info = machine_info()
    repeats = 1 if args.quick else args.repeats
    sizes = [10**4, 10**5, 10**6] if args.quick else [10**4, 10**5, 10**6, 10**7, 10**8, 10**9]
    check = not args.quick
    rows: list[dict[str, object]] = []
    for n in sizes:
        for eps0 in EPS0:
            eps, seconds = timed(lambda e=eps0, m=n: central_epsilon(e, DOMAIN, m, DELTA), repeats)
            rows.append({"n": n, "epsilon0": eps0, "epsilon": eps, "seconds": seconds,
                         "lower_bound": central_epsilon_lower_bound(eps0, DOMAIN, n, DELTA),
                         "fmt21_numerical": central_epsilon(eps0, DOMAIN, n, DELTA, bound="fmt21-numerical"),
                         "goal": f"<= {GOAL_SECONDS:g} s",
                         "met": "" if not check else ("yes" if seconds <= GOAL_SECONDS else "NO")})
    lines = ["# Shuffle accountant benchmark", "", *[f"- {k}: {v}" for k, v in info.items()],
             f"- times: one `central_epsilon` call (bound \"blanket\"), minimum over {repeats} repeat(s); "
             f"k = {DOMAIN:,}, delta = {DELTA:g}",
             "- lower bound: `central_epsilon_lower_bound` (the variation-ratio formula, WPLWLYWY24 Thm 4.8); "
             "fmt21: FMT21's numerical bound (ignores k)",
             "- quick run: sizes reduced, goal not checked" if args.quick else "", "",
             "| n | eps0 | eps (blanket) | time (s) | lower bound | fmt21 numerical | goal | met |",
             "|---:|---:|---:|---:|---:|---:|---|---|"]
    for row in rows:
        lines.append(f"| {row['n']:.0e} | {row['epsilon0']:g} | {row['epsilon']:.6g} | {row['seconds']:.3f} | "
                     f"{row['lower_bound']:.6g} | {row['fmt21_numerical']:.4g} | {row['goal']} | {row['met']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "amplification.md").write_text(text, encoding="utf-8")
    with open(args.out / "amplification.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return 0 if all(row["met"] != "NO" for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
