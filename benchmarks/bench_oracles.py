"""The frequency oracles of ``shared/mechanisms`` (OUE, OLH, HR, SS) beside pure-ldp and multi-freq-ldpy.

Four tables, all measured in the same run and written to ``oracles.md`` / ``oracles.csv``:

1. **Speed** at n = 10^6 reports for k = 2^6 ... 2^16 (epsilon = 1, uniform codes): ours (``perturb``, the
   seeded exact sampler; ``perturb_secure``, the device's; decoding = statistics + support counts +
   unbiased counts) beside the peers' clients and servers on the same mechanism (pure-ldp ``UE``,
   ``LH``, ``HadamardMech`` with one coefficient, ``HadamardResponse``; multi-freq-ldpy ``UE``,
   ``LH``, ``SS``). The peers loop over reports in Python: each operation is timed on one report (its
   fixed cost, e.g. a transform or a loop over the domain) and on n reports, n grown until the time above
   the fixed cost reaches 0.25 s (or a run 4 s), and extrapolated to 10^6 as fixed + 10^6 x per-report.
   Ours run at 10^6 except the bitmap oracles (OUE, SS) at large k, which run on 2^28/k reports and are
   scaled linearly (their cost is n k bits). Goals: decoding
   >= 30x faster than the faster peer; HR's decoding within 2x of a bare ``np.bincount`` of the reports
   into 2K bins plus one bare Walsh-Hadamard transform of size K.
2. **Bytes per report** of each oracle's compact report (and of E's code).
3. **Error on MovieLens-100K** with the (movie, rating) pair private (|D| = 1,682 x 5 = 8,410,
   n = 100,000 ratings): E (WYZ eq. 16) against each oracle at epsilon = 1, 2, 4; the RMSE of the
   8,410 cell counts, of the 1,682 movie counts and of the 5 rating counts, beside the RMSE the closed-form
   variance predicts. Skipped, with a message, where the data set is absent (``../shared/data``).
4. **Choices**: OLH's hash family (ours against a prime-field linear hash and a fixed pool of random hash
   functions) and HR's variant (the Hadamard mechanism against Acharya-Sun-Zhang's Hadamard response),
   by measured variance, bias and decoding time.

Usage::

    python benchmarks/bench_oracles.py            # full run (about 8 minutes on 2 cores); exit 1 if a goal is missed
    python benchmarks/bench_oracles.py --quick    # small sizes, goals not checked (CI smoke test)
"""

from __future__ import annotations

import argparse
import csv
import gc
import gzip
import math
import random
import sys
import time
import warnings
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import numpy as np
from machine import machine_info  # benchmarks/machine.py (scripts run from this folder)
from multi_freq_ldpy.pure_frequency_oracles.LH import LH_Aggregator_MI, LH_Client
from multi_freq_ldpy.pure_frequency_oracles.SS import SS_Aggregator_MI, SS_Client
from multi_freq_ldpy.pure_frequency_oracles.UE import UE_Aggregator_MI, UE_Client
from pure_ldp.frequency_oracles.hadamard_mechanism import HadamardMechClient, HadamardMechServer
from pure_ldp.frequency_oracles.hadamard_response import HadamardResponseClient, HadamardResponseServer
from pure_ldp.frequency_oracles.local_hashing import LHClient, LHServer
from pure_ldp.frequency_oracles.unary_encoding import UEClient, UEServer

from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms import (
    OLH,
    OUE,
    FrequencyOracle,
    HadamardResponse,
    PureProtocol,
    SubsetSelection,
    bit_kernel,
)
from ldpsynth.simulation.datasets import MOVIELENS_FILE, DatasetNotFound, dataset_path

RESULTS = Path(__file__).resolve().parent / "results"
EPSILON = 1.0
N = 10**6
BITMAP_CELLS = 1 << 28
PEER_SECONDS = 0.25
DECODE_GOAL = 30.0
HR_GOAL = 2.0
ORACLES: list[type[FrequencyOracle]] = [OUE, OLH, HadamardResponse, SubsetSelection]


def identity(v: int) -> int:
    return v


# ----- timing ------------------------------------------------------------------------------------------
def timed(function: Callable[..., object], *args: object, repeats: int = 1) -> tuple[float, object]:
    """The least seconds of ``repeats`` calls of ``function(*args)``, and the last result."""
    best, result = math.inf, None
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        result = function(*args)
        best = min(best, time.perf_counter() - start)
    return best, result


class Peer:
    """A peer library's client and server for one mechanism: ``perturb(codes) -> reports``, ``decode(reports)``."""

    def __init__(self, label: str, perturb: Callable[[list[int]], list], decode: Callable[[list], object]):
        self.label, self.perturb, self.decode = label, perturb, decode


def peers_of(name: str, k: int, eps: float) -> list[Peer]:
    """The peers that implement oracle ``name`` (see the module docstring)."""
    if name == "OUE":
        def pure_ue(codes: list[int]) -> list:
            client = UEClient(eps, k, use_oue=True, index_mapper=identity)
            return [client.privatise(v) for v in codes]

        def pure_ue_decode(reports: list) -> object:
            server = UEServer(eps, k, use_oue=True, index_mapper=identity)
            server.aggregate_all(reports)
            return server.estimate_all(range(k), suppress_warnings=True)

        return [Peer("pure-ldp UE (OUE)", pure_ue, pure_ue_decode),
                Peer("multi-freq-ldpy UE (OUE)", lambda codes: [UE_Client(v, k, eps) for v in codes],
                     lambda reports: UE_Aggregator_MI(reports, eps))]
    if name == "OLH":
        def pure_lh(codes: list[int]) -> list:
            client = LHClient(eps, k, use_olh=True, index_mapper=identity)
            return [client.privatise(v) for v in codes]

        def pure_lh_decode(reports: list) -> object:
            server = LHServer(eps, k, use_olh=True, index_mapper=identity)
            server.aggregate_all(reports)
            return server.estimate_all(range(k), suppress_warnings=True)

        return [Peer("pure-ldp LH (OLH)", pure_lh, pure_lh_decode),
                Peer("multi-freq-ldpy LH (OLH)", lambda codes: [LH_Client(v, k, eps) for v in codes],
                     lambda reports: LH_Aggregator_MI(reports, k, eps))]
    if name == "HR":
        def pure_hm(codes: list[int]) -> list:
            client = HadamardMechClient(eps, k, 1, index_mapper=identity)
            return [list(client.privatise(v)) for v in codes]

        def pure_hm_decode(reports: list) -> object:
            server = HadamardMechServer(eps, k, 1, index_mapper=identity)
            server.aggregate_all(reports)
            return server.estimate_all(range(k), suppress_warnings=True)

        hr_server = HadamardResponseServer(eps, k, index_mapper=identity)
        hr_client = HadamardResponseClient(eps, k, hr_server.get_hash_funcs(), index_mapper=identity)

        def pure_hr_decode(reports: list) -> object:
            hr_server.reset()
            hr_server.aggregate_all(reports)
            return hr_server.estimate_all(range(k), suppress_warnings=True)

        return [Peer("pure-ldp HadamardMech (t = 1)", pure_hm, pure_hm_decode),
                Peer("pure-ldp HadamardResponse (ASZ19)", lambda codes: [hr_client.privatise(v) for v in codes],
                     pure_hr_decode)]
    return [Peer("multi-freq-ldpy SS", lambda codes: [SS_Client(v, k, eps) for v in codes],
                 lambda reports: SS_Aggregator_MI(reports, k, eps))]


def extrapolate(run: Callable[[int], float], variable_seconds: float, cap_seconds: float) -> tuple[float, int]:
    """Seconds at N of an operation costing ``fixed + n * per_report``: ``fixed`` is its least time on one
    report (of three), ``per_report`` comes from one run on n reports, n grown (from 4) until the part above
    ``fixed`` reaches ``variable_seconds`` or a run takes ``cap_seconds``. Returns it and that n."""
    fixed = min(run(1) for _ in range(3))
    n = 4
    while True:
        t = run(n)
        above = t - fixed
        if above >= variable_seconds or t >= cap_seconds:
            return fixed + max(above, 0.0) / n * N, n
        n = int(n * min(16.0, max(2.0, 1.2 * variable_seconds / above if above > 0 else 16.0)))


def peer_seconds(peer: Peer, k: int, quick: bool) -> tuple[float, float, int]:
    """Seconds per 10^6 reports to perturb and to decode (:func:`extrapolate`), and the largest n run."""
    rng = np.random.default_rng(k)
    np.random.seed(k)
    random.seed(k)
    peer.decode(peer.perturb(rng.integers(0, k, 2).tolist()))      # warm-up: numba compiles on the first call
    variable, cap = (0.02, 0.5) if quick else (PEER_SECONDS, 4.0)
    reports: list = []

    def perturb(n: int) -> float:
        codes = rng.integers(0, k, n).tolist()
        start = time.perf_counter()
        made = peer.perturb(codes)
        seconds = time.perf_counter() - start
        if len(made) > len(reports):
            reports[:] = made
        return seconds

    def decode(n: int) -> float:
        while len(reports) < n:                                   # more reports, untimed
            reports.extend(peer.perturb(rng.integers(0, k, n - len(reports)).tolist()))
        part = reports[:n]
        start = time.perf_counter()
        peer.decode(part)
        return time.perf_counter() - start

    perturb_seconds, n_perturb = extrapolate(perturb, variable, cap)
    decode_seconds, n_decode = extrapolate(decode, variable, cap)
    return perturb_seconds, decode_seconds, max(n_perturb, n_decode)


def bare_walsh_hadamard(values: np.ndarray) -> np.ndarray:
    """The textbook in-place butterflies of a Walsh-Hadamard transform (the baseline of HR's decoding)."""
    a = values.astype(np.int64)
    h = 1
    while h < len(a):
        v = a.reshape(-1, 2, h)
        x, y = v[:, 0, :].copy(), v[:, 1, :].copy()
        v[:, 0, :], v[:, 1, :] = x + y, x - y
        h *= 2
    return a


def decode_ours(oracle: FrequencyOracle, reports: np.ndarray) -> np.ndarray:
    """Reports to unbiased counts: statistics (checked reports, tally), support counts, estimates."""
    return oracle.statistics(reports).count_estimates()


def bare_decode(reports: np.ndarray, size: int) -> np.ndarray:
    """HR's baseline: one bincount of the reports into 2K bins and one Walsh-Hadamard transform of size K."""
    return bare_walsh_hadamard(np.bincount(reports, minlength=2 * size)[::2])


def speed_rows(quick: bool) -> list[dict[str, object]]:
    sizes = [1 << 6, 1 << 10] if quick else [1 << e for e in (6, 8, 10, 12, 14, 16)]
    rows: list[dict[str, object]] = []
    for cls in ORACLES:
        for k in sizes:
            oracle = cls(EPSILON, k)
            n = min(N if not quick else 10**4, BITMAP_CELLS // k if cls in (OUE, SubsetSelection) else N)
            codes = np.random.default_rng(k).integers(0, k, n)
            rng = np.random.default_rng(1)
            repeats = 1 if quick else 2
            t_perturb, reports = timed(oracle.perturb, codes, rng, repeats=repeats)
            t_secure, _ = timed(oracle.perturb_secure, codes)
            t_decode, _ = timed(decode_ours, oracle, reports, repeats=1 if quick else 5)
            scale = N / n
            print(f"[bench] {cls.name} k={k}: ours at n={n:,}", file=sys.stderr, flush=True)
            peer_results = []
            for peer in peers_of(cls.name, k, EPSILON):
                print(f"[bench]   {peer.label} ...", file=sys.stderr, flush=True)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")      # the peers' numba and small-n warnings
                    peer_results.append((peer.label, *peer_seconds(peer, k, quick)))
            fastest = min(r[2] for r in peer_results)
            row: dict[str, object] = {
                "oracle": cls.name, "k": k, "n measured": n, "perturb (s / 10^6)": t_perturb * scale,
                "perturb_secure (s / 10^6)": t_secure * scale, "decode (s / 10^6)": t_decode * scale,
                "peers": "; ".join(f"{label}: perturb {p:.3g} s, decode {d:.3g} s (n <= {m:,})"
                                   for label, p, d, m in peer_results),
                "decode speed-up vs faster peer": fastest / (t_decode * scale),
            }
            row["decode goal"] = f">= {DECODE_GOAL:g}x"
            row["met"] = "" if quick else ("yes" if row["decode speed-up vs faster peer"] >= DECODE_GOAL else "NO")
            row["HR decode / (bincount + FWHT)"] = ""
            if cls is HadamardResponse:
                size = oracle.size
                bare, _ = timed(bare_decode, reports, size, repeats=3)
                row["HR decode / (bincount + FWHT)"] = t_decode / bare
                row["met"] += "" if quick else ("; HR " + ("yes" if t_decode / bare <= HR_GOAL else "NO"))
            rows.append(row)
    return rows


def size_rows() -> list[dict[str, object]]:
    rows = []
    for k in (1 << 6, 1 << 10, 1 << 16, 8410):
        row: dict[str, object] = {"k": k, "E": -(-max(1, (k - 1).bit_length()) // 8)}
        for cls in ORACLES:
            row[cls.name] = cls(EPSILON, k).report_bytes
        ss = SubsetSelection(EPSILON, k)
        row["SS as a list of d codes"] = -(-ss.subset_size * max(1, (k - 1).bit_length()) // 8)
        rows.append(row)
    return rows


# ----- MovieLens -----------------------------------------------------------------------------------------
def movielens_codes() -> np.ndarray:
    raw = np.loadtxt(gzip.open(dataset_path(MOVIELENS_FILE), "rt"), dtype=np.int64)
    return (raw[:, 1] - 1) * 5 + (raw[:, 2] - 1)     # (movie, rating) -> 0 .. 8409


def movielens_rows(quick: bool) -> list[dict[str, object]]:
    codes = movielens_codes()
    if quick:
        codes = codes[:5000]
    k, n = 1682 * 5, len(codes)
    truth = np.bincount(codes, minlength=k)
    movie_weights = np.kron(np.eye(1682), np.ones(5))          # (1682, 8410): sum over a movie's 5 ratings
    rating_weights = np.tile(np.eye(5), 1682)                  # (5, 8410): sum over the movies
    queries = {"cells": None, "movies": movie_weights, "ratings": rating_weights}
    rows = []
    for eps in (1.0, 2.0, 4.0):
        methods: list[tuple[str, PureProtocol, Callable[[np.random.Generator], np.ndarray]]] = []
        mech = MechanismE(eps, k)
        methods.append(("E", PureProtocol.for_mechanism_e(mech),
                        lambda rng, mech=mech: np.bincount(mech.perturb(codes, rng), minlength=k)))
        for cls in ORACLES:
            oracle = cls(eps, k)
            methods.append((cls.name, oracle.protocol,
                            lambda rng, o=oracle: o.statistics(o.perturb(codes, rng)).support_counts()))
        for name, protocol, support in methods:
            seconds, s = timed(support, np.random.default_rng(int(eps * 10)))
            estimate = protocol.count_estimates(s, n)
            row: dict[str, object] = {"epsilon": eps, "mechanism": name, "seconds": seconds}
            for label, weights in queries.items():
                if weights is None:     # the k cells, a block of the identity at a time
                    error = estimate - truth
                    variances = np.concatenate([protocol.linear_variance(np.eye(min(1024, k - start), k, start), truth)
                                                for start in range(0, k, 1024)])
                else:
                    error = weights @ estimate - weights @ truth
                    variances = protocol.linear_variance(weights, truth)
                row[f"RMSE {label}"] = float(np.sqrt(np.mean(error**2)))
                row[f"predicted {label}"] = float(np.sqrt(np.mean(variances)))
            rows.append(row)
            print(f"[bench] MovieLens eps={eps} {name}: {row['RMSE cells']:.1f}", file=sys.stderr, flush=True)
    return rows


# ----- choices -------------------------------------------------------------------------------------------
def grr_buckets(hashed: np.ndarray, g: int, keep: float, rng: np.random.Generator) -> np.ndarray:
    """k-ary randomized response over g buckets (floats: a simulation of an alternative, not a sampler)."""
    other = rng.integers(0, g - 1, hashed.shape)
    return np.where(rng.random(hashed.shape) < keep, hashed, other + (other >= hashed))


def range_variance_ours(oracle: OLH | HadamardResponse, codes: np.ndarray, weights: np.ndarray, groups: int,
                        rng: np.random.Generator) -> float:
    reports = oracle.perturb(np.tile(codes, groups), rng).reshape(groups, len(codes))
    return float(np.var([oracle.statistics(r).linear_estimates(weights)[0] for r in reports], ddof=1))


def prime_field_variance(k: int, eps: float, codes: np.ndarray, in_range: np.ndarray, groups: int,
                         rng: np.random.Generator) -> tuple[int, float, float]:
    """OLH with the linear hash v -> <a, digits_g(v)> mod g over GF(g)^t, g prime near e^eps + 1, a uniform
    (collision probability exactly 1/g): the range estimate's variance, simulated, and the variance the
    independent-support closed form gives."""
    g = 53 if eps == 4.0 else 3
    t = 1
    while g**t < k:
        t += 1
    digits = (np.arange(k)[:, None] // g ** np.arange(t)[None, :]) % g
    keep = math.exp(eps) / (math.exp(eps) + g - 1)
    members = digits[in_range]
    estimates = []
    for _ in range(groups):
        a = rng.integers(0, g, (len(codes), t))
        z = grr_buckets((a * digits[codes]).sum(axis=1) % g, g, keep, rng)
        hits = ((a @ members.T) % g == z[:, None]).sum()
        estimates.append((hits - len(codes) * len(members) / g) / (keep - 1 / g))
    q = 1 / g
    h_in = np.isin(codes, np.flatnonzero(in_range)).sum()
    closed = (len(codes) * q * (1 - q) * len(members) + h_in * (keep * (1 - keep) - q * (1 - q))) / (keep - q) ** 2
    return g, float(np.var(estimates, ddof=1)), float(closed)


def pool_bias(k: int, eps: float, pool: int, n: int, rng: np.random.Generator) -> tuple[int, float, float, float]:
    """OLH with a fixed public pool of ``pool`` random hash functions (pure-ldp's FastLH): with all n rows on
    value 0, the bias of c_hat(v), v != 0, is n g/(g-1) (c(v, 0) - 1/g), c the pool's collision rate;
    returned over the standard deviation (max and RMS over v), with the decoding time of the pool (a gather
    over pool x k)."""
    g = int(round(math.exp(eps))) + 1
    table = rng.integers(0, g, (pool, k))
    collide = (table[:, 1:] == table[:, :1]).mean(axis=0)
    keep = math.exp(eps) / (math.exp(eps) + g - 1)
    bias = n * g / (g - 1) * (collide - 1 / g)
    sd = math.sqrt(n * (1 / g) * (1 - 1 / g)) / (keep - 1 / g)
    counts = rng.integers(0, n // (pool * g) + 2, (pool, g))
    seconds, _ = timed(lambda: counts[np.arange(pool)[:, None], table].sum(axis=0), repeats=3)
    return g, float(np.abs(bias).max() / sd), float(np.sqrt(np.mean(bias**2)) / sd), seconds


def asz_simulation(k: int, eps: float, codes: np.ndarray, weights: np.ndarray, groups: int,
                   rng: np.random.Generator) -> tuple[float, float]:
    """Acharya-Sun-Zhang's Hadamard response (ASZ19, high-privacy form, as pure-ldp's port): K' = 2^ceil(log2(k+1)),
    the output j with probability proportional to e^eps where row x+1 of the Hadamard matrix is +1 at j, else 1;
    support of j: {v : <v+1, j> even}. Returns the simulated variance of sum_v w(v) c_hat(v) and the seconds
    to decode 10^6 reports (bincount into K' + one Walsh-Hadamard transform of size K')."""
    size = 1 << (k.bit_length() if k & (k - 1) == 0 else (k - 1).bit_length())
    if size <= k:
        size *= 2
    keep = math.exp(eps) / (1 + math.exp(eps))
    rows = codes + 1
    lowest = rows & -rows

    def sample(x_rows: np.ndarray, low: np.ndarray) -> np.ndarray:
        j = rng.integers(0, size, len(x_rows))
        inside = np.bitwise_count(j & x_rows) % 2 == 0
        return np.where(inside == (rng.random(len(x_rows)) < keep), j, j ^ low)

    def decode(outputs: np.ndarray) -> np.ndarray:
        counts = np.bincount(outputs, minlength=size)
        support = (len(outputs) + bare_walsh_hadamard(counts)[1:k + 1]) / 2
        return (support - len(outputs) / 2) / (keep - 0.5)

    estimates = [weights @ decode(sample(rows, lowest)) for _ in range(groups)]
    many = np.random.default_rng(3).integers(0, k, N) + 1
    outputs = sample(many, many & -many)
    seconds, _ = timed(decode, outputs, repeats=3)
    return float(np.var(estimates, ddof=1)), seconds


def choice_rows(quick: bool) -> list[dict[str, object]]:
    """OLH's hash family and HR's variant by simulated variance (two sets of values: the first half, aligned
    with the digits of the codes, and a random half), bias and decoding cost."""
    rng = np.random.default_rng(2026)
    k, rows_per_group, groups = 4096, (500 if quick else 1000), (20 if quick else 400)
    codes = rng.integers(0, k, rows_per_group)
    histogram = np.bincount(codes, minlength=k)
    sets = {"first half": np.arange(k) < k // 2, "random half": rng.permutation(k) < k // 2}
    out: list[dict[str, object]] = []

    def row(choice: str, variant: str, eps: float, ratios: dict[str, float] | None, collision: str, bias: str,
            decode: str) -> dict[str, object]:
        cells: dict[str, object] = {"choice": choice, "variant": variant, "epsilon": eps}
        for name in sets:
            cells[f"variance / closed form, {name}"] = "" if ratios is None else ratios[name]
        cells.update({"collision probability": collision, "bias / sd (max, RMS)": bias, "decode": decode})
        return cells

    for eps in (1.0, 4.0):
        olh = OLH(eps, k)
        ours, prime = {}, {}
        for name, members in sets.items():
            weights = members.astype(float)[None, :]
            ours[name] = (range_variance_ours(olh, codes, weights, groups, rng)
                          / float(olh.protocol.linear_variance(weights, histogram)[0]))
            g, simulated, closed = prime_field_variance(k, eps, codes, members, groups, rng)
            prime[name] = simulated / closed
        out.append(row("OLH hash", f"ours: GF(2^{olh.field_bits}) quadratic, g = {olh.hash_range}", eps, ours,
                       f"1/{olh.hash_range} exactly", "0, 0", "O(n g + 2^t t), exact integers"))
        out.append(row("OLH hash", f"linear over GF({g})^t, g = {g}", eps, prime, f"1/{g} exactly", "0, 0",
                       "O(n + g^t t log g) by a DFT over GF(g)^t"))
        g, worst, rms, seconds = pool_bias(k, eps, 1024, N, rng)
        out.append(row("OLH hash", f"pool of 1,024 random hashes, g = {g}", eps, None, "varies by pair",
                       f"{worst:.1f}, {rms:.1f} (n = 10^6 on one value)",
                       f"O(pool k): {seconds * 1e3:.1f} ms at k = {k:,}"))
    eps = 1.0
    hr = HadamardResponse(eps, k)
    ours, asz, asz_seconds = {}, {}, 0.0
    for name, members in sets.items():
        weights = members.astype(float)[None, :]
        closed = float(hr.protocol.linear_variance(weights, histogram)[0])
        ours[name] = range_variance_ours(hr, codes, weights, groups, rng) / closed
        simulated, asz_seconds = asz_simulation(k, eps, codes, weights[0], groups, rng)
        asz[name] = simulated / closed
    out.append(row("HR variant", "ours: Hadamard mechanism, j != 0", eps, ours, "", "0, 0",
                   f"one transform of K = {hr.size:,}"))
    out.append(row("HR variant", "ASZ19 Hadamard response", eps, asz, "", "0, 0",
                   f"one transform of K' = {2 * hr.size:,}: {asz_seconds:.3f} s at n = 10^6"))
    return out


# ----- report ----------------------------------------------------------------------------------------------
def table(rows: list[dict[str, object]]) -> list[str]:
    if not rows:
        return []
    header = list(rows[0])

    def cell(value: object) -> str:
        return f"{value:.4g}" if isinstance(value, float) else str(value).replace("|", "\\|")

    return (["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(cell(row.get(h, "")) for h in header) + " |" for row in rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes; goals not checked (smoke test)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"output folder (default {RESULTS})")
    args = parser.parse_args(argv)
    info = machine_info(**{name: version(name) for name in ("pure-ldp", "multi-freq-ldpy", "xxhash")})
    start = time.perf_counter()
    speed = speed_rows(args.quick)
    sizes = size_rows()
    try:
        movielens = movielens_rows(args.quick)
        movielens_note = "quick: first 5,000 ratings" if args.quick else "n = 100,000 ratings, one seeded run per row"
    except DatasetNotFound as missing:
        movielens, movielens_note = [], f"skipped: {missing}"
        print(f"[bench] MovieLens {movielens_note}", file=sys.stderr)
    choices = choice_rows(args.quick)
    lines = ["# Frequency oracles: speed, report size, error", ""]
    lines += [f"- {key}: {value}" for key, value in info.items()]
    lines += [f"- epsilon = {EPSILON:g} for the speed table; run time {time.perf_counter() - start:.0f} s",
              "- quick run: sizes reduced, goals not checked" if args.quick else "", ""]
    lines += ["## 1. Speed (seconds per 10^6 reports)", "",
              "Peers: timed on 1 and on n reports (n grown until the part above the 1-report time is 0.25 s), "
              "extrapolated as that fixed time plus 10^6 times the per-report time. Ours: "
              "measured at `n measured` reports and scaled linearly. OUE and SS decode by column counts of their "
              "bit sets: " + ("one pass of carry-save counters compiled by numba (ldpsynth/shared/mechanisms/"
                              "bit_kernel.py)." if bit_kernel.KERNEL is not None else
                              "numpy byte lanes (numba is not installed)."), ""] + table(speed)
    lines += ["", "## 2. Bytes per report", ""] + table(sizes)
    lines += ["", f"## 3. Error on MovieLens-100K, (movie, rating) private, |D| = 8,410 ({movielens_note})", "",
              "RMSE of the unbiased estimates against the true counts; `predicted`: the square root of the mean "
              "closed-form variance (`PureProtocol.linear_variance`) over the same queries; `seconds`: perturbing the "
              "ratings (seeded) and decoding them to support counts.", ""]
    lines += table(movielens)
    lines += ["", "## 4. Choices (k = 4,096; 1,000 uniform rows per group)", "",
              "`variance / closed form`: the variance of the estimated count of a set of values (the first half of "
              "the codes, or a random half), simulated over the groups, divided by the variance the pure-protocol "
              "closed form gives with the variant's own p*, q* and no covariance between supports (for ours: "
              "`PureProtocol.linear_variance`); 1 = the closed form holds (a ratio's sampling error is about "
              "sqrt(2/groups) where the estimates are near normal; sets aligned with the codes' digits make rare "
              "reports hit a whole subgroup of values, heavy tails that widen it).", ""]
    lines += table(choices)
    report = "\n".join(lines) + "\n"
    print(report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "oracles.md").write_text(report, encoding="utf-8")
    with open(args.out / "oracles.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(speed[0]))
        writer.writeheader()
        writer.writerows(speed)
    missed = [f"{r['oracle']} k={r['k']}" for r in speed if "NO" in str(r["met"])]
    if missed and not args.quick:
        print(f"goal(s) missed: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
