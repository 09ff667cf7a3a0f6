"""DPFW: differentially private Frank–Wolfe on the entropy-regularised dual (DPSCO §4, Alg. 1).

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.evaluation.comparison.dpfw``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import log_softmax

from ldpsynth.evaluation.comparison.releases import CentralRelease, normalized_distribution
from ldpsynth.evaluation.comparison.workloads import Histogram, Workload
from ldpsynth.evaluation.primitives.composition import advanced_composition_step, approx_dp_to_zcdp
from ldpsynth.evaluation.primitives.guarantee import Neighbours, PrivacyGuarantee
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_choice, check_epsilon, check_int, check_probability, check_real

MODES = ("paper", "practical")
ACCOUNTINGS = ("advanced", "zcdp", "basic")
#: Default cap on T (a compute budget; not from DPSCO).
MAX_ITERATIONS = 20_000
#: δ used only to choose μ and T for pure-DP (basic) accounting.
DEFAULT_DELTA = 1e-6


@dataclass(frozen=True, eq=False)
class DistributionQueries:
    """A workload as centred linear queries on the distribution scale: answers are
    :math:`\\langle a_j, p\\rangle + o_j`.

    ``matrix`` is ``(m, d)`` with :math:`a_j = n W_j/Z_j - o_j` and ``offset`` :math:`o_j` the midpoint
    of :math:`n W_j / Z_j` over the cells; ``n`` the data size (public).
    """

    matrix: np.ndarray
    offset: np.ndarray
    n: int

    @classmethod
    def of(cls, workload: Workload, hist: Histogram) -> DistributionQueries:
        z = workload.normalizers(hist.group_sizes)
        factor = hist.n / z
        a = workload.weights.reshape(workload.size, workload.cells) * factor[:, None]
        mid = 0.5 * (a.max(axis=1) + a.min(axis=1))
        return cls(a - mid[:, None], mid, hist.n)

    @property
    def ranges(self) -> np.ndarray:
        """:math:`\\max_x a_j(x) - \\min_x a_j(x)`, ``(m,)``."""
        return self.matrix.max(axis=1) - self.matrix.min(axis=1)

    def answers(self, p: np.ndarray) -> np.ndarray:
        return self.matrix @ p + self.offset


def derived_parameters(n: int, epsilon: float, delta: float, m: int, d: int, kappa: float) -> tuple[float, int, float]:
    """The derived defaults :math:`(\\mu^*, T^*, \\eta^*)` (uncapped T); see the module docstring."""
    log_delta = math.log(1.0 / delta)
    log_m = 1.0 + math.log(2.0 * m)
    c = 8.0 * math.sqrt(2.0 * kappa * log_m) * log_delta ** 0.25 / math.sqrt(n * epsilon)
    mu = (c / (4.0 * math.log(max(d, 2)))) ** 0.8
    t = max(1, int(round(n * epsilon / (kappa * math.sqrt(mu * log_delta) * log_m))))
    eta = min(1.0, math.sqrt(2.0 * mu / t))
    return mu, t, eta


@dataclass(frozen=True)
class DPFW:
    """Differentially private Frank–Wolfe (DPSCO Alg. 1), (ε, δ)-DP under replace-one rows.

    Parameters
    ----------
    epsilon, delta:
        Budget: ε > 0; δ in (0, 1) (ignored by ``accounting="basic"``, which is pure ε-DP).
    mode:
        ``"paper"`` (constant step, uniformly random iterate) or ``"practical"`` (2/(t+2), last iterate).
    accounting:
        ``"advanced"``, ``"zcdp"`` or ``"basic"`` (module docstring).
    mu, iterations, step:
        Regularisation μ > 0, T in [1, 10^7], constant step η in (0, 1] (paper mode); None: the
        derived defaults (T capped at ``max_iterations``).
    max_iterations:
        Cap on the derived T, in [1, 10^7].
    """

    epsilon: float
    delta: float = DEFAULT_DELTA
    mode: str = "paper"
    accounting: str = "advanced"
    mu: float | None = None
    iterations: int | None = None
    step: float | None = None
    max_iterations: int = MAX_ITERATIONS

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, "epsilon"))
        object.__setattr__(self, "delta", check_probability(self.delta, "delta"))
        check_choice(self.mode, "mode", MODES)
        check_choice(self.accounting, "accounting", ACCOUNTINGS)
        if self.mu is not None:
            object.__setattr__(self, "mu", check_real(self.mu, "mu", low=0.0, low_open=True))
        if self.step is not None:
            object.__setattr__(self, "step", check_real(self.step, "step", low=0.0, high=1.0, low_open=True))
        if self.iterations is not None:
            object.__setattr__(self, "iterations", check_int(self.iterations, "iterations", 1, 10**7))
        object.__setattr__(self, "max_iterations", check_int(self.max_iterations, "max_iterations", 1, 10**7))
        if self.step is not None and self.mode == "practical":
            raise ValidationError("step", "None in practical mode (the step is 2/(t+2))", f"got {self.step!r}")

    @property
    def name(self) -> str:
        return f"DPFW ({self.mode}, {self.accounting})"

    @property
    def pure(self) -> bool:
        return self.accounting == "basic"

    # ----- parameters -----------------------------------------------------------------------
    def parameters(self, queries: DistributionQueries) -> tuple[float, int, float]:
        """``(μ, T, η)``: the given values or the derived defaults (T capped), η recomputed for T."""
        m, d = queries.matrix.shape
        kappa = 2.0 * float(queries.ranges.max())
        if kappa <= 0:
            raise ValidationError("workload", "at least one query that is not constant on the domain",
                                  "every query is constant")
        delta = DEFAULT_DELTA if self.pure else self.delta
        mu, t, _ = derived_parameters(queries.n, self.epsilon, delta, m, d, kappa)
        mu = self.mu if self.mu is not None else mu
        t = self.iterations if self.iterations is not None else min(t, self.max_iterations)
        eta = self.step if self.step is not None else min(1.0, math.sqrt(2.0 * mu / t))
        return mu, t, eta

    def step_epsilon(self, iterations: int) -> float:
        """ε0 of one selection step for T = ``iterations`` under :attr:`accounting`."""
        if self.accounting == "basic":
            return self.epsilon / iterations
        if self.accounting == "advanced":
            return advanced_composition_step(self.epsilon, iterations, self.delta)
        rho = approx_dp_to_zcdp(self.epsilon, self.delta)
        return math.sqrt(8.0 * rho / iterations)

    @staticmethod
    def sensitivity(queries: DistributionQueries) -> float:
        """Δ: the largest change of a gradient coordinate between replace-one neighbours."""
        return float(queries.ranges.max()) / queries.n

    def noise_scale(self, queries: DistributionQueries, iterations: int) -> float:
        """:math:`2\\Delta/\\epsilon_0`: the Laplace (or Gumbel, zCDP) scale of the selection noise."""
        return 2.0 * self.sensitivity(queries) / self.step_epsilon(iterations)

    @property
    def guarantee(self) -> PrivacyGuarantee:
        how = {"advanced": "T report-noisy-max steps Lap(2Δ/eps0), advanced composition (DRV10), eps0 exact inverse",
               "zcdp": "T exponential-mechanism steps (Gumbel(2Δ/eps0)), rho = T eps0^2/8, "
                       "eps = rho + 2 sqrt(rho ln(1/delta))",
               "basic": "T report-noisy-max steps Lap(2Δ/eps0), basic composition eps0 = eps/T"}[self.accounting]
        return PrivacyGuarantee(self.epsilon, 0.0 if self.pure else self.delta, Neighbours.REPLACE_ONE_ROW, how)

    # ----- algorithm ---------------------------------------------------------------------------
    def release(self, data: Histogram | npt.ArrayLike, workload: Workload, rng: np.random.Generator) -> CentralRelease:
        hist = workload.check_histogram(data)
        queries = DistributionQueries.of(workload, hist)
        mu, t_max, eta = self.parameters(queries)
        scale = self.noise_scale(queries, t_max)
        a = queries.matrix
        m = a.shape[0]
        target = a @ hist.distribution().ravel()          # A p̂ (the only data access), (m,)
        s = np.zeros(a.shape[1])                            # A^T λ_0 = 0 for λ_0 uniform
        out_at = int(rng.integers(1, t_max + 1)) if self.mode == "paper" else t_max   # data-independent
        s_out = s
        for t in range(t_max):
            p = np.exp(log_softmax(-s / mu))
            err = a @ p - target                            # gradient, first half; second half is -err
            grad = np.concatenate([err, -err])
            if self.accounting == "zcdp":
                noisy = grad + rng.gumbel(scale=scale, size=2 * m)
            else:
                noisy = grad + rng.laplace(scale=scale, size=2 * m)
            j = int(np.argmax(noisy))
            vertex = a[j] if j < m else -a[j - m]
            step = eta if self.mode == "paper" else 2.0 / (t + 2.0)
            s = (1.0 - step) * s + step * vertex
            if t + 1 == out_at:
                s_out = s
                if self.mode == "paper":
                    break                                   # later iterates are never output
        dist = normalized_distribution(np.exp(log_softmax(-s_out / mu)).reshape(hist.counts.shape))
        details: dict[str, Any] = {"mu": mu, "iterations": t_max, "step": eta if self.mode == "paper" else "2/(t+2)",
                                   "step_epsilon": self.step_epsilon(t_max), "noise_scale": scale,
                                   "output_iterate": out_at}
        return CentralRelease(self.name, workload.distribution_answers(dist, hist), dist, hist.n, self.guarantee,
                              details)
