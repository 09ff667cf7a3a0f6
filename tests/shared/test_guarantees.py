"""A shuffled collection's guarantees per party (issue 38; docs/shuffle-accountant.md §6): the schema's shuffle
block and the card's, their refusals; the public-key groups a batch reads; the minimum batch, which differencing
cannot undo (the audit's attack and its variants: complements, overlapping predicates, marginals, releases); the
central (ε, δ) at the pool floor equal to the accountant's; several rows per device; planning's central ε and
its inverse.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from ldpsynth.shared import amplification
from ldpsynth.shared import guarantees as G
from ldpsynth.shared import queries as Q
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import SchemaError, ValidationError
from ldpsynth.shared.estimators.offline import estimate_release
from ldpsynth.shared.planning.planner import plan
from ldpsynth.shared.planning.row_distribution import SampleRows
from ldpsynth.shared.planning.shuffled import plan_shuffle
from ldpsynth.shared.queries.wire import guarantees_from_proto, guarantees_to_proto
from ldpsynth.shared.release import Release
from ldpsynth.shared.schema import Schema, ShuffleSpec

ATTRIBUTES = [{"name": "movie", "type": "integer", "min": 0, "max": 3, "public": True},
              {"name": "genre", "type": "categorical", "values": ["a", "b"], "public": True},
              {"name": "rating", "type": "integer", "min": 1, "max": 5}]


def schema(shuffle: object = None, epsilon: float = 2.0) -> Schema:
    obj: dict = {"name": "r", "epsilon": epsilon, "attributes": ATTRIBUTES}
    if shuffle is not None:
        obj["shuffle"] = shuffle
    return Schema.from_json(obj)


SHUFFLE = {"delta": 1e-9, "min_batch": 100, "rows_per_device": 1, "shuffler": "independent"}


# ----- the schema and the card ---------------------------------------------------------------------
def test_schema_and_card_round_trip_the_shuffle_block():
    s = schema(SHUFFLE)
    assert s.shuffle == ShuffleSpec(1e-9, 100, 1, "independent") and s.shuffle.independent
    assert Schema.from_json(s.dumps()) == s and s.to_json()["shuffle"] == SHUFFLE
    card = MechanismCard.for_schema(s)
    text = card.dumps()
    assert MechanismCard.from_json(text) == card
    block = json.loads(text)["shuffle"]
    assert block["local"]["epsilon"] == card.mechanism.epsilon and block["central"]["delta"] == 1e-9
    assert block["central"]["honest_reports_per_pool"] == 99 and block["central"]["assume_injected"] == 1
    assert block["central"]["against"]["operator"].startswith("the central guarantee")
    assert block["central"]["against"]["shuffler"].startswith("the local guarantee only")
    defaults = schema({"delta": 1e-6, "min_batch": 5}).shuffle
    assert (defaults.rows_per_device, defaults.shuffler, defaults.independent) == (1, "aggregator-operator", False)
    assert (defaults.assume_injected, defaults.injected, defaults.honest_per_pool) == (None, 1, 4)
    assert "assume_injected" not in defaults.to_json()                 # the default is not written (cards unchanged)
    explicit = schema({"delta": 1e-6, "min_batch": 50, "rows_per_device": 3, "assume_injected": 20}).shuffle
    assert (explicit.injected, explicit.honest_per_pool, explicit.to_json()["assume_injected"]) == (20, 30, 20)
    assert schema({"delta": 1e-6, "min_batch": 1}).shuffle.injected == 0   # no room: nothing assumed injected
    assert "operator runs the shuffler too" in MechanismCard.for_schema(schema({"delta": 1e-6, "min_batch": 5})
                                                                         ).to_json()["shuffle"]["central"]["against"][
        "operator"]
    plain = schema()
    assert plain.shuffle is None and "shuffle" not in plain.to_json()
    assert "shuffle" not in MechanismCard.for_schema(plain).to_json()


@pytest.mark.parametrize("block, field, legal", [
    ({"delta": 0, "min_batch": 10}, "shuffle.delta", "(0, 1)"),
    ({"delta": 1.0, "min_batch": 10}, "shuffle.delta", "(0, 1)"),
    ({"delta": float("nan"), "min_batch": 10}, "shuffle.delta", "(0, 1)"),
    ({"delta": "1e-9", "min_batch": 10}, "shuffle.delta", "(0, 1)"),
    ({"delta": 1e-9, "min_batch": 0}, "shuffle.min_batch", "[1, 1000000000000]"),
    ({"delta": 1e-9, "min_batch": 10.5}, "shuffle.min_batch", "[1, 1000000000000]"),
    ({"delta": 1e-9, "min_batch": 10**13}, "shuffle.min_batch", "[1, 1000000000000]"),
    ({"delta": 1e-9, "min_batch": 10, "rows_per_device": 0}, "shuffle.rows_per_device", "[1, 1000000]"),
    ({"delta": 1e-9, "min_batch": 10, "shuffler": "nobody"}, "shuffle.shuffler", "independent"),
    ({"delta": 1e-9, "min_batch": 10, "assume_injected": 10}, "shuffle.assume_injected", "[0, 9]"),
    ({"delta": 1e-9, "min_batch": 10, "assume_injected": -1}, "shuffle.assume_injected", "[0, 9]"),
    ({"delta": 1e-9, "min_batch": 10, "assume_injected": 1.5}, "shuffle.assume_injected", "[0, 9]"),
    ({"delta": 1e-9}, "shuffle.min_batch", "delta, min_batch"),
    ({"min_batch": 10}, "shuffle.delta", "delta, min_batch"),
    ({"delta": 1e-9, "min_batch": 10, "threshold": 3}, "shuffle", "delta, min_batch"),
    ([1e-9, 10], "shuffle", "an object"),
])
def test_bad_shuffle_blocks_are_refused_naming_the_field_and_range(block, field, legal):
    with pytest.raises(SchemaError) as caught:
        schema(block)
    assert caught.value.field == field and legal in caught.value.legal


def test_a_card_whose_shuffle_block_disagrees_with_its_schema_is_refused():
    card = json.loads(MechanismCard.for_schema(schema(SHUFFLE)).dumps())
    for path, value in ((("shuffle", "delta"), 1e-3), (("shuffle", "min_batch"), 1),
                        (("shuffle", "central"), {"delta": 1e-9}), (("shuffle", "local"), {"epsilon": 0.1})):
        tampered = json.loads(json.dumps(card))
        tampered[path[0]][path[1]] = value
        with pytest.raises(ValidationError) as caught:
            MechanismCard.from_json(json.dumps(tampered))
        assert caught.value.field == f"card.shuffle.{path[1]}"
    missing = {k: v for k, v in card.items() if k != "shuffle"}
    with pytest.raises(ValidationError, match="card.shuffle"):
        MechanismCard.from_json(json.dumps(missing))
    unshuffled = json.loads(MechanismCard.for_schema(schema()).dumps())
    with pytest.raises(ValidationError, match="card.shuffle"):
        MechanismCard.from_json(json.dumps({**unshuffled, "shuffle": card["shuffle"]}))


# ----- groups --------------------------------------------------------------------------------------
def release(per_key: dict[tuple[int, int], int], rng: np.random.Generator, s: Schema | None = None) -> Release:
    s = s or schema(SHUFFLE)
    movies = np.concatenate([np.full(c, m) for (m, _), c in per_key.items()])
    genres = np.concatenate([np.full(c, g) for (_, g), c in per_key.items()])
    return Release(MechanismCard.for_schema(s), {"movie": movies, "genre": genres,
                                                 "rating": rng.integers(0, 5, len(movies))})


def keys_read(r: Release, queries) -> dict[str, int]:
    batch = Q.compile_queries(Q.queries_from_json(json.dumps(queries)), r.card.schema)
    keys, sizes = np.unique(r.public_keys(), return_counts=True)
    read = G.keys_read(batch, keys)
    return dict(zip(G.key_names(r.card.schema, keys[read]), sizes[read].tolist()))


GROUPED = {"kind": "grouped", "attribute": "movie", "tables": [{"value": 0, "weights": [1, 2, 3, 4, 5]},
                                                               {"value": 1, "weights": [3, 3, 3, 3, 3]}]}


def test_the_public_key_groups_a_batch_reads():
    r = release({(0, 0): 300, (0, 1): 200, (1, 0): 150, (2, 1): 120, (3, 0): 50}, np.random.default_rng(1))
    every = {"movie=0, genre=a": 300, "movie=0, genre=b": 200, "movie=1, genre=a": 150, "movie=2, genre=b": 120,
             "movie=3, genre=a": 50}
    assert keys_read(r, [{"kind": "linear", "weights": [1, 2, 3, 4, 5]}]) == every       # all rows: every key
    assert keys_read(r, [GROUPED]) == {"movie=0, genre=a": 300, "movie=0, genre=b": 200}  # movie 1 constant
    assert keys_read(r, [{**GROUPED, "default": [0, 0, 0, 0, 1]}]) == {
        k: v for k, v in every.items() if not k.startswith("movie=1")}
    assert keys_read(r, [GROUPED, {"kind": "marginal", "attributes": ["rating"]}]) == every
    assert keys_read(r, [{"kind": "linear", "weights": [1, 1, 1, 1, 1]}]) == {}    # reads no private value


# ----- the minimum batch, which differencing cannot undo ---------------------------------------------
ATTACK = [{"name": "movie", "type": "integer", "min": 1, "max": 2, "public": True},
          {"name": "rating", "type": "integer", "min": 1, "max": 5}]
ATTACK_SHUFFLE = {"delta": 1e-9, "min_batch": 100, "shuffler": "independent"}


def attack_release(small: int = 3, large: int = 3000, seed: int = 38) -> Release:
    """The audit's collection: ε0 = 4, a public movie in {1, 2}, min_batch 100; movie=1 has 3 reports."""
    s = Schema.from_json({"name": "audit", "epsilon": 4.0, "attributes": ATTACK, "shuffle": ATTACK_SHUFFLE})
    rng = np.random.default_rng(seed)
    movies = np.concatenate([np.full(small, 0), np.full(large, 1)])           # codes: movie=1, movie=2
    return Release(MechanismCard.for_schema(s), {"movie": movies, "rating": rng.integers(0, 5, len(movies))})


def answers_to(r: Release, queries: list) -> tuple[np.ndarray, Any]:
    answers = estimate_release(r, queries)
    return answers.estimate, answers


def movie_table(tables: dict[int, list[float]], default: list[float] | None = None, **extra: Any) -> dict:
    """A grouped query by movie (a public attribute): weights per listed movie, ``default`` for the others."""
    query = {"kind": "grouped", "attribute": "movie", "tables": [{"value": m, "weights": w} for m, w in tables.items()],
             "normalization": "sum", **extra}
    return query if default is None else {**query, "default": default}


def cell(v: int) -> list[float]:
    return np.eye(5)[v - 1].tolist()


def test_the_audits_differencing_attack_recovers_nothing_of_a_small_group():
    """Answer A (the rating marginal over all rows) minus answer B (the same for movie=2) used to be movie=1's
    three perturbed reports, each answer stating central ε ≈ 1.1. Now movie=1 (below min_batch) is counted in
    no answer: A equals B exactly, both count the same 3,000 reports, and both state the pool floor's ε, which
    is above the exact lower bound of any group they read."""
    r = attack_release()
    a, answers_a = answers_to(r, [{"kind": "marginal", "attributes": ["rating"]}])
    b, answers_b = answers_to(r, [movie_table({2: cell(v)}) for v in range(1, 6)])
    np.testing.assert_array_equal(a, b)                          # A - B = 0: movie=1 left no trace
    assert answers_a.n == answers_b.n == 3000
    ga, gb = answers_a.guarantees, answers_b.guarantees
    assert (ga.withheld_groups, ga.withheld_reports) == (1, 3) and ga.counts.tolist() == [3000]
    assert (gb.withheld_groups, gb.labels) == (0, ("movie=2",))
    # The pool floor (min_batch 100 less F = 1 injected) amplifies nothing at ε0 = 4 over 5 values: an analyst who
    # asks before and after one pool of 99 honest reports lands sees those 99, so only the local ε0 is stated.
    assert amplification.central_epsilon(4.0, 5, 99, 1e-9) >= 4.0
    assert ga.analysts.epsilon == gb.analysts.epsilon == ga.operator.epsilon == ga.local_epsilon
    assert not ga.analysts.central and ga.analysts.delta == 0.0
    assert ga.analysts.epsilon >= amplification.central_epsilon_lower_bound(4.0, 5, 3000, 1e-9)


@pytest.mark.parametrize("query", [
    movie_table({1: [1, 2, 3, 4, 5]}),                                               # the complement of movie=2
    movie_table({1: [0, 0, 0, 1, 1]}, normalization="mean"),                         # a predicate within movie=1
    movie_table({2: [1, 1, 1, 1, 1]}, default=[0, 0, 0, 0, 1]),                      # movie=2 constant, the rest read
])
def test_a_query_that_reads_only_the_small_group_is_refused(query):
    with pytest.raises(G.BelowMinimumBatch) as caught:
        estimate_release(attack_release(), [query])
    assert (caught.value.group, caught.value.count, caught.value.minimum) == ("movie=1", 3, 100)
    assert "never released nor counted" in str(caught.value)


def test_overlapping_predicates_complements_and_marginals_difference_to_nothing():
    """Rating >= 4 over movies {1, 2} and over movie 2 alone (overlapping), over every row and over movie 2 (the
    complement pair), the rating cells over both movies and the rating marginal: every difference is exactly 0."""
    r = attack_release(seed=7)
    high = [0, 0, 0, 1, 1]
    both, _ = answers_to(r, [movie_table({1: high, 2: high})])
    only_2, _ = answers_to(r, [movie_table({2: high})])
    every, _ = answers_to(r, [{"kind": "predicate", "where": [{"attribute": "rating", "op": ">=", "value": 4}]}])
    np.testing.assert_array_equal(both, only_2)
    np.testing.assert_array_equal(every, only_2)
    by_movie, answers = answers_to(r, [movie_table({1: cell(v), 2: cell(v)}) for v in range(1, 6)])
    by_rating, _ = answers_to(r, [{"kind": "marginal", "attributes": ["rating"]}])
    np.testing.assert_array_equal(by_movie, by_rating)            # the two movies' cells: movie=2's alone
    assert answers.guarantees.withheld_groups == 1 and answers.n == 3000


def test_a_release_holding_a_small_group_answers_as_without_it():
    """Offline, from a release that holds movie=1's rows (not one the server writes: it leaves them out): the
    same answers as from the release without them, to the last bit."""
    r = attack_release(seed=9)
    keep = r.public_keys() == 1                                                 # movie=2's rows only
    values = r.values()
    without = Release.from_values(r.card, {name: np.asarray(col)[keep] for name, col in values.items()})
    queries = [{"kind": "marginal", "attributes": ["rating"], "normalization": "mean"},
               {"kind": "linear", "weights": [1, 2, 3, 4, 5], "normalization": "mean"}]
    full, _ = answers_to(r, queries)
    cut, answers = answers_to(without, queries)
    np.testing.assert_array_equal(full, cut)
    assert answers.guarantees.withheld_groups == 0


def test_a_cut_or_dense_query_reading_a_small_group_is_refused():
    r = attack_release()
    with pytest.raises(G.BelowMinimumBatch, match="reads each group whole"):
        estimate_release(r, [{"kind": "dense", "table": [[1.0, 2.0, 3.0, 4.0, 5.0]] * len(r)}])


def test_min_batch_of_any_collection_withholds_small_groups_with_its_field():
    """The schema's min_batch (no shuffle block): the same rule, no central guarantee to state."""
    plain = Schema.from_json({"name": "r", "epsilon": 2.0, "attributes": ATTRIBUTES, "min_batch": 150})
    assert plain.minimum_batch == (150, "min_batch")
    r = release({(0, 0): 300, (1, 0): 99}, np.random.default_rng(3), plain)
    grouped = {"kind": "grouped", "attribute": "movie", "tables": [{"value": 1, "weights": [1, 2, 3, 4, 5]}]}
    with pytest.raises(G.BelowMinimumBatch) as caught:
        estimate_release(r, [grouped])
    assert (caught.value.group, caught.value.count, caught.value.minimum, caught.value.field) == (
        "movie=1, genre=a", 99, 150, "min_batch")
    assert "(min_batch)" in str(caught.value)
    answers = estimate_release(r, [{"kind": "linear", "weights": [1, 2, 3, 4, 5]}])   # movie=1's 99 left out
    assert answers.n == 300 and answers.guarantees.shuffle is None
    assert answers.guarantees.summary() == {"withheld_groups": 1, "withheld_reports": 99}
    small = release({(0, 0): 100, (1, 0): 49}, np.random.default_rng(4), plain)
    with pytest.raises(G.BelowMinimumBatch) as caught:
        estimate_release(small, [{"kind": "linear", "weights": [1, 2, 3, 4, 5]}])
    assert caught.value.count == 49 and "(2 groups below it)" in str(caught.value)
    # Beside a shuffle block, the larger minimum applies, named by its field.
    both = Schema.from_json({"name": "r", "epsilon": 2.0, "attributes": ATTRIBUTES, "min_batch": 150,
                             "shuffle": SHUFFLE})
    assert both.minimum_batch == (150, "min_batch")
    assert schema(SHUFFLE).minimum_batch == (100, "shuffle.min_batch")
    assert Schema.from_json({"name": "r", "epsilon": 2.0, "attributes": ATTRIBUTES}).minimum_batch == (1, "min_batch")


# ----- the accountant at the pool floor ---------------------------------------------------------------
def test_the_central_guarantee_is_the_accountants_at_the_pool_floor_whatever_the_groups():
    spec = ShuffleSpec(1e-9, 5_000, 1, "independent", 200)
    counts = np.array([5_000, 300_000, 50_000])
    g = G.compute(G.RELEASE, 1.5, 8410, spec, ["a", "b", "c"], counts)
    assert g.evaluated_at == 4_800 and g.central == (amplification.central_epsilon(1.5, 8410, 4_800, 1e-9), 1e-9)
    assert g.analysts.epsilon == g.operator.epsilon == g.central[0] and g.analysts.honest_reports == 4_800
    assert g.against(G.SHUFFLER) == G.PartyGuarantee(G.SHUFFLER, 1.5, 0.0, False, 0, g.against(G.SHUFFLER).basis)
    back = guarantees_from_proto(guarantees_to_proto(g))
    assert back.to_json() == g.to_json()
    assert G.Guarantees.from_json(json.loads(json.dumps(g.to_json())), g.shuffle).to_json() == g.to_json()
    operated = G.compute(G.ANSWERS, 1.5, 8410, ShuffleSpec(1e-9, 5_000), ["a"], counts[:1])
    assert operated.analysts.epsilon == operated.central[0] < 1.5        # analysts: central
    assert (operated.operator.epsilon, operated.operator.delta, operated.operator.central) == (1.5, 0.0, False)
    with pytest.raises(ValidationError, match="party"):
        g.against("the press")


def test_several_rows_per_device_compose_and_fewer_than_the_cards_are_refused():
    spec = ShuffleSpec(1e-9, 40_004, rows_per_device=4)
    g = G.compute(G.ANSWERS, 2.0, 8410, spec, ["a"], np.array([90_000]))
    assert g.rows_per_device == 4 and g.device_local_epsilon == 8.0
    assert g.evaluated_at == 10_000                                  # floor((40,004 - 4) / 4) per round
    assert g.central[0] == amplification.composed_epsilon(2.0, 8410, 10_000, 1e-9, 4)
    assert g.central[0] > amplification.central_epsilon(2.0, 8410, 10_000, 1e-9)
    more = G.compute(G.ANSWERS, 2.0, 8410, spec, ["a"], np.array([90_000]), rows_per_device=8)
    assert more.central[0] > g.central[0]
    with pytest.raises(ValidationError) as caught:
        G.compute(G.ANSWERS, 2.0, 8410, spec, ["a"], np.array([90_000]), rows_per_device=3)
    assert caught.value.field == "rows_per_device" and "[4, " in caught.value.legal
    tiny = G.compute(G.ANSWERS, 2.0, 8410, ShuffleSpec(1e-9, 3, rows_per_device=4, assume_injected=0), ["a"],
                     np.array([3]))
    assert tiny.central == (8.0, 0.0) and not tiny.analysts.central   # too few: 4 x eps0, delta 0


def test_an_unshuffled_collection_states_the_local_guarantee_only():
    g = G.compute(G.ANSWERS, 1.0, 5, None, ["all rows"], np.array([10]))
    assert not g.shuffled and g.central is None and g.summary() == {}
    assert g.to_json()["central"] is None and g.to_json()["local"]["epsilon"] == 1.0
    assert g.analysts.epsilon == 1.0 and not g.analysts.central


# ----- planning --------------------------------------------------------------------------------------
def test_planning_central_epsilon_and_its_inverse_round_trip():
    s = schema({"delta": 1e-9, "min_batch": 30_000}, epsilon=1.0)
    queries = Q.queries_from_json('[{"kind": "marginal", "attributes": ["rating"], "normalization": "mean"}]')
    p = plan_shuffle(plan(s, queries, 200_000), s, Q.compile_queries(queries, s), target_central_epsilon=0.5)
    sp = p.shuffle
    per_key = 200_000 // 8
    assert sp.planned_reports.tolist() == [per_key] and sp.below_min_batch.tolist() == [True]
    assert sp.at_planned.withheld_groups == 1 and sp.assume_injected == 1
    floor = 30_000 - 1
    assert sp.at_planned.central[0] == amplification.central_epsilon(p.epsilon, 5, floor, 1e-9)
    assert sp.epsilon0 == amplification.local_epsilon_for(0.5, 5, floor, 1e-9)
    assert sp.central_at_epsilon0 <= 0.5 < amplification.central_epsilon(sp.epsilon0 * 1.001, 5, floor, 1e-9)
    assert (sp.shuffled.se_worst < sp.plain.se_worst).all()                       # ε0 > 0.5: less noise
    np.testing.assert_allclose(sp.plain.se_worst, plan(s, queries, 200_000, epsilon=0.5).e.se_worst)
    plain = plan(s, queries, 200_000, epsilon=0.5)          # the oracles at the central ε, without a shuffler
    assert [c.mechanism for c in sp.oracles] == ["OUE", "OLH", "HR", "SS"]
    for c in sp.oracles:
        np.testing.assert_allclose(c.figures.se_worst, plain.oracle(c.mechanism).se_worst)
    ratios = {"E": 1.0, **{b.choice.mechanism: b.choice.error_ratio for b in sp.behind}}  # all behind the shuffler
    assert ratios[sp.recommended] <= min(ratios.values()) * 1.05 and sp.recommended in sp.recommendation
    wide = Schema.from_json({"name": "w", "epsilon": 1.0, "shuffle": {"delta": 1e-9, "min_batch": 20_000},
                             "attributes": [{"name": "movie", "type": "integer", "min": 1, "max": 1682},
                                            {"name": "rating", "type": "integer", "min": 1, "max": 5}]})
    marginal = Q.queries_from_json('[{"kind": "marginal", "attributes": ["rating"]}]')
    w = plan_shuffle(plan(wide, marginal, 100_000), wide, Q.compile_queries(marginal, wide)).shuffle
    assert w.recommended == "E" and w.recommendation.startswith("E: standard errors 1 x E's behind the shuffler")
    assert min(c.error_ratio for c in w.oracles) > 20
    injected = plan_shuffle(plan(s, queries, 200_000), s, Q.compile_queries(queries, s), assume_injected=10_000,
                            target_central_epsilon=0.5).shuffle
    assert injected.epsilon0 == amplification.local_epsilon_for(0.5, 5, 20_000, 1e-9) < sp.epsilon0
    rows = SampleRows.from_columns(s, {"movie": [0, 0, 0, 1], "genre": ["a", "a", "a", "b"], "rating": [1, 2, 3, 4]})
    q = plan_shuffle(plan(s, queries, 100_000, prior=rows), s, Q.compile_queries(queries, s), prior=rows)
    assert q.shuffle.planned_reports.tolist() == [75_000, 25_000] and q.shuffle.below_min_batch.tolist() == [False,
                                                                                                                True]
    assert q.shuffle.epsilon0 == amplification.local_epsilon_for(q.epsilon, 5, floor, 1e-9)


def test_planning_inverse_with_several_rows_per_device():
    e0 = amplification.local_epsilon_for(0.5, 8410, 20_000, 1e-9, reports_per_device=2)
    assert amplification.composed_epsilon(e0, 8410, 20_000, 1e-9, 2) <= 0.5
    assert amplification.composed_epsilon(e0 * 1.001, 8410, 20_000, 1e-9, 2) > 0.5
