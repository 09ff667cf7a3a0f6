"""A release's privacy guarantee: (ε, δ)-DP under a stated neighbouring relation.

A randomised mechanism M is :math:`(\\epsilon, \\delta)`-DP under a neighbouring relation
:math:`\\sim` when for all :math:`D \\sim D'` and every set S of outputs

.. math::  \\Pr[M(D) \\in S] \\le e^{\\epsilon} \\Pr[M(D') \\in S] + \\delta

(DR14 Def. 2.4; δ = 0 is pure ε-DP). The relation is part of the guarantee: the same ε means
different things under different relations, so every :class:`PrivacyGuarantee` names its
:class:`Neighbours`. The relations used by the central mechanisms:

* :attr:`Neighbours.REPLACE_ONE_ROW` — replace one row by any other row of the domain (bounded
  DP, n public): WYZ, DPSCO, JWHZW, and the comparison mechanisms when a row's label may change;
* :attr:`Neighbours.REPLACE_ONE_VALUE` — replace one row's private value, its public label fixed
  (the group sizes :math:`n_g` are public): WYZ's sub-database MWEM (WYZ §VI-A-1) needs it, since
  a row moving between sub-databases would touch two of them;
* :attr:`Neighbours.ADD_REMOVE_ONE_ROW` — add or remove one row (unbounded DP, n private):
  the DP-PQD deciders (DP-PQD §2.2);
* :attr:`Neighbours.LOCAL` — local DP: any two values of one row, on its own device (WYZ eq. 16);
  ε-LDP implies ε-DP under :attr:`~Neighbours.REPLACE_ONE_VALUE`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum


class Neighbours(str, Enum):
    """The neighbouring relation of a guarantee; its value is the sentence that states it."""

    REPLACE_ONE_ROW = "replace-one row (bounded DP: n public; a row may change its label and its value)"
    REPLACE_ONE_VALUE = "replace-one private value (bounded DP: n and the public labels' group sizes n_g are public)"
    ADD_REMOVE_ONE_ROW = "add/remove one row (unbounded DP: n private)"
    LOCAL = "local: every row's value is randomized on its own device (ε-LDP; implies ε-DP under replace-one value)"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


@dataclass(frozen=True)
class PrivacyGuarantee:
    """``(epsilon, delta)``-DP under ``neighbours``; ``statement`` says how it was obtained.

    ``delta`` is 0 for pure ε-DP. ``epsilon`` is ``math.inf`` when the release, as configured, is
    not differentially private (``statement`` then says why). The guarantee covers the whole
    release: anything computed from it without the data is post-processing (DR14 Prop. 2.1).
    """

    epsilon: float
    delta: float
    neighbours: Neighbours
    statement: str

    @property
    def is_private(self) -> bool:
        """False when ``epsilon`` is infinite (no differential privacy)."""
        return math.isfinite(self.epsilon)

    def __str__(self) -> str:
        kind = f"{self.epsilon:g}-DP" if self.delta == 0 else f"({self.epsilon:g}, {self.delta:g})-DP"
        return f"{kind} under {self.neighbours}; {self.statement}"
