"""``benchmarks/numeric_references.py``: the adapters on tiny fake modules (always run), and the loaders on real
checkouts named by ``LDPSYNTH_SOK_DIR`` (mad-lab-fau/sok-ldp-data-analysis) and ``LDPSYNTH_SW_REFERENCE_DIR``
(vvv214/LDP_Protocols, at least its ``sw.py``), skipped when those are unset or absent."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from ldpsynth.shared.numeric import NumericRange
from ldpsynth.shared.numeric import closed_form as cf

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

# A stand-in for the SoK: reports on a scale of their own (3x the unit scale, shifted by 7, no noise) whose
# `mean` maps back to the range, so our adapter must recover each value exactly; Duchi2018 takes (n, 1) columns.
FAKE_SOK = '''
import numpy as np

class _Mean:
    def __init__(self, eps, input_range, rng=None):
        self.lo, self.hi = input_range

    def _unit(self, t):
        return 2 * (t - self.lo) / (self.hi - self.lo) - 1

    def _back(self, m):
        return (m + 1) / 2 * (self.hi - self.lo) + self.lo


class Wang2019Piecewise1D(_Mean):
    def mechanism(self, t):
        assert t.ndim == 1
        return 3 * self._unit(t) + 7

    def mean(self, u):
        return self._back((np.mean(u) - 7) / 3)


Wang2019Hybrid1D = Wang2019Duchi1D = Wang2019Piecewise1D


class Duchi2018(_Mean):
    def mechanism(self, t):
        assert t.ndim == 2
        return -2 * self._unit(t)

    def mean(self, u):
        return self._back(np.mean(u, axis=0) / -2)
'''

# A stand-in for sw.py: counts of the values on [l, h] in domain_bins buckets, through EM or EMS (EMS marks
# itself by returning uniform counts), drawing one number from numpy's global generator.
FAKE_SW = '''
import numpy as np

def sw(ori_samples, l, h, eps, randomized_bins=1024, domain_bins=1024):
    np.random.uniform()
    hist, _ = np.histogram(ori_samples, bins=domain_bins, range=(l, h))
    return EM(domain_bins, hist, None, 0, 0) * len(ori_samples)

def EM(n, ns_hist, transform, max_iteration, loglikelihood_threshold):
    return ns_hist / ns_hist.sum()

def EMS(n, ns_hist, transform, max_iteration, loglikelihood_threshold):
    return np.full(n, 1.0 / n)
'''


@pytest.fixture
def references() -> Iterator[ModuleType]:
    """The module under test, with ``sys.path`` and any imported ``sok_ldp_analysis`` restored afterwards."""
    path = list(sys.path)
    sys.path.insert(0, str(BENCHMARKS))
    yield importlib.import_module("numeric_references")
    sys.path[:] = path
    for name in [m for m in sys.modules if m == "sok_ldp_analysis" or m.startswith("sok_ldp_analysis.")]:
        del sys.modules[name]


def fake_sok(root: Path) -> Path:
    mean = root / "sok_ldp_analysis" / "ldp" / "mean"
    mean.mkdir(parents=True)
    for folder in (mean.parents[1], mean.parent, mean):
        (folder / "__init__.py").write_text("")
    (mean / "wang2019.py").write_text(FAKE_SOK)
    (mean / "duchi2018.py").write_text("from sok_ldp_analysis.ldp.mean.wang2019 import Duchi2018\n")
    return root


def test_sok_reports_map_back_to_our_unit_scale(references: ModuleType, tmp_path: Path) -> None:
    makers = references.load_sok(fake_sok(tmp_path))
    assert set(makers) == {"sok duchi", "sok pm", "sok hm", "sok duchi2018"}
    value_range = NumericRange(17, 90)
    values = np.array([17.0, 30.5, 55.0, 90.0])
    for name, make in makers.items():
        model = make(1.0, value_range, np.random.default_rng(0))
        estimates = model.unit_estimates(model.reports(values))
        np.testing.assert_allclose(estimates, value_range.to_unit(values), atol=1e-12, err_msg=name)
        their = model.model.mean(model.model.mechanism(values[:, None] if model.column else values))
        np.testing.assert_allclose(value_range.from_unit(estimates.mean()), np.ravel(their)[0], rtol=1e-12)


def test_sok_loader_names_a_wrong_folder(references: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="sok_ldp_analysis"):
        references.load_sok(tmp_path)
    with pytest.raises(FileNotFoundError, match="sw.py"):
        references.load_sw_reference(tmp_path)


def test_reference_sw_swaps_in_ems_and_restores_em(references: ModuleType, tmp_path: Path) -> None:
    (tmp_path / "sw.py").write_text(FAKE_SW)
    module = references.load_sw_reference(tmp_path)
    value_range = NumericRange(0, 4)
    values = np.array([0.5, 0.5, 1.5, 3.5])
    shipped = module.EM
    em = references.reference_sw(module, values, value_range, 1.0, 4, 4, seed=3, smoothing=False)
    np.testing.assert_allclose(em, [0.5, 0.25, 0.0, 0.25])
    ems = references.reference_sw(module, values, value_range, 1.0, 4, 4, seed=3, smoothing=True)
    np.testing.assert_allclose(ems, [0.25] * 4)
    assert module.EM is shipped
    np.random.seed(3)
    np.random.uniform()
    second = np.random.uniform()
    np.random.seed(99)
    references.reference_sw(module, values, value_range, 1.0, 4, 4, seed=3)
    assert np.random.uniform() == second  # it seeded numpy's global generator with 3, and sw() drew once


def directory(variable: str, marker: str) -> Path:
    folder = os.environ.get(variable)
    if not folder or not (Path(folder) / marker).exists():
        pytest.skip(f"{variable} does not name a checkout holding {marker}")
    return Path(folder)


def test_real_sok_estimators_have_wang2019s_variance(references: ModuleType) -> None:
    makers = references.load_sok(directory("LDPSYNTH_SOK_DIR", "sok_ldp_analysis/ldp/mean/wang2019.py"))
    value_range = NumericRange(1, 5)
    rng = np.random.default_rng(20261207)
    values = rng.integers(1, 6, 200_000).astype(float)
    x = value_range.to_unit(values)
    for name, (_, _, _, ours) in references.SOK_MEANS.items():
        model = makers[name](1.0, value_range, rng)
        estimates = model.unit_estimates(model.reports(values))
        # Pooled per-report variance against Wang2019ICDE's closed form: its relative SD at 2e5 reports is under
        # 0.4 % for these laws (fourth moments bounded by the report range); 3 % is > 7 SD (α < 1e-12).
        assert np.mean((estimates - x) ** 2) / cf.variance(ours, 1.0, x).mean() == pytest.approx(1, rel=0.03), name
        # Unbiased: the mean error's SD is sqrt(4.3 / 2e5) = 0.0046; 0.025 is > 5 SD (α < 1e-6).
        assert abs(estimates.mean() - x.mean()) < 0.025, name


def test_real_reference_sw_fits_a_distribution(references: ModuleType) -> None:
    module = references.load_sw_reference(directory("LDPSYNTH_SW_REFERENCE_DIR", "sw.py"))
    value_range = NumericRange(0, 10)
    values = np.random.default_rng(5).uniform(2, 4, 20_000)
    for smoothing in (True, False):
        theta = references.reference_sw(module, values, value_range, 4.0, 32, 32, seed=1, smoothing=smoothing)
        assert theta.shape == (32,) and theta.min() >= 0 and theta.sum() == pytest.approx(1)
        # The true mass on [2, 4] is buckets 6-12; at ε = 4 and 2e4 reports the fit puts most of it there (a
        # loose bound on a fixed seed: the uniform fit would hold 0.22).
        assert theta[6:13].sum() > 0.6, smoothing


def test_bench_runs_beside_the_references(tmp_path: Path) -> None:
    sok = directory("LDPSYNTH_SOK_DIR", "sok_ldp_analysis/ldp/mean/wang2019.py")
    sw = directory("LDPSYNTH_SW_REFERENCE_DIR", "sw.py")
    done = subprocess.run([sys.executable, "bench_numeric.py", "--quick", "--sok", str(sok), "--sw-reference",
                           str(sw), "--out", str(tmp_path)], capture_output=True, text=True, timeout=900,
                          cwd=BENCHMARKS)
    assert done.returncode == 0, done.stdout + done.stderr
    if done.stdout.startswith("skipped:"):
        pytest.skip(done.stdout.strip())
    markdown = (tmp_path / "bench_numeric.md").read_text(encoding="utf-8")
    assert "### 1b. Beside the SoK" in markdown and "reference SW + EMS" in markdown
    assert "| sok hm | hm |" in markdown


def test_no_worse_verdicts(references: ModuleType) -> None:
    bench = importlib.import_module("bench_numeric")
    assert bench.no_worse(1.0, 0.1, 1.1, 0.1, 10).startswith("yes (-9.1%")
    assert bench.no_worse(1.05, 0.1, 1.0, 0.1, 10).startswith("no, within noise (+5.0%, z +1.1)")
    assert bench.no_worse(1.1, 0.1, 1.0, 0.1, 10).startswith("NO (+10.0%, z +2.2)")
