"""The shuffler (ldpsynth.shuffler) in front of a real replica, its pools: pooling across devices per public key,
the threshold over distinct reports, the permutation end to end (the forwarded order independent of the arrival
order), what a call that ends while waiting leaves. Shufflers run in process on 127.0.0.1; devices use the SDK.

α of the χ² check: 1e-3, with a seeded permutation source (deterministic)."""

from __future__ import annotations

import asyncio
import threading
import time

import grpc
import numpy as np
from scipy import stats

from ldpsynth.shared.reports import Reports
from ldpsynth.shared.wire import collection_pb2 as pb
from tests.aggregator.conftest import ServerThread, stored_ids

from .conftest import ShufflerThread, devices, log_sections, one_movie, sealed, stored

ALPHA = 1e-3


def test_devices_are_pooled_permuted_forwarded_in_batches_and_stored_once(
        replica: ServerThread, fixed_threshold: list[int], rng: np.random.Generator) -> None:
    """7 devices x 20 reports of one movie, one pool of threshold 140: released once, forwarded as 46 + 47 + 47
    (three parts of equal size within the replica's max_batch_reports of 64), every device acknowledged, every
    report stored once."""
    fixed_threshold[0] = 140
    mixer = ShufflerThread(replica, threshold=100, max_wait=20.0)
    try:
        parts = [one_movie(20, rng) for _ in range(7)]
        before = stored(replica)
        assert asyncio.run(devices(mixer.address, replica, parts, batch_size=20)) == [20] * 7
    finally:
        mixer.stop()
    ids = {bytes(row) for part in parts for row in part.report_ids}
    assert ids <= stored_ids(replica, "ratings") and stored(replica) == before + 140
    sections, _ = log_sections(replica)
    mine = [s for s in sections if {bytes(r) for r in s.report_ids} & ids]
    assert sorted(len(s) for s in mine) == [46, 47, 47] and all(dict(s.quota) == {"mixer": len(s)} for s in mine)
    forwarded = np.concatenate([s.report_ids for s in mine])
    sent = np.concatenate([p.report_ids for p in parts])
    assert not np.array_equal(forwarded, sent)  # not in the devices' order


def test_below_its_threshold_a_pool_forwards_nothing_and_its_devices_get_unavailable(
        replica: ServerThread, rng: np.random.Generator) -> None:
    """T = 40 (the noise only adds): 39 reports wait max_wait, then UNAVAILABLE; nothing stored."""
    mixer = ShufflerThread(replica, threshold=40, max_wait=0.5)
    try:
        before = stored(replica)
        reports = one_movie(39, rng)
        ack, code, details = mixer.submit(sealed(replica, reports))
        assert (ack, code) == (None, grpc.StatusCode.UNAVAILABLE) and "threshold" in details
        assert "nothing was forwarded" in details
    finally:
        mixer.stop()
    assert stored(replica) == before and not {bytes(r) for r in reports.report_ids} & stored_ids(replica, "ratings")


def test_the_forwarded_order_is_independent_of_the_arrival_order(
        replica: ServerThread, fixed_threshold: list[int], seeded_permutation: None) -> None:
    """60 pools of 10 reports each arriving in a known order (one call): the position of the first to
    arrive among the 10 stored reports is uniform on 0..9 (6 expected per position), α = 1e-3."""
    fixed_threshold[0] = 10
    mixer = ShufflerThread(replica, threshold=10, max_wait=20.0)
    rng = np.random.default_rng(11)
    tagged = []
    try:
        for _ in range(60):
            reports = one_movie(10, rng)
            tagged.append((bytes(reports.report_ids[0]), {bytes(r) for r in reports.report_ids}))
            assert mixer.submit(sealed(replica, reports))[1] == grpc.StatusCode.OK
    finally:
        mixer.stop()
    sections, _ = log_sections(replica)
    where = {}
    for section in sections:
        ids = [bytes(r) for r in section.report_ids]
        where.update({report: (i, frozenset(ids)) for i, report in enumerate(ids)})
    positions = []
    for first, ids in tagged:
        position, section = where[first]
        assert section == ids  # one pool, one forwarded batch, one section
        positions.append(position)
    counts = np.bincount(positions, minlength=10)
    assert stats.chisquare(counts).pvalue > ALPHA, counts


def test_a_call_that_ends_while_waiting_leaves_the_pool_and_is_not_forwarded(
        replica: ServerThread, fixed_threshold: list[int], rng: np.random.Generator) -> None:
    """Threshold 10: B (4 reports) waits, A (4) waits after it and its deadline passes; C (6) makes
    B + C = 10: released without A's reports (a gone call's reports do not count towards the threshold)."""
    fixed_threshold[0] = 10
    mixer = ShufflerThread(replica, threshold=10, max_wait=20.0)
    try:
        a, b, c = (one_movie(k, rng) for k in (4, 4, 6))
        results: list = []
        waiting_b = threading.Thread(target=lambda: results.append(mixer.submit(sealed(replica, b))))
        waiting_b.start()
        time.sleep(0.3)
        assert mixer.submit(sealed(replica, a), timeout=0.5)[1] == grpc.StatusCode.DEADLINE_EXCEEDED
        time.sleep(0.2)
        code_c = mixer.submit(sealed(replica, c))[1]
        waiting_b.join(30)
        assert code_c == grpc.StatusCode.OK and results[0][1] == grpc.StatusCode.OK
    finally:
        mixer.stop()
    held = stored_ids(replica, "ratings")
    assert {bytes(r) for r in (*b.report_ids, *c.report_ids)} <= held
    assert not {bytes(r) for r in a.report_ids} & held


def test_pools_are_per_public_key_and_count_distinct_sealed_reports(
        replica: ServerThread, fixed_threshold: list[int], rng: np.random.Generator) -> None:
    """Threshold 10: 6 reports of movie 7 and 6 of movie 8 do not make a pool (each key waits for its own 10);
    5 reports of movie 9 sent twice, the same sealed bytes, count 5 (a copy adds nothing) and wait too. Then 4
    more of movie 7 release movie 7's pool alone: its 10 reports are one forwarded batch of one key."""
    fixed_threshold[0] = 10
    mixer = ShufflerThread(replica, threshold=10, max_wait=3.0)
    try:
        first = one_movie(6, rng, movie=7)
        results: dict[str, tuple] = {}

        def call(name: str, batch: pb.SealedBatch) -> None:
            results[name] = mixer.submit(batch)

        copies = sealed(replica, one_movie(5, rng, movie=9))
        waiting = [threading.Thread(target=call, args=(name, batch)) for name, batch in (
            ("7a", sealed(replica, first)), ("8", sealed(replica, one_movie(6, rng, movie=8))),
            ("9a", copies), ("9b", copies))]
        for thread in waiting:
            thread.start()
        time.sleep(0.5)
        more = one_movie(4, rng, movie=7)
        assert mixer.submit(sealed(replica, more))[1] == grpc.StatusCode.OK
        for thread in waiting:
            thread.join(30)
    finally:
        mixer.stop()
    assert results["7a"][1] == grpc.StatusCode.OK
    assert results["8"][1] == results["9a"][1] == results["9b"][1] == grpc.StatusCode.UNAVAILABLE
    sections, _ = log_sections(replica)
    mine = {bytes(r) for r in (*first.report_ids, *more.report_ids)}
    holding = [s for s in sections if {bytes(r) for r in s.report_ids} & mine]
    assert len(holding) == 1 and {bytes(r) for r in holding[0].report_ids} == mine
    assert set(holding[0].public_keys.tolist()) == {7}


def test_copies_of_a_sealed_report_travel_once(replica: ServerThread, fixed_threshold: list[int],
                                              rng: np.random.Generator) -> None:
    """Threshold 8: 8 distinct reports, 3 of them also sent by a second call, byte for byte: one pool of 8 is
    forwarded, every call acknowledged, the replica receives each report once (no duplicates to count)."""
    fixed_threshold[0] = 8
    mixer = ShufflerThread(replica, threshold=8, max_wait=10.0)
    reports = one_movie(8, rng, movie=11)
    batch = sealed(replica, reports)
    rows = np.frombuffer(batch.reports, np.uint8).reshape(8, -1)
    replay = pb.SealedBatch(collection="ratings", key_id=batch.key_id, sequence=1, reports=rows[:3].tobytes(),
                            pool_key=batch.pool_key)
    try:
        results: list = []
        waiting = threading.Thread(target=lambda: results.append(mixer.submit(replay)))
        waiting.start()
        time.sleep(0.3)
        assert mixer.submit(batch)[1] == grpc.StatusCode.OK
        waiting.join(30)
    finally:
        mixer.stop()
    assert results[0][1] == grpc.StatusCode.OK
    sections, _ = log_sections(replica)
    ids = {bytes(r) for r in reports.report_ids}
    holding = [s for s in sections if {bytes(r) for r in s.report_ids} & ids]
    assert sum(len(s) for s in holding) == 8 and {bytes(r) for s in holding for r in s.report_ids} == ids


def test_a_report_of_another_public_key_is_dropped_by_the_replica(
        replica: ServerThread, shuffler: ShufflerThread, rng: np.random.Generator) -> None:
    """A batch declared movie 3 holding 4 reports of movie 3 and 2 of movie 4: the shuffler cannot tell (it takes
    6), the replica stores the 4 and drops the 2 as invalid."""
    ours, theirs = one_movie(4, rng, movie=3), one_movie(2, rng, movie=4)
    batch = sealed(replica, Reports.concat([ours, theirs], 1), pool_key=3)
    ack, code, _ = shuffler.submit(batch)
    assert code == grpc.StatusCode.OK and ack.accepted == 6
    held = stored_ids(replica, "ratings")
    assert {bytes(r) for r in ours.report_ids} <= held and not {bytes(r) for r in theirs.report_ids} & held
