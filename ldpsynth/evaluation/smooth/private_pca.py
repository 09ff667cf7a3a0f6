"""Private Subspace Iteration (PSI), JWHZW Alg. 2 (after Hardt13), with its accounting.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.evaluation.smooth.private_pca``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_choice, check_epsilon, check_int, check_probability, check_real

NOISE_KINDS = ("gaussian", "laplace")
MULTIPLIERS = ("one", "max")
EIGENVALUES = ("noisy", "rayleigh")


def covariance(data: np.ndarray) -> np.ndarray:
    """:math:`A = \\frac1n\\sum_i \\mathbf z_i\\mathbf z_i^\\top - \\bar{\\mathbf z}\\bar{\\mathbf z}^\\top`
    (``(d, d)``)."""
    n = data.shape[0]
    mean = data.mean(axis=0)
    return data.T @ data / n - np.outer(mean, mean)


def covariance_sensitivity(n: int, d: int) -> float:
    """:math:`\\Delta_A = 5d/n + 4d/n^2 \\ge \\|A(D) - A(D')\\|_2` for replace-one neighbours in :math:`[-1,1]^d`.

    :math:`\\|\\mathbf z\\mathbf z^\\top - \\mathbf z'\\mathbf z'^\\top\\|_2 \\le d` (difference of PSD matrices of norm
    :math:`\\le d`); with :math:`\\mathbf v = \\mathbf z' - \\mathbf z`, :math:`\\|\\mathbf v\\| \\le 2\\sqrt d`, the
    mean term changes by
    :math:`\\|\\bar{\\mathbf z}\\mathbf v^\\top + \\mathbf v\\bar{\\mathbf z}^\\top\\|/n + \\|\\mathbf v\\|^2/n^2
    \\le 4d/n + 4d/n^2`.
    """
    return 5.0 * d / n + 4.0 * d / n**2


def orthonormalize(w: np.ndarray) -> np.ndarray:
    """Gram–Schmidt of the columns of ``w`` (thin QR with the signs fixed so ``diag(R) >= 0``, as GS gives)."""
    q, r = np.linalg.qr(w)
    signs = np.where(np.diag(r) < 0, -1.0, 1.0)
    return q * signs


@dataclass(frozen=True)
class PsiConfig:
    """Parameters of one PSI run: ``k`` directions, ``iterations`` = L, the noise and the eigenvalue rule.

    ``scale`` is σ (Gaussian standard deviation or Laplace scale); 0 means no noise (not private;
    for tests of the iteration itself).
    """

    k: int
    iterations: int
    noise: str = "gaussian"
    scale: float = 0.0
    multiplier: str = "one"
    eigenvalues: str = "noisy"

    def __post_init__(self) -> None:
        check_int(self.k, "k", 1)
        check_int(self.iterations, "iterations", 1, 10_000)
        check_choice(self.noise, "noise", NOISE_KINDS)
        check_choice(self.multiplier, "multiplier", MULTIPLIERS)
        check_choice(self.eigenvalues, "eigenvalues", EIGENVALUES)
        check_real(self.scale, "scale", low=0.0)

    @property
    def noisy_iterations(self) -> int:
        """:math:`I`: L, plus the eigenvalue iteration when ``eigenvalues == "noisy"``."""
        return self.iterations + (self.eigenvalues == "noisy")

    def cost(self, n: int, d: int) -> float:
        """μ (Gaussian: μ-GDP) or ε (Laplace: ε-DP) of the run on ``n`` rows in ``d`` dimensions.

        ``math.inf`` when the run is not private: no noise, or the paper's exact-covariance eigenvalues.
        """
        if self.scale == 0.0 or self.eigenvalues == "rayleigh":
            return math.inf
        ratio = covariance_sensitivity(n, d) / (self.scale * (1.0 if self.multiplier == "one" else 1.0 / math.sqrt(d)))
        if self.noise == "gaussian":
            return math.sqrt(self.noisy_iterations * self.k) * ratio
        return self.noisy_iterations * self.k * math.sqrt(d) * ratio

    def noise_column_norm(self, d: int) -> float:
        """Root-mean-square :math:`\\ell_2` norm of one column of :math:`G^{(l)}` in ``d`` dimensions.

        :math:`\\sigma\\sqrt d` (Gaussian) or :math:`\\sigma\\sqrt{2d}` (Laplace, variance :math:`2\\sigma^2`). In
        step 5, :math:`W^{(l)} = A X^{(l-1)} + c_l G^{(l)}`, column ``s`` carries the signal
        :math:`A\\mathbf x_s` of norm at most :math:`\\lambda_1` against this noise (:math:`c_l = 1`, safe).
        """
        d = check_int(d, "d", 1)
        return self.scale * math.sqrt((2.0 if self.noise == "laplace" else 1.0) * d)

    # ----- calibrations ---------------------------------------------------------------------
    @classmethod
    def safe_gaussian(cls, n: int, d: int, k: int, iterations: int, mu: float) -> PsiConfig:
        """σ with :meth:`cost` = ``mu`` exactly: :math:`\\sigma = \\sqrt{(L+1)k}\\,\\Delta_A/\\mu`, multiplier 1,
        noisy eigenvalues."""
        mu = check_epsilon(mu, "mu")
        sigma = math.sqrt((iterations + 1) * k) * covariance_sensitivity(n, d) / mu
        return cls(k, iterations, "gaussian", sigma, "one", "noisy")

    @classmethod
    def safe_laplace(cls, n: int, d: int, k: int, iterations: int, epsilon: float) -> PsiConfig:
        """Laplace scale with :meth:`cost` = ``epsilon``: :math:`(L+1)k\\sqrt d\\,\\Delta_A/\\epsilon`."""
        eps = check_epsilon(epsilon, "epsilon")
        scale = (iterations + 1) * k * math.sqrt(d) * covariance_sensitivity(n, d) / eps
        return cls(k, iterations, "laplace", scale, "one", "noisy")

    @classmethod
    def paper_gaussian(cls, n: int, d: int, k: int, iterations: int, epsilon: float, delta: float) -> PsiConfig:
        """As published (Alg. 2 step 1): :math:`\\sigma = 5d\\sqrt{4kL\\ln(1/\\delta)}/(n\\epsilon)`, multiplier
        :math:`\\|X\\|_{\\max}`, eigenvalues :math:`\\sqrt{\\mathbf x^\\top A^2\\mathbf x}`."""
        eps, dl = check_epsilon(epsilon, "epsilon"), check_probability(delta, "delta")
        sigma = 5.0 * d * math.sqrt(4.0 * k * iterations * math.log(1.0 / dl)) / (n * eps)
        return cls(k, iterations, "gaussian", sigma, "max", "rayleigh")

    @classmethod
    def paper_laplace(cls, n: int, d: int, k: int, iterations: int, epsilon: float) -> PsiConfig:
        """As published (Thm 3.6, pure ε): Laplace scale :math:`50 d^{3/2} k L/(n\\epsilon)`, multiplier
        :math:`\\|X\\|_{\\max}`, eigenvalues :math:`\\sqrt{\\mathbf x^\\top A^2\\mathbf x}`."""
        eps = check_epsilon(epsilon, "epsilon")
        return cls(k, iterations, "laplace", 50.0 * d**1.5 * k * iterations / (n * eps), "max", "rayleigh")


@dataclass(frozen=True)
class PrivateEigenpairs:
    """PSI's output: ``vectors`` (d, k) with orthonormal columns and ``values`` (k,) eigenvalue estimates."""

    vectors: np.ndarray
    values: np.ndarray
    config: PsiConfig


def private_subspace_iteration(data: npt.ArrayLike, config: PsiConfig, rng: np.random.Generator) -> PrivateEigenpairs:
    """Run Algorithm 2 on ``data`` (``(n, d)`` in :math:`[-1,1]^d`) with ``config``; vectorised over the k columns."""
    z = np.asarray(data, dtype=np.float64)
    if z.ndim != 2 or z.shape[0] < 1:
        raise ValidationError("data", "an (n, d) array with n >= 1", f"got shape {z.shape}")
    n, d = z.shape
    if config.k > d:
        raise ValidationError("k", f"an integer in [1, d = {d}]", f"got {config.k}")
    a = covariance(z)

    def noise() -> np.ndarray:
        if config.scale == 0.0:
            return np.zeros((d, config.k))
        if config.noise == "gaussian":
            return rng.normal(0.0, config.scale, size=(d, config.k))
        return rng.laplace(0.0, config.scale, size=(d, config.k))

    def multiplier(x: np.ndarray) -> float:
        return 1.0 if config.multiplier == "one" else float(np.abs(x).max())

    x = orthonormalize(rng.standard_normal((d, config.k)))                 # step 2
    for _ in range(config.iterations):                                       # steps 3-7
        x = orthonormalize(a @ x + multiplier(x) * noise())
    if config.eigenvalues == "noisy":
        w = a @ x + multiplier(x) * noise()                                  # one more noisy iteration
        values = np.clip(np.linalg.norm(w, axis=0), 0.0, float(d))
    else:
        values = np.sqrt(np.einsum("ij,ij->j", x, a @ (a @ x)))             # Cor. 3.5, not private
    return PrivateEigenpairs(x, values, config)
