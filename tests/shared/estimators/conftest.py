"""Fixtures of the estimator tests: every test runs on both table-block sum paths."""

from __future__ import annotations

import pytest

from ldpsynth.shared.estimators import table_kernel


@pytest.fixture(autouse=True, params=["numba kernel", "numpy passes"])
def table_path(request, monkeypatch):
    """Every test runs on both implementations of the table-block sums (the numba kernel when
    numba is installed, and the numpy passes used without it)."""
    if request.param == "numba kernel" and table_kernel.KERNEL is None:
        pytest.skip("numba is not installed")
    if request.param == "numpy passes":
        monkeypatch.setattr(table_kernel, "KERNEL", None)
    return request.param
