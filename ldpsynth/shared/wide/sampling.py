"""Rows drawn from a fitted model without its dense joint: ancestral sampling along the junction tree.

A Markov random field over a chordal (triangulated) graph factorizes along a perfect elimination order
:math:`x_{\\pi(1)}, \\dots, x_{\\pi(d)}` (the reverse of an elimination order) as

.. math:: p(x) = \\prod_{i} p\\big(x_{\\pi(i)} \\mid x_{S_i}\\big), \\qquad
          S_i = \\{\\pi(j) : j < i\\} \\cap \\bigcup_{C \\ni \\pi(i)} C,

the parents :math:`S_i` being the earlier attributes that share a junction-tree clique with :math:`\\pi(i)`
(Koller and Friedman 2009, Thm 4.13: the earlier neighbours of a simplicial vertex form a clique with it, so
:math:`S_i \\cup \\{\\pi(i)\\}` lies inside one clique and its marginal is a clique marginal, no inference).
Each conditional is the model's marginal of :math:`S_i \\cup \\{\\pi(i)\\}` normalized over :math:`\\pi(i)`;
drawing the attributes in that order gives exact independent draws from :math:`p`. This is the order and the
parent rule of ``mbi``'s own ``synthetic_data`` (McKenna2019ICML), with our generator instead of NumPy's global
one, so a seeded draw is reproducible (the export and the offline estimate agree). Memory: the largest clique,
not the row domain (:data:`~ldpsynth.shared.wide.bounded.MAX_CLIQUE` cells under the fit's bound).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

__all__ = ["ancestral_order", "ancestral_sample"]


def ancestral_order(width: int, cliques: Sequence[Sequence[int]]) -> list[tuple[int, tuple[int, ...]]]:
    """Per attribute, in sampling order, the attribute and its parents :math:`S_i` (module docstring), from
    the model's cliques (attribute indices); the junction tree and its elimination order are ``mbi``'s."""
    from mbi import Domain, junction_tree

    names = [f"a{j}" for j in range(width)]
    domain = Domain(names, [2] * width)          # the tree depends on the cliques only, not the sizes
    tree, elimination = junction_tree.make_junction_tree(domain, [tuple(names[a] for a in c) for c in cliques])
    maximal = [{int(str(name)[1:]) for name in node} for node in tree.nodes]
    order: list[tuple[int, tuple[int, ...]]] = []
    used: list[int] = []
    for name in elimination[::-1]:
        attribute = int(str(name)[1:])
        near = set().union(*(c for c in maximal if attribute in c))
        order.append((attribute, tuple(a for a in used if a in near)))
        used.append(attribute)
    return order


def ancestral_sample(sizes: Sequence[int], order: Sequence[tuple[int, tuple[int, ...]]],
                     marginal: Callable[[tuple[int, ...]], np.ndarray], rows: int,
                     rng: np.random.Generator) -> np.ndarray:
    """``rows`` independent rows ``(rows, d)`` int64 drawn along ``order`` (:func:`ancestral_order`);
    ``marginal(attributes)`` is the model's shares of those attributes' cells, mixed radix in that order.

    Row r's value of attribute :math:`\\pi(i)` is the first v with :math:`F(v \\mid s_r) > u_r` for one uniform
    :math:`u_r`, F the conditional CDF at the row's parent cell :math:`s_r`; all rows at once by one sorted
    search over the CDFs laid end to end (parent cell s occupies [s, s + 1))."""
    out = np.zeros((rows, len(sizes)), np.int64)
    for attribute, parents in order:
        k = sizes[attribute]
        table = np.clip(np.asarray(marginal((*parents, attribute)), np.float64), 0.0, None).reshape(-1, k)
        mass = table.sum(axis=1, keepdims=True)
        conditional = np.divide(table, mass, out=np.full_like(table, 1.0 / k), where=mass > 0)
        cdf = np.cumsum(conditional, axis=1)
        cdf[:, -1] = 1.0
        cell = np.ravel_multi_index(tuple(out[:, p] for p in parents), [sizes[p] for p in parents]) \
            if parents else np.zeros(rows, np.int64)
        offsets = np.arange(len(cdf), dtype=np.float64)[:, None]
        position = np.searchsorted((cdf + offsets).ravel(), cell + rng.random(rows), side="right")
        out[:, attribute] = np.minimum(position - cell * k, k - 1)
    return out
