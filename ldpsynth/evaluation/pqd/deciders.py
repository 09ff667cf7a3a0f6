"""The DP-PQD deciders by name, a runner with its privacy record, and evaluation against the truth.

:func:`run_decider` is the private path: it gives the decider a
:class:`~.access.PrivateView` of the private table and returns the outcomes with the
accountant's record (steps, ε, reads). :func:`evaluate` is the evaluation path (it reads the
truth :math:`q(D)`, so it is *not* private): empirical error over independent executions and,
where available, the exact error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ldpsynth.evaluation.pqd.access import PrivacyAccountant, PrivateView
from ldpsynth.evaluation.pqd.count import (
    BinaryEMCount,
    EMCount,
    LegacyEMCount,
    LMCount,
    NaiveEMCount,
    laplace_accept_probability,
)
from ldpsynth.evaluation.pqd.median import (
    EMMedian,
    HistMedian,
    em_median_accept_probability,
    hist_median_accept_probability,
)
from ldpsynth.evaluation.pqd.problem import Decider, DecisionProblem
from ldpsynth.evaluation.pqd.sum import (
    LMSum,
    R2TSum,
    SVTSum,
    r2t_accept_probability,
    svt_accept_probability,
    truncation_thresholds,
)
from ldpsynth.evaluation.pqd.table import Table
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_choice

#: Every decider by name. ``EM_count_legacy`` reproduces the artifact's overflow (not ε-DP: evaluation
#: mode only); ``SVT_sum_paper`` is Algorithm 2 as printed (no Algorithm 4).
DECIDERS: dict[str, Decider] = {
    "LM_count": LMCount(),
    "EM_count": EMCount(),
    "EM_count_legacy": LegacyEMCount(),
    "EM_count_naive": NaiveEMCount(),
    "LM_sum": LMSum(),
    "R2T_sum": R2TSum(),
    "SVT_sum": SVTSum(),
    "SVT_sum_paper": SVTSum(use_alg4=False),
    "EM_med": EMMedian(),
    "Hist_med": HistMedian(),
}

#: The deciders DP-PQD evaluates, per aggregate (DP-PQD §7.2, Figs. 5-10).
DEFAULT_DECIDERS: dict[str, tuple[str, ...]] = {
    "count": ("LM_count", "EM_count"),
    "sum": ("LM_sum", "R2T_sum", "SVT_sum"),
    "median": ("EM_med", "Hist_med"),
    "quantile": ("EM_med", "Hist_med"),
}


def get_decider(name: str) -> Decider:
    return DECIDERS[check_choice(name, "decider", DECIDERS)]


@dataclass(frozen=True)
class DecisionRun:
    """Outcomes of ``len(decisions)`` independent executions and the privacy record of one."""

    decider: str
    decisions: np.ndarray
    accountant: PrivacyAccountant

    @property
    def epsilon_per_run(self) -> float:
        return self.accountant.spent


def run_decider(decider: Decider, private: Table, problem: DecisionProblem, rng: np.random.Generator,
                trials: int = 1) -> DecisionRun:
    """Run ``decider`` on the private table through an accounted view (the private path)."""
    require_private(decider)
    return _run(decider, private, problem, rng, trials)


def require_private(decider: Decider) -> None:
    """Refuse a decider whose privacy loss is unbounded on the private path: its accounted ε would
    be a false promise."""
    if not decider.differentially_private:
        private_ones = ", ".join(name for name, d in DECIDERS.items() if d.differentially_private)
        raise ValidationError("decider", f"an epsilon-DP decider ({private_ones})",
                              f"{decider.name} is not differentially private (its privacy loss is unbounded); "
                              "it runs only in the evaluation mode (--trials), which reads the truth")


def _run(decider: Decider, private: Table, problem: DecisionProblem, rng: np.random.Generator,
         trials: int) -> DecisionRun:
    accountant = PrivacyAccountant(problem.epsilon)
    view = PrivateView(private, problem.query, accountant, problem.domain)
    decisions = decider.decide(view, problem, rng, trials)
    return DecisionRun(decider.name, decisions, accountant)


# ----- evaluation (reads the truth: not private) ------------------------------------------------
def _selected(private: Table, problem: DecisionProblem) -> tuple[int, np.ndarray]:
    mask = problem.query.mask(private)
    if problem.query.attribute is None:
        return int(mask.sum()), np.empty(0)
    assert problem.domain is not None
    return int(mask.sum()), np.sort(problem.domain.clamp(problem.query.values(private)[mask]))


def exact_accept_probability(decider: Decider, private: Table, problem: DecisionProblem) -> float:
    """:math:`\\Pr[o = 1]` of ``decider`` computed exactly from the private table (evaluation only)."""
    decider.check(problem)
    n, values = _selected(private, problem)
    l, r = problem.interval
    if isinstance(decider, LMCount):
        return laplace_accept_probability(n, l, r, 1.0 / problem.epsilon)
    if isinstance(decider, BinaryEMCount):
        return decider.accept_probability(n, problem)
    domain = problem.require_domain(decider.name)
    if isinstance(decider, LMSum):
        return laplace_accept_probability(float(values.sum()), l, r, domain.global_sensitivity / problem.epsilon)
    if isinstance(decider, (R2TSum, SVTSum)):
        thresholds = truncation_thresholds(domain.global_sensitivity)
        prefix = np.concatenate([[0.0], np.cumsum(values)])
        truncated = prefix[np.searchsorted(values, thresholds, side="right")]
        if isinstance(decider, R2TSum):
            return r2t_accept_probability(truncated, thresholds, problem, decider.beta)
        counts = np.searchsorted(values, thresholds, side="right").astype(np.float64)
        return svt_accept_probability(truncated, counts, n, thresholds, problem, decider.theta, decider.use_alg4)
    if isinstance(decider, EMMedian):
        candidates = domain.candidates()
        return em_median_accept_probability(candidates, np.searchsorted(values, candidates, side="left"), n, problem)
    if isinstance(decider, HistMedian):
        at_most_l = float(np.searchsorted(values, l, side="right"))
        at_least_r = float(n - np.searchsorted(values, r, side="left"))
        return hist_median_accept_probability(n, at_most_l, at_least_r, problem)
    raise ValidationError("decider", "a decider with an exact accept probability", f"got {decider.name}")


class Evaluation(NamedTuple):
    """Empirical error over ``trials`` executions against the truth, and the exact error (a row of
    ``ldpsynth pqd``'s report: ``evaluation._asdict()``)."""

    #: The decider's name (e.g. ``"LM_count"``).
    decider: str
    #: :math:`q(D)` on the private table.
    true_answer: float
    #: Whether :math:`l < q(D) < r`: the right outcome is 1 (accept) if so, else 0.
    satisfied: bool
    #: Executions run, and how many of them accepted.
    trials: int
    accepted: int
    #: The fraction of wrong outcomes over the executions (DP-PQD Def. 3.2).
    empirical_error: float
    #: The probability of a wrong outcome, from the decider's exact accept probability
    #: (NaN when not computed).
    exact_error: float


def evaluate(decider: Decider, private: Table, problem: DecisionProblem, rng: np.random.Generator,
             trials: int, exact: bool = True) -> Evaluation:
    """Run ``trials`` executions and compare with the truth (evaluation mode: reads q(D), so it is
    not private, and deciders that are not ε-DP may be evaluated too)."""
    run = _run(decider, private, problem, rng, trials)
    truth = problem.query.answer(private)
    satisfied = problem.satisfied(truth)
    accept = exact_accept_probability(decider, private, problem) if exact else float("nan")
    return Evaluation(decider.name, truth, satisfied, trials, int(run.decisions.sum()),
                      problem.error(run.decisions, truth), 1.0 - accept if satisfied else accept)
