"""The storage formats without a log: checked files, log records, the on-disk id index, record ranges.

Damage is refused, never served: a flipped byte, a truncated or foreign file, a missing record.
"""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pytest

from ldpsynth.aggregator.storage.checked_file import CheckedFileError, read_checked, write_checked
from ldpsynth.aggregator.storage.idindex import SortedIds, merge_sorted_ids, sort_ids
from ldpsynth.aggregator.storage.idstore import DiskIdIndex, RunOwner, merge_runs, write_run
from ldpsynth.aggregator.storage.log_records import LogCorruption, Section, decode, encode_genesis, encode_reports
from ldpsynth.aggregator.storage.record_ranges import READ_THROUGH, RecordRanges
from ldpsynth.shared.reports import new_report_ids


# ----- checked files -------------------------------------------------------------------------------
def test_checked_file_round_trip_and_every_kind_of_damage(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    arrays = {"a": np.arange(1000, dtype=np.uint64), "b": np.array([[1.5, 2.5]]), "empty": np.zeros(0, np.int64)}
    write_checked(path, "kind/1", {"x": 1}, arrays)
    meta, read = read_checked(path, "kind/1")
    assert meta == {"x": 1}
    for name, array in arrays.items():
        assert np.array_equal(read[name], array) and read[name].dtype == array.dtype
    good = path.read_bytes()

    def damaged(data: bytes, kind: str = "kind/1") -> str:
        path.write_bytes(data)
        with pytest.raises(CheckedFileError) as info:
            read_checked(path, kind)
        assert str(path) in str(info.value)
        return str(info.value)

    assert "checksum" in damaged(good[:300] + bytes([good[300] ^ 1]) + good[301:])  # one flipped bit
    assert "truncated" in damaged(good[:40]) or "checksum" in damaged(good[:len(good) // 2])
    assert "bad magic" in damaged(b"garbage" * 20)
    assert "'other/1' file was expected" in damaged(good, "other/1")
    path.unlink()
    with pytest.raises(CheckedFileError, match="missing"):
        read_checked(path, "kind/1")


# ----- log records ---------------------------------------------------------------------------------
def _section(n: int, rng: np.random.Generator, collection: str = "ratings") -> Section:
    return Section(collection, "c" * 32, new_report_ids(n), rng.integers(0, 100, n), rng.integers(0, 5, n),
                   {"device-1": n})


def test_records_round_trip_and_refuse_damage_and_displacement() -> None:
    rng = np.random.default_rng(1)
    bits = _section(4, rng, "bitsets")                    # a frequency oracle's reports: bit sets of 3 bytes
    bits = Section(bits.collection, bits.card, bits.report_ids, bits.public_keys,
                   rng.integers(0, 256, (4, 3)).astype(np.uint8), bits.quota)
    sections = [_section(50, rng), _section(3, rng, "graph"), bits]
    data = encode_reports("layout1", 2, 7, 1000, sections, {"ratings": (100, 5, 0), "graph": (4096 * 4096, 2, 0),
                                                            "bitsets": (100, 0, 3)})
    record = decode(data, layout="layout1", shard=2, sequence=7)
    assert (record.kind, record.before, record.reports) == ("reports", 1000, 57)
    for got, sent in zip(record.sections, sections):
        assert np.array_equal(got.report_ids, sent.report_ids) and np.array_equal(got.public_keys, sent.public_keys)
        assert np.array_equal(got.private_codes, sent.private_codes) and got.quota == sent.quota
    genesis = decode(encode_genesis("layout1", 2, 4), layout="layout1", shard=2, sequence=1)
    assert genesis.kind == "genesis" and genesis.meta == {"shards": 4}
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0x10  # a private code changed to another valid one, say
    for bad, where, fragment in [(bytes(flipped), (2, 7), "checksum"), (data[:-9] + data[-4:], (2, 7), "checksum"),
                                 (data, (2, 8), "another stream or position"), (data, (3, 7), "another stream"),
                                 (b"not a record at all", (2, 7), "not an ldpsynth log record")]:
        with pytest.raises(LogCorruption, match=fragment):
            decode(bad, layout="layout1", shard=where[0], sequence=where[1])
    with pytest.raises(LogCorruption, match="another stream"):
        decode(data, layout="another", shard=2, sequence=7)


# ----- the on-disk id index ------------------------------------------------------------------------
def _ids(values: np.ndarray) -> np.ndarray:
    """Report ids whose first 8 bytes are ``values`` (small: ties in ``hi`` happen) and last 8 random."""
    ids = new_report_ids(len(values))
    ids[:, :8] = np.asarray(values, "<u8").view(np.uint8).reshape(-1, 8)
    return ids


OWNER = RunOwner("layout1", 0, "ratings")


def test_disk_index_is_an_exact_set_through_flushes_and_merges(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    index, truth = DiskIdIndex(), set()
    for step in range(12):
        ids = _ids(rng.integers(0, 300, 200))  # many equal hi: the slow path is exercised
        ordered = sort_ids(ids)
        known = index.contains(ordered)
        expected = np.array([bytes(ids[i]) in truth for i in ordered.order])
        assert np.array_equal(known, expected)
        fresh = {bytes(i) for i in ids} - truth
        keep = np.array([bytes(ids[i]) in fresh for i in ordered.order]) & ~np.r_[False, (
            (ordered.hi[1:] == ordered.hi[:-1]) & (ordered.lo[1:] == ordered.lo[:-1]))]
        index.add(SortedIds(ordered.order[keep], ordered.hi[keep], ordered.lo[keep]))
        truth |= fresh
        if step % 3 == 2:  # flush the tail to a run file
            tail = index.freeze()
            assert tail is not None
            index.flushed(tail, write_run(tmp_path, OWNER, "c", step, step, *tail.merged()))
        if len(index.runs) >= 2:
            first, second = index.runs[-2], index.runs[-1]
            index.replace(first, second, merge_runs(tmp_path, OWNER, "c", first, second, chunk=7))
        assert len(index) == len(truth)
    everything = np.frombuffer(b"".join(sorted(truth)), np.uint8).reshape(-1, 16)
    assert index.contains(sort_ids(everything)).all()
    assert index.memory_ids < len(truth)


def test_merge_streams_in_chunks_and_keeps_every_id(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    a_hi, b_hi = (np.sort(rng.integers(0, 50, 1000).astype(np.uint64)),
                  np.sort(rng.integers(0, 50, 777).astype(np.uint64)))
    a = write_run(tmp_path, OWNER, "c", 2, 5, a_hi, rng.integers(0, 2**63, 1000).astype(np.uint64))
    b = write_run(tmp_path, OWNER, "c", 6, 9, b_hi, rng.integers(0, 2**63, 777).astype(np.uint64))
    merged = merge_runs(tmp_path, OWNER, "c", a, b, chunk=13)
    assert (merged.entry.first, merged.entry.last, merged.entry.count) == (2, 9, 1777)
    assert np.all(np.diff(merged.hi.astype(np.int64)) >= 0)
    pairs = sorted(zip(np.r_[a.hi, b.hi].tolist(), np.r_[a.lo, b.lo].tolist()))
    assert sorted(zip(merged.hi.tolist(), merged.lo.tolist())) == pairs
    assert not glob.glob(str(tmp_path / ".merge-*"))


def test_record_ranges_join_near_runs_and_refuse_a_damaged_snapshot_of_them() -> None:
    ranges = RecordRanges()
    for sequence, before in ((2, 0), (3, 10), (3, 10), (9, 50), (9 + READ_THROUGH + 1, 90)):
        ranges.add(sequence, before)
    assert ranges.to_array().tolist() == [[2, 3, 0], [9, 9, 50], [10 + READ_THROUGH, 10 + READ_THROUGH, 90]]
    assert ranges.spans(upto=100) == [(2, 9, 0)]  # 5 records of others between: read through
    assert ranges.spans(upto=2) == [(2, 2, 0)]
    assert ranges.spans(upto=10**6) == [(2, 9, 0), (10 + READ_THROUGH, 10 + READ_THROUGH, 90)]
    restored = RecordRanges.from_array(ranges.to_array(), offset=10 + READ_THROUGH)
    assert restored.to_array().tolist() == ranges.to_array().tolist()
    for damaged, offset in (([[1, 3, 0]], 5), ([[2, 6, 0]], 5), ([[2, 3, 0], [4, 4, 9]], 5), ([[3, 2, 0]], 5),
                            ([[2, 2, 9], [4, 4, 3]], 5), ([[2, 2]], 5)):
        with pytest.raises(ValueError):
            RecordRanges.from_array(np.array(damaged), offset)


def test_merge_sorted_ids_orders_runs_as_sort_ids_does_with_ties_on_hi() -> None:
    rng = np.random.default_rng(12)
    runs = []
    for _ in range(5):
        ids = new_report_ids(200)
        ids[:40, :8] = 7  # the same first 64 bits in every run: ties ranked by lo
        runs.append(ids[sort_ids(ids).order])
    ids = np.concatenate(runs)
    merged, sorted_ = merge_sorted_ids(ids), sort_ids(ids[rng.permutation(len(ids))])
    assert np.array_equal(merged.hi, sorted_.hi) and np.array_equal(merged.lo, sorted_.lo)
    assert np.array_equal(merged.order, sort_ids(ids).order)
