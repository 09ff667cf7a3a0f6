"""Mechanism E: k-ary randomized response over the whole private domain D (WYZ eqs. 14-16).

Each row :math:`x_i \\in D` is released independently as :math:`Y_i` with (eq. 16)

.. math::  p_{Y_i}(y) = \\frac{e^{-\\epsilon\\,\\delta(x_i, y)}}{g(\\epsilon)}, \\qquad
           g(\\epsilon) = 1 + (|D| - 1) e^{-\\epsilon},

i.e. the true value is kept with probability :math:`1/g(\\epsilon)` and each *particular* other value
is reported with probability :math:`e^{-\\epsilon}/g(\\epsilon)`. (WYZ writes
:math:`|D| = 2^l`; nothing in WYZ eqs. 14-22 needs a power of two.) The ratio of the output
probabilities of two inputs is at most :math:`e^{\\epsilon}`: E is ε-DP (Lemma 1), locally.

**Exact rational probabilities.** So that a device can sample E exactly from the operating
system's CSPRNG, the probabilities are rationals over one integer space of size
:math:`N = A + (|D|-1) L`: the true value owns ``A`` points, each other value ``L`` points, with
:math:`A / L \\le e^{\\epsilon}` (so the keep probability :math:`A/N` is not above the ideal
:math:`1/g(\\epsilon)`). The ε actually *delivered* is :math:`\\ln(A/L)`, rounded up to the next
float; it never exceeds the ε asked for. The simulation sampler :meth:`MechanismE.perturb` uses
the same probabilities (as floats), so one card describes both.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.privacy import delivered_epsilon, log_ratio_exceeds
from ldpsynth.shared.validation import check_codes, check_epsilon, check_int

__all__ = [
    "MAX_SAMPLER_DOMAIN_SIZE",
    "SPACE_BITS",
    "integer_weights",
    "rational_weights",
    "MechanismE",
]

#: Bits of the integer space of the rational probabilities: it has at most 2^SPACE_BITS points.
SPACE_BITS = 62
#: Relative safety margin below e^ε when choosing A (covers the error of float exp).
_MARGIN = 2.0**-50
#: Largest |D| of the exact sampler: each other value owns L ~ 2^62 / (e^ε + |D|) points of the
#: rational space, about 2^22 at this |D|, and the delivered ε falls short of the one asked for by
#: about 1/A <= 1/L (:func:`rational_weights`). A schema's private domain is bounded further, by
#: ``schema.MAX_BATCH_WEIGHTS``; ``schema.MAX_DOMAIN_SIZE`` bounds the size of a domain we encode.
MAX_SAMPLER_DOMAIN_SIZE = 1 << 40


def integer_weights(epsilon: float, high: int, low: int, *, reserve: int = 0, space_bits: int = SPACE_BITS,
                    label: str | None = None) -> tuple[int, int]:
    r"""Integer weights ``(A, L)`` with :math:`A/L \le e^{\epsilon}` exactly, ``A > L`` and
    :math:`\mathrm{high} \cdot A + \mathrm{low} \cdot L \le 2^{\mathrm{space\_bits}}`: the one place that
    turns an ε into the integer weights of an exact law in which ``high`` outputs (or input-weighted
    outputs) have weight A and ``low`` weight L.

    With :math:`b` = ``space_bits`` and :math:`g` = ``exp(min(ε, 45))`` (a float; :math:`e^{45} > 2^{62}
    \ge A/L`, so the cap only lowers A where the space caps it anyway, and keeps ``exp`` from overflowing),

    .. math::  L = \max(1, \lfloor 2^{b} / (\mathrm{high}\, g + \mathrm{low} + \mathrm{reserve}) \rfloor),
               \qquad A = \min(\lfloor L\, (g (1 - 2^{-50})) \rfloor,\;
                               \lfloor (2^{b} - \mathrm{low}\, L)/\mathrm{high} \rfloor)

    (float arithmetic, in exactly this order), then A is lowered while
    :func:`~ldpsynth.shared.privacy.log_ratio_exceeds` ``(A, L, ε)`` (exact; practically never loops).
    So L is as large as the space allows and :math:`A/L` is below :math:`e^{\epsilon}` by a relative
    :math:`2^{-50} + 1/L` at most: the delivered ε (:func:`~ldpsynth.shared.privacy.delivered_epsilon`)
    falls short of the one asked by about that much, never exceeds it. For a huge ε the space caps A
    (with ``L = 1``), and the delivered ε is smaller than the one asked.

    ``reserve`` adds that many L's to L's divisor without spending them. Mechanism E is
    ``high = 1, low = k - 1, reserve = 1`` (:func:`rational_weights`): its published formula
    :math:`L = \lfloor 2^{62}/(g + k) \rfloor`, which its conformance vectors and the TypeScript SDK
    reproduce bit for bit, divides by :math:`g + k`, one unit more than its space
    :math:`A + (k - 1) L` needs. The numeric samplers use ``reserve = 0``.

    Raises :class:`~ldpsynth.shared.errors.ValidationError` naming ``epsilon`` when the space cannot
    resolve it (A would not exceed L); the message states an ε from which on it always can,
    :math:`4 (2^{-50} + (\mathrm{high} + \mathrm{low} + \mathrm{reserve})/2^{b})`, for ``label``
    (default: the counts of weights A and L).
    """
    eps = check_epsilon(epsilon)
    high = check_int(high, "high", 1)
    low = check_int(low, "low", 0)
    reserve = check_int(reserve, "reserve", 0)
    space = 1 << check_int(space_bits, "space_bits", 8, SPACE_BITS)
    growth = math.exp(min(eps, 45.0))
    lie = max(1, int(space // (growth * high + (low + reserve))))
    keep = min(int(lie * (growth * (1.0 - _MARGIN))), (space - low * lie) // high)
    while keep > lie and log_ratio_exceeds(keep, lie, eps):  # exact check; practically never loops
        keep -= 1
    if keep <= lie:
        least = 4.0 * (_MARGIN + (high + low + reserve) / space)
        raise ValidationError("epsilon", f"a finite number >= {least:.2g} for "
                              f"{label or f'{high} weights A and {low} weights L'} "
                              "(the resolution of the exact sampler)", f"got {epsilon!r}")
    return keep, lie


def rational_weights(epsilon: float, domain_size: int) -> tuple[int, int]:
    r"""Mechanism E's integer weights ``(A, L)``: :math:`A/L \le e^{\epsilon}` exactly and
    ``A + (k-1) L <= 2^62``, :math:`L = \lfloor 2^{62}/(e^{\epsilon} + k) \rfloor` (its published formula:
    :func:`integer_weights` with ``high = 1``, ``low = k - 1`` and a one-unit ``reserve``).

    :math:`A/L` is below :math:`e^{\epsilon}` by a relative :math:`2^{-50} + 1/A` at most, i.e. about
    :math:`2^{-50} + (e^{\epsilon} + k)/(2^{62} e^{\epsilon})` (the delivered ε loses about that much);
    once :math:`e^{\epsilon} > 2^{62} - k` (ε of about 43) the space caps ``A`` at :math:`2^{62} - (k-1)`
    with ``L = 1``, and the delivered ε is smaller than the one asked (never larger).
    """
    return integer_weights(epsilon, 1, domain_size - 1, reserve=1, label=f"domain_size {domain_size}")


class MechanismE:
    """Mechanism E of WYZ (eq. 16) over a private domain of ``domain_size`` codes.

    Parameters
    ----------
    epsilon : float
        The ε asked for: a finite number > 0 that the exact sampler resolves for ``domain_size``
        (every ε >= :math:`4 (2^{-50} + (|D| + 1)/2^{62})` is).
    domain_size : int
        :math:`|D|`: an integer in [2, 2^40] (:data:`MAX_SAMPLER_DOMAIN_SIZE`).

    Attributes
    ----------
    epsilon : float
        The ε actually delivered, :math:`\\ln(A/L)` rounded up; ``<= epsilon_requested``.
    keep_probability, lie_probability : float
        :math:`A/N` and :math:`L/N` as floats (:math:`1/g(\\epsilon)` and :math:`e^{-\\epsilon}/g(\\epsilon)`
        at the delivered ε); the exact values are :attr:`keep_fraction` / :attr:`lie_fraction`.

    Raises
    ------
    ValidationError
        Naming ``epsilon`` or ``domain_size``: out of its legal range.
    """

    VERSION = "E/1"

    def __init__(self, epsilon: float, domain_size: int):
        self.epsilon_requested = check_epsilon(epsilon, "epsilon")
        self.domain_size = check_int(domain_size, "domain_size", 2, MAX_SAMPLER_DOMAIN_SIZE)
        self.keep_weight, self.lie_weight = rational_weights(self.epsilon_requested, self.domain_size)
        self.total_weight = self.keep_weight + (self.domain_size - 1) * self.lie_weight
        self.epsilon = delivered_epsilon(self.keep_weight, self.lie_weight)
        self.keep_probability = self.keep_weight / self.total_weight
        self.lie_probability = self.lie_weight / self.total_weight
        # Rejection threshold for drawing uniformly from [0, N) with 64-bit words.
        self._accept_below = (1 << 64) - ((1 << 64) % self.total_weight)

    # ----- exact description -----------------------------------------------------------------
    @property
    def keep_fraction(self) -> Fraction:
        """Exact keep probability :math:`A/N`."""
        return Fraction(self.keep_weight, self.total_weight)

    @property
    def lie_fraction(self) -> Fraction:
        """Exact probability :math:`L/N` of each particular other value."""
        return Fraction(self.lie_weight, self.total_weight)

    def output_probabilities(self, true_code: int) -> np.ndarray:
        """The pmf of eq. 16 for one input (length ``domain_size``); for tests and small domains.

        Parameters
        ----------
        true_code : int
            The input's code, in ``[0, |D|)`` (not validated: it indexes the array).

        Returns
        -------
        numpy.ndarray
            float64 probabilities of every output code: ``keep_probability`` at ``true_code``,
            ``lie_probability`` elsewhere.

        Raises
        ------
        IndexError
            ``true_code`` outside ``[-|D|, |D|)``.
        """
        probs = np.full(self.domain_size, self.lie_probability)
        probs[true_code] = self.keep_probability
        return probs

    def __repr__(self) -> str:
        return (f"MechanismE(epsilon={self.epsilon_requested!r}, domain_size={self.domain_size}; "
                f"delivered epsilon={self.epsilon!r}, keep={self.keep_weight}/{self.total_weight})")

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, MechanismE) and other.domain_size == self.domain_size
                and other.keep_weight == self.keep_weight and other.lie_weight == self.lie_weight)

    def __hash__(self) -> int:
        return hash((self.domain_size, self.keep_weight, self.lie_weight))

    # ----- sampling -----------------------------------------------------------------------------
    def check_codes(self, codes: npt.ArrayLike, field_name: str = "codes") -> np.ndarray:
        """Return ``codes`` as int64, raising if any lies outside ``[0, |D|)``.

        Parameters
        ----------
        codes : array_like
            Integer codes in ``[0, |D|)``, of any shape.
        field_name : str, default "codes"
            The field an error names.

        Returns
        -------
        numpy.ndarray
            ``codes`` as int64.

        Raises
        ------
        ValidationError
            Naming ``field_name``: codes that are not integers or lie outside ``[0, |D|)`` (the
            first bad position).
        """
        return check_codes(codes, field_name, self.domain_size)

    def _lie(self, codes: np.ndarray, index: np.ndarray) -> np.ndarray:
        """The ``index``-th value of D other than ``codes`` (index in ``[0, |D|-1)``): uniform lie."""
        return index + (index >= codes)

    def perturb(self, codes: npt.ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """Apply E to every code, vectorized, with a seeded numpy Generator (simulations, benchmarks).

        One uniform :math:`U` per row: keep if :math:`U < p`, else report the
        :math:`\\lfloor (U - p)/q \\rfloor`-th other value, which is uniform over the other
        :math:`|D|-1` values (eq. 16 with :math:`p = A/N`, :math:`q = L/N` in float64).
        Not for devices: see :meth:`perturb_secure`.

        Parameters
        ----------
        codes : array_like
            Integer codes in ``[0, |D|)``, of any shape.
        rng : numpy.random.Generator
            Draws the uniforms (seed it for a reproducible run).

        Returns
        -------
        numpy.ndarray
            The perturbed int64 codes, of the shape of ``codes``.

        Raises
        ------
        ValidationError
            Naming ``codes``: not integers, or outside ``[0, |D|)``.
        """
        x = self.check_codes(codes)
        u = rng.random(x.shape)
        p, q = self.keep_probability, self.lie_probability
        index = ((u - p) * (1.0 / q)).astype(np.int64)
        np.clip(index, 0, self.domain_size - 2, out=index)
        return np.where(u < p, x, self._lie(x, index))

    def _uniform_below_total(self, count: int, random_bytes: Callable[[int], bytes]) -> np.ndarray:
        """``count`` exact uniform draws from ``[0, N)`` (rejection sampling of 64-bit words).

        Words are read in rounds: one little-endian word per draw in order, then one per draw still
        rejected, in order, until none is (docs/contract.md §5; conformance/sampler.json).
        """
        out = np.empty(count, dtype=np.uint64)
        todo = np.arange(count)
        limit = self._accept_below
        while todo.size:
            words = np.frombuffer(random_bytes(8 * todo.size), dtype="<u8")
            ok = words < np.uint64(limit) if limit < (1 << 64) else np.ones(todo.size, bool)
            out[todo[ok]] = words[ok] % np.uint64(self.total_weight)
            todo = todo[~ok]
        return out

    def perturb_secure(self, codes: npt.ArrayLike) -> np.ndarray:
        """Apply E with the operating system's CSPRNG only (``os.urandom``); for devices.

        Draw :math:`R` uniform on :math:`\\{0, \\dots, N-1\\}` exactly (rejection from 64-bit words):
        keep if :math:`R < A`, else report the :math:`\\lfloor (R - A)/L \\rfloor`-th other value.
        The output pmf is exactly :math:`A/N` for the true value and :math:`L/N` for each other
        value, so the privacy loss is exactly :math:`\\ln(A/L) \\le` :attr:`epsilon`.
        Out-of-domain codes are rejected before any randomness is drawn.

        Parameters
        ----------
        codes : array_like
            Integer codes in ``[0, |D|)``, of any shape.

        Returns
        -------
        numpy.ndarray
            The perturbed int64 codes, of the shape of ``codes``.

        Raises
        ------
        ValidationError
            Naming ``codes``: not integers, or outside ``[0, |D|)``.
        """
        return self._perturb_exact(codes, os.urandom)

    def _perturb_exact(self, codes: npt.ArrayLike, random_bytes: Callable[[int], bytes]) -> np.ndarray:
        """:meth:`perturb_secure` with its random bytes read from ``random_bytes(n)``.

        Test hook of the conformance vectors only (tests/client/test_conformance.py feeds it the
        byte stream of conformance/sampler.json): no device code calls it, and it changes no
        state, so :meth:`perturb_secure` always reads ``os.urandom``.
        """
        x = self.check_codes(codes)
        flat = x.reshape(-1)
        r = self._uniform_below_total(flat.size, random_bytes)
        keep = r < np.uint64(self.keep_weight)
        index = np.where(keep, 0, (r - np.uint64(self.keep_weight)) // np.uint64(self.lie_weight)).astype(np.int64)
        return np.where(keep, flat, self._lie(flat, index)).reshape(x.shape)

    # ----- debiasing constants (WYZ eq. 17) ----------------------------------------------------
    @property
    def signal(self) -> float:
        """:math:`p - q = (1 - e^{-\\epsilon})/g(\\epsilon)`: the weight of the truth in :math:`E[\\varphi(Y)]`."""
        return float(Fraction(self.keep_weight - self.lie_weight, self.total_weight))
