"""The reference implementations bench_numeric runs beside ours: the SoK's mean mechanisms and the SW authors' SW.

Neither is a dependency (neither is on PyPI): ``bench_numeric.py --sok DIR --sw-reference DIR`` imports their
files from checkouts the user extracted, and this module adapts them to our scales.

* **SoK** (mad-lab-fau/sok-ldp-data-analysis, MIT; numpy + scipy): ``sok_ldp_analysis.ldp.mean.wang2019``'s
  ``Wang2019Piecewise1D``, ``Wang2019Hybrid1D`` and ``Wang2019Duchi1D`` (Wang2019ICDE's PM, HM and Duchi as
  the SoK transcribes them) and ``duchi2018.Duchi2018`` (DJW18's d-dimensional sampler, as the SoK implements
  it, here at d = 1). Each has ``mechanism(t)`` (the devices: values on their range to reports) and ``mean(u)``
  (the aggregator: an affine map of the reports' mean back to the range). Their ``mean`` is affine,
  :math:`m(u) = a\\bar u + b`, so each report's estimate on our scale [−1, 1] is :math:`(a u_i + b - lo)/h - 1`,
  :math:`h = (hi - lo)/2`, with :math:`b = m(0)`, :math:`a = m(1) - b` read off their own ``mean``: the mean of
  these is exactly their estimate mapped to [−1, 1], and the per-report variance is comparable with
  Wang2019ICDE's closed form.
* **SW** (vvv214/LDP_Protocols, MIT; numpy + scipy): ``sw.py``'s ``sw(values, l, h, ε, randomized_bins,
  domain_bins)`` perturbs the values (numpy's global generator) and fits the input histogram in one call,
  returning counts on ``domain_bins`` equal buckets of [l, h]. As published it fits with ``EM`` (its ``EMS`` call
  is commented out); :func:`reference_sw` with ``smoothing=True`` runs the module's own ``EMS`` (Li2020SIGMOD's
  smoothed EM) in EM's place, by swapping the module's global for the call.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ldpsynth.shared.numeric import NumericRange

#: Our name of each SoK mechanism: (module under ``sok_ldp_analysis.ldp.mean``, class, input as an (n, 1) column,
#: the closed form of ours it implements).
SOK_MEANS: dict[str, tuple[str, str, bool, str]] = {
    "sok duchi": ("wang2019", "Wang2019Duchi1D", False, "duchi"),
    "sok pm": ("wang2019", "Wang2019Piecewise1D", False, "pm"),
    "sok hm": ("wang2019", "Wang2019Hybrid1D", False, "hm"),
    "sok duchi2018": ("duchi2018", "Duchi2018", True, "duchi"),
}


@dataclass(frozen=True)
class SokMean:
    """One SoK mean estimator at one ε and range, adapted to our unit scale."""

    model: Any
    value_range: NumericRange
    column: bool

    def _their_mean(self, reports_mean: float) -> float:
        u = np.full((1, 1) if self.column else 1, reports_mean)
        return float(np.asarray(self.model.mean(u), dtype=np.float64).reshape(-1)[0])

    def reports(self, values: np.ndarray) -> np.ndarray:
        """Their ``mechanism`` on the values (their devices), flattened to one report per value."""
        t = np.asarray(values, dtype=np.float64)
        return np.asarray(self.model.mechanism(t[:, None] if self.column else t), dtype=np.float64).reshape(-1)

    def unit_estimates(self, reports: np.ndarray) -> np.ndarray:
        """Each report's estimate of its x on [−1, 1] (module docstring); their mean is their ``mean`` on our scale."""
        b = self._their_mean(0.0)
        a = self._their_mean(1.0) - b
        return (a * reports + b - self.value_range.lo) / self.value_range.half_width - 1.0


def load_sok(directory: Path) -> dict[str, Callable[[float, NumericRange, np.random.Generator], SokMean]]:
    """``{name: make(ε, range, rng)}`` of the SoK's mean estimators (:data:`SOK_MEANS`) from a checkout at
    ``directory`` (the folder holding ``sok_ldp_analysis/``)."""
    if not (directory / "sok_ldp_analysis" / "ldp" / "mean").is_dir():
        raise FileNotFoundError(f"{directory} holds no sok_ldp_analysis/ldp/mean (a checkout of "
                                "mad-lab-fau/sok-ldp-data-analysis)")
    if str(directory) not in sys.path:
        sys.path.insert(0, str(directory))
    makers = {}
    for name, (module, cls, column, _) in SOK_MEANS.items():
        kind = getattr(importlib.import_module(f"sok_ldp_analysis.ldp.mean.{module}"), cls)

        def make(eps: float, value_range: NumericRange, rng: np.random.Generator, kind: Any = kind,
                 column: bool = column) -> SokMean:
            return SokMean(kind(eps, (value_range.lo, value_range.hi), rng=rng), value_range, column)

        makers[name] = make
    return makers


def load_sw_reference(directory: Path) -> ModuleType:
    """``sw.py`` of a checkout of vvv214/LDP_Protocols at ``directory`` (imported under its own name, so a module
    named ``sw`` elsewhere on the path is not shadowed)."""
    path = directory / "sw.py"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is absent (sw.py of vvv214/LDP_Protocols)")
    spec = importlib.util.spec_from_file_location("ldp_protocols_sw", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_sw(module: ModuleType, values: np.ndarray, value_range: NumericRange, epsilon: float, buckets: int,
                 reports: int, seed: int, *, smoothing: bool = True) -> np.ndarray:
    """The reference SW's histogram (shares on ``buckets`` equal buckets of the range) of ``values`` at ``epsilon``,
    ``reports`` randomized bins, fitted by its ``EMS`` (``smoothing``) or, as its ``sw()`` ships, its ``EM``.
    Seeds numpy's global generator with ``seed`` (the reference draws from it)."""
    np.random.seed(seed)
    shipped = module.EM
    if smoothing:
        module.EM = module.EMS
    try:
        counts = np.asarray(module.sw(np.asarray(values, dtype=np.float64), value_range.lo, value_range.hi, epsilon,
                                      randomized_bins=reports, domain_bins=buckets), dtype=np.float64)
    finally:
        module.EM = shipped
    return counts / counts.sum()
