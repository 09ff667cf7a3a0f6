"""What the aggregator's operator and analysts really get behind a shuffler, before and after pools per public key.

A realistic deployment (docs/shuffle-accountant.md §6.3): 10^6 reports, one per device, over 50 public keys
whose shares follow Zipf(1.1) (share of key j ∝ j^-1.1), mechanism E at ε0 = 4 over |D| = 5, δ = 1e-9. Devices
arrive in a uniformly random order (a seeded numpy Generator: a simulation, so it says so).

* **Before** (pools of every public key together, the earlier shuffler): each pool closes at a threshold drawn
  as the shuffler draws it, T + U (T = 10^4, U uniform on {0, ..., T/4}). The operator sees each pool opened, so
  a device of key g hides among the reports of g in its own pool: the real guarantee of key g is the accountant's
  at the fewest reports of g in any pool, while the earlier rule stated the one at g's whole count.
* **After** (pools per public key, ``shuffle.min_batch`` = T, F = 1 assumed injected): the shuffler pools each key
  on its own and releases a pool at T + U of that key; every device gets the pool floor, ε(T − F), stated and real
  alike, against the operator and analysts. A key whose reports never fill a pool is not stored: its devices
  wait (the cost, counted).

For each T in {10^3, 10^4}: per key, the stated and the real central ε against the operator before, and the one
after, with the reports left waiting. Writes ``shuffle_parties.md``, ``shuffle_parties.csv`` and
``shuffle_parties.png`` to ``--out`` (default ``experiments/results/shuffle_parties``).

    python experiments/shuffle_parties.py [--reports 1000000] [--keys 50] [--seed 38] [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ldpsynth.shared.amplification import central_epsilon

RESULTS = Path(__file__).resolve().parent / "results" / "shuffle_parties"
EPSILON0, DOMAIN, DELTA, ZIPF = 4.0, 5, 1e-9, 1.1
THRESHOLDS = (1_000, 10_000)
#: Reports per pool assumed injected after the change (one device credential's quota at one row per device).
INJECTED = 1


def accountant(n: int) -> float:
    """The central ε of n reports (ε0 when n is 0 or amplifies nothing)."""
    return EPSILON0 if n < 1 else min(EPSILON0, central_epsilon(EPSILON0, DOMAIN, n, DELTA))


def zipf_keys(reports: int, keys: int, rng: np.random.Generator) -> np.ndarray:
    """The public key of each report, in arrival order: shares ∝ j^-ZIPF, shuffled uniformly."""
    shares = np.arange(1, keys + 1, dtype=float) ** -ZIPF
    counts = np.floor(reports * shares / shares.sum()).astype(np.int64)
    counts[0] += reports - counts.sum()
    return rng.permutation(np.repeat(np.arange(keys), counts))


def thresholds(floor: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` pool thresholds floor + U, U uniform on {0, ..., floor // 4} (as the shuffler draws them)."""
    return floor + rng.integers(0, floor // 4 + 1, count)


@dataclass(frozen=True)
class Before:
    """Pools of every key together: per key, its reports and the fewest of them in any pool."""

    reports: np.ndarray
    fewest_in_a_pool: np.ndarray
    pools: int


def before(arrivals: np.ndarray, keys: int, floor: int, rng: np.random.Generator) -> Before:
    cuts = np.cumsum(thresholds(floor, len(arrivals) // floor + 2, rng))
    cuts = cuts[cuts <= len(arrivals)]
    fewest = np.full(keys, np.iinfo(np.int64).max)
    for start, end in zip(np.concatenate([[0], cuts[:-1]]), cuts):
        per_key = np.bincount(arrivals[start:end], minlength=keys)
        fewest = np.where(per_key > 0, np.minimum(fewest, per_key), fewest)  # a pool without the key shows none
    return Before(np.bincount(arrivals, minlength=keys), np.where(fewest == np.iinfo(np.int64).max, 0, fewest),
                  len(cuts))


def after(arrivals: np.ndarray, keys: int, floor: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Pools per key: per key, the reports forwarded and those left waiting for a pool."""
    totals = np.bincount(arrivals, minlength=keys)
    forwarded = np.zeros(keys, np.int64)
    for key, total in enumerate(totals.tolist()):
        cuts = np.cumsum(thresholds(floor, total // floor + 2, rng))
        forwarded[key] = int(cuts[cuts <= total][-1]) if (cuts <= total).any() else 0
    return forwarded, totals - forwarded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reports", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=50)
    parser.add_argument("--seed", type=int, default=38)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    arrivals = zipf_keys(args.reports, args.keys, rng)
    rows, summary = [], []
    for floor in THRESHOLDS:
        old = before(arrivals, args.keys, floor, rng)
        forwarded, waiting = after(arrivals, args.keys, floor, rng)
        floor_epsilon = accountant(floor - INJECTED)
        for key in range(args.keys):
            rows.append({"T": floor, "key": key + 1, "reports": int(old.reports[key]),
                         "before_stated": accountant(int(old.reports[key])),
                         "before_fewest_in_a_pool": int(old.fewest_in_a_pool[key]),
                         "before_real": accountant(int(old.fewest_in_a_pool[key])),
                         "after_stated_and_real": floor_epsilon if forwarded[key] else None,
                         "after_forwarded": int(forwarded[key]), "after_waiting": int(waiting[key])})
            print(f"T={floor} key {key + 1}/{args.keys} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
        mine = [r for r in rows if r["T"] == floor]
        summary.append({"T": floor, "pools_before": old.pools,
                        "before_stated_weakest": max(r["before_stated"] for r in mine),
                        "before_stated_strongest": min(r["before_stated"] for r in mine),
                        "before_real_weakest": max(r["before_real"] for r in mine),
                        "before_real_strongest": min(r["before_real"] for r in mine),
                        "before_fewest_in_a_pool": min(r["before_fewest_in_a_pool"] for r in mine),
                        "after": floor_epsilon, "after_keys_stored": int((forwarded > 0).sum()),
                        "after_waiting_share": float(waiting.sum() / args.reports)})
    args.out.mkdir(parents=True, exist_ok=True)
    write(args, rows, summary, time.perf_counter() - started)
    return 0


def write(args: argparse.Namespace, rows: list[dict], summary: list[dict], seconds: float) -> None:
    with open(args.out / "shuffle_parties.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = ["# The central guarantee against the aggregator's operator, before and after pools per public key\n",
             f"`python experiments/shuffle_parties.py --reports {args.reports} --keys {args.keys} --seed {args.seed}` "
             f"({seconds:.0f} s): {args.reports:,} reports over {args.keys} public keys (Zipf({ZIPF}) shares, random "
             f"arrival order from a seeded generator), E at ε0 = {EPSILON0:g} over |D| = {DOMAIN}, δ = {DELTA:g}. "
             "Before: pools of every key together at T + U; after: pools per key at T + U (min_batch = T, "
             f"F = {INJECTED}). ε is per device; ε0 = {EPSILON0:g} means no amplification.\n",
             "| T | pools before | stated before (keys: strongest / weakest) | real before (strongest / weakest) | "
             "fewest reports of a key in a pool, before | after: stated = real, every key | keys stored after | "
             "reports waiting for a pool after |",
             "|---:|---:|---|---|---:|---:|---:|---:|"]
    for s in summary:
        lines.append(f"| {s['T']:,} | {s['pools_before']:,} | {s['before_stated_strongest']:.4g} / "
                     f"{s['before_stated_weakest']:.4g} | {s['before_real_strongest']:.4g} / "
                     f"{s['before_real_weakest']:.4g} | {s['before_fewest_in_a_pool']:,} | {s['after']:.4g} | "
                     f"{s['after_keys_stored']} of {args.keys} | {s['after_waiting_share']:.2%} |")
    lines += ["", "Per key (T = 10,000; the CSV has every row):", "",
              "| key | reports | stated before | fewest in a pool before | real before | after |",
              "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r["T"] == THRESHOLDS[-1] and (r["key"] <= 5 or r["key"] % 10 == 0):
            stated = r["after_stated_and_real"]
            after_text = "waits (no pool)" if stated is None else f"{stated:.4g}"
            lines.append(f"| {r['key']} | {r['reports']:,} | {r['before_stated']:.4g} | "
                         f"{r['before_fewest_in_a_pool']:,} | {r['before_real']:.4g} | {after_text} |")
    (args.out / "shuffle_parties.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    plot(args, rows)


def plot(args: argparse.Namespace, rows: list[dict]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(THRESHOLDS), figsize=(11, 4), sharey=True)
    for axis, floor in zip(axes, THRESHOLDS):
        mine = [r for r in rows if r["T"] == floor]
        keys = [r["key"] for r in mine]
        axis.plot(keys, [r["before_stated"] for r in mine], "o-", label="before: stated (whole group)")
        axis.plot(keys, [r["before_real"] for r in mine], "s-", label="before: real (fewest in a pool)")
        axis.plot(keys, [r["after_stated_and_real"] if r["after_stated_and_real"] is not None else np.nan
                         for r in mine], "^-", label="after: stated = real (pool floor)")
        axis.set_title(f"T = {floor:,}")
        axis.set_xlabel("public key (by share, Zipf 1.1)")
        axis.set_yscale("log")
    axes[0].set_ylabel("central ε per device against the operator")
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(args.out / "shuffle_parties.png", dpi=120)


if __name__ == "__main__":
    sys.exit(main())
