"""The one-call offline estimate (:func:`estimate_release`) and the release it reads
(:class:`Release`: from values, from a folder, a CSV or a Parquet file): the same answers as the
estimator on the statistics of the rows, whatever form the rows and the queries come in."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ldpsynth.shared import queries as Q
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators import estimate
from ldpsynth.shared.estimators.offline import estimate_release
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.release import CSV_FILE, PARQUET_FILE, Release
from ldpsynth.shared.schema import Schema

SCHEMA = Schema.from_json({"name": "ratings", "epsilon": 1.0, "attributes": [
    {"name": "movie", "type": "integer", "min": 1, "max": 3, "public": True},
    {"name": "rating", "type": "integer", "min": 1, "max": 5},
    {"name": "genre", "type": "categorical", "values": ["drama", "comedy"]},
    {"name": "score", "type": "continuous", "lo": 0.1, "hi": 0.7, "bits": 3},   # edges 0.1 + j * 0.075
]})
CARD = MechanismCard.for_schema(SCHEMA)
K = SCHEMA.private_domain_size
BUILT = [Q.predicate(Q.condition("rating", ">=", 4), label="high"),
         Q.linear([float(j % 7) for j in range(K)], normalization="mean"),
         Q.marginal("genre"),
         Q.grouped("movie", {2: [1.0] * 40 + [0.0] * 40}),
         Q.predicate(Q.condition("score", ">=", 0.4), normalization="mean"),
         Q.dense(np.random.default_rng(22).random((300, K)), normalization="sum")]
JSON = Q.queries_to_json(BUILT)


def perturbed_release(n: int = 300, seed: int = 21) -> Release:
    """Seed 21: n rows, every private value perturbed by E."""
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, SCHEMA.public_domain_size, n)
    codes = CARD.mechanism.perturb(rng.integers(0, K, n), rng)
    return Release(CARD, {**SCHEMA.public_digits(keys), **SCHEMA.private_digits(codes)})


def reference(release: Release, level: float = 0.95) -> list[dict]:
    """The multi-module path: statistics of the rows, compiled queries, the estimator."""
    codes = release.private_codes()
    stats = SufficientStatistics.from_schema(SCHEMA, release.public_keys(), codes)
    return estimate(Q.compile_queries(BUILT, SCHEMA), stats, CARD.mechanism, level=level, codes=codes).records()


def test_every_form_of_the_release_gives_the_estimators_answers(tmp_path: Path) -> None:
    release = perturbed_release()
    expected = reference(release, level=0.9)
    release.write(tmp_path / "both")
    release.write(tmp_path / "parquet")
    (tmp_path / "parquet" / CSV_FILE).unlink()
    (tmp_path / "csv").mkdir()
    (tmp_path / "both" / CSV_FILE).rename(tmp_path / "csv" / "rows.csv")
    sources = {
        "Release": (release, None),
        "folder with CSV and Parquet": (tmp_path / "both", None),
        "folder with Parquet only": (str(tmp_path / "parquet"), None),
        "CSV file and card path": (tmp_path / "csv" / "rows.csv", tmp_path / "both" / "card.json"),
        "Parquet file and card": (tmp_path / "both" / PARQUET_FILE, CARD),
        "columns of values and card": (release.values(), CARD),
    }
    assert len(expected) == 7 and expected[0]["label"] == "high" and expected[0]["level"] == 0.9
    for name, (source, card) in sources.items():
        assert estimate_release(source, BUILT, card=card, level=0.9).records() == expected, name


def test_queries_as_builders_json_objects_json_text_or_mixed_answer_alike() -> None:
    release = perturbed_release()
    expected = reference(release)
    mixed = [BUILT[0], *JSON[1:3], *BUILT[3:]]
    for queries in (BUILT, JSON, json.dumps(JSON), tuple(mixed)):
        assert estimate_release(release, queries).records() == expected


def test_values_round_trip_and_from_values_checks_columns() -> None:
    release = perturbed_release(50)
    again = Release.from_values(CARD, {"report_id": np.arange(50), **release.values()})   # other columns ignored
    assert all(np.array_equal(again.codes[a.name], release.codes[a.name]) for a in SCHEMA.attributes)
    values = release.values()
    cases = [({k: v for k, v in values.items() if k != "genre"}, "synthetic.genre", None),
             ({**values, "rating": values["rating"][:-1]}, "synthetic.rating", None),
             ({**values, "score": np.where(np.arange(50) == 7, 0.2, values["score"])}, "synthetic.score", 7),
             ({**values, "rating": np.where(np.arange(50) == 3, 6, values["rating"])}, "rating", 3)]
    for columns, field, position in cases:
        with pytest.raises(ValidationError) as err:
            Release.from_values(CARD, columns)
        assert (err.value.field, err.value.position) == (field, position)


def test_queries_and_level_are_checked_before_any_row_is_read(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.csv"
    with pytest.raises(ValidationError) as err:
        estimate_release(missing, [{"kind": "linear", "weights": [1, 2]}], card=CARD)
    assert err.value.field == "queries[0].weights"
    with pytest.raises(ValidationError) as err:
        estimate_release(missing, BUILT, card=CARD, level=1.0)
    assert err.value.field == "level"
    with pytest.raises(ValidationError) as err:
        estimate_release(missing, BUILT[:1], card=CARD)
    assert err.value.field == "release" and "nowhere.csv" in err.value.problem


@pytest.mark.parametrize("source, card", [
    ("columns", None),                         # rows without a card
    ("file", None),                            # a table file without its card
    ("release", CARD),                         # a Release carries its own card
])
def test_the_card_is_required_exactly_when_the_rows_lack_one(tmp_path: Path, source: str, card) -> None:
    release = perturbed_release(20)
    release.write(tmp_path)
    rows = {"columns": release.values(), "file": tmp_path / CSV_FILE, "release": release}[source]
    with pytest.raises(ValidationError) as err:
        estimate_release(rows, BUILT[:1], card=card)
    assert err.value.field == "card"


def test_no_rows_is_an_error_naming_the_synthetic_database() -> None:
    with pytest.raises(ValidationError) as err:
        estimate_release({a.name: [] for a in SCHEMA.attributes}, BUILT[:1], card=CARD)
    assert err.value.field == "synthetic"
