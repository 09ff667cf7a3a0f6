"""Sufficient statistics (dense and sparse paths) and the exact id index, against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ldpsynth.aggregator.storage.idindex import IdIndex, repeats, sort_ids
from ldpsynth.aggregator.storage.stats import DENSE_MAX_CELLS, StatsAccumulator
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.statistics import SufficientStatistics


def brute_counts(keys: np.ndarray, codes: np.ndarray) -> dict[tuple[int, int], int]:
    out: dict[tuple[int, int], int] = {}
    for k, c in zip(keys.tolist(), codes.tolist()):
        out[(k, c)] = out.get((k, c), 0) + 1
    return out


def as_dict(stats: SufficientStatistics) -> dict[tuple[int, int], int]:
    return {(int(k), int(c)): int(w) for k, c, w in zip(stats.keys, stats.codes, stats.counts)}


@pytest.mark.parametrize("public, private", [(100, 5), (DENSE_MAX_CELLS, 2)], ids=["dense", "sparse"])
def test_accumulator_matches_brute_force(public: int, private: int) -> None:
    rng = np.random.default_rng(1)
    acc = StatsAccumulator(public, private)
    all_keys, all_codes = [], []
    for size in (0, 1, 500, 3000, 20000):
        keys = rng.integers(0, min(public, 300), size)  # few keys: cells repeat across adds
        codes = rng.integers(0, private, size)
        acc.add(keys, codes)
        all_keys.append(keys)
        all_codes.append(codes)
        snap = acc.snapshot()
        assert as_dict(snap) == brute_counts(np.concatenate(all_keys), np.concatenate(all_codes))
        assert snap.n == sum(len(k) for k in all_keys)
        order = np.lexsort((snap.codes, snap.keys))
        assert np.array_equal(order, np.arange(order.size)), "cells sorted by (key, code)"


def test_snapshot_unaffected_by_later_adds() -> None:
    acc = StatsAccumulator(DENSE_MAX_CELLS, 2)
    acc.add(np.array([5, 5, 7]), np.array([0, 0, 1]))
    before = acc.snapshot()
    acc.add(np.array([5]), np.array([0]))
    assert as_dict(before) == {(5, 0): 2, (7, 1): 1}
    assert as_dict(acc.snapshot()) == {(5, 0): 3, (7, 1): 1}


def test_merge_and_dense() -> None:
    a = StatsAccumulator(4, 3)
    a.add(np.array([0, 3, 3]), np.array([2, 1, 1]))
    b = StatsAccumulator(4, 3)
    b.add(np.array([3, 1]), np.array([1, 0]))
    merged = SufficientStatistics.merge([a.snapshot(), b.snapshot()])
    expected = np.zeros((4, 3), np.int64)
    expected[0, 2], expected[3, 1], expected[1, 0] = 1, 3, 1
    assert np.array_equal(merged.dense(), expected)
    assert merged.n == 5
    with pytest.raises(ValidationError, match="at most 11 cells"):
        merged.dense(max_cells=11)
    with pytest.raises(ValidationError, match="same domain sizes"):
        SufficientStatistics.merge([a.snapshot(), SufficientStatistics.empty(5, 3)])


def test_snapshot_table_equals_counting_the_rows() -> None:
    rng = np.random.default_rng(3)
    keys, codes = rng.integers(0, 50, 1000), rng.integers(0, 4, 1000)
    acc = StatsAccumulator(60, 4)
    acc.add(keys, codes)
    compact = acc.snapshot()
    expected = SufficientStatistics.from_rows(keys, codes, domain_size=4, public_domain_size=60)
    assert np.array_equal(compact.present_keys, expected.present_keys)
    assert np.array_equal(compact.table, expected.table)
    assert compact.public_domain_size == 60


@pytest.mark.parametrize("public, private", [(60, 4), (DENSE_MAX_CELLS, 2)], ids=["dense", "sparse"])
def test_a_shard_and_the_offline_path_count_into_the_same_statistics(public: int, private: int) -> None:
    """A shard's snapshot (restored or not) and ``from_rows`` on the same rows: equal cells, one class."""
    rng = np.random.default_rng(5)
    keys, codes = rng.integers(0, 500, 4000) * (public // 500), rng.integers(0, private, 4000)
    acc = StatsAccumulator(public, private)
    acc.add(keys[:1000], codes[:1000])
    acc.add(keys[1000:], codes[1000:])
    offline = SufficientStatistics.from_rows(keys, codes, domain_size=private, public_domain_size=public)
    for shard in (acc.snapshot(), StatsAccumulator.restore(acc.snapshot()).snapshot()):
        assert type(shard) is SufficientStatistics
        assert (shard.public_domain_size, shard.domain_size) == (offline.public_domain_size, offline.domain_size)
        for name in ("keys", "codes", "counts", "present_keys", "table"):
            assert np.array_equal(getattr(shard, name), getattr(offline, name)), name


def ids_from_pairs(pairs: list[tuple[int, int]]) -> np.ndarray:
    words = np.array(pairs, dtype="<u8").reshape(-1, 2)
    return words.view(np.uint8).reshape(-1, 16)


# Few distinct hi values so that distinct ids often share their first 64 bits (the slow path).
id_pairs = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**64 - 1) | st.integers(0, 3)), max_size=40)


@settings(max_examples=150, deadline=None)
@given(st.lists(id_pairs, min_size=1, max_size=8))
def test_id_index_is_an_exact_set(batches: list[list[tuple[int, int]]]) -> None:
    index = IdIndex()
    reference: set[tuple[int, int]] = set()
    for pairs in batches:
        if not pairs:
            continue
        ordered = sort_ids(ids_from_pairs(pairs))
        found = index.contains(ordered)
        sorted_pairs = [(int(h), int(lo)) for h, lo in zip(ordered.hi, ordered.lo)]
        assert found.tolist() == [p in reference for p in sorted_pairs]
        new = ~repeats(ordered) & ~found
        assert sum(new) == len(set(pairs) - reference)
        index.add(ordered._replace(hi=ordered.hi[new], lo=ordered.lo[new], order=ordered.order[new]))
        reference |= set(pairs)
        assert len(index) == len(reference)


@settings(max_examples=150, deadline=None)
@given(id_pairs)
def test_sort_ids_orders_by_hi_lo_arrival_also_when_already_sorted(pairs: list[tuple[int, int]]) -> None:
    """The order is (hi, lo, arrival) whether the input came unsorted (the sort) or in order (a record's
    ids, returned as they are): sorting the sorted output gives it back with the identity permutation."""
    ordered = sort_ids(ids_from_pairs(pairs))
    expected = sorted(range(len(pairs)), key=lambda i: (pairs[i][0], pairs[i][1], i))
    assert ordered.order.tolist() == expected
    assert list(zip(ordered.hi.tolist(), ordered.lo.tolist())) == [pairs[i] for i in expected]
    again = sort_ids(ids_from_pairs([pairs[i] for i in expected]))
    assert again.order.tolist() == list(range(len(pairs)))
    assert again.hi.tolist() == ordered.hi.tolist() and again.lo.tolist() == ordered.lo.tolist()


def test_id_index_many_runs() -> None:
    rng = np.random.default_rng(3)
    index = IdIndex()
    stored = []
    for size in (1000, 10, 300, 5000, 7, 2000, 1):
        ids = rng.integers(0, 256, (size, 16), dtype=np.uint8)
        ordered = sort_ids(ids)
        index.add(ordered)
        stored.append(ids)
    everything = np.concatenate(stored)
    assert index.contains(sort_ids(everything)).all()
    fresh = rng.integers(0, 256, (500, 16), dtype=np.uint8)
    assert not index.contains(sort_ids(fresh)).any()


def test_sort_ids_matches_a_two_key_sort_with_ties_and_duplicates():
    """Ids sharing their first 64 bits and exact duplicates: the order is (hi, lo, arrival), as a lexsort."""
    from ldpsynth.aggregator.storage.idindex import sort_ids

    rng = np.random.default_rng(31)
    ids = rng.integers(0, 256, (5000, 16), dtype=np.uint8)
    ids[100:140, :8] = ids[7, :8]                      # 41 ids with one hi, different lo
    ids[200:260] = ids[3000]                           # 61 exact duplicates
    ids[4000:4010, :8] = 0                             # the smallest hi, repeated
    words = ids.view("<u8")
    reference = np.lexsort((np.arange(len(ids)), words[:, 1], words[:, 0]))
    got = sort_ids(ids)
    np.testing.assert_array_equal(got.order, reference)
    np.testing.assert_array_equal(got.hi, words[reference, 0])
    np.testing.assert_array_equal(got.lo, words[reference, 1])
