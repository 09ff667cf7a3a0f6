"""The one SufficientStatistics: sparse cells (what shards exchange) and the estimators' compact table."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.statistics import SufficientStatistics


def brute_table(keys: np.ndarray, codes: np.ndarray, public: int, k: int) -> np.ndarray:
    table = np.zeros((public, k), np.int64)
    np.add.at(table, (keys, codes), 1)
    return table


@pytest.mark.parametrize("public, k", [(1, 7), (40, 3), (5000, 6)])
def test_cells_and_table_are_the_same_counts(public, k):
    rng = np.random.default_rng(public)
    keys, codes = rng.integers(0, min(public, 200), 3000), rng.integers(0, k, 3000)
    stats = SufficientStatistics.from_rows(None if public == 1 else keys, codes, domain_size=k,
                                           public_domain_size=public)
    expected = brute_table(keys if public > 1 else np.zeros_like(keys), codes, public, k)
    assert np.array_equal(stats.dense(), expected)
    present = np.flatnonzero(expected.sum(axis=1))
    assert np.array_equal(stats.present_keys, present) and np.array_equal(stats.table, expected[present])
    assert np.array_equal(np.lexsort((stats.codes, stats.keys)), np.arange(len(stats.keys))), "sorted by (key, code)"
    assert (stats.counts > 0).all() and stats.n == 3000
    assert np.array_equal(stats.histogram(), expected.sum(axis=0))
    assert np.array_equal(stats.group_sizes, expected[present].sum(axis=1))
    # The table derived from the cells alone (as after a merge or a snapshot) is the one counted.
    derived = SufficientStatistics(stats.public_domain_size, stats.domain_size, stats.keys, stats.codes, stats.counts)
    assert np.array_equal(derived.present_keys, stats.present_keys) and np.array_equal(derived.table, stats.table)


def test_merge_of_parts_equals_the_whole():
    rng = np.random.default_rng(2)
    keys, codes = rng.integers(0, 30, 2000), rng.integers(0, 4, 2000)
    parts = [SufficientStatistics.from_rows(keys[a:b], codes[a:b], domain_size=4, public_domain_size=30)
             for a, b in ((0, 500), (500, 501), (501, 501), (501, 2000))]
    merged, whole = SufficientStatistics.merge(parts), SufficientStatistics.from_rows(keys, codes, domain_size=4,
                                                                                   public_domain_size=30)
    for name in ("keys", "codes", "counts", "present_keys", "table"):
        assert np.array_equal(getattr(merged, name), getattr(whole, name)), name
    with pytest.raises(ValidationError) as info:
        SufficientStatistics.merge([whole, SufficientStatistics.empty(30, 5)])
    assert info.value.field == "parts" and "same domain sizes" in info.value.legal
    with pytest.raises(ValidationError, match="at least one"):
        SufficientStatistics.merge([])


def test_no_rows():
    stats = SufficientStatistics.from_rows(np.zeros(0, np.int64), np.zeros(0, np.int64), domain_size=3,
                                           public_domain_size=10)
    assert stats.n == 0 and stats.table.shape == (0, 3) and stats.present_keys.size == 0
    assert SufficientStatistics.empty(10, 3).table.shape == (0, 3)
    assert SufficientStatistics.from_rows(None, [], domain_size=3).table.shape == (0, 3)


def test_from_table_round_trip_and_refusals():
    table = np.array([[1, 0, 2], [0, 3, 0]])
    stats = SufficientStatistics.from_table([2, 7], table, 10)
    assert (stats.keys.tolist(), stats.codes.tolist(), stats.counts.tolist()) == ([2, 2, 7], [0, 2, 1], [1, 2, 3])
    assert np.array_equal(stats.table, table) and stats.n == 6
    bad = [
        (lambda: SufficientStatistics.from_table([7, 2], table, 10), "present_keys"),     # not increasing
        (lambda: SufficientStatistics.from_table([2, 2], table, 10), "present_keys"),     # repeated
        (lambda: SufficientStatistics.from_table([2, 10], table, 10), "present_keys"),    # out of range
        (lambda: SufficientStatistics.from_table([2], table, 10), "table"),               # one row per key
        (lambda: SufficientStatistics.from_table([2, 7], table * 0.5, 10), "table"),      # not integers
        (lambda: SufficientStatistics.from_table([2, 7], -table, 10), "table"),           # negative
        (lambda: SufficientStatistics.from_table([2, 7], np.array([[1, 0, 2], [0, 0, 0]]), 10), "table"),  # empty row
    ]
    for call, field in bad:
        with pytest.raises(ValidationError) as info:
            call()
        assert info.value.field == field


def test_uint64_codes_count_like_int64():
    codes = np.array([0, 2, 2, 1], np.uint64)
    stats = SufficientStatistics.from_rows(None, codes, domain_size=3)
    assert stats.table.tolist() == [[1, 1, 2]]
    with pytest.raises(ValidationError) as info:
        SufficientStatistics.from_rows(None, np.array([0, 2**63 + 5], np.uint64), domain_size=3)
    assert (info.value.field, info.value.position) == ("codes", 1)


def test_pickled_statistics_keep_their_cells():
    """Shards send statistics between processes (Ray pickles them)."""
    rng = np.random.default_rng(4)
    stats = SufficientStatistics.from_rows(rng.integers(0, 9, 100), rng.integers(0, 3, 100), domain_size=3,
                                           public_domain_size=9)
    again = pickle.loads(pickle.dumps(stats))
    assert np.array_equal(again.keys, stats.keys) and np.array_equal(again.table, stats.table)
