"""Optimized local hashing (OLH, WBLJ17 §4.4) with a GF(2)-linear, 3-wise independent hash family.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.mechanisms.olh``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..privacy import delivered_epsilon
from .bits import LinearMap, parity, walsh_hadamard
from .coins import CoinFlips
from .oracle import FrequencyOracle
from .pure import PureProtocol, ratio_weights

__all__ = [
    "irreducible_polynomial",
    "BinaryField",
    "OLH",
]

#: Largest number of hash bits s (g <= 1024): decoding costs n g.
MAX_HASH_BITS = 10
#: Least cells (reports x g) of one block of the tally; a block has at least twice the tally's cells, so
#: adding each block's counts into the tally costs at most half as much as counting them.
_BLOCK_CELLS = 1 << 20
#: :math:`2^{31}`: a report adds at most g to one cell (all its subsets' terms on one cell when its masks are
#: dependent), so n reports with :math:`n g` below this leave every cell of a signed tally within int32.
_INT32 = 1 << 31


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
        #: The masks' byte tables, ``(s, ceil(2t/8), 256)``, for :mod:`~ldpsynth.shared.mechanisms.olh_kernel`.
        self._rho_tables = np.stack([linear.tables for linear in self._rho])

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

    def _signed_tally(self, reports: np.ndarray, base: np.ndarray, count: int) -> np.ndarray:
        """Per report, the g signed indices :math:`\\gamma_b = \\bigoplus_{j \\in b} \\rho_j`,
        :math:`(-1)^{\\langle b, z \\rangle}` (b < g), added at ``base`` (a multiple of :math:`2^t` per report)
        into ``count`` tallies of :math:`2^t`. Vectorized: the span is built by doubling (indices ``[2^j, 2^{j+1})``
        are ``[0, 2^j)`` XOR the mask :math:`2\\rho_j + z_j`, the sign in bit 0) on blocks of reports, one
        ``bincount`` a block. With numba, :mod:`~ldpsynth.shared.mechanisms.olh_kernel` adds the same terms
        straight into the tally (no index array, no sign doubling)."""
        from . import olh_kernel  # on first use: ``import ldpsynth`` loads no numba

        kernel = olh_kernel.KERNEL
        if kernel is not None:
            narrow = len(reports) * self.hash_range < _INT32
            tally = np.zeros(self.tally_size * count, np.int32 if narrow else np.int64)
            kernel(self._rho_tables, reports, base.astype(np.int64), tally)
            return tally.astype(np.int64)
        one, s = np.uint64(1), np.uint64(self.hash_bits)
        seeds, z = reports >> s, reports & np.uint64(self.hash_range - 1)
        masks = [((rho << one) | ((z >> np.uint64(j)) & one)).astype(np.intp) for j, rho in enumerate(self.rho(seeds))]
        start = (base.astype(np.uint64) << one).astype(np.intp)
        size, g = 2 * self.tally_size * count, self.hash_range
        counts = np.zeros(size, np.int64)                # [group, gamma, sign]
        step = max(1, max(_BLOCK_CELLS, 2 * size) // g)
        for lo in range(0, len(reports), step):
            rows = np.empty((g, len(start[lo:lo + step])), np.intp)
            rows[0] = start[lo:lo + step]
            for j, mask in enumerate(masks):
                np.bitwise_xor(rows[:1 << j], mask[lo:lo + step], out=rows[1 << j:2 << j])
            counts += np.bincount(rows.ravel(), minlength=size)
        return counts[0::2] - counts[1::2]

    def _tally(self, reports: np.ndarray) -> np.ndarray:
        return self._signed_tally(reports, np.zeros(reports.shape, np.uint64), 1)

    def _group_tally(self, reports: np.ndarray, groups: np.ndarray, count: int) -> np.ndarray:
        """:meth:`_tally` per group: each group's cells offset by ``group * 2^t``."""
        size = self.tally_size
        return self._signed_tally(reports, groups.astype(np.uint64) * np.uint64(size), count).reshape(count, size)

    def _support_rows(self, reports: np.ndarray) -> np.ndarray:
        seeds, z = reports >> np.uint64(self.hash_bits), reports & np.uint64(self.hash_range - 1)
        values = np.arange(self.domain_size, dtype=np.uint64)[None, :]
        hashed = np.zeros((len(reports), self.domain_size), np.uint64)
        for j, rho in enumerate(self.rho(seeds)):
            hashed |= parity(values & rho[:, None]) << np.uint64(j)
        return hashed == z[:, None]

    def _support(self, tally: np.ndarray, n: int | np.ndarray) -> np.ndarray:
        total = walsh_hadamard(tally)[..., :self.domain_size]
        if (total & (self.hash_range - 1)).any():   # g = 2^s: the remainder's bits and the floor quotient's shift
            raise ValidationError("tally", f"an OLH tally (its transform is divisible by g = {self.hash_range})",
                                  "not a sum of OLH reports")
        return total >> self.hash_bits
