"""The rows of the collection-mode simulations: sampling devices, Zipf words, and the CLI's refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ldpsynth.cli.main import main
from ldpsynth.simulation.datasets import DatasetNotFound
from ldpsynth.simulation.modes import data

DOCS = Path(__file__).resolve().parents[3] / "docs" / "simulate"


def test_sampled_devices_keep_all_their_rows_renumbered_in_the_order_drawn() -> None:
    columns = {"x": np.arange(10)}
    owner = np.array([0, 0, 1, 2, 2, 2, 3, 4, 4, 5])
    picked, devices = data.sample_devices(columns, owner, 3, seed=5)
    chosen = np.random.default_rng(5).permutation(np.arange(6))[:3]
    expected = np.concatenate([np.flatnonzero(owner == d) for d in chosen])
    np.testing.assert_array_equal(picked["x"], expected)
    np.testing.assert_array_equal(devices, np.repeat(np.arange(3), [np.sum(owner == d) for d in chosen]))
    everyone, _ = data.sample_devices(columns, owner, 100, seed=5)
    assert sorted(everyone["x"].tolist()) == list(range(10))


def test_zipf_words_are_spelled_in_the_alphabet_and_seeded(tmp_path: Path) -> None:
    words = tmp_path / "words"
    words.write_text("apple\nBanana\nkiwi\nfig\ndate's\ncherry\nplum\npear\n", encoding="utf-8")
    a = data.zipf_words("abcdefghijklmnopqrstuvwxyz", 5, 4, 2000, 1.0, seed=3, path=words)
    b = data.zipf_words("abcdefghijklmnopqrstuvwxyz", 5, 4, 2000, 1.0, seed=3, path=words)
    np.testing.assert_array_equal(a, b)
    assert set(a) <= {"apple", "kiwi", "fig", "plum", "pear"} and len(set(a)) == 4
    # The most frequent word has probability 1/H_4 = 0.48 (Zipf 1): at least 800 of 2000 draws
    # (alpha ~ 1e-6, 5.6 SE below the expectation of 960).
    assert np.unique(a, return_counts=True)[1].max() >= 800
    with pytest.raises(DatasetNotFound, match="fewer than the 9"):
        data.zipf_words("abcdefghijklmnopqrstuvwxyz", 5, 9, 10, 1.0, seed=3, path=words)
    with pytest.raises(DatasetNotFound, match="wamerican"):
        data.zipf_words("ab", 5, 1, 10, 1.0, seed=3, path=tmp_path / "absent")


@pytest.mark.parametrize(("argv", "named"), [
    (["--collection", str(DOCS / "adult-wide.json"), "--target", "127.0.0.1:1"], "--target"),
    (["--collection", str(DOCS / "adult-hours.json"), "--shuffler"], "--shuffler"),
    (["--collection", str(DOCS / "adult-hours.json"), "--dataset", "words"], "--dataset"),
    (["--collection", str(DOCS.parents[0] / "plan" / "ratings.json")], "--collection"),
    (["--dataset", "adult"], "--dataset"),
])
def test_the_cli_refuses_what_a_collection_mode_cannot_run(argv: list[str], named: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", *argv]) == 2
    assert named in capsys.readouterr().err


def test_the_numeric_truth_is_over_each_devices_distinct_rows() -> None:
    from ldpsynth.simulation.modes.numeric import distinct_rows

    columns = {"rating": np.array([4, 4, 5, 4, 4, 3]), "movie": np.array([1, 1, 1, 2, 2, 1])}
    devices = np.array([0, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(distinct_rows(columns, devices), [True, False, True, True, True, True])
    np.testing.assert_array_equal(distinct_rows({"rating": columns["rating"]}, devices),
                                  [True, False, True, False, True, True])


@pytest.mark.parametrize("path", sorted(DOCS.glob("*.json")), ids=lambda p: p.name)
def test_the_example_collection_files_validate(path: Path) -> None:
    from ldpsynth.aggregator.runtime.config import load_collection
    from ldpsynth.simulation.modes.run import mode_of
    from tests.test_json_schemas import assert_valid, kind_of

    doc = json.loads(path.read_text(encoding="utf-8"))
    assert_valid(kind_of(doc), doc)                        # the JSON Schema, and the server's reader
    assert mode_of(load_collection(path)) in ("wide", "numeric", "discovery")
