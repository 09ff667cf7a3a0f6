"""Views of a wide row: low-dimensional marginals that devices are partitioned across.

A wide row has d categorical attributes, attribute j with :math:`k_j` values (codes ``0 .. k_j - 1``).
A *view* is a tuple of attribute indices :math:`V = (j_1, \\dots, j_\\ell)`; its cells are the
:math:`\\prod_i k_{j_i}` combinations of their values, numbered in mixed radix (C order, the last
attribute fastest):

.. math::  \\mathrm{cell}_V(x) = \\sum_{i=1}^{\\ell} x_{j_i} \\prod_{m > i} k_{j_m}.

Each device reports only its view's cell (CALM, ZWLHC18; Wang2019ICDE on sampling one
attribute per device rather than splitting ε), so a view's size, not the row domain's, sets the error.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..validation import check_codes, check_int

__all__ = ["WideDomain", "View", "pairs", "project"]


@dataclass(frozen=True)
class WideDomain:
    """The attributes of a wide row: their names and numbers of values (each >= 2)."""

    names: tuple[str, ...]
    sizes: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.names) != len(self.sizes) or not self.names:
            raise ValidationError("sizes", "one size per attribute name, at least one attribute",
                                  f"got {len(self.names)} names and {len(self.sizes)} sizes")
        if len(set(self.names)) != len(self.names):
            raise ValidationError("names", "distinct attribute names", "a name repeats")
        object.__setattr__(self, "sizes", tuple(check_int(k, f"sizes[{j}]", 2) for j, k in enumerate(self.sizes)))

    @property
    def width(self) -> int:
        """d, the number of attributes."""
        return len(self.sizes)

    @property
    def size(self) -> int:
        """:math:`|D| = \\prod_j k_j`, the full row domain."""
        return math.prod(self.sizes)

    def check_rows(self, rows: npt.ArrayLike) -> np.ndarray:
        """``rows`` as an int64 ``(n, d)`` array, column j in ``[0, k_j)``."""
        arr = np.asarray(rows)
        if arr.ndim != 2 or arr.shape[1] != self.width:
            raise ValidationError("rows", f"an (n, {self.width}) array of codes", f"got shape {arr.shape}")
        return np.stack([check_codes(arr[:, j], f"rows[:, {j}]", k) for j, k in enumerate(self.sizes)], axis=1) \
            if len(arr) else arr.astype(np.int64)

    def view(self, attributes: Sequence[int]) -> View:
        """The view of ``attributes`` (indices into the domain)."""
        attrs = tuple(check_int(a, "attributes", 0, self.width - 1) for a in attributes)
        if not attrs or len(set(attrs)) != len(attrs):
            raise ValidationError("attributes", "one or more distinct attribute indices", f"got {attrs}")
        return View(attrs, tuple(self.sizes[a] for a in attrs))


@dataclass(frozen=True)
class View:
    """A marginal of the wide row: attribute indices and their sizes (:meth:`WideDomain.view`)."""

    attributes: tuple[int, ...]
    sizes: tuple[int, ...]

    @property
    def size(self) -> int:
        """Number of cells, :math:`\\prod_i k_{j_i}`."""
        return math.prod(self.sizes)

    def cells(self, rows: np.ndarray) -> np.ndarray:
        """The cell index (mixed radix, module docstring) of each checked row, int64 of shape (n,)."""
        index = np.zeros(len(rows), np.int64)
        for attribute, size in zip(self.attributes, self.sizes):
            index = index * size + rows[:, attribute]
        return index

    def histogram(self, rows: np.ndarray) -> np.ndarray:
        """The true counts of the view's cells over checked ``rows`` (int64, length :attr:`size`)."""
        return np.bincount(self.cells(rows), minlength=self.size).astype(np.int64)


def pairs(domain: WideDomain, attributes: Sequence[int] | None = None, *, singles: bool = False) -> tuple[View, ...]:
    """All 2-way views of ``attributes`` (default: all), in lexicographic order, after their 1-way views
    when ``singles``."""
    chosen = tuple(range(domain.width)) if attributes is None else tuple(attributes)
    ones = [domain.view((a,)) for a in chosen] if singles else []
    return (*ones, *(domain.view(pair) for pair in itertools.combinations(chosen, 2)))


def project(values: npt.ArrayLike, view: View, attributes: Sequence[int]) -> np.ndarray:
    """Sum a vector over ``view``'s cells (last axis) down to the sub-view of ``attributes`` (in the
    view's order), keeping any leading axes: the linear map :math:`M` with :math:`M_{uc} = 1` when cell
    c of the view agrees with cell u of the sub-view."""
    arr = np.asarray(values, dtype=np.float64)
    keep = tuple(attributes)
    if not set(keep) <= set(view.attributes) or len(set(keep)) != len(keep):
        raise ValidationError("attributes", f"distinct attributes of the view {view.attributes}", f"got {keep}")
    lead = arr.shape[:-1]
    cube = arr.reshape(*lead, *view.sizes)
    axes = tuple(len(lead) + i for i, a in enumerate(view.attributes) if a not in keep)
    summed = cube.sum(axis=axes)
    order = [a for a in view.attributes if a in keep]
    perm = [*range(len(lead)), *(len(lead) + order.index(a) for a in keep)]
    return summed.transpose(perm).reshape(*lead, -1)
