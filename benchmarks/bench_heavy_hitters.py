"""Heavy hitters over strings: our prefix-extension protocol (``ldpsynth/shared/heavy_hitters``) beside pure-ldp's PEM,
TreeHist and SFP.

Population: Debian's ``wamerican`` word list (``/usr/share/dict/american-english``; ``apt-get install -y
wamerican``), the words of lowercase a-z only (pure-ldp's fragments are over a declared alphabet), shuffled
with a fixed seed and drawn from Zipf(1.1) over that order; values are truncated to 10 characters (both
protocols: the truth is counted on the truncated strings). For each n and ε, every protocol looks for the top
10 and the top 50 over the same population; we report precision, recall, F1, the mean relative
error of the counts of the true heavy hitters found, the coverage of our counts' 95% CIs over those (pure-ldp gives no
CI), and the client and server seconds per report (ours: the least of ``--repeats`` (3) timings of the server
decoding the same reports; a peer's: one run, as it takes seconds).

* ours: alphabet ``a-z`` (5-bit symbols, 50 bits), 20 bits in round 0 then 15 bits a round (3 rounds),
  candidates capped at min(2k, 2^21 / 2^15 - 1) so that every round's domain fits a tally of 2^21 cells
  (docs/heavy-hitters.md: the settings tried), the least-variance oracle per round (OLH here), seeded exact
  samplers; client time per report is a device's :func:`~ldpsynth.shared.heavy_hitters.device.report`
  (CSPRNG) on one value.
* pure-ldp's PEM, TreeHist and SFP (``hh_peers.py``: their parameters and what is timed), each with Apple's
  count-mean sketch (64 hash functions, m = 1024). pure-ldp loops over reports in Python: each peer runs on at
  most ``--peer-n`` / ``--treehist-n`` / ``--sfp-n`` of the reports (its accuracy columns are then at that n, said
  in the table), its top 10 and top 50 found from the same reports; its server time per report is also given at n
  (aggregating grows with the reports, finding does not).

Usage::

    python benchmarks/bench_heavy_hitters.py                 # n = 10^6 and 10^5, eps = 1, 2, 4
    python benchmarks/bench_heavy_hitters.py --n 100000 --eps 2 --no-write
    python benchmarks/bench_heavy_hitters.py --quick --out /tmp/hh   # smoke run: n = 20,000, eps = 4, top 10
    python benchmarks/bench_heavy_hitters.py --n 1000000 100000 --eps 2 --out benchmarks/results/hh_peers
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
from hh_peers import PEERS, PureLdpPeer  # benchmarks/hh_peers.py (scripts run from this folder)
from machine import machine_info  # benchmarks/machine.py

from ldpsynth.shared.heavy_hitters.device import report
from ldpsynth.shared.heavy_hitters.encoding import StringEncoding
from ldpsynth.shared.heavy_hitters.rounds import RoundSchedule
from ldpsynth.shared.heavy_hitters.simulate import simulate

WORDS = Path("/usr/share/dict/american-english")
ALPHABET = "abcdefghijklmnopqrstuvwxyz"
MAX_LENGTH = 10
URL_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789./-"
URL_LENGTH = 16
RESULTS = Path(__file__).parent / "results"
#: Every round's domain (candidates x 2^step + 1) within 2^TALLY_BITS cells: OLH's tally stays 16 MB.
TALLY_BITS = 21
Z95 = 1.959963984540054


def load_words(seed: int) -> list[str]:
    words = sorted({w.strip() for w in WORDS.read_text().splitlines()
                    if w.strip() and all(ch in ALPHABET for ch in w.strip())})
    random.Random(seed).shuffle(words)
    return words


def synthetic_urls(seed: int, count: int = 20_000) -> list[str]:
    """``count`` distinct URLs ``host.tld/path`` over URL_ALPHABET: 2,000 hosts (4-9 letters), 3 top-level
    domains, paths of 1-8 characters; shuffled (their Zipf ranks are random, hosts share prefixes)."""
    rng = random.Random(seed)
    letters, path_chars = "abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz0123456789-"
    hosts = ["".join(rng.choices(letters, k=rng.randint(4, 9))) + rng.choice([".com", ".org", ".io"])
             for _ in range(2_000)]
    urls: set[str] = set()
    while len(urls) < count:
        urls.add(rng.choice(hosts) + "/" + "".join(rng.choices(path_chars, k=rng.randint(1, 8))))
    out = sorted(urls)
    rng.shuffle(out)
    return out


def population(words: list[str], n: int, rng: np.random.Generator) -> np.ndarray:
    weights = np.arange(1, len(words) + 1, dtype=np.float64) ** -1.1
    return rng.choice(len(words), n, p=weights / weights.sum())


def scores(found: list[str], counts: np.ndarray, truth: Counter, k: int,
           low: np.ndarray | None = None, high: np.ndarray | None = None) -> dict:
    """Precision, recall, F1 of ``found`` against the true top k; the mean relative error of the counts of the
    true top k found; with intervals, their coverage over those, and each one's z = (count - truth) / se
    (se = half-width / 1.96), to pool over runs."""
    top = {v for v, _ in truth.most_common(k)}
    hits = [i for i, v in enumerate(found) if v in top]
    precision = len(hits) / len(found) if found else 0.0
    recall = len(hits) / k
    f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
    rel = float(np.mean([abs(counts[i] - truth[found[i]]) / truth[found[i]] for i in hits])) if hits else float("nan")
    cover, covered, z = float("nan"), 0, []
    if low is not None and high is not None and hits:
        covered = sum(int(low[i] <= truth[found[i]] <= high[i]) for i in hits)
        cover = covered / len(hits)
        z = [float((counts[i] - truth[found[i]]) / ((high[i] - low[i]) / (2 * Z95))) for i in hits]
    return {"precision": precision, "recall": recall, "f1": f1, "rel_error": rel, "ci_coverage": cover,
            "ci_hits": len(hits) if low is not None else 0, "ci_covered": covered, "z": z}


def run_ours(words, codes_of_words, ids, truncated, eps, k, rng, enc, first, step, repeats) -> dict[str, float]:
    truth = Counter(truncated[i] for i in ids)
    start = time.perf_counter()
    cap = min(2 * k, (1 << TALLY_BITS >> step) - 1)
    sim = simulate(codes_of_words[ids], enc, RoundSchedule(enc.bits, first, step), eps, rng, top_k=k, cap=cap,
                   server_repeats=repeats)
    wall = time.perf_counter() - start
    r = sim.result
    out = scores(r.values, r.counts, truth, k, r.ci_low, r.ci_high)
    spec = sim.server.estimates[-1].spec                       # a device's work against the last round
    sample = [words[i] for i in ids[:2000]]
    t0 = time.perf_counter()
    for value in sample:
        report(spec, value, enc)
    out["client_ms"] = 1e3 * (time.perf_counter() - t0) / len(sample)
    out["server_us"] = out["server_us_at_n"] = 1e6 * sim.server_seconds / len(ids)
    out["wall_s"] = wall
    out["peer_n"] = len(ids)
    return out


def run_peer(peer: PureLdpPeer, k: int, width: int, n: int, truth: Counter) -> dict[str, float]:
    """Score a peer's top k (its reports already collected; ``width`` candidates a level). ``server_us``:
    aggregating and finding over the reports it ran on, per report; ``server_us_at_n``: the same at ``n`` reports
    (aggregating grows with the reports, finding does not), the one to compare with ours when the peer ran on
    fewer."""
    answer = peer.top_k(k, width)
    out = scores(answer.values, answer.counts, truth, k)
    out.update(client_ms=1e3 * answer.client_seconds / answer.n,
               server_us=1e6 * (answer.aggregate_seconds + answer.find_seconds) / answer.n,
               server_us_at_n=1e6 * (answer.aggregate_seconds / answer.n + answer.find_seconds / n),
               aggregate_us=1e6 * answer.aggregate_seconds / answer.n, find_s=answer.find_seconds,
               wall_s=answer.client_seconds + answer.aggregate_seconds + answer.find_seconds, peer_n=answer.n)
    return out


def pooled(rows: list[dict], k: int | None = None) -> tuple[int, int, float, float]:
    """Our intervals pooled over runs (all, or those of top k): covered, total, mean z and sd of z."""
    mine = [r for r in rows if r["method"] == "ours" and (k is None or r["k"] == k)]
    z = np.array([v for r in mine for v in r["z"]])
    return (sum(r["ci_covered"] for r in mine), sum(r["ci_hits"] for r in mine),
            float(z.mean()) if z.size else float("nan"), float(z.std(ddof=1)) if z.size > 1 else float("nan"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, nargs="+", default=[1_000_000, 100_000])
    parser.add_argument("--eps", type=float, nargs="+", default=[2.0, 1.0, 4.0])
    parser.add_argument("--k", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--peers", nargs="*", choices=PEERS, default=list(PEERS),
                        help="pure-ldp's protocols to run beside ours (none: ours only)")
    parser.add_argument("--peer-n", type=int, default=100_000, help="largest n pure-ldp's PEM runs at")
    parser.add_argument("--treehist-n", type=int, default=100_000, help="largest n pure-ldp's TreeHist runs at")
    parser.add_argument("--sfp-n", type=int, default=50_000, help="largest n pure-ldp's SFP runs at")
    parser.add_argument("--peer-width", type=int, default=2,
                        help="a peer keeps this many times k candidates at each level, then answers the k largest")
    parser.add_argument("--seed", type=int, nargs="+", default=[2026],
                        help="one run of every cell per seed (word order, population, draws)")
    parser.add_argument("--no-peer", action="store_true", help="ours only (as --peers with no name)")
    parser.add_argument("--urls", action="store_true",
                        help="also synthetic URLs at n = 10^6, eps = 2 (of the peers, PEM; TreeHist and SFP with "
                             "--url-treehist-n, --url-sfp-n)")
    parser.add_argument("--urls-only", action="store_true",
                        help="the URLs alone, at every --n and --eps (without it the URLs run at n = 10^6, eps = 2)")
    parser.add_argument("--url-peer-n", type=int, default=100_000, help="largest n pure-ldp's PEM runs at on URLs")
    parser.add_argument("--url-treehist-n", type=int, default=0,
                        help="largest n pure-ldp's TreeHist runs at on URLs (default 0: not run; slow in Python)")
    parser.add_argument("--url-sfp-n", type=int, default=0,
                        help="largest n pure-ldp's SFP runs at on URLs (default 0: not run; slow in Python)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="our server's decoding is timed this many times on the same reports; the least is kept")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: n = 20,000, eps = 4, top 10, PEM only of the peers on 2,000 reports, URLs at "
                             "that n and eps (words only where the word list is installed)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder of the .md and .csv tables")
    parser.add_argument("--words-rounds", type=int, nargs=2, default=[20, 15], metavar=("FIRST", "STEP"),
                        help="the words' schedule: bits of round 0, bits a round after")
    args = parser.parse_args()
    info = machine_info()
    url_n, url_eps = ([1_000_000], [2.0]) if not args.urls_only else (args.n, args.eps)
    if args.quick:
        args.n, args.eps, args.k, args.url_peer_n, args.urls = [20_000], [4.0], [10], 2_000, True
        args.peers, args.peer_n = ["PEM"], 2_000
        url_n, url_eps = args.n, args.eps
    peers = [] if args.no_peer else [p for p in PEERS if p in args.peers]
    caps = {"PEM": args.peer_n, "TreeHist": args.treehist_n, "SFP": args.sfp_n}
    url_caps = {"PEM": args.url_peer_n, "TreeHist": args.url_treehist_n, "SFP": args.url_sfp_n}

    if not WORDS.exists() and not args.quick:
        sys.exit(f"{WORDS} is missing: apt-get install -y wamerican")
    if not WORDS.exists():
        print(f"{WORDS} is missing (apt-get install -y wamerican): URLs only", flush=True)
    setups = []
    for seed in args.seed:
        if WORDS.exists() and not args.urls_only:
            setups.append((seed, "words", load_words(seed), ALPHABET, MAX_LENGTH, *args.words_rounds, args.n,
                           args.eps, peers, caps))
        if args.urls or args.urls_only:
            setups.append((seed, "urls", synthetic_urls(seed), URL_ALPHABET, URL_LENGTH, 12, 12, url_n, url_eps,
                           [p for p in peers if p == "PEM" or url_caps[p] > 0], url_caps))
    rows = []
    started = time.perf_counter()
    for seed, name, values, letters, length, first, step, sizes, epsilons, methods, limits in setups:
        enc = StringEncoding(length, letters)
        codes_of_values = enc.encode(values)
        truncated = [v[:length] for v in values]
        for n in sizes:
            for eps in epsilons:
                rng = np.random.default_rng([seed, n, int(eps * 100)])
                ids = population(values, n, rng)
                cell = f"seed {seed} {name} n={n:>9,} eps={eps:g}"
                for k in args.k:
                    ours = run_ours(values, codes_of_values, ids, truncated, eps, k, rng, enc, first, step,
                                    args.repeats)
                    rows.append({"seed": seed, "population": name, "method": "ours", "n": n, "epsilon": eps, "k": k,
                                 **ours})
                    print(f"{cell} k={k:>2}  ours  F1 {ours['f1']:.2f}  rel.err {ours['rel_error']:.3f}  CI cover "
                          f"{ours['ci_coverage']:.2f}  client {ours['client_ms']:.3f} ms  server "
                          f"{ours['server_us']:.2f} us/report  ({ours['wall_s']:.1f} s; "
                          f"{time.perf_counter() - started:.0f} s in all)", flush=True)
                for method in methods:
                    peer_ids = ids[:limits[method]]
                    peer = PureLdpPeer(method, eps, letters, length, seed)
                    for lo in range(0, len(peer_ids), 200_000):
                        peer.collect([values[i] for i in peer_ids[lo:lo + 200_000]])
                        print(f"{cell}  {method}  {peer.n:,} of {len(peer_ids):,} reports collected "
                              f"({time.perf_counter() - started:.0f} s in all)", flush=True)
                    truth = Counter(truncated[i] for i in peer_ids)
                    for k in args.k:
                        got = run_peer(peer, k, args.peer_width * k, n, truth)
                        rows.append({"seed": seed, "population": name, "method": f"pure-ldp {method}+CMS", "n": n,
                                     "epsilon": eps, "k": k, **got})
                        print(f"{cell} k={k:>2}  {method}  F1 {got['f1']:.2f}  rel.err {got['rel_error']:.3f}  "
                              f"client {got['client_ms']:.3f} ms  server {got['server_us']:.2f} us/report "
                              f"({got['server_us_at_n']:.2f} at n; run at n={len(peer_ids):,}, find "
                              f"{got['find_s']:.1f} s; {time.perf_counter() - started:.0f} s in all)", flush=True)
    if args.no_write:
        return
    order = {m: i for i, m in enumerate(["ours", *(f"pure-ldp {p}+CMS" for p in PEERS)])}
    rows.sort(key=lambda r: (r["seed"], r["population"] != "words", -r["n"], args.eps.index(r["epsilon"])
                             if r["epsilon"] in args.eps else 0, r["k"], order[r["method"]]))
    write_tables(args.out, rows, info, caps, args.peer_width, args.repeats)


def write_tables(out: Path, rows: list[dict], info: dict[str, str], caps: dict[str, int], width: int,
                 repeats: int) -> None:
    fields = ["seed", "population", "method", "n", "epsilon", "k", "peer_n", "precision", "recall", "f1", "rel_error",
              "ci_coverage", "ci_hits", "ci_covered", "client_ms", "server_us", "server_us_at_n", "aggregate_us",
              "find_s", "wall_s"]
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "bench_heavy_hitters.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({key: (f"{row.get(key, float('nan')):.4g}" if isinstance(row.get(key, float("nan")),
                                                                                    float) else row[key])
                             for key in fields})
    lines = ["# Heavy hitters: prefix extension (ours) beside pure-ldp's PEM, TreeHist and SFP", "",
             *(f"- {key}: {value}" for key, value in info.items()), "",
             "Zipf(1.1) over the a-z words of Debian's wamerican list, truncated to 10 characters (`words`), and over "
             "20,000 synthetic URLs truncated to 16 characters (`urls`, with `--urls`; of the peers, PEM, and TreeHist "
             "and SFP when `--url-treehist-n`, `--url-sfp-n` are given); top-k "
             "by each method. Peers (`benchmarks/hh_peers.py`): pure-ldp 1.2's own classes, each with the count-mean "
             "sketch (64 hashes, m = 1024); PEM fragments of 2 characters from length 0; TreeHist fragments of 2 "
             "(ε/2 prefix, ε/2 string); SFP fragments of 1 with its 256-value hash (ε/2 fragment, ε/2 string); `*` "
             f"pads every string and is in every alphabet; each keeps {width}k candidates a level (`--peer-width`) and "
             "answers the k with the largest counts. `run at n`: the reports the method actually ran on (the "
             f"peers at most `--peer-n` {caps.get('PEM', 0):,} PEM, `--treehist-n` {caps.get('TreeHist', 0):,}, "
             f"`--sfp-n` {caps.get('SFP', 0):,}); a peer's accuracy columns are at that n, and each peer's reports "
             "are shared by its top 10 and top 50.", "",
             "Relative error: mean over the true top-k found. CI coverage: share of the true top-k found whose 95% CI "
             "holds the true count (ours only; pure-ldp gives no CI). Client: a device's randomizing, per report "
             "(ours: `report` on the CSPRNG over 2,000 values; peers: `privatise` over every report). Server: from "
             "the reports in memory to the top k with counts, per report: ours, every round's tally, decoding and "
             "candidate choice (`simulate`'s `server_seconds`), the least of "
             f"{repeats} decodings of the same reports (`--repeats`; each by a new server, same answer: the machine's "
             "other load only adds time); a peer, `aggregate` of every report plus `find_heavy_hitters(k)`, timed "
             "once (they take seconds: one run, so a peer's time is not the least of several and may include "
             "load). `server µs at n`: a peer's aggregating per report plus its finding (which does "
             "not grow with the reports) spread over n, i.e. extrapolated to n when it ran on fewer.", "",
             "| seed | population | method | n | ε | k | run at n | precision | recall | F1 | rel. error | CI coverage "
             "| client ms/report | server µs/report | server µs/report at n |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['seed']} | {r['population']} | {r['method']} | {r['n']:,} | {r['epsilon']:g} | {r['k']} | "
                     f"{r['peer_n']:,} | {r['precision']:.2f} | {r['recall']:.2f} | {r['f1']:.2f} | "
                     f"{r['rel_error']:.3f} | {r['ci_coverage']:.2f} | {r['client_ms']:.3f} | {r['server_us']:.2f} | "
                     f"{r['server_us_at_n']:.2f} |")
    lines += ["", "**Our 95% CIs pooled over the runs** (z = (count − truth)/se over the true top-k found):", "",
              "| runs | covered / intervals | coverage | mean z | sd z |", "|---|---|---|---|---|"]
    for label, k in (("all", None), *((f"top {k}", k) for k in sorted({r["k"] for r in rows}))):
        covered, total, zmean, zsd = pooled(rows, k)
        if total:
            lines.append(f"| {label} | {covered} / {total} | {covered / total:.3f} | {zmean:+.2f} | {zsd:.2f} |")
    lines += ["", "**Server time, a peer's at n over ours** (× faster):", "",
              "| seed | population | n | ε | k | " + " | ".join(p for p in PEERS) + " |",
              "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["method"] != "ours":
            continue
        same = {x["method"]: x for x in rows if x["method"] != "ours" and
                (x["seed"], x["population"], x["n"], x["epsilon"], x["k"]) ==
                (r["seed"], r["population"], r["n"], r["epsilon"], r["k"])}
        ratios = [f"{same[f'pure-ldp {p}+CMS']['server_us_at_n'] / r['server_us']:.0f}"
                  if f"pure-ldp {p}+CMS" in same else "" for p in PEERS]
        if any(ratios):
            lines.append(f"| {r['seed']} | {r['population']} | {r['n']:,} | {r['epsilon']:g} | {r['k']} | "
                         + " | ".join(ratios) + " |")
    (out / "bench_heavy_hitters.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
