"""Optimized local hashing (OLH, WBLJ17 §4.4) with a GF(2)-linear, 3-wise independent hash family.

The user with value x draws a hash function H from a public family, hashes x into g buckets and
reports ``(H, z)``, z the k-ary randomized response of :math:`H(x)` over the g buckets (keep with
probability :math:`p = A/N`, else a uniform other bucket). The support of ``(H, z)`` is
:math:`\\{v : H(v) = z\\}`.

**The hash family.** With :math:`t = \\lceil \\log_2 k \\rceil`, values are elements of the field
:math:`GF(2^t)` (bits = coefficients in the polynomial basis), :math:`g = 2^s`, and for a seed
:math:`(\\alpha, \\beta) \\in GF(2^t)^2` drawn uniformly

.. math::  H_{\\alpha,\\beta}(v) = \\bigl(\\mathrm{Tr}(\\theta_j(\\alpha v + (\\beta v)^2))\\bigr)_{j < s},
           \\qquad \\theta_j = x^j,

Tr the field trace to GF(2). H is GF(2)-linear in v (squaring is additive in characteristic 2), so
:math:`H(u) \\oplus H(x) = H(u \\oplus x)`. For distinct non-zero :math:`d_1, d_2` the map
:math:`(\\alpha, \\beta) \\mapsto (\\alpha d_1 + \\beta^2 d_1^2, \\alpha d_2 + \\beta^2 d_2^2)` is a bijection
of :math:`GF(2^t)^2` (determinant :math:`d_1 d_2 (d_1 + d_2) \\ne 0`, and :math:`\\beta \\mapsto \\beta^2`
is one), and the trace projections of a uniform element are uniform on :math:`GF(2)^s`; hence
:math:`H(d_1)` and :math:`(H(d_1), H(d_2))` are uniform. In the notation of
:mod:`~ldpsynth.shared.mechanisms.pure`: the collision probability of two values is exactly
:math:`1/g` (so :math:`q^* = 1/g` as WBLJ17 §4.4 assumes of a random hash), and any three values
hash independently, so :math:`\\pi_1 = p^*/g` and :math:`\\pi_2 = 1/g^2` (support indicators
uncorrelated): the variance of a linear query is the OUE form with OLH's :math:`p^*, q^*`.

**Why this family** (``benchmarks/results/oracles.md``, §4, k = 4,096). WBLJ17's OLH hashes with a
fresh random function per user, so decoding must evaluate every report's hash on every value,
:math:`O(nk)` (pure-ldp and multi-freq-ldpy: xxhash per (report, value)). Two faster designs were
measured against this one: a *linear hash over a prime field*, :math:`v \\mapsto \\langle a, v\\rangle`
on the base-g digits (g prime, collision probability exactly 1/g, decodable by a DFT over
:math:`GF(g)^t`), whose values on a line collide together: three collinear values are correlated and
the variance of a count over half the values came out 9 to 17 times the closed form at g = 53 (ε = 4);
and a *fixed pool* of 1,024 random hash functions (pure-ldp's FastLH; decoding :math:`O(Pk)`), whose
per-pair collision rates differ from 1/g: with :math:`10^6` reports of one value the counts of the
others are off by up to 44 (ε = 1) and 60 (ε = 4) standard deviations. This family has both the exact
collision probability and uncorrelated supports (its simulated variances are within sampling error of
the closed form), and decodes in :math:`O(ng + 2^t t)`.

**Decoding in** :math:`O(n g + 2^t t)`. Write :math:`\\mathrm{Tr}(c\\,u\\,v) = |v \\wedge L_c(u)| \\bmod 2`
with :math:`L_c` a fixed GF(2)-linear map (a byte table) and
:math:`\\rho_j = L_{\\theta_j}(\\alpha) \\oplus L_{\\sqrt{\\theta_j}}(\\beta)`; then
:math:`H_j(v) = |v \\wedge \\rho_j| \\bmod 2` (the device computes its hash so too) and, for
:math:`b \\in GF(2)^s`, :math:`\\langle b, H(v)\\rangle = |v \\wedge \\gamma_b| \\bmod 2` with
:math:`\\gamma_b = \\bigoplus_j b_j \\rho_j`. Since
:math:`1[H(v) = z] = g^{-1}\\sum_b (-1)^{\\langle b, H(v) \\oplus z \\rangle}`,

.. math::  S(v) = \\frac1g \\sum_\\gamma F(\\gamma) (-1)^{|\\gamma \\wedge v|}, \\qquad
           F(\\gamma) = \\sum_i \\sum_b (-1)^{\\langle b, z_i \\rangle} 1[\\gamma_{i,b} = \\gamma]:

the tally is F (:math:`2^t` integers, added into by each report's g signed indices; shards merge by
adding), and the support counts are one Walsh-Hadamard transform of it, exact in integers.

**Exact rationals.** The seed is :math:`2t` uniform bits; the randomized response keeps with
probability :math:`A/N`, :math:`N = A + (g-1)L`, :math:`A/L \\le e^\\epsilon`
(:func:`~ldpsynth.shared.mechanisms.pure.ratio_weights`), and the delivered ε is
:math:`\\ln(A/L)` rounded up (two inputs with different hashes swap a weight A and a weight L).

**g.** :math:`g = 2^s` with s minimizing OLH's variance per report,
:math:`(e^\\epsilon + g - 1)^2/((g-1)(e^\\epsilon-1)^2)` (WBLJ17 eq. 4 with :math:`p^*, q^*` above;
its real minimizer is WBLJ17's :math:`g = e^\\epsilon + 1`, eq. 11); rounding g to a power of two costs
at most 3% of that variance. :math:`s \\le \\min(t, 10)`: decoding costs n g, and beyond
:math:`\\epsilon \\approx 6.9` (where g would pass 1024) direct encoding is the oracle to use unless
:math:`k > 3e^\\epsilon + 2` (WBLJ17 §5).

**Reports.** One uint64 per report: ``(seed << s) | z``, ``seed = (alpha << t) | beta``;
:math:`2t + s` bits.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from .bits import LinearMap, parity, walsh_hadamard
from .coins import CoinFlips
from .oracle import FrequencyOracle
from .pure import PureProtocol, delivered_epsilon, ratio_weights

#: Largest number of hash bits s (g <= 1024): decoding costs n g.
MAX_HASH_BITS = 10


# ----- GF(2^t) in the polynomial basis, as Python ints (built once per oracle) ----------------------
def _poly_mod(a: int, f: int) -> int:
    degree = f.bit_length()
    while a.bit_length() >= degree:
        a ^= f << (a.bit_length() - degree)
    return a


def _poly_mul_mod(a: int, b: int, f: int) -> int:
    product = 0
    while b:
        if b & 1:
            product ^= a
        b >>= 1
        a <<= 1
    return _poly_mod(product, f)


def _poly_gcd(a: int, b: int) -> int:
    while b:
        a, b = b, _poly_mod(a, b)
    return a


def _prime_factors(n: int) -> list[int]:
    return [p for p in range(2, n + 1) if n % p == 0 and all(p % d for d in range(2, p))]


def irreducible_polynomial(degree: int) -> int:
    """The least irreducible binary polynomial of ``degree`` (bits = coefficients), by Rabin's test:
    :math:`f \\mid x^{2^t} - x` and :math:`\\gcd(f, x^{2^{t/r}} - x) = 1` for every prime r of t."""
    for f in range((1 << degree) | 1, 1 << (degree + 1), 2):
        frobenius = [_poly_mod(2, f)]                       # x^(2^i) mod f for i = 0 .. degree
        for _ in range(degree):
            frobenius.append(_poly_mul_mod(frobenius[-1], frobenius[-1], f))
        if frobenius[degree] != frobenius[0]:
            continue
        if all(_poly_gcd(f, frobenius[degree // r] ^ frobenius[0]) == 1 for r in _prime_factors(degree)):
            return f
    raise AssertionError(f"no irreducible polynomial of degree {degree}")  # impossible: one exists for every degree


class BinaryField:
    """:math:`GF(2^t)` as :math:`GF(2)[x]/(f)`, f the least irreducible polynomial of degree t."""

    def __init__(self, bits: int):
        self.bits = bits
        self.modulus = irreducible_polynomial(bits)
        self._trace_mask = sum(self.trace_slow(1 << i) << i for i in range(bits))

    def mul(self, a: int, b: int) -> int:
        return _poly_mul_mod(a, b, self.modulus)

    def power(self, a: int, exponent: int) -> int:
        result = 1
        while exponent:
            if exponent & 1:
                result = self.mul(result, a)
            a = self.mul(a, a)
            exponent >>= 1
        return result

    def trace_slow(self, y: int) -> int:
        """:math:`\\mathrm{Tr}(y) = \\sum_{i<t} y^{2^i}` (0 or 1), by squaring."""
        total, term = 0, y
        for _ in range(self.bits):
            total ^= term
            term = self.mul(term, term)
        return total

    def trace(self, y: int) -> int:
        """:math:`\\mathrm{Tr}(y)`, a linear form: the parity of ``y & trace_mask``."""
        return (y & self._trace_mask).bit_count() & 1

    def trace_form(self, c: int) -> int:
        """The word :math:`m_c` with :math:`\\mathrm{Tr}(c\\,y) = |y \\wedge m_c| \\bmod 2` for every y."""
        return sum(self.trace(self.mul(c, 1 << i)) << i for i in range(self.bits))

    def sqrt(self, y: int) -> int:
        """:math:`\\sqrt y = y^{2^{t-1}}`."""
        return self.power(y, 1 << (self.bits - 1))


class OLH(FrequencyOracle):
    """Optimized local hashing over ``domain_size`` codes at ``epsilon`` (module docstring).

    >>> olh = OLH(1.0, 1000)
    >>> olh.hash_range, olh.field_bits, olh.protocol.q, olh.report_bytes
    (4, 10, Fraction(1, 4), 3)
    """

    name = "OLH"
    max_domain_size = 1 << 24

    def __init__(self, epsilon: float, domain_size: int):
        super().__init__(epsilon, domain_size)
        self.field_bits = max(1, (self.domain_size - 1).bit_length())
        self.hash_bits = self.choose_hash_bits(self.epsilon_requested, self.field_bits)
        self.hash_range = g = 1 << self.hash_bits
        self.keep_weight, self.lie_weight = ratio_weights(self.epsilon_requested, 1, g - 1)
        self.total_weight = self.keep_weight + (g - 1) * self.lie_weight
        self.epsilon = delivered_epsilon(self.keep_weight, self.lie_weight)
        p, q = Fraction(self.keep_weight, self.total_weight), Fraction(1, g)
        self.protocol = PureProtocol(self.name, self.domain_size, p, q, p * q, q * q)
        field, t = BinaryField(self.field_bits), self.field_bits
        # rho_j(seed) = L_theta_j(alpha) ^ L_sqrt(theta_j)(beta), seed = (alpha << t) | beta, theta_j = x^j
        self._rho = []
        for j in range(self.hash_bits):
            theta, root = 1 << j, field.sqrt(1 << j)
            beta_columns = [field.trace_form(field.mul(root, 1 << m)) for m in range(t)]
            alpha_columns = [field.trace_form(field.mul(theta, 1 << m)) for m in range(t)]
            self._rho.append(LinearMap(beta_columns + alpha_columns))
        #: The field's modulus: with t, s and the weights it defines the public hash family.
        self.modulus = field.modulus

    @staticmethod
    def choose_hash_bits(epsilon: float, field_bits: int) -> int:
        """The s in :math:`[1, \\min(t, 10)]` minimizing
        :math:`(e^\\epsilon + 2^s - 1)^2/((2^s - 1)(e^\\epsilon - 1)^2)`
        (WBLJ17 eq. 4 for OLH; the smaller s on a tie)."""
        e = math.exp(min(epsilon, 700.0))

        def factor(s: int) -> float:
            g = 2.0**s
            return (e + g - 1.0) ** 2 / (g - 1.0)

        return min(range(1, min(field_bits, MAX_HASH_BITS) + 1), key=factor)

    @property
    def parameters(self) -> tuple[int, ...]:
        return (self.domain_size, self.hash_bits, self.keep_weight, self.lie_weight)

    @property
    def report_bytes(self) -> int:
        return -(-(2 * self.field_bits + self.hash_bits) // 8)

    @property
    def tally_size(self) -> int:
        return 1 << self.field_bits

    def rho(self, seeds: np.ndarray) -> list[np.ndarray]:
        """:math:`\\rho_j` of each seed, j < s (uint64 words of t bits):
        :math:`H_j(v) = |v \\wedge \\rho_j| \\bmod 2`."""
        return [linear(seeds) for linear in self._rho]

    def hash_values(self, seeds: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """:math:`H_{\\mathrm{seed}}(\\mathrm{code})` for aligned arrays of seeds and codes (int64 in [0, g))."""
        x = codes.astype(np.uint64)
        out = np.zeros(seeds.shape, np.uint64)
        for j, rho in enumerate(self.rho(seeds)):
            out |= parity(x & rho) << np.uint64(j)
        return out.astype(np.int64)

    def _sample(self, codes: np.ndarray, coins: CoinFlips) -> np.ndarray:
        n, g = codes.size, self.hash_range
        seeds = coins.below(1 << (2 * self.field_bits), n).astype(np.uint64)
        hashed = self.hash_values(seeds, codes)
        keep = coins.bernoulli(self.keep_weight, self.total_weight, n)
        other = coins.below(g - 1, n)
        z = np.where(keep, hashed, other + (other >= hashed))
        return (seeds << np.uint64(self.hash_bits)) | z.astype(np.uint64)

    def check_reports(self, reports: npt.ArrayLike) -> np.ndarray:
        arr = self._check_reports_array(reports, np.uint64, ())
        width = 2 * self.field_bits + self.hash_bits
        if arr.size and width < 64 and int(arr.max()) >> width:
            bad = arr >> np.uint64(width) != 0
            raise ValidationError("reports", f"OLH reports: integers below 2^{width}", "out of range",
                                  int(np.flatnonzero(bad)[0]))
        return arr

    def _tally(self, reports: np.ndarray) -> np.ndarray:
        s = np.uint64(self.hash_bits)
        seeds, z = reports >> s, reports & np.uint64(self.hash_range - 1)
        rho = self.rho(seeds)
        size = self.tally_size
        counts = np.zeros(2 * size, np.int64)          # [gamma, sign]
        index = np.zeros(reports.shape, np.uint64)
        sign = np.zeros(reports.shape, np.uint64)
        for b in range(self.hash_range):               # Gray code: step b flips bit j = ctz(b)
            if b:
                j = (b & -b).bit_length() - 1
                index ^= rho[j]
                sign ^= (z >> np.uint64(j)) & np.uint64(1)
            counts += np.bincount(((index << np.uint64(1)) | sign).astype(np.intp), minlength=2 * size)
        return counts[0::2] - counts[1::2]

    def _support(self, tally: np.ndarray, n: int) -> np.ndarray:
        total = walsh_hadamard(tally)[:self.domain_size]
        if (total % self.hash_range).any():
            raise ValidationError("tally", f"an OLH tally (its transform is divisible by g = {self.hash_range})",
                                  "not a sum of OLH reports")
        return total // self.hash_range
