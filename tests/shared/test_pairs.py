"""Pair totals of cut queries (shared/estimators/pairs.py): exact totals on both paths, compact types."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators import pairs as pair_module
from ldpsynth.shared.estimators.pairs import PairTotals, edge_pair_totals
from ldpsynth.shared.estimators.statistics import SufficientStatistics, aggregate_cells
from ldpsynth.shared.schema import Schema


def graph(vertices: int) -> Schema:
    return Schema.from_json({"name": "g", "epsilon": 1.0, "attributes": [
        {"name": "i", "type": "integer", "min": 0, "max": vertices - 1, "public": True},
        {"name": "j", "type": "integer", "min": 0, "max": vertices - 1, "public": True},
        {"name": "edge", "type": "binary"}]})


def stats_of(schema: Schema, i: np.ndarray, j: np.ndarray, y: np.ndarray) -> SufficientStatistics:
    keys = schema.encode_public({"i": i, "j": j})
    return SufficientStatistics(schema.public_domain_size, 2, *aggregate_cells(keys, y, np.ones(len(y), np.int64)))


@pytest.fixture(params=["dense", "pair list"])
def regime(request, monkeypatch):
    """Both paths: the dense matrix, and the pair list (DENSE_PAIRS below every graph here)."""
    if request.param == "pair list":
        monkeypatch.setattr(pair_module, "DENSE_PAIRS", 0)
    return request.param


@pytest.mark.parametrize("repeats", [1, 300])
def test_edge_totals_equal_a_direct_count(regime, repeats):
    rng = np.random.default_rng(9)
    schema = graph(50)
    i, j = (np.repeat(a, repeats) for a in np.nonzero(~np.eye(50, dtype=bool)))
    y = rng.integers(0, 2, len(i))
    pairs = edge_pair_totals(schema, stats_of(schema, i, j, y), "i", "j", "edge")
    if regime == "dense":
        assert pairs.matrix is not None and pairs.matrix.dtype == (np.uint8 if repeats == 1 else np.uint16)
    else:
        assert pairs.matrix is None
    sources = rng.random((40, 50)) < 0.5
    targets = ~sources
    m, y1 = pairs.totals(sources, targets).T
    inside = sources[:, i] & targets[:, j]
    np.testing.assert_array_equal(m, inside.sum(axis=1))
    np.testing.assert_array_equal(y1, (inside * y).sum(axis=1))


def test_float_values_and_unequal_domains(regime):
    """Signed real values (an oracle's per-pair estimates) over 7 x 11 vertices: float64 sums of the pairs inside."""
    rng = np.random.default_rng(4)
    src, dst = rng.integers(0, 7, 60), rng.integers(0, 11, 60)
    values = rng.normal(size=(60, 3))
    pairs = PairTotals(7, 11, src, dst, values)
    sources, targets = rng.random((9, 7)) < 0.5, rng.random((9, 11)) < 0.5
    inside = sources[:, src] & targets[:, dst]
    np.testing.assert_allclose(pairs.totals(sources, targets), inside @ values, rtol=1e-12, atol=1e-12)


def test_large_counts_leave_float32():
    """Counts whose partial sums pass 2^24 are summed in float64, exactly."""
    pairs = PairTotals(2, 2, np.array([0, 1]), np.array([1, 0]), np.array([[1 << 30, 1], [(1 << 30) + 1, 0]]))
    totals = pairs.totals(np.ones((1, 2), bool), np.ones((1, 2), bool))
    assert totals.tolist() == [[(1 << 31) + 1, 1]]


def test_masks_of_the_wrong_shape_are_refused(regime):
    schema = graph(5)
    pairs = edge_pair_totals(schema, stats_of(schema, np.array([0]), np.array([1]), np.array([1])), "i", "j", "edge")
    with pytest.raises(ValidationError, match="sources/targets"):
        pairs.totals(np.ones((2, 4), bool), np.ones((2, 5), bool))
