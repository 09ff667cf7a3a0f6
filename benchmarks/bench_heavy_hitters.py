"""Heavy hitters over strings: our prefix-extension protocol (``ldpsynth/shared/heavy_hitters``) beside pure-ldp's PEM.

Population: Debian's ``wamerican`` word list (``/usr/share/dict/american-english``; ``apt-get install -y
wamerican``), the words of lowercase a-z only (pure-ldp's fragments are over a declared alphabet), shuffled
with a fixed seed and drawn from Zipf(1.1) over that order; values are truncated to 10 characters (both
protocols: the truth is counted on the truncated strings). For each n and ε, both protocols look for the top
10 and the top 50 (a run each) over the same population; we report precision, recall, F1, the mean relative
error of the counts of the true heavy hitters found, the coverage of our counts' 95% CIs over those (pure-ldp gives no
CI), and the client and server seconds per report.

* ours: alphabet ``a-z`` (5-bit symbols, 50 bits), 20 bits in round 0 then 15 bits a round (3 rounds),
  candidates capped at min(2k, 2^21 / 2^15 - 1) so that every round's domain fits a tally of 2^21 cells
  (docs/heavy-hitters.md: the settings tried), the least-variance oracle per round (OLH here), seeded exact
  samplers; client time per report is a device's :func:`~ldpsynth.shared.heavy_hitters.device.report`
  (CSPRNG) on one value.
* pure-ldp PEM (``PEMClient``/``PEMServer``): start length 0, fragments of 2 characters (5 groups), alphabet
  ``a-z`` + its padding ``*``, with Apple's count-mean sketch (``CMSClient``/``CMSServer``, 64 hash functions,
  m = 1024) as its oracle: pure-ldp's default oracle (OLH) keeps a tally over the whole domain, 27^10 cells,
  which no machine holds. pure-ldp loops over reports in Python: at n = 10^6 it is run on a sample
  (``--peer-n``) and its client and server seconds per report are measured there; its accuracy columns are
  then at that n (said in the table).

Usage::

    python benchmarks/bench_heavy_hitters.py                 # n = 10^6 and 10^5, eps = 1, 2, 4
    python benchmarks/bench_heavy_hitters.py --n 100000 --eps 2 --no-write
    python benchmarks/bench_heavy_hitters.py --quick --out /tmp/hh   # smoke run: n = 20,000, eps = 4, top 10
    python benchmarks/bench_heavy_hitters.py --n 100000 --eps 2 --more-peers --out benchmarks/results/more_peers
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
           low: np.ndarray | None = None, high: np.ndarray | None = None) -> dict[str, float]:
    top = {v for v, _ in truth.most_common(k)}
    hits = [i for i, v in enumerate(found) if v in top]
    precision = len(hits) / len(found) if found else 0.0
    recall = len(hits) / k
    f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
    rel = float(np.mean([abs(counts[i] - truth[found[i]]) / truth[found[i]] for i in hits])) if hits else float("nan")
    cover = float("nan")
    if low is not None and high is not None and hits:
        cover = float(np.mean([low[i] <= truth[found[i]] <= high[i] for i in hits]))
    return {"precision": precision, "recall": recall, "f1": f1, "rel_error": rel, "ci_coverage": cover}


def run_ours(words, codes_of_words, ids, truncated, eps, k, rng, enc, first, step) -> dict[str, float]:
    truth = Counter(truncated[i] for i in ids)
    start = time.perf_counter()
    cap = min(2 * k, (1 << TALLY_BITS >> step) - 1)
    sim = simulate(codes_of_words[ids], enc, RoundSchedule(enc.bits, first, step), eps, rng, top_k=k, cap=cap)
    wall = time.perf_counter() - start
    r = sim.result
    out = scores(r.values, r.counts, truth, k, r.ci_low, r.ci_high)
    spec = sim.server.estimates[-1].spec                       # a device's work against the last round
    sample = [words[i] for i in ids[:2000]]
    t0 = time.perf_counter()
    for value in sample:
        report(spec, value, enc)
    out["client_ms"] = 1e3 * (time.perf_counter() - t0) / len(sample)
    out["server_us"] = 1e6 * sim.server_seconds / len(ids)
    out["wall_s"] = wall
    out["peer_n"] = len(ids)
    return out


class _Numpy1Zeros:
    """numpy with numpy 1's ``zeros(None)`` (a 0-d array): pure-ldp 1.2's server base class calls
    ``np.zeros(self.d)`` with d None for its sketch oracles, which numpy 2 refuses."""

    def __getattr__(self, name: str):
        return getattr(np, name)

    @staticmethod
    def zeros(shape, *args, **kwargs):
        return np.zeros(() if shape is None else shape, *args, **kwargs)


def run_pem(words, ids, truncated, eps, k, seed, letters, length, method: str = "PEM") -> dict[str, float]:
    """pure-ldp's ``method`` (PEM, TreeHist or SFP) with its count-mean sketch on the values ``ids``."""
    import pure_ldp.core._freq_oracle_server as base
    from pure_ldp.frequency_oracles.apple_cms import CMSClient, CMSServer
    from pure_ldp.heavy_hitters.apple_sfp.sfp_client import SFPClient
    from pure_ldp.heavy_hitters.apple_sfp.sfp_server import SFPServer
    from pure_ldp.heavy_hitters.prefix_extending import PEMClient, PEMServer
    from pure_ldp.heavy_hitters.treehistogram.treehist_client import TreeHistClient
    from pure_ldp.heavy_hitters.treehistogram.treehist_server import TreeHistServer

    base.np = _Numpy1Zeros()

    random.seed(seed)
    np.random.seed(seed % 2**32)
    server_fo = CMSServer(eps, 64, 1024)
    client_fo = CMSClient(eps, server_fo.get_hash_funcs(), 1024)
    if method == "PEM":
        alphabet = [*letters, "*"]
        client = PEMClient(eps, 0, length, 2, alphabet=alphabet, fo_client=client_fo)
        server = PEMServer(eps, 0, length, 2, alphabet=alphabet, fo_server=server_fo)
    elif method == "TreeHist":                       # its padding must stay out of its alphabet
        client = TreeHistClient(eps, 2, length, alphabet=set(letters), fo_client=client_fo)
        server = TreeHistServer(eps, length, 2, alphabet=set(letters), fo_server=server_fo)
    else:                                            # SFP: fragments of 1 (of 2: 27^2 * 256 estimates a position)
        client = SFPClient(eps, 1, length, alphabet={*letters, "*"}, fo_client=client_fo)
        server = SFPServer(eps, 1, length, alphabet={*letters, "*"}, fo_server=server_fo)
    values = [words[i][:length] for i in ids]
    t0 = time.perf_counter()
    reports = [client.privatise(v) for v in values]
    client_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for rep in reports:
        server.aggregate(rep)
    found, freqs = server.find_heavy_hitters(k=k)
    server_s = time.perf_counter() - t0
    truth = Counter(truncated[i] for i in ids)
    found = [v.split("*")[0] for v in found]
    out = scores(list(found), np.asarray(freqs, np.float64), truth, k)
    out.update(client_ms=1e3 * client_s / len(ids), server_us=1e6 * server_s / len(ids),
               wall_s=client_s + server_s, peer_n=len(ids))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, nargs="+", default=[1_000_000, 100_000])
    parser.add_argument("--eps", type=float, nargs="+", default=[2.0, 1.0, 4.0])
    parser.add_argument("--k", type=int, nargs="+", default=[10, 50])
    parser.add_argument("--peer-n", type=int, default=100_000, help="largest n pure-ldp's PEM runs at")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--urls", action="store_true", help="also synthetic URLs at n = 10^6, eps = 2")
    parser.add_argument("--url-peer-n", type=int, default=100_000, help="largest n pure-ldp's PEM runs at on URLs")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: n = 20,000, eps = 4, top 10, pure-ldp on 2,000 reports, URLs at that n and "
                             "eps (words only where the word list is installed)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder of the .md and .csv tables")
    parser.add_argument("--words-rounds", type=int, nargs=2, default=[20, 15], metavar=("FIRST", "STEP"),
                        help="the words' schedule: bits of round 0, bits a round after")
    parser.add_argument("--more-peers", action="store_true",
                        help="also pure-ldp's TreeHist (fragments of 2) and SFP (fragments of 1) on the words, with "
                             "the same sketch, at most --peer-n reports")
    args = parser.parse_args()
    url_n, url_eps = [1_000_000], [2.0]
    if args.quick:
        args.n, args.eps, args.k, args.peer_n, args.url_peer_n, args.urls = [20_000], [4.0], [10], 2_000, 2_000, True
        url_n, url_eps = args.n, args.eps

    setups = []
    if WORDS.exists():
        words = load_words(args.seed)
        print(f"{len(words):,} words (a-z only) from {WORDS}", flush=True)
        setups.append(("words", words, ALPHABET, MAX_LENGTH, *args.words_rounds, args.n, args.eps, args.peer_n))
    elif not args.quick:
        sys.exit(f"{WORDS} is missing: apt-get install -y wamerican")
    else:
        print(f"{WORDS} is missing (apt-get install -y wamerican): URLs only", flush=True)
    if args.urls:
        setups.append(("urls", synthetic_urls(args.seed), URL_ALPHABET, URL_LENGTH, 12, 12, url_n, url_eps,
                       args.url_peer_n))
    rows = []
    for name, values, letters, length, first, step, sizes, epsilons, peer_n in setups:
        enc = StringEncoding(length, letters)
        codes_of_values = enc.encode(values)
        truncated = [v[:length] for v in values]
        for n in sizes:
            for eps in epsilons:
                rng = np.random.default_rng([args.seed, n, int(eps * 100)])
                ids = population(values, n, rng)
                for k in args.k:
                    ours = run_ours(values, codes_of_values, ids, truncated, eps, k, rng, enc, first, step)
                    rows.append({"population": name, "method": "ours", "n": n, "epsilon": eps, "k": k, **ours})
                    print(f"{name} n={n:>9,} eps={eps:g} k={k:>2}  ours  F1 {ours['f1']:.2f}  "
                          f"rel.err {ours['rel_error']:.3f}  CI cover {ours['ci_coverage']:.2f}  "
                          f"client {ours['client_ms']:.3f} ms  server {ours['server_us']:.2f} us/report  "
                          f"({ours['wall_s']:.1f} s)", flush=True)
                    if args.no_peer:
                        continue
                    peer_ids = ids[:peer_n]
                    pem = run_pem(values, peer_ids, truncated, eps, k, args.seed, letters, length)
                    rows.append({"population": name, "method": "pure-ldp PEM+CMS", "n": n, "epsilon": eps, "k": k,
                                 **pem})
                    print(f"{name} n={n:>9,} eps={eps:g} k={k:>2}  PEM   F1 {pem['f1']:.2f}  "
                          f"rel.err {pem['rel_error']:.3f}  client {pem['client_ms']:.3f} ms  "
                          f"server {pem['server_us']:.2f} us/report (run at n={len(peer_ids):,}, "
                          f"{pem['wall_s']:.1f} s)", flush=True)
                    for method in ("TreeHist", "SFP") if args.more_peers and name == "words" else ():
                        other = run_pem(values, peer_ids, truncated, eps, k, args.seed, letters, length, method)
                        rows.append({"population": name, "method": f"pure-ldp {method}+CMS", "n": n, "epsilon": eps,
                                     "k": k, **other})
                        print(f"{name} n={n:>9,} eps={eps:g} k={k:>2}  {method}  F1 {other['f1']:.2f}  "
                              f"server {other['server_us']:.2f} us/report ({other['wall_s']:.1f} s)", flush=True)
    if args.no_write:
        return
    fields = ["population", "method", "n", "epsilon", "k", "peer_n", "precision", "recall", "f1", "rel_error",
              "ci_coverage", "client_ms", "server_us", "wall_s"]
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "bench_heavy_hitters.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        for row in rows:
            writer.writerow({key: (f"{row[key]:.4g}" if isinstance(row[key], float) else row[key]) for key in fields})
    lines = ["# Heavy hitters: prefix extension (ours) beside pure-ldp's PEM", "",
             f"`python benchmarks/bench_heavy_hitters.py {' '.join(sys.argv[1:])}`".replace(" `", "`"), "",
             "Zipf(1.1) over the a-z words of Debian's wamerican list, truncated to 10 characters (`words`), and over "
             "20,000 synthetic URLs truncated to 16 characters (`urls`, with `--urls`); top-k by each "
             "method. `run at n`: the reports the method actually ran on (pure-ldp at most `--peer-n`). "
             "Relative error: mean over the true top-k found. CI coverage: share of the true top-k found whose "
             "95% CI holds the true count (ours only). Server time: decoding and choosing, per report. "
             "pure-ldp's TreeHist (fragments of 2) and SFP (fragments of 1) with `--more-peers`.", "",
             "| population | method | n | ε | k | run at n | precision | recall | F1 | rel. error | CI coverage "
             "| client ms/report | server µs/report |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['population']} | {r['method']} | {r['n']:,} | {r['epsilon']:g} | {r['k']} | "
                     f"{r['peer_n']:,} | "
                     f"{r['precision']:.2f} | {r['recall']:.2f} | {r['f1']:.2f} | {r['rel_error']:.3f} | "
                     f"{r['ci_coverage']:.2f} | {r['client_ms']:.3f} | {r['server_us']:.2f} |")
    (args.out / "bench_heavy_hitters.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
