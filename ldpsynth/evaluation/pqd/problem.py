"""The DP-PQD decision problem (DP-PQD Def. 3.1) and the interface of a decider.

Given the private D, a synthetic answer :math:`q(D_s)`, a distance bound :math:`\\tau > 0` and
:math:`\\epsilon > 0`, decide whether :math:`|q(D) - q(D_s)| < \\tau` under ε-DP. With

.. math::  I = (l, r) = (q(D_s) - \\tau,\\ q(D_s) + \\tau) \\qquad \\text{(eq. 1)}

the truth is "bound satisfied" iff :math:`l < q(D) < r` (open interval, as the artifact's
``FP_FN``), and the error of a decider (Def. 3.2) is
:math:`\\Pr[o=1 \\wedge d_q \\ge \\tau] + \\Pr[o=0 \\wedge d_q < \\tau]`. A relative τ (§7.1,
"τ as a percentage of :math:`q(D_s)`") gives :math:`I = (q(D_s)(1-\\tau), q(D_s)(1+\\tau))`,
i.e. the absolute bound :math:`\\tau |q(D_s)|`.

A :class:`Decider` runs ``trials`` independent executions at once (vectorised over the noise;
each execution is ε-DP on its own, so ``trials`` runs together cost ``trials * ε``: evaluation
only) and returns one 0/1 outcome per execution.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ldpsynth.evaluation.pqd.access import PrivateView
from ldpsynth.evaluation.pqd.query import Query
from ldpsynth.evaluation.pqd.table import NumericDomain
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_epsilon, check_int, check_real


@dataclass(frozen=True)
class DecisionProblem:
    """One per-query decision: the query, :math:`q(D_s)`, the absolute τ, ε, and public bounds."""

    query: Query
    synthetic_answer: float
    tau: float
    epsilon: float
    domain: NumericDomain | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "synthetic_answer", check_real(self.synthetic_answer, "synthetic_answer"))
        object.__setattr__(self, "tau", check_real(self.tau, "tau", low=0.0, low_open=True))
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, "epsilon"))
        if self.domain is not None and self.query.attribute is not None \
                and self.domain.attribute not in ("attribute", self.query.attribute):
            raise ValidationError("domain", f"the domain of the aggregated attribute {self.query.attribute!r}",
                                  f"got the domain of {self.domain.attribute!r}")

    @classmethod
    def relative(cls, query: Query, synthetic_answer: float, tau_fraction: float, epsilon: float,
                 domain: NumericDomain | None = None) -> DecisionProblem:
        """τ as a fraction of :math:`|q(D_s)|` (DP-PQD §7.1): absolute bound ``tau_fraction * |q(D_s)|``."""
        frac = check_real(tau_fraction, "tau", low=0.0, low_open=True, legal="a finite fraction > 0 (0.032 = 3.2 %)")
        answer = check_real(synthetic_answer, "synthetic_answer")
        if answer == 0:
            raise ValidationError("tau", "an absolute tau when q(D_s) = 0 (a relative tau gives an empty interval)",
                                  "relative tau with q(D_s) = 0")
        return cls(query, answer, frac * abs(answer), epsilon, domain)

    @property
    def interval(self) -> tuple[float, float]:
        """:math:`I = (l, r)` of eq. 1."""
        return self.synthetic_answer - self.tau, self.synthetic_answer + self.tau

    def satisfied(self, true_answer: float) -> bool:
        """The truth: :math:`l < q(D) < r` (evaluation only)."""
        l, r = self.interval
        return bool(l < true_answer < r)

    def error(self, decisions: np.ndarray, true_answer: float) -> float:
        """Empirical error (Def. 3.2): the fraction of wrong outcomes (evaluation only)."""
        return float(np.mean(np.asarray(decisions) != int(self.satisfied(true_answer))))

    def require_domain(self, who: str, non_negative: bool = False) -> NumericDomain:
        """The public domain of the aggregated attribute, which ``who`` needs."""
        if self.domain is None:
            raise ValidationError("domain", f"the public domain of {self.query.attribute!r} (needed by {who})",
                                  "missing")
        if non_negative and self.domain.lo < 0:
            raise ValidationError(f"domain.{self.domain.attribute}.lo", f"a number >= 0 ({who} truncates non-negative "
                                  "values, DP-PQD §5.2)", f"got {self.domain.lo}")
        return self.domain


class Decider(ABC):
    """A per-query decider: ε-DP in the private table, one 0/1 outcome per execution."""

    #: Name as in DP-PQD (LM_count, EM_count, ...).
    name: ClassVar[str]
    #: Aggregates it decides on.
    aggregates: ClassVar[tuple[str, ...]]
    #: Whether its privacy loss is bounded by the problem's ε. Only such deciders run on the private
    #: path (:func:`~.deciders.run_decider`); the others exist to reproduce a paper's figure.
    differentially_private: ClassVar[bool] = True

    def check(self, problem: DecisionProblem) -> None:
        if problem.query.aggregate not in self.aggregates:
            raise ValidationError("decider", f"a decider for {problem.query.aggregate.upper()} "
                                  f"({self.name} handles {', '.join(a.upper() for a in self.aggregates)})",
                                  f"got {self.name}")

    def decide(self, view: PrivateView, problem: DecisionProblem, rng: np.random.Generator,
               trials: int = 1) -> np.ndarray:
        """``trials`` independent outcomes (int8: 1 = "distance bound satisfied")."""
        self.check(problem)
        if view.query != problem.query:
            raise ValidationError("view", "a private view of the problem's query", "a view of another query")
        return self._decide(view, problem, rng, check_int(trials, "trials", 1)).astype(np.int8)

    @abstractmethod
    def _decide(self, view: PrivateView, problem: DecisionProblem, rng: np.random.Generator,
                trials: int) -> np.ndarray:
        """The algorithm; every private read inside ``view.accountant.step(...)``."""


def generic_decider(estimates: np.ndarray, problem: DecisionProblem) -> np.ndarray:
    """Algorithm 1 (GenericDecider): 1 iff :math:`-\\tau < \\tilde q - q(D_s) < \\tau`."""
    gap = np.asarray(estimates) - problem.synthetic_answer
    return ((-problem.tau < gap) & (gap < problem.tau)).astype(np.int8)
