"""Compact pair counts of a shard (aggregator/storage/pairs.py): exact cut totals, compact types."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.aggregator.storage.pairs import PairCounts
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


@pytest.mark.parametrize("repeats", [1, 300])
def test_totals_equal_a_direct_count(repeats):
    rng = np.random.default_rng(9)
    schema = graph(50)
    i, j = (np.repeat(a, repeats) for a in np.nonzero(~np.eye(50, dtype=bool)))
    y = rng.integers(0, 2, len(i))
    pairs = PairCounts.build(schema, stats_of(schema, i, j, y), "i", "j", "edge")
    assert pairs.matrix.dtype == (np.uint8 if repeats == 1 else np.uint16)
    sources = rng.random((40, 50)) < 0.5
    targets = ~sources
    m, y1 = pairs.totals(sources, targets)
    inside = sources[:, i] & targets[:, j]
    np.testing.assert_array_equal(m, inside.sum(axis=1))
    np.testing.assert_array_equal(y1, (inside * y).sum(axis=1))


def test_masks_of_the_wrong_shape_are_refused():
    schema = graph(5)
    pairs = PairCounts.build(schema, stats_of(schema, np.array([0]), np.array([1]), np.array([1])), "i", "j", "edge")
    with pytest.raises(ValueError, match="sources/targets"):
        pairs.totals(np.ones((2, 4), bool), np.ones((2, 5), bool))
