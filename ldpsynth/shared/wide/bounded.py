"""Which views the model fits whole: the junction tree's largest clique bounded (the one place that decides it).

Exact inference on the model of the views' cliques (MSM19) runs on a junction tree of their triangulated graph;
with every pair of d attributes that graph is complete and its one clique is the whole row domain (Adult's 8
attributes: 2,257,920 cells, about 1 s per mirror-descent step on 2 shared cores). Here the views are taken
greedily, each kept whole while the junction tree of the kept views has no clique above ``limit`` cells
(:data:`MAX_CLIQUE`); a view that would break the bound is fitted through its 1-way margins instead
(:class:`~ldpsynth.shared.wide.model.Margin`: its cells summed to each attribute, with their exact variances).
The order: 1-way views and views of three or more attributes first (as given), then the pairs by decreasing
debiased dependence score :math:`s_{ab}` (:func:`~ldpsynth.shared.wide.selection.pair_score`, from the views'
own shares: no ε), so the pairs left to their margins are the ones closest to independent. When every view
fits, nothing is left out and the model is the exact fit of all views.

The junction tree is ``mbi``'s own (:func:`mbi.junction_tree.make_junction_tree`, the same greedy elimination
order the fit uses), so the bound holds for the tree the fit builds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..validation import check_int
from .measure import ViewMeasurement
from .selection import pair_score

__all__ = ["MAX_CLIQUE", "bounded_margins", "largest_clique"]

#: The largest junction-tree clique (cells) of a fit: 2^18 keeps Adult's all-pairs fit under a minute on 2
#: shared cores (25 of its 28 pairs whole, docs/wide.md "Fit time").
MAX_CLIQUE = 1 << 18


def _name(j: int) -> str:
    return f"a{j}"


def largest_clique(mbi_domain: Any, cliques: Sequence[tuple[int, ...]]) -> int:
    """Cells of the largest clique of ``mbi``'s junction tree of ``cliques`` (attribute indices)."""
    from mbi import junction_tree

    named = [tuple(_name(a) for a in clique) for clique in cliques]
    tree = junction_tree.make_junction_tree(mbi_domain, named)[0]
    return max(mbi_domain.project(c).size() for c in junction_tree.maximal_cliques(tree))


def bounded_margins(measurements: Sequence[ViewMeasurement], population: int, mbi_domain: Any,
                    limit: int | None = None) -> list[tuple[int, tuple[int, ...]]]:
    """The ``(i, (a,))`` 1-way margins that replace the views left out of the model (module docstring): empty
    when the junction tree of all views has no clique above ``limit`` cells (default :data:`MAX_CLIQUE`)."""
    bound = check_int(MAX_CLIQUE if limit is None else limit, "limit", 1)
    views = [m.view.attributes for m in measurements]
    if largest_clique(mbi_domain, views) <= bound:
        return []
    pairs = sorted((i for i, v in enumerate(views) if len(v) == 2),
                   key=lambda i: -pair_score(measurements[i], population))
    kept: list[int] = []
    margins: list[tuple[int, tuple[int, ...]]] = []
    for i in [*(i for i, v in enumerate(views) if len(v) != 2), *pairs]:
        if len(views[i]) == 1 or largest_clique(mbi_domain, [views[k] for k in (*kept, i)]) <= bound:
            kept.append(i)
        else:
            margins.extend((i, (a,)) for a in views[i])
    return sorted(margins)
