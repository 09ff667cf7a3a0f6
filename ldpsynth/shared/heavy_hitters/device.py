"""A round as a device sees it, and a device's report: its prefix fragment against the candidates.

Round r publishes C candidate prefixes :math:`P_1 < \\dots < P_C` of :math:`b_{r-1}` bits and the width
:math:`w = b_r - b_{r-1}`. A device with code x reports, with one frequency oracle at the full ε,

.. math::  y(x) = \\begin{cases} i\\,2^w + x[b_{r-1}, b_r) & x[0, b_{r-1}) = P_i \\\\
                                 C\\,2^w \\ (\\text{"other"}) & \\text{no candidate is a prefix of } x \\end{cases}

over the domain :math:`D_r = C\\,2^w + 1` (:math:`2^w` in round 0, whose only candidate is the empty prefix).
Why "other" rather than a uniform pick among the cells: the oracles' estimates are unbiased for the
true count of every cell whatever the other cells hold, so a device outside the candidates adds
nothing but variance to the candidates' cells; a uniform pick would add :math:`n_{\\text{other}}/D_r`
to each cell's expectation (a bias the server would have to estimate and subtract), and the "other"
cell's own estimate tells the server how much mass the pruning left out.

The oracle is the one of least variance for :math:`D_r` at ε (:func:`choose_mechanism`): E (direct
encoding, one code) on small domains, OLH on large ones (HR where its variance is within
:data:`CLOSE` of OLH's: a smaller report and a cheaper decoding).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..errors import ValidationError
from ..mechanisms.registry import Mechanism, least_variance, make_mechanism
from ..planning.choice import CLOSE
from ..validation import check_epsilon, check_int
from .encoding import StringEncoding, bit_fragment, prefix_bytes

__all__ = ["CANDIDATE_MECHANISMS", "MAX_DOMAIN", "choose_mechanism", "RoundSpec",
           "report"]

#: The mechanisms a round may use, cheapest decoding and smallest report first.
CANDIDATE_MECHANISMS = ("E", "HR", "OLH")
#: The largest round domain :math:`D_r` (the server's tally and transform are of this size).
MAX_DOMAIN = 1 << 22


def choose_mechanism(epsilon: float, domain_size: int) -> str:
    """The mechanism of :data:`CANDIDATE_MECHANISMS` whose count estimate has the least variance per report
    for a rare value, :math:`q^*(1-q^*)/(p^*-q^*)^2` (WBLJ17 eq. 4, at the exact probabilities), the first
    in that order within :data:`CLOSE` of the least.

    >>> choose_mechanism(2.0, 8), choose_mechanism(2.0, 1 << 16), choose_mechanism(0.1, 1 << 16)
    ('E', 'OLH', 'HR')
    """
    return least_variance(epsilon, domain_size, CANDIDATE_MECHANISMS, CLOSE)


@dataclass(frozen=True, eq=False)
class RoundSpec:
    """What the server publishes for round ``index`` (module docstring).

    ``candidates``: the C distinct prefixes of ``start_bits`` bits, sorted, as uint8 rows of
    ``ceil(start_bits/8)`` bytes with the bits after ``start_bits`` zero (round 0: one empty row).
    ``mechanism_name``: one of :data:`CANDIDATE_MECHANISMS` in place of :func:`choose_mechanism`'s (E for a
    shuffled collection: its blanket bound amplifies far more than the oracles' clone bound); None: the least
    variance's.
    """

    index: int
    start_bits: int
    width_bits: int
    candidates: np.ndarray
    epsilon: float
    mechanism_name: str | None = None

    def __post_init__(self) -> None:
        check_int(self.index, "round", 0)
        check_epsilon(self.epsilon)
        c = self.candidates
        if c.ndim != 2 or c.dtype != np.uint8 or c.shape[1] != -(-self.start_bits // 8) or len(c) < 1:
            raise ValidationError("candidates", f"a non-empty uint8 array of shape (C, {-(-self.start_bits // 8)})",
                                  f"got shape {c.shape}, dtype {c.dtype}")
        if self.start_bits == 0 and len(c) != 1:
            raise ValidationError("candidates", "the empty prefix alone in round 0", f"got {len(c)} rows")
        keys = self.keys
        if len(keys) > 1 and not np.array_equal(np.unique(keys), keys):
            raise ValidationError("candidates", "distinct prefixes in increasing order", "not sorted or repeated")
        if self.mechanism_name is not None and self.mechanism_name not in CANDIDATE_MECHANISMS:
            raise ValidationError("mechanism", f"one of {', '.join(CANDIDATE_MECHANISMS)} or None",
                                  f"got {self.mechanism_name!r}")
        if self.domain_size > MAX_DOMAIN:
            raise ValidationError("candidates", f"C * 2^width + 1 <= {MAX_DOMAIN}", f"got {self.domain_size}")

    @property
    def keys(self) -> np.ndarray:
        """The candidates as one opaque (void) key each, ordered as bytes are."""
        return np.ascontiguousarray(self.candidates).view(f"V{max(1, self.candidates.shape[1])}").ravel()

    @property
    def has_other(self) -> bool:
        """Round 0 has no "other" cell: every code has the empty prefix."""
        return self.start_bits > 0

    @property
    def other(self) -> int:
        """The "other" cell, :math:`C\\,2^w`."""
        return len(self.candidates) << self.width_bits

    @property
    def domain_size(self) -> int:
        """:math:`D_r`."""
        return self.other + int(self.has_other)

    @functools.cached_property
    def mechanism(self) -> Mechanism:
        """The round's mechanism (``mechanism_name`` or :func:`choose_mechanism`'s) at the full ε over :math:`D_r`."""
        size = max(2, self.domain_size)
        return make_mechanism(self.mechanism_name or choose_mechanism(self.epsilon, size), self.epsilon, size)

    def cells_of(self, codes: np.ndarray) -> np.ndarray:
        """:math:`y(x)` of each code (uint8 ``(n, m)``), int64 in ``[0, D_r)``."""
        fragment = bit_fragment(codes, self.start_bits, self.width_bits)
        if not self.has_other:
            return fragment
        keys = self.keys
        mine = prefix_bytes(codes, self.start_bits).view(keys.dtype).ravel()
        index = np.minimum(np.searchsorted(keys, mine), len(keys) - 1)
        found = keys[index] == mine
        return np.where(found, (index << self.width_bits) | fragment, self.other)


def report(spec: RoundSpec, value: str, encoding: StringEncoding) -> int:
    """A device's report for ``spec``: its cell (:meth:`RoundSpec.cells_of`) randomized by the round's
    mechanism from the operating system's CSPRNG (an E code, an HR index or an OLH word, as an int)."""
    cell = spec.cells_of(encoding.encode_one(value)[None, :])
    return int(spec.mechanism.perturb_secure(cell)[0])
