"""A round's support counts from what the storage shards keep (E's counts, an oracle's tallies per public key,
over several shards) equal those of its reports; statistics of another mechanism are refused."""

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.statistics import SufficientStatistics, aggregate_cells
from ldpsynth.shared.estimators.tallies import KeyedTallies
from ldpsynth.shared.heavy_hitters.device import RoundSpec
from ldpsynth.shared.heavy_hitters.server import stored_support, support_counts

KEYS = 3  # a public attribute of three values


def shard_statistics(spec: RoundSpec, keys: np.ndarray, reports: np.ndarray) -> SufficientStatistics | KeyedTallies:
    """What two shards holding alternate reports keep, merged as the aggregator merges them."""
    parts = []
    for shard in range(2):
        k, r = keys[shard::2], reports[shard::2]
        if getattr(spec.mechanism, "name", "E") == "E":
            parts.append(SufficientStatistics(KEYS, spec.mechanism.domain_size,
                                              *aggregate_cells(k, r, np.ones(len(r), np.int64))))
        else:
            parts.append(KeyedTallies.from_rows(spec.mechanism, k, r, public_domain_size=KEYS))
    if isinstance(parts[0], KeyedTallies):
        return KeyedTallies.merge(parts)
    return SufficientStatistics.merge(parts)


@pytest.mark.parametrize(("epsilon", "width", "mechanism"), [(2.0, 2, "E"), (2.0, 5, "OLH"), (0.5, 6, "HR")])
def test_stored_support_equals_the_reports_support(epsilon: float, width: int, mechanism: str) -> None:
    spec = RoundSpec(1, 8, width, np.array([[10], [20], [30]], np.uint8), epsilon)
    assert getattr(spec.mechanism, "name", "E") == mechanism
    rng = np.random.default_rng(5)
    cells = rng.integers(0, spec.domain_size, 2_000)
    reports = spec.mechanism.perturb(cells, rng)
    keys = rng.integers(0, KEYS, len(cells))
    support, n = stored_support(spec, shard_statistics(spec, keys, reports))
    expected, m = support_counts(spec, reports)
    assert n == m == len(cells)
    assert support.dtype == np.int64 and np.array_equal(support, expected)


def test_statistics_of_another_mechanism_are_refused() -> None:
    e_spec = RoundSpec(1, 8, 2, np.array([[10]], np.uint8), 2.0)
    olh_spec = RoundSpec(1, 8, 5, np.array([[10], [20], [30]], np.uint8), 2.0)
    rng = np.random.default_rng(6)
    olh = shard_statistics(olh_spec, np.zeros(10, np.int64), olh_spec.mechanism.perturb(np.zeros(10, np.int64), rng))
    e = shard_statistics(e_spec, np.zeros(10, np.int64), np.zeros(10, np.int64))
    with pytest.raises(ValidationError, match="E's counts"):
        stored_support(e_spec, olh)
    with pytest.raises(ValidationError, match="tallies of the round's oracle"):
        stored_support(olh_spec, e)
