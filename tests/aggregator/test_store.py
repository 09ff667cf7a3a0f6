"""The SQLite shard: deduplication, durability of counts across reopen, atomicity, verification."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest

from ldpsynth.aggregator.datadir import DataDir, DataDirError, read_layout
from ldpsynth.aggregator.store import Segment, ShardReader, ShardStore, StoreError, check_shard_files
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.reports import new_report_ids
from ldpsynth.shared.schema import Schema

from .conftest import GRAPH, GRAPH_CARD, RATINGS, RATINGS_CARD

CARDS = {"ratings": RATINGS_CARD.dumps(), "graph": GRAPH_CARD.dumps()}


def segment(n: int, rng: np.random.Generator, credential: str = "dev-1", collection: str = "ratings",
            ids: np.ndarray | None = None) -> Segment:
    schema = RATINGS if collection == "ratings" else GRAPH
    return Segment(collection, credential, new_report_ids(n) if ids is None else ids,
                   rng.integers(0, schema.public_domain_size, n), rng.integers(0, schema.private_domain_size, n))


def brute_stats(chunks: list[Segment]) -> dict[tuple[int, int], int]:
    out: dict[tuple[int, int], int] = {}
    for seg in chunks:
        for k, c in zip(seg.public_keys.tolist(), seg.private_codes.tolist()):
            out[(k, c)] = out.get((k, c), 0) + 1
    return out


def stats_dict(store: ShardStore, collection: str) -> dict[tuple[int, int], int]:
    s = store.stats(collection)
    return {(int(k), int(c)): int(w) for k, c, w in zip(s.keys, s.codes, s.counts)}


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "shard-000.sqlite"


def test_dedup_within_group_and_across_commits(path: Path, rng: np.random.Generator) -> None:
    store = ShardStore(path, CARDS)
    a = segment(100, rng)
    b = segment(50, rng, credential="dev-2")
    # The group holds a, b and a retry of a: the retry is all duplicates.
    out = store.commit([a, b, a])
    assert out.results == ((100, 0), (50, 0), (0, 100))
    assert out.quota == {("ratings", "dev-1"): 100, ("ratings", "dev-2"): 50}
    # Half old, half new ids; a repeat inside the same segment counts once.
    mixed_ids = np.concatenate([a.report_ids[:30], new_report_ids(20)])
    mixed_ids = np.concatenate([mixed_ids, mixed_ids[-1:]])
    out = store.commit([segment(51, rng, ids=mixed_ids)])
    assert out.results == ((20, 31),)
    assert out.quota == {("ratings", "dev-1"): 120}
    assert store.row_counts() == {"ratings": 170, "graph": 0}
    assert store.count_existing("ratings", np.concatenate([a.report_ids, new_report_ids(7)])) == 100
    # Same id in another collection is another report.
    assert store.commit([segment(100, rng, collection="graph", ids=a.report_ids)]).results == ((100, 0),)
    store.close()
    with ShardReader(path) as reader:
        assert reader.row_count("ratings") == 170
        assert reader.row_count("graph") == 100
        assert reader.verify() == []


def test_counts_and_index_rebuilt_after_reopen(path: Path, rng: np.random.Generator) -> None:
    store = ShardStore(path, CARDS)
    segments = [segment(n, rng) for n in (1, 200, 3000)]
    graph = [segment(500, rng, collection="graph")]
    # One group may span collections: one transaction, a segment per collection.
    assert store.commit([segments[0], *graph, segments[1]]).results == ((1, 0), (500, 0), (200, 0))
    store.commit([segments[2]])
    before = stats_dict(store, "ratings"), stats_dict(store, "graph")
    assert before[0] == brute_stats(segments)
    store.close()

    reopened = ShardStore(path, CARDS)
    assert (stats_dict(reopened, "ratings"), stats_dict(reopened, "graph")) == before
    assert reopened.row_counts() == {"ratings": 3201, "graph": 500}
    assert reopened.quota_usage() == {("ratings", "dev-1"): 3201, ("graph", "dev-1"): 500}
    # The index came back too: every stored id is a duplicate now.
    assert reopened.commit(segments).results == ((0, 1), (0, 200), (0, 3000))
    reopened.close()


def test_rows_round_trip(path: Path, rng: np.random.Generator) -> None:
    store = ShardStore(path, CARDS)
    seg = segment(400, rng, collection="graph")
    store.commit([seg])
    store.close()
    with ShardReader(path) as reader:
        chunks = list(reader.rows("graph"))
        assert reader.collections()["graph"].dumps() == GRAPH_CARD.dumps()
    ids = np.concatenate([c.report_ids for c in chunks])
    got = {bytes(i): (int(k), int(c)) for i, k, c in zip(ids, np.concatenate([c.public_keys for c in chunks]),
                                                         np.concatenate([c.private_codes for c in chunks]))}
    want = {bytes(i): (int(k), int(c)) for i, k, c in zip(seg.report_ids, seg.public_keys, seg.private_codes)}
    assert got == want
    codes = chunks[0].public_codes(GRAPH)
    assert np.array_equal(codes[:, 0] * 2048 + codes[:, 1], chunks[0].public_keys)


def test_failed_transaction_changes_nothing(path: Path, rng: np.random.Generator) -> None:
    store = ShardStore(path, CARDS)
    first = segment(10, rng)
    store.commit([first])
    # Make the next insert fail inside the transaction (after the segment row was written).
    side = sqlite3.connect(path)
    side.execute("CREATE TRIGGER refuse BEFORE INSERT ON quota BEGIN SELECT RAISE(ABORT, 'disk says no'); END")
    side.commit()
    second = segment(20, rng)
    with pytest.raises(sqlite3.IntegrityError):
        store.commit([second])
    assert store.row_counts()["ratings"] == 10
    assert stats_dict(store, "ratings") == brute_stats([first])
    side.execute("DROP TRIGGER refuse")
    side.commit()
    side.close()
    # Nothing of the failed group was stored or indexed: the retry stores it all.
    assert store.commit([second]).results == ((20, 0),)
    store.close()
    with ShardReader(path) as reader:
        assert reader.row_count("ratings") == 30
        assert reader.verify() == []


def test_durability_settings(path: Path) -> None:
    store = ShardStore(path, CARDS)
    assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert store._conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0
    store.close()


def test_verify_finds_duplicates_and_bad_counters(path: Path, rng: np.random.Generator) -> None:
    store = ShardStore(path, CARDS)
    store.commit([segment(5, rng)])
    store.close()
    raw = sqlite3.connect(path)
    raw.execute("INSERT INTO segments(collection_id, n, report_ids, public_keys, private_codes) "
                "SELECT collection_id, n, report_ids, public_keys, private_codes FROM segments")
    raw.commit()
    with ShardReader(path) as reader:
        problems = reader.verify()
    assert any("more than once" in p for p in problems)
    assert any("quota counters sum to 5, 10 rows stored" in p for p in problems)
    raw.execute("UPDATE segments SET public_keys = x'00' WHERE seq = 1")
    raw.commit()
    raw.close()
    with ShardReader(path) as reader:
        assert any("wrong length" in p for p in reader.verify())


def test_card_mismatch_is_refused(path: Path) -> None:
    ShardStore(path, CARDS).close()
    other = Schema(RATINGS.name, 2.0, RATINGS.attributes)  # same name, another epsilon
    changed = {"ratings": MechanismCard.for_schema(other).dumps()}
    with pytest.raises(StoreError, match="different mechanism card"):
        ShardStore(path, changed)
    with pytest.raises(StoreError, match="different mechanism card"):
        check_shard_files([path], changed)
    check_shard_files([path, path.with_name("missing.sqlite")], CARDS)  # unchanged: fine


def test_one_owner_at_a_time(path: Path) -> None:
    store = ShardStore(path, CARDS)
    with pytest.raises(StoreError, match="still held"):
        ShardStore(path, CARDS, lock_timeout=0.2)
    # A waiting owner gets the file as soon as the first lets go.
    threading.Timer(0.3, store.close).start()
    second = ShardStore(path, CARDS, lock_timeout=10)
    second.close()


def test_data_dir_layout_and_lock(tmp_path: Path) -> None:
    first = DataDir(tmp_path / "d")
    first.acquire()
    assert [p.name for p in first.shard_paths(3)] == ["shard-000.sqlite", "shard-001.sqlite", "shard-002.sqlite"]
    with pytest.raises(DataDirError, match="in use"):
        DataDir(tmp_path / "d").acquire()
    first.release()
    again = DataDir(tmp_path / "d")
    again.acquire()
    assert len(again.shard_paths(None)) == 3
    with pytest.raises(DataDirError, match="holds 3 shards"):
        again.shard_paths(2)
    again.release()
    assert read_layout(tmp_path / "d") == again.shard_paths(3)
    with pytest.raises(DataDirError, match="not an aggregator data directory"):
        read_layout(tmp_path)
