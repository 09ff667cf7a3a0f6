"""SW's distribution on declared levels: EM over the L level atoms instead of over SW's M buckets of the range.

A device with a value on level k reports SW of :math:`x_k` (its value on [−1, 1] as the device encodes it), which
SW buckets into :math:`b_k = \\lfloor (x_k + 1) M/2 \\rfloor` (:meth:`~.samplers.SquareWave.bucket`); so the law of
its report is exactly column :math:`b_k` of SW's transition matrix (:meth:`~.samplers.SquareWave.transition`, the
one EMS inverts: weight A on the window's cells, L elsewhere, over the denominator):

.. math::  P[j \\mid \\text{level } k] = P[j \\mid b_k], \\qquad \\sum_j P[j \\mid \\text{level } k] = 1.

The levels' buckets are distinct (:mod:`~ldpsynth.shared.numeric.levels.declared`). The reports' law is
:math:`P_L \\theta` with :math:`\\theta` the levels' masses; :func:`~ldpsynth.shared.numeric.estimators.em_fit` fits
it (Li2020SIGMOD's EM, from the uniform start, the same stopping rule as EMS). **Smoothing** (EMS's (1, 2, 1)/4 step
on the level grid) or not is chosen per fit by :data:`FOLDS`-fold cross-validation (:meth:`LevelModel.chosen`): the
reports are split at random into :data:`FOLDS` folds; in each fold f the difference :math:`d_f` of the held-out
log-likelihoods :math:`\\sum_j c^{(f)}_j \\log (P_L \\hat\\theta_{-f})_j` of the plain and the smoothed EM fitted to
the other folds is taken, and the plain EM is chosen only when it is clearly better: the paired statistic
:math:`t = \\bar d / (s_d / \\sqrt{F}) >` :data:`PLAIN_ABOVE`; otherwise the smoothed one. Measured (docs/numeric.md,
"Declared levels"): smoothing wins on a smooth law over many levels (Adult's age), loses badly on spikes
(MovieLens's 5 ratings, Adult's hours at 40), where t was 2.3 to 17 at every ε; on Adult's age the plain EM's held-out
likelihood was now and then slightly larger (t up to 1.2) although its W1 was 2-3x worse, hence a threshold and not
the sign. The bootstrap keeps the chosen smoothing (its SE leaves out the choice's own variability).

From the fit :math:`\\theta` (atoms at the level values :math:`v_k`):

* quantiles: :math:`Q(q) = \\min\\{v_k : F(v_k) \\ge q\\}`, :math:`F(v_k) = \\sum_{i \\le k} \\theta_i`
  (the law is discrete: no interpolation within a bucket);
* the shares of ``bins`` equal bins :math:`[e_j, e_{j+1})` of the range (the last closed): level k is in bin
  :math:`\\min(\\lfloor k \\cdot bins / N \\rfloor, bins - 1)`, in integers (:math:`v_k = lo + k(hi - lo)/N`);
* the variance :math:`\\sum_k \\theta_k v_k^2 - (\\sum_k \\theta_k v_k)^2` (no within-bucket term).

Standard errors: the nonparametric bootstrap of the SW path
(:func:`~ldpsynth.shared.numeric.estimators.bootstrap_from_counts` with this fit); a quantile's interval is inverted
from the CDF's (:mod:`~ldpsynth.shared.numeric.levels.intervals`).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ...errors import ValidationError
from ...validation import check_int
from ..estimators import em_fit
from ..samplers import SquareWave
from .declared import NumericLevels

__all__ = ["FOLDS", "PLAIN_ABOVE", "LevelModel"]

#: Folds of the cross-validation that chooses the smoothing (module docstring).
FOLDS = 5
#: The plain EM is chosen when the paired t of its held-out log-likelihood over the smoothed one exceeds this.
PLAIN_ABOVE = 2.0
#: Slack on q in the comparisons with a CDF (a sum of masses may miss q by rounding).
CDF_SLACK = 1e-12


@dataclass(frozen=True, eq=False)
class LevelModel:
    """SW at its ε on the declared ``levels``; ``units``: the levels on [−1, 1] as the device encodes them."""

    sampler: SquareWave
    levels: NumericLevels
    transition: np.ndarray
    smoothing: bool

    @classmethod
    def of(cls, sampler: SquareWave, levels: NumericLevels, units: npt.ArrayLike, smoothing: bool) -> LevelModel:
        """The model with :math:`P_L` = the columns :math:`b_k` of SW's transition matrix (module docstring)."""
        buckets = sampler.bucket(units)
        if buckets.size != levels.count or np.unique(buckets).size != buckets.size:
            raise ValidationError("levels", f"{levels.count} levels in distinct buckets of SW's {sampler.buckets}",
                                  "two levels share a bucket")
        return cls(sampler, levels, sampler.transition()[:, buckets], smoothing)

    def chosen(self, counts: npt.ArrayLike, rng: np.random.Generator | None = None) -> LevelModel:
        """This model, plain or smoothed by the :data:`FOLDS`-fold cross-validation of the module docstring on the
        reports of ``counts``; ``rng`` splits the reports into folds (analysis-side randomness; None: a generator
        seeded by SHA-256 of the counts, so every answer from the same counts makes the same choice)."""
        c = np.asarray(counts, dtype=np.int64).reshape(-1)
        if rng is None:
            rng = np.random.default_rng(list(hashlib.sha256(c.astype("<i8").tobytes()).digest()))
        reports = rng.permutation(np.repeat(np.arange(c.size), c))
        plain, smooth = (LevelModel(self.sampler, self.levels, self.transition, s) for s in (False, True))
        diffs = []
        for fold in np.array_split(np.arange(reports.size), FOLDS):
            held = np.bincount(reports[fold], minlength=c.size)
            rest = c - held
            if held.any() and rest.any():
                plain_ll, smooth_ll = (float(held @ np.log(self.transition @ m.fit(rest))) for m in (plain, smooth))
                diffs.append(plain_ll - smooth_ll)
        d = np.array(diffs)
        if d.size < 2:
            return smooth
        spread = float(d.std(ddof=1)) / math.sqrt(d.size)
        t = float(d.mean()) / spread if spread > 0 else math.copysign(math.inf, float(d.mean()))
        return plain if t > PLAIN_ABOVE else smooth

    def fit(self, counts: npt.ArrayLike, *, tolerance: float = 1e-3) -> np.ndarray:
        """The levels' masses :math:`\\theta` fitted to the report ``counts`` (length ``sampler.reports``)."""
        return em_fit(self.transition, counts, smoothing=self.smoothing, tolerance=tolerance)

    def quantiles(self, theta: npt.ArrayLike, q: npt.ArrayLike) -> np.ndarray:
        """:math:`\\min\\{v_k : F(v_k) \\ge q\\}` for each probability in ``q`` (module docstring)."""
        probs = np.asarray(q, dtype=np.float64).reshape(-1)
        if not ((probs >= 0) & (probs <= 1)).all():
            raise ValidationError("q", "probabilities in [0, 1]", "a value outside")
        cdf = self.cdf(theta)
        k = np.searchsorted(cdf, probs - CDF_SLACK, side="left")
        return self.levels.values()[np.minimum(k, cdf.size - 1)]

    def cdf(self, theta: npt.ArrayLike) -> np.ndarray:
        """:math:`F(v_k) = \\sum_{i \\le k} \\theta_i / \\sum_i \\theta_i`, :math:`F(v_N) = 1` exactly."""
        t = np.asarray(theta, dtype=np.float64)
        cdf = np.cumsum(t) / t.sum()
        cdf[-1] = 1.0
        return cdf

    def bin_shares(self, theta: npt.ArrayLike, bins: int) -> np.ndarray:
        """The shares of ``bins`` equal bins of the range (module docstring)."""
        b = check_int(bins, "bins", 1)
        t = np.asarray(theta, dtype=np.float64)
        k = np.arange(t.size)
        return np.bincount(np.minimum(k * b // self.levels.intervals, b - 1), weights=t / t.sum(), minlength=b)

    def variance(self, theta: npt.ArrayLike) -> float:
        """The variance of the fitted law on the value scale."""
        t = np.asarray(theta, dtype=np.float64)
        t = t / t.sum()
        v = self.levels.values()
        mean = float(t @ v)
        return float(t @ ((v - mean) ** 2))
