"""Data universe, grid and output of the smooth-query mechanisms (JWHZW).

* :class:`UnitCube`: the public min–max normalisation of each attribute to :math:`[-1,1]`
  (JWHZW §4: "we normalize each attribute to [−1, 1]"). The bounds are parameters and must be
  public: computing them from the data would itself leak.
* :func:`grid_centres` / :func:`snap_to_grid`: the grid :math:`a_k = (2k+1-N)/N`, :math:`k = 0..N-1`
  (Algorithm 1 steps 3–6), and the coordinate-wise nearest centre.
* :class:`SmoothRelease`: the synthetic database :math:`\\tilde D` (``m`` rows drawn i.i.d. from
  :math:`\\mathbf u^*`, steps 21–24), stored as its distinct rows with counts; a query
  :math:`q_f(\\tilde D) = \\frac1m\\sum_{y\\in\\tilde D} f(y)` is evaluated on the distinct rows only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from ldpsynth.evaluation.primitives.guarantee import PrivacyGuarantee
from ldpsynth.evaluation.smooth.noise import NOISE_SETTINGS
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.validation import check_choice, check_epsilon, check_int, check_probability


@dataclass(frozen=True)
class UnitCube:
    """Public per-attribute bounds ``[lo_i, hi_i]`` mapped affinely onto :math:`[-1, 1]`:
    :math:`z = 2(x - lo)/(hi - lo) - 1`."""

    lo: np.ndarray
    hi: np.ndarray

    def __post_init__(self) -> None:
        lo = np.atleast_1d(np.asarray(self.lo, dtype=np.float64))
        hi = np.atleast_1d(np.asarray(self.hi, dtype=np.float64))
        if lo.ndim != 1 or lo.shape != hi.shape or lo.size == 0:
            raise ValidationError("bounds", "lo and hi: equal-length 1-D arrays (one bound per attribute)",
                                  f"got shapes {lo.shape} and {hi.shape}")
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()) or not (lo < hi).all():
            bad = int(np.flatnonzero(~(np.isfinite(lo) & np.isfinite(hi) & (lo < hi)))[0])
            raise ValidationError("bounds", "finite lo < hi for every attribute", "not so", bad)
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    @property
    def d(self) -> int:
        return int(self.lo.size)

    def to_unit(self, data: npt.ArrayLike) -> np.ndarray:
        """Rows in the bounds -> :math:`[-1,1]^d`; a value outside its public bounds is an error (never clipped
        silently)."""
        x = np.asarray(data, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.d:
            raise ValidationError("data", f"an (n, {self.d}) array", f"got shape {x.shape}")
        inside = np.isfinite(x) & (x >= self.lo) & (x <= self.hi)
        if not inside.all():
            row, col = np.argwhere(~inside)[0]
            raise ValidationError(f"data[:, {col}]",
                                  f"a number in [{self.lo[col]:g}, {self.hi[col]:g}] (public bounds)",
                                  "outside", int(row))
        return np.clip(2.0 * (x - self.lo) / (self.hi - self.lo) - 1.0, -1.0, 1.0)

    def from_unit(self, z: npt.ArrayLike) -> np.ndarray:
        """The inverse map :math:`x = lo + (z + 1)(hi - lo)/2`."""
        return self.lo + (np.asarray(z, dtype=np.float64) + 1.0) * (self.hi - self.lo) / 2.0


def check_unit_data(data: npt.ArrayLike, name: str = "data") -> np.ndarray:
    """An ``(n, d)`` float array with ``n, d >= 1`` and every entry in :math:`[-1, 1]`."""
    z = np.asarray(data, dtype=np.float64)
    if z.ndim != 2 or z.shape[0] < 1 or z.shape[1] < 1:
        raise ValidationError(name, "an (n, d) array with n, d >= 1", f"got shape {z.shape}")
    inside = np.isfinite(z) & (np.abs(z) <= 1.0)
    if not inside.all():
        row, col = np.argwhere(~inside)[0]
        raise ValidationError(f"{name}[:, {col}]", "a number in [-1, 1] (normalise with UnitCube and public bounds)",
                              "outside", int(row))
    return z


class ReleaseArguments(NamedTuple):
    """The checked arguments every smooth-query release starts from."""

    data: np.ndarray
    epsilon: float
    noise: str
    delta: float | None


def check_release_arguments(data: npt.ArrayLike, epsilon: float, noise: str, delta: float | None) -> ReleaseArguments:
    """Data in :math:`[-1,1]^d`, ε finite and > 0, the noise setting, δ in (0, 1) or None (ε-DP)."""
    return ReleaseArguments(check_unit_data(data), check_epsilon(epsilon), check_choice(noise, "noise", NOISE_SETTINGS),
                            None if delta is None else check_probability(delta, "delta"))


def grid_centres(N: int) -> np.ndarray:
    """:math:`a_k = (2k + 1 - N)/N`, :math:`k = 0..N-1` (Algorithm 1, step 3)."""
    N = check_int(N, "N", 1)
    return (2.0 * np.arange(N) + 1.0 - N) / N


def snap_to_grid(z: np.ndarray, N: int) -> np.ndarray:
    """Index of the nearest :math:`a_k` per coordinate (ties toward the upper centre):
    :math:`\\min(\\lfloor (z+1)N/2\\rfloor, N-1)`."""
    return np.clip(np.floor((z + 1.0) * (N / 2.0)), 0, N - 1).astype(np.int64)


def round_to_lattice(values: np.ndarray, L: int) -> np.ndarray:
    """Nearest element of :math:`\\mathcal L = \\{i/L : i = -L..L\\}` (Algorithm 1 steps 10 and 15; clamps to
    [-1, 1])."""
    return np.clip(np.rint(values * L), -L, L) / L


@dataclass(frozen=True)
class SmoothRelease:
    """A synthetic database in :math:`[-1,1]^d`: distinct ``points`` (P, d) with ``counts`` (P,) summing to ``m``.

    ``guarantee`` is the release's privacy; ``details`` records the sizes and settings used
    (t, N, m, L, number of basis functions and candidates, the noise, PSI's configuration...);
    ``seconds`` is the wall time of the release.
    """

    points: np.ndarray
    counts: np.ndarray
    guarantee: PrivacyGuarantee
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def m(self) -> int:
        return int(self.counts.sum())

    def rows(self) -> np.ndarray:
        """The ``m`` rows themselves (each distinct point repeated by its count)."""
        return np.repeat(self.points, self.counts, axis=0)

    def answer(self, function: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """:math:`q_f(\\tilde D) = \\frac1m\\sum_{y\\in\\tilde D} f(y)` for ``function`` mapping (P, d) points to
        (P,) or (P, Q) values."""
        values = np.asarray(function(self.points), dtype=np.float64)
        if values.shape[:1] != (len(self.points),):
            raise ValidationError("function", "a map from (P, d) points to (P,) or (P, Q) values",
                                  f"returned shape {values.shape}")
        return (self.counts.astype(np.float64) @ values) / self.m
