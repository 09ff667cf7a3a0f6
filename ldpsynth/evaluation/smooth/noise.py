"""Noise on the basis answers of the smooth-query mechanism, in two settings, with their guarantees.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.evaluation.smooth.noise``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ldpsynth.evaluation.primitives.composition import composed_epsilon, gaussian_guarantee, gaussian_mu
from ldpsynth.evaluation.primitives.guarantee import Neighbours, PrivacyGuarantee
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_choice, check_epsilon, check_int, check_probability

NOISE_SETTINGS = ("safe", "paper")


def answer_vector(values: npt.ArrayLike, count: int, field: str, what: str) -> np.ndarray:
    """``values`` as float64 of shape ``(count,)``; else a :class:`ValidationError` naming ``field``."""
    v = np.asarray(values, dtype=np.float64)
    if v.shape != (count,):
        raise ValidationError(field, f"{count} {what}", f"got shape {v.shape}")
    return v


def additive_noise(kind: str, scale: float, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` independent draws of :math:`\\mathrm{Lap}(scale)` (``kind="laplace"``) or
    :math:`N(0, scale^2)` (``"gaussian"``)."""
    draw = rng.laplace if kind == "laplace" else rng.normal
    return draw(0.0, scale, size=count)


def additive_log_density(kind: str, scale: float, z: np.ndarray) -> float:
    """Log density of the noise vector ``z`` under :func:`additive_noise`: with :math:`c` = ``z.size``,
    :math:`-\\|z\\|_1/b - c\\ln(2b)` (``kind="laplace"``, :math:`b` = ``scale``) or
    :math:`-\\|z\\|_2^2/(2\\sigma^2) - c\\ln(\\sqrt{2\\pi}\\sigma)` (``"gaussian"``, :math:`\\sigma` = ``scale``)."""
    if kind == "laplace":
        return float(-np.abs(z).sum() / scale - z.size * math.log(2.0 * scale))
    return float(-(z @ z) / (2.0 * scale * scale) - z.size * math.log(math.sqrt(2.0 * math.pi) * scale))


@dataclass(frozen=True)
class MeansNoise:
    """Noise of one ``kind`` and ``scale`` on a vector of ``count`` means of :math:`[-1,1]`-valued functions of
    ``n`` rows (replace-one sensitivity :math:`2/n` per coordinate), and what the release guarantees."""

    kind: str
    scale: float
    count: int
    n: int
    guarantee: PrivacyGuarantee


@dataclass(frozen=True)
class BasisNoise(MeansNoise):
    """Noise added to ``count`` basis answers (``r = 0`` first) of ``n`` rows, and what it guarantees.

    ``kind`` is ``"laplace"`` (``scale`` = the Laplace scale b) or ``"gaussian"`` (``scale`` = σ);
    ``noisy_constant`` says whether :math:`b_0` gets noise too (the paper) or is released as 1 (safe).
    """

    setting: str
    noisy_constant: bool

    def apply(self, answers: npt.ArrayLike, rng: np.random.Generator) -> np.ndarray:
        """The noisy answers :math:`\\hat b` of exact answers ``answers`` (shape ``(count,)``)."""
        b = answer_vector(answers, self.count, "answers", "basis answers")
        out = b + additive_noise(self.kind, self.scale, self.count, rng)
        if not self.noisy_constant:
            out[0] = 1.0
        return out

    def log_density(self, released: npt.ArrayLike, answers: npt.ArrayLike) -> float:
        """Log density of releasing ``released`` when the exact answers are ``answers`` (the informative coordinates).

        The privacy loss of an output is the difference of this between neighbouring data sets;
        the tests evaluate it at worst-case outputs.
        """
        y = np.asarray(released, dtype=np.float64)
        b = np.asarray(answers, dtype=np.float64)
        start = 0 if self.noisy_constant else 1
        return additive_log_density(self.kind, self.scale, (y - b)[start:])


def basis_noise(count: int, n: int, epsilon: float, delta: float | None = None, setting: str = "safe") -> BasisNoise:
    """The noise of Algorithm 1 (``delta`` None) or of its (ε, δ) variant, in ``setting``, for ``count``
    basis answers."""
    k = check_int(count, "count", 2)
    n = check_int(n, "n", 1)
    eps = check_epsilon(epsilon)
    setting = check_choice(setting, "noise", NOISE_SETTINGS)
    informative = k - 1
    if delta is None:
        if setting == "safe":
            scale = 2.0 * informative / (n * eps)
            guarantee = PrivacyGuarantee(eps, 0.0, Neighbours.REPLACE_ONE_ROW,
                                         f"Laplace({scale:.6g}) on {informative} answers of l1-sensitivity "
                                         f"{2 * informative}/n: {eps:g}-DP")
            return BasisNoise("laplace", scale, k, n, guarantee, setting=setting, noisy_constant=False)
        scale = k / (n * eps)
        actual = 2.0 * eps * informative / k
        guarantee = PrivacyGuarantee(actual, 0.0, Neighbours.REPLACE_ONE_ROW,
                                     f"paper's Laplace(t^d/(n eps)) = Laplace({scale:.6g}): l1-sensitivity "
                                     f"{2 * informative}/n gives {actual:.6g}-DP (paper claims {eps:g})")
        return BasisNoise("laplace", scale, k, n, guarantee, setting=setting, noisy_constant=True)
    dl = check_probability(delta, "delta")
    if setting == "safe":
        mu = gaussian_mu(eps, dl)
        sigma = 2.0 * math.sqrt(informative) / n / mu
        guarantee = gaussian_guarantee(2.0 * math.sqrt(informative) / n / sigma, dl, Neighbours.REPLACE_ONE_ROW,
                                       f"Gaussian({sigma:.6g}) on {informative} answers of l2-sensitivity "
                                       f"2 sqrt({informative})/n")
        return BasisNoise("gaussian", sigma, k, n, guarantee, setting=setting, noisy_constant=False)
    scale = math.sqrt(k * math.log(1.0 / dl)) / (n * eps)
    actual = composed_epsilon((2.0 / n) / scale, informative, dl)
    guarantee = PrivacyGuarantee(actual, dl, Neighbours.REPLACE_ONE_ROW,
                                 f"paper's Laplace(sqrt(t^d ln(1/delta))/(n eps)) = Laplace({scale:.6g}) on "
                                 f"{informative} answers of sensitivity 2/n, advanced composition: "
                                 f"({actual:.6g}, {dl:g})-DP (paper claims ({eps:g}, {dl:g}))")
    return BasisNoise("laplace", scale, k, n, guarantee, setting=setting, noisy_constant=True)


def gaussian_basis_noise(count: int, n: int, mu: float, delta: float) -> BasisNoise:
    """Safe Gaussian noise on ``count`` basis answers calibrated to a GDP parameter ``mu`` (a share of a
    composed budget).

    :math:`\\sigma = 2\\sqrt{k-1}/(n\\mu)`, :math:`\\hat b_0 = 1`; the guarantee is :math:`\\mu`-GDP stated
    at ``delta``.
    """
    k = check_int(count, "count", 2)
    n = check_int(n, "n", 1)
    mu = check_epsilon(mu, "mu")
    sensitivity = 2.0 * math.sqrt(k - 1) / n
    sigma = sensitivity / mu
    guarantee = gaussian_guarantee(mu, check_probability(delta, "delta"), Neighbours.REPLACE_ONE_ROW,
                                   f"Gaussian({sigma:.6g}) on {k - 1} answers of l2-sensitivity 2 sqrt({k - 1})/n")
    return BasisNoise("gaussian", sigma, k, n, guarantee, setting="safe", noisy_constant=False)

