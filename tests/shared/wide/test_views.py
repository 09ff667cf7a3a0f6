"""Views of a wide row: mixed-radix cells, histograms, projections, the pair set."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.wide import WideDomain, pairs, project

DOMAIN = WideDomain(("a", "b", "c", "d"), (3, 4, 5, 2))


def test_cells_are_mixed_radix_in_c_order() -> None:
    rows = np.random.default_rng(1).integers(0, DOMAIN.sizes, size=(200, 4))
    view = DOMAIN.view((2, 0, 3))
    expected = np.ravel_multi_index((rows[:, 2], rows[:, 0], rows[:, 3]), (5, 3, 2))
    assert np.array_equal(view.cells(DOMAIN.check_rows(rows)), expected)
    assert view.size == 30
    assert view.histogram(rows).sum() == 200


def test_projection_sums_the_cells_of_the_sub_view() -> None:
    rows = np.random.default_rng(2).integers(0, DOMAIN.sizes, size=(500, 4))
    view = DOMAIN.view((0, 1, 2))
    counts = view.histogram(rows)
    for sub in ((0,), (2,), (2, 0), (1, 2)):
        assert np.array_equal(project(counts, view, sub), DOMAIN.view(sub).histogram(rows))
    stacked = project(np.stack([counts, 2 * counts]), view, (1,))
    assert np.array_equal(stacked[1], 2 * DOMAIN.view((1,)).histogram(rows))
    with pytest.raises(ValidationError):
        project(counts, view, (3,))


def test_pairs_and_singles() -> None:
    views = pairs(DOMAIN)
    assert [v.attributes for v in views] == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert len(pairs(DOMAIN, (0, 2, 3), singles=True)) == 3 + 3


def test_rows_and_domains_are_checked() -> None:
    with pytest.raises(ValidationError, match="rows"):
        DOMAIN.check_rows([[0, 0, 5, 0]])
    with pytest.raises(ValidationError, match="rows"):
        DOMAIN.check_rows([[0, 0, 0]])
    with pytest.raises(ValidationError):
        WideDomain(("a", "a"), (2, 2))
    with pytest.raises(ValidationError):
        WideDomain(("a",), (1,))
    with pytest.raises(ValidationError):
        DOMAIN.view((1, 1))
