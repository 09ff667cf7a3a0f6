"""Populations for the simulator: shapes, schemas, and the real data sets where present."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.simulation import datasets
from ldpsynth.simulation.datasets import DatasetNotFound


def test_synthetic_ratings_is_seeded_and_valid() -> None:
    a = datasets.synthetic_ratings(devices=300, movies=20, ratings_per_device=5, seed=3)
    b = datasets.synthetic_ratings(devices=300, movies=20, ratings_per_device=5, seed=3)
    assert len(a) == 1500 and a.device_count == 300
    np.testing.assert_array_equal(a.columns["rating"], b.columns["rating"])
    keys, codes = a.true_codes()  # raises if any value is outside the schema
    assert codes.min() >= 0 and codes.max() < 5 and keys.max() < 20
    # every device rates distinct movies
    for rows in a.rows_by_device()[:50]:
        assert len(np.unique(a.columns["movie"][rows])) == len(rows) == 5


def test_rows_by_device_partitions_the_rows() -> None:
    pop = datasets.synthetic_ratings(devices=50, movies=10, ratings_per_device=3)
    parts = pop.rows_by_device()
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(pop)))
    assert all((pop.devices[rows] == d).all() for d, rows in enumerate(parts))


def test_missing_data_set_says_where_it_looked(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LDPSYNTH_DATA", str(tmp_path))
    with pytest.raises(DatasetNotFound, match="LDPSYNTH_DATA"):
        datasets.movielens_100k()


def _require(relative: str) -> None:
    if not (datasets.data_dir() / relative).is_file():
        pytest.skip(f"real data set {relative} not present in {datasets.data_dir()}")


def test_movielens_top_128_matches_the_seed_protocol() -> None:
    _require(datasets.MOVIELENS_FILE)
    pop = datasets.movielens_100k(top_movies=128)
    assert len(pop) == 35_631  # the 128 most-rated movies of MovieLens-100k
    assert pop.schema.private_domain_size == 5 and pop.schema.public_domain_size == 128
    counts = np.bincount(pop.columns["movie"])[1:]
    assert (np.diff(counts) <= 0).all()  # renumbered by rank of popularity


def test_facebook_pairs_are_symmetric_and_complete() -> None:
    _require(datasets.FACEBOOK_FILE)
    pop = datasets.facebook_graph(vertices=200)
    assert len(pop) == 200 * 200
    a = pop.columns["edge"].reshape(200, 200)
    np.testing.assert_array_equal(a, a.T)
    assert a.trace() == 0
    full = datasets.facebook_edges()
    assert full.shape == (88_234, 2)
