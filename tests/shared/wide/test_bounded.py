"""The junction tree's bound: the views that would make its largest clique too large are fitted through their
1-way margins, and the bounded model answers like the exact fit when those views are the independent ones."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mbi")

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.wide import WideDomain, bounded, pairs, simulate
from ldpsynth.shared.wide.bounded import bounded_margins, largest_clique
from ldpsynth.shared.wide.model import Problem, total_variation

DOMAIN = WideDomain(("a", "b", "c", "d"), (3, 2, 4, 3))     # 72 cells


def _rows(rng: np.random.Generator, n: int) -> np.ndarray:
    """A chain a -> b -> c with strong dependence, d independent of them."""
    a = rng.choice(3, n, p=[0.5, 0.3, 0.2])
    b = (rng.random(n) < np.array([0.2, 0.6, 0.9])[a]).astype(np.int64)
    c = np.where(b == 1, rng.choice(4, n, p=[0.1, 0.2, 0.3, 0.4]), rng.choice(4, n, p=[0.7, 0.1, 0.1, 0.1]))
    d = rng.choice(3, n, p=[0.3, 0.3, 0.4])
    return np.stack([a, b, c, d], axis=1)


@pytest.fixture(scope="module")
def measured():
    rng = np.random.default_rng(21)
    rows = _rows(rng, 60_000)
    views = pairs(DOMAIN)
    return rows, simulate(DOMAIN, views, rows, rng.integers(0, len(views), len(rows)), 4.0, rng)


def _problem_domain(rows: np.ndarray, measurements):
    return Problem.of(DOMAIN, measurements, len(rows), margins=()).mbi_domain


def test_all_views_kept_when_the_junction_tree_fits(measured) -> None:
    rows, views = measured
    mbi_domain = _problem_domain(rows, views)
    assert largest_clique(mbi_domain, [m.view.attributes for m in views]) == DOMAIN.size   # complete graph
    assert bounded_margins(views, len(rows), mbi_domain, limit=DOMAIN.size) == []
    assert Problem.of(DOMAIN, views, len(rows)).margins == ()                # 72 cells <= MAX_CLIQUE
    tree = [v for v in views if v.view.attributes in {(0, 1), (1, 2), (2, 3)}]
    assert bounded_margins(tree, len(rows), mbi_domain, limit=12) == []      # a chain: cliques are pairs


def test_the_weakest_pair_leaves_the_model_when_the_clique_is_too_large(measured) -> None:
    rows, views = measured
    mbi_domain = _problem_domain(rows, views)
    # Limit 24 = |abc|: a, b, c and two of d's pairs triangulate into cliques abc and abd / acd; the third of
    # d's pairs would close the complete graph (72 cells).
    margins = bounded_margins(views, len(rows), mbi_domain, limit=24)
    left = {i for i, _ in margins}
    assert len(left) == 1
    (i,) = left
    assert 3 in views[i].view.attributes                                      # one of the independent pairs
    assert margins == [(i, (a,)) for a in views[i].view.attributes]
    kept = [m.view.attributes for k, m in enumerate(views) if k != i]
    assert largest_clique(mbi_domain, kept) <= 24
    # a deliberately low limit: no pair fits, every pair goes to its margins
    assert {k for k, _ in bounded_margins(views, len(rows), mbi_domain, limit=5)} == set(range(len(views)))
    with pytest.raises(ValidationError, match="limit"):
        bounded_margins(views, len(rows), mbi_domain, limit=0)


def test_the_default_path_is_bounded_when_the_tree_is_too_large(measured, monkeypatch) -> None:
    # Problem.of decides by the junction tree's largest clique against bounded.MAX_CLIQUE (read at call time).
    rows, views = measured
    monkeypatch.setattr(bounded, "MAX_CLIQUE", 24)
    problem = Problem.of(DOMAIN, views, len(rows))
    assert len(problem.margins) == 2 and problem.margins[0].measurement == problem.margins[1].measurement
    model = problem.fit([m.shares() for m in views], 300)
    cliques = {tuple(sorted(int(n[1:]) for n in c)) for c in model.mrf.potentials.tables}
    assert views[problem.margins[0].measurement].view.attributes not in cliques


def test_the_bounded_fit_agrees_with_the_exact_fit(measured, monkeypatch) -> None:
    # Same views, same 300 iterations: the exact model (every pair a clique) and the bounded one (one of d's
    # independent pairs through its margins) give every 2-way and 3-way marginal within TVD 0.02 of each other,
    # and each is within 0.03 of the truth (measured once: at most 0.0063 apart, 0.017 from the truth; 60,000
    # devices, ε = 4).
    rows, views = measured
    exact = Problem.of(DOMAIN, views, len(rows)).fit([m.shares() for m in views], 300)
    monkeypatch.setattr(bounded, "MAX_CLIQUE", 24)
    problem = Problem.of(DOMAIN, views, len(rows))
    assert problem.margins
    model = problem.fit([m.shares() for m in views], 300)
    for attrs in [*(v.attributes for v in pairs(DOMAIN)), (0, 1, 2), (0, 2, 3), (1, 2, 3)]:
        truth = DOMAIN.view(attrs).histogram(rows) / len(rows)
        assert total_variation(model.marginal(attrs), exact.marginal(attrs)) < 0.02
        assert total_variation(model.marginal(attrs), truth) < 0.03
    sample = model.sample(1_000, np.random.default_rng(3))
    assert sample.shape == (1_000, 4) and np.all(sample.max(axis=0) < np.array(DOMAIN.sizes))
