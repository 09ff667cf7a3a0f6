"""Local validation and encoding of a device's rows (columns or CSV)."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.client.rows import encode_columns, load_rows, read_csv
from ldpsynth.shared.errors import ValidationError

from .client_fakes import ratings_schema


def columns(**overrides: list) -> dict[str, list]:
    base = {"movie": [3, 7, 7], "region": ["eu", "asia", "us"], "rating": [1, 5, 3], "watched": [0, 1, 1]}
    base.update(overrides)
    return base


def test_columns_encode_public_codes_and_mixed_radix_private_code() -> None:
    encoded = encode_columns(ratings_schema(), columns())
    assert encoded.public_codes.tolist() == [[3, 0], [7, 2], [7, 1]]
    # private code = (rating - 1) * |watched| + watched, first private attribute most significant
    assert encoded.private_codes.tolist() == [0, 9, 5]
    assert len(encoded) == 3


def test_csv_encodes_like_the_same_columns(tmp_path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("region,movie,watched,rating\neu,3,0,1\n\nasia,7,1,5\nus,7,1,3\n", encoding="utf-8")
    assert read_csv(path)["movie"] == ["3", "7", "7"]
    from_csv = load_rows(ratings_schema(), path)
    from_columns = encode_columns(ratings_schema(), columns())
    np.testing.assert_array_equal(from_csv.public_codes, from_columns.public_codes)
    np.testing.assert_array_equal(from_csv.private_codes, from_columns.private_codes)


def test_out_of_range_value_names_field_position_and_range_but_not_the_value() -> None:
    with pytest.raises(ValidationError) as info:
        encode_columns(ratings_schema(), columns(rating=[1, 5, 987654]))
    err = info.value
    assert (err.field, err.position, err.legal) == ("rating", 2, "an integer in [1, 5]")
    assert "987654" not in str(err)
    assert "rating at position 2" in str(err) and "[1, 5]" in str(err)


def test_unknown_category_is_not_echoed() -> None:
    with pytest.raises(ValidationError) as info:
        encode_columns(ratings_schema(), columns(region=["eu", "secret-place", "us"]))
    assert (info.value.field, info.value.position) == ("region", 1)
    assert "secret-place" not in str(info.value)


def test_missing_column_is_an_error() -> None:
    rows = columns()
    del rows["watched"]
    with pytest.raises(ValidationError) as info:
        encode_columns(ratings_schema(), rows)
    assert info.value.field == "watched" and "missing column" in str(info.value)


def test_extra_column_is_refused_rather_than_dropped() -> None:
    with pytest.raises(ValidationError) as info:
        encode_columns(ratings_schema(), columns(income=[1, 2, 3]))
    assert info.value.field == "income" and "not an attribute" in str(info.value)


def test_columns_of_different_lengths_are_an_error() -> None:
    with pytest.raises(ValidationError) as info:
        encode_columns(ratings_schema(), columns(watched=[0, 1]))
    assert info.value.field == "watched" and "3 rows" in info.value.legal


@pytest.mark.parametrize("bad", ["12345", 7, [[1, 2], [3]]])
def test_a_column_must_be_a_flat_sequence(bad: object) -> None:
    with pytest.raises(ValidationError) as info:
        encode_columns(ratings_schema(), columns(rating=bad))
    assert info.value.field == "rating"


def test_csv_record_with_wrong_cell_count_names_its_position(tmp_path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("movie,region,rating,watched\n3,eu,1,0\n7,asia,5\n", encoding="utf-8")
    with pytest.raises(ValidationError) as info:
        read_csv(path)
    assert (info.value.field, info.value.position) == ("row", 1)


def test_csv_with_missing_column_and_unreadable_file(tmp_path) -> None:
    path = tmp_path / "rows.csv"
    path.write_text("movie,region,rating\n3,eu,1\n", encoding="utf-8")
    with pytest.raises(ValidationError) as info:
        load_rows(ratings_schema(), path)
    assert info.value.field == "watched"
    with pytest.raises(ValidationError) as info:
        read_csv(tmp_path / "absent.csv")
    assert info.value.field == "rows"
    (tmp_path / "empty.csv").write_text("", encoding="utf-8")
    with pytest.raises(ValidationError, match="empty file"):
        read_csv(tmp_path / "empty.csv")
