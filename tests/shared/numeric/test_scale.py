"""The declared range of a numeric attribute: the affine map onto [−1, 1] and its validation errors."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.numeric import NumericRange


def test_the_affine_map_and_its_inverse() -> None:
    r = NumericRange(1.0, 5.0, "rating")
    assert r.to_unit([1, 3, 5]).tolist() == [-1.0, 0.0, 1.0]
    assert r.from_unit([-1.0, 0.5]).tolist() == [1.0, 4.0]
    assert r.half_width == 2.0


@pytest.mark.parametrize("bad, position", [([1, 6, 2], 1), ([0.999], 0), ([3, float("nan")], 1),
                                           ([float("inf")], 0)])
def test_a_value_outside_the_range_is_refused_naming_field_position_and_range(bad: list[float],
                                                                               position: int) -> None:
    with pytest.raises(ValidationError) as caught:
        NumericRange(1, 5, "rating").to_unit(bad)
    err = caught.value
    assert (err.field, err.position, err.legal) == ("rating", position, "a number in [1, 5]")
    assert "6" not in err.problem and "nan" not in str(err)      # the private value is not echoed


@pytest.mark.parametrize("lo, hi, field", [(2, 2, "age.hi"), (3, 1, "age.hi"), (float("nan"), 1, "age.lo"),
                                           (0, float("inf"), "age.hi"), (-1e308, 1e308, "age.hi")])
def test_a_bad_range_is_refused(lo: float, hi: float, field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        NumericRange(lo, hi, "age")
    assert caught.value.field == field


def test_the_ends_map_exactly_into_the_unit_interval() -> None:
    r = NumericRange(17, 90)
    x = r.to_unit(np.linspace(17, 90, 1001))
    assert x.min() == -1.0 and x.max() == 1.0
