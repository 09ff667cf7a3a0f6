"""DPAM: randomised smoothing + accelerated complementary-composite stochastic mirror descent (DPSCO §5, Alg. 2).

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.evaluation.comparison.dpam``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import logsumexp

from ldpsynth.evaluation.comparison.dpfw import DistributionQueries
from ldpsynth.evaluation.comparison.releases import CentralRelease, normalized_distribution
from ldpsynth.evaluation.comparison.workloads import Histogram, Workload
from ldpsynth.evaluation.primitives.composition import gaussian_zcdp, zcdp_to_approx_dp
from ldpsynth.evaluation.primitives.guarantee import Neighbours, PrivacyGuarantee
from ldpsynth.shared.validation import check_epsilon, check_int, check_probability

MAX_ITERATIONS = 20_000


def gaussian_sigma(iterations: int, n: int, epsilon: float, delta: float) -> float:
    """σ of every oracle call so that T calls are (ε, δ)-DP (zCDP route; the module docstring)."""
    t, eps = check_int(iterations, "iterations", 1), check_epsilon(epsilon)
    log_delta = math.log(1.0 / check_probability(delta, "delta"))
    return math.sqrt(t) * (math.sqrt(log_delta + eps) + math.sqrt(log_delta)) / (check_int(n, "n", 1) * eps)


def privacy_of(sigma: float, iterations: int, n: int, delta: float) -> float:
    """ε of T Gaussian oracle calls with noise σ on p̂ (ℓ2-sensitivity √2/n): ρ + 2√(ρ ln(1/δ)), ρ = T/(n²σ²)."""
    return zcdp_to_approx_dp(iterations * gaussian_zcdp(math.sqrt(2.0) / n, sigma), delta)


def gaussian_width(matrix: np.ndarray, samples: int, rng: np.random.Generator) -> float:
    """Monte Carlo :math:`E_Z \\max_j |\\langle a_j, Z\\rangle|`, Z ~ N(0, I_d) (data-independent)."""
    z = rng.standard_normal((samples, matrix.shape[1]))
    return float(np.abs(z @ matrix.T).max(axis=1).mean())


@dataclass(frozen=True)
class DPAM:
    """DPAM (see the module docstring). ``mu`` and ``iterations`` default to the derived values."""

    epsilon: float
    delta: float = 1e-6
    mu: float | None = None
    iterations: int | None = None
    max_iterations: int = MAX_ITERATIONS
    width_samples: int = 200

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "delta", check_probability(self.delta, "delta"))
        if self.mu is not None:
            object.__setattr__(self, "mu", check_epsilon(self.mu, "mu"))
        if self.iterations is not None:
            object.__setattr__(self, "iterations", check_int(self.iterations, "iterations", 1, 10**7))
        object.__setattr__(self, "max_iterations", check_int(self.max_iterations, "max_iterations", 1, 10**7))
        object.__setattr__(self, "width_samples", check_int(self.width_samples, "width_samples", 1, 10**6))

    @property
    def name(self) -> str:
        return "DPAM"

    @property
    def guarantee(self) -> PrivacyGuarantee:
        return PrivacyGuarantee(self.epsilon, self.delta, Neighbours.REPLACE_ONE_ROW,
                                "T Gaussian oracle calls on the empirical distribution (l2-sensitivity sqrt(2)/n), "
                                "rho = T/(n sigma)^2 zCDP, eps = rho + 2 sqrt(rho ln(1/delta))")

    def parameters(self, queries: DistributionQueries, rng: np.random.Generator) -> tuple[float, int, float, float]:
        """``(μ, T, σ, GW)``: the given values or the derived defaults (see the module docstring)."""
        d = queries.matrix.shape[1]
        log_d = math.log(max(d, 2))
        width = gaussian_width(queries.matrix, self.width_samples, rng)
        if self.iterations is not None:
            t = self.iterations
        else:
            t_star = (4.0 * math.sqrt(2.0 * log_d) * queries.n * self.epsilon
                      / (width * math.sqrt(math.log(1 / self.delta))))
            t = int(min(self.max_iterations, max(1, round(t_star))))
        mu = self.mu if self.mu is not None else math.sqrt(32.0 / (t * log_d))
        return mu, t, gaussian_sigma(t, queries.n, self.epsilon, self.delta), width

    def release(self, data: Histogram | npt.ArrayLike, workload: Workload, rng: np.random.Generator) -> CentralRelease:
        hist = workload.check_histogram(data)
        queries = DistributionQueries.of(workload, hist)
        mu, t_max, sigma, width = self.parameters(queries, rng)
        a = queries.matrix
        m, d = a.shape
        p_hat = hist.distribution().ravel()
        lipschitz = math.sqrt(2.0 * math.log(2.0 * d)) / sigma
        x = np.full(d, 1.0 / d)
        log_z = np.full(d, -math.log(d))
        big_w = 0.0
        for t in range(1, t_max + 1):
            w_t = t / (4.0 * lipschitz)
            new_w = t * (t + 1) / (8.0 * lipschitz)
            y = (big_w * x + w_t * np.exp(log_z)) / new_w
            scores = a @ (y - p_hat + rng.normal(0.0, sigma, d))   # the private oracle (DPSCO eq. 9)
            j = int(np.argmax(np.abs(scores)))
            gradient = a[j] if scores[j] >= 0 else -a[j]
            log_z = ((1.0 + mu * big_w) * log_z - w_t * gradient) / (1.0 + mu * new_w)
            log_z -= logsumexp(log_z)
            x = (big_w * x + w_t * np.exp(log_z)) / new_w
            big_w = new_w
        dist = normalized_distribution(x.reshape(hist.counts.shape))
        details: dict[str, Any] = {"mu": mu, "iterations": t_max, "sigma": sigma, "gaussian_width": width,
                                   "smoothness": lipschitz}
        return CentralRelease(self.name, workload.distribution_answers(dist, hist), dist, hist.n, self.guarantee,
                              details)
