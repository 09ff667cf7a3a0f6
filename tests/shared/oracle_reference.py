"""Independent reference implementations of the four oracles' definitions, for the oracle tests.

Written from the definitions in the oracles' docstrings (and the papers), not from the package's
kernels: supports by direct evaluation (OLH's hash by GF(2^t) arithmetic on Python ints, the trace by
repeated squaring), and the textbook probability of a report given an input as an exact Fraction.
"""

from __future__ import annotations

from fractions import Fraction
from math import comb

import numpy as np

from ldpsynth.shared.mechanisms import OLH, OUE, FrequencyOracle, HadamardResponse, SubsetSelection
from ldpsynth.shared.mechanisms.pure import DYADIC


def gf_mul(a: int, b: int, modulus: int) -> int:
    degree = modulus.bit_length() - 1
    product = 0
    while b:
        if b & 1:
            product ^= a
        b >>= 1
        a <<= 1
        if a >> degree & 1:
            a ^= modulus
    return product


def gf_trace(y: int, modulus: int) -> int:
    degree = modulus.bit_length() - 1
    total, term = 0, y
    for _ in range(degree):
        total ^= term
        term = gf_mul(term, term, modulus)
    assert total in (0, 1)
    return total


def olh_hash(oracle: OLH, alpha: int, beta: int, v: int) -> int:
    """H(v) = (Tr(x^j (alpha v + (beta v)^2)))_j, straight from the definition."""
    m = oracle.modulus
    beta_v = gf_mul(beta, v, m)
    y = gf_mul(alpha, v, m) ^ gf_mul(beta_v, beta_v, m)
    return sum(gf_trace(gf_mul(1 << j, y, m), m) << j for j in range(oracle.hash_bits))


def bits_of(report: np.ndarray, k: int) -> np.ndarray:
    return np.unpackbits(np.asarray(report, np.uint8), bitorder="little")[:k].astype(bool)


def support(oracle: FrequencyOracle, report: np.ndarray) -> np.ndarray:
    """The support of one report: a boolean vector over the k values."""
    k = oracle.domain_size
    if isinstance(oracle, (OUE, SubsetSelection)):
        return bits_of(report, k)
    if isinstance(oracle, HadamardResponse):
        j, b = int(report) >> 1, int(report) & 1
        return np.array([(j & v).bit_count() % 2 == b for v in range(k)])
    if isinstance(oracle, OLH):
        t, s = oracle.field_bits, oracle.hash_bits
        seed, z = int(report) >> s, int(report) & ((1 << s) - 1)
        alpha, beta = seed >> t, seed & ((1 << t) - 1)
        return np.array([olh_hash(oracle, alpha, beta, v) == z for v in range(k)])
    raise TypeError(type(oracle))


def support_counts(oracle: FrequencyOracle, reports: np.ndarray) -> np.ndarray:
    """S(v) by brute force: each report's support, summed (O(n k))."""
    return sum((support(oracle, r).astype(np.int64) for r in reports), np.zeros(oracle.domain_size, np.int64))


def textbook_probability(oracle: FrequencyOracle, x: int, report: np.ndarray) -> Fraction:
    """P[report | x] from the oracle's definition (its public parameters), exactly."""
    k = oracle.domain_size
    if isinstance(oracle, OUE):
        q, p = Fraction(oracle.small, DYADIC), Fraction(1, 2)
        bits = bits_of(report, k)
        out = Fraction(1)
        for v in range(k):
            on = p if v == x else q
            out *= on if bits[v] else 1 - on
        return out
    if isinstance(oracle, SubsetSelection):
        d, a, l = oracle.subset_size, oracle.keep_weight, oracle.lie_weight
        bits = bits_of(report, k)
        if bits.sum() != d:
            return Fraction(0)
        inside = Fraction(d * a, d * a + (k - d) * l)
        return inside / comb(k - 1, d - 1) if bits[x] else (1 - inside) / comb(k - 1, d)
    if isinstance(oracle, HadamardResponse):
        j, b = int(report) >> 1, int(report) & 1
        if not 1 <= j < oracle.size:
            return Fraction(0)
        keep = Fraction(oracle.big, DYADIC)
        return Fraction(1, oracle.size - 1) * (keep if (j & x).bit_count() % 2 == b else 1 - keep)
    if isinstance(oracle, OLH):
        t, s = oracle.field_bits, oracle.hash_bits
        seed, z = int(report) >> s, int(report) & ((1 << s) - 1)
        alpha, beta = seed >> t, seed & ((1 << t) - 1)
        weight = oracle.keep_weight if olh_hash(oracle, alpha, beta, x) == z else oracle.lie_weight
        return Fraction(weight, oracle.total_weight * (1 << (2 * t)))
    raise TypeError(type(oracle))


def design_ratio(oracle: FrequencyOracle) -> Fraction:
    """The worst output ratio each oracle is designed to have (its docstring)."""
    if isinstance(oracle, (OUE, HadamardResponse)):
        return Fraction(oracle.big, oracle.small)
    if isinstance(oracle, (OLH, SubsetSelection)):
        return Fraction(oracle.keep_weight, oracle.lie_weight)
    raise TypeError(type(oracle))
