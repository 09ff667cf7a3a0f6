"""A shuffled collection's two guarantees (issue 27 items 3 and 5): the schema's shuffle block and the card's,
their refusals; the groups a batch reads; the minimum batch; the central (ε, δ) equal to the accountant's on
the same counts; several rows per device; planning's central ε and its inverse.
"""

from __future__ import annotations

import json
import math

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
    assert "aggregator's operator" in block["central"]["against"]
    defaults = schema({"delta": 1e-6, "min_batch": 5}).shuffle
    assert (defaults.rows_per_device, defaults.shuffler, defaults.independent) == (1, "aggregator-operator", False)
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


def groups_of(r: Release, queries) -> dict[str, int]:
    batch = Q.compile_queries(Q.queries_from_json(json.dumps(queries)), r.card.schema)
    stats = r.public_keys()
    keys, sizes = np.unique(stats, return_counts=True)
    labels, counts = G.batch_groups(batch, keys, sizes)
    return dict(zip(labels, counts.tolist()))


def test_the_groups_a_batch_reads():
    r = release({(0, 0): 300, (0, 1): 200, (1, 0): 150, (2, 1): 120, (3, 0): 50}, np.random.default_rng(1))
    assert groups_of(r, [{"kind": "linear", "weights": [1, 2, 3, 4, 5]}]) == {"all rows": 820}
    grouped = {"kind": "grouped", "attribute": "movie", "tables": [{"value": 0, "weights": [1, 2, 3, 4, 5]},
                                                                  {"value": 1, "weights": [3, 3, 3, 3, 3]}]}
    assert groups_of(r, [grouped]) == {"movie=0": 500}                          # movie 1 constant, default zeros
    assert groups_of(r, [{**grouped, "default": [0, 0, 0, 0, 1]}]) == {"movie=0": 500,
                                                                        "movie: the unlisted values": 170}
    assert groups_of(r, [grouped, {"kind": "marginal", "attributes": ["rating"]}]) == \
        {"movie=0": 500, "movie: other values": 320}                           # the common refinement
    by_genre = {"kind": "grouped", "attribute": "genre", "tables": [{"value": "a", "weights": [0, 0, 0, 1, 1]}]}
    assert groups_of(r, [grouped, by_genre]) == {"movie=0; genre=a": 300, "movie=0; genre: other values": 200,
                                                 "movie: other values; genre=a": 200}
    assert groups_of(r, [{"kind": "linear", "weights": [1, 1, 1, 1, 1]}]) == {}    # reads no private value
    keys, sizes = np.unique(r.public_keys(), return_counts=True)
    labels, counts = G.release_groups(r.card.schema, keys, sizes)
    assert dict(zip(labels, counts.tolist())) == {"movie=0, genre=a": 300, "movie=0, genre=b": 200,
                                                  "movie=1, genre=a": 150, "movie=2, genre=b": 120,
                                                  "movie=3, genre=a": 50}


def test_below_the_minimum_batch_offline_is_refused_naming_the_group():
    r = release({(0, 0): 300, (1, 0): 99}, np.random.default_rng(2))
    grouped = {"kind": "grouped", "attribute": "movie", "tables": [{"value": 1, "weights": [1, 2, 3, 4, 5]}]}
    with pytest.raises(G.BelowMinimumBatch) as caught:
        estimate_release(r, [grouped])
    assert (caught.value.group, caught.value.count, caught.value.minimum) == ("movie=1", 99, 100)
    assert "99 reports" in str(caught.value) and "minimum batch of 100" in str(caught.value)
    answers = estimate_release(r, [{"kind": "linear", "weights": [1, 2, 3, 4, 5]}])   # 399 rows in all
    assert answers.guarantees.counts.tolist() == [399]


def test_min_batch_of_any_collection_refuses_small_releases_and_small_groups_with_its_field():
    """The schema's min_batch (no shuffle block): the same groups and the same refusal, no guarantees to state."""
    plain = Schema.from_json({"name": "r", "epsilon": 2.0, "attributes": ATTRIBUTES, "min_batch": 150})
    assert plain.minimum_batch == (150, "min_batch") and G.releases_by_group(plain)
    r = release({(0, 0): 300, (1, 0): 99}, np.random.default_rng(3), plain)
    grouped = {"kind": "grouped", "attribute": "movie", "tables": [{"value": 1, "weights": [1, 2, 3, 4, 5]}]}
    with pytest.raises(G.BelowMinimumBatch) as caught:
        estimate_release(r, [grouped])
    assert (caught.value.group, caught.value.count, caught.value.minimum, caught.value.field) == ("movie=1", 99, 150,
                                                                                                  "min_batch")
    assert "(min_batch)" in str(caught.value) and "amplifies" not in str(caught.value)
    answers = estimate_release(r, [{"kind": "linear", "weights": [1, 2, 3, 4, 5]}])   # 399 rows in all
    assert answers.n == 399 and answers.guarantees is None
    small = release({(0, 0): 100, (1, 0): 49}, np.random.default_rng(4), plain)
    with pytest.raises(G.BelowMinimumBatch) as caught:
        estimate_release(small, [{"kind": "linear", "weights": [1, 2, 3, 4, 5]}])
    assert (caught.value.group, caught.value.count) == ("", 149) and "the collection holds 149" in str(caught.value)
    # Beside a shuffle block, the larger minimum applies, named by its field.
    both = Schema.from_json({"name": "r", "epsilon": 2.0, "attributes": ATTRIBUTES, "min_batch": 150,
                             "shuffle": SHUFFLE})
    assert both.minimum_batch == (150, "min_batch")
    assert schema(SHUFFLE).minimum_batch == (100, "shuffle.min_batch")
    assert Schema.from_json({"name": "r", "epsilon": 2.0, "attributes": ATTRIBUTES}).minimum_batch == (1, "min_batch")


# ----- the accountant, grouped ---------------------------------------------------------------------
def test_the_ladder_is_exact_at_the_smallest_count_and_never_above_a_count():
    counts = np.array([10_000, 10_001, 12_000, 20_000, 1_000_000, 999_999, 10_000])
    points = G.ladder(counts)
    assert points[0] == points[-1] == 10_000 and (points <= counts).all() and (points >= 10_000).all()
    assert ((points == 10_000) | (points * G.LADDER_RATIO > counts - 1)).all()   # within one step
    many = np.arange(10_000, 1_000_001, 37)
    assert len(np.unique(G.ladder(many))) <= math.ceil(math.log(100) / math.log(G.LADDER_RATIO)) + 2


def test_per_group_guarantees_equal_the_accountant_on_the_same_counts():
    counts = np.array([5_000, 300, 50_000, 5_000, 0, 7_000])
    g = G.compute(G.RELEASE, 1.5, 8410, ShuffleSpec(1e-9, 1), [f"g{i}" for i in range(6)], counts)
    reference = amplification.group_guarantees(1.5, 8410, g.evaluated, 1e-9)
    live = counts > 0
    np.testing.assert_array_equal(g.epsilon[live], reference.epsilon[live])
    np.testing.assert_array_equal(g.delta[live], reference.delta[live])
    assert (g.epsilon[4], g.delta[4], g.evaluated[4]) == (1.5, 0.0, 0)              # empty: the local guarantee
    assert g.central_epsilon == amplification.central_epsilon(1.5, 8410, 300, 1e-9) and g.weakest_group == "g1"
    assert g.evaluated[1] == 300 and g.evaluated[0] == g.evaluated[3]
    exact = [amplification.central_epsilon(1.5, 8410, int(c), 1e-9) for c in counts[live]]
    assert (g.epsilon[live] >= exact).all() and (g.epsilon[live] <= np.array(exact) * 1.1).all()
    back = guarantees_from_proto(guarantees_to_proto(g))
    assert back.to_json() == g.to_json()
    assert G.Guarantees.from_json(json.loads(json.dumps(g.to_json())), g.shuffle).to_json() == g.to_json()


def test_several_rows_per_device_compose():
    counts = np.array([40_000, 90_000])
    g = G.compute(G.ANSWERS, 2.0, 8410, ShuffleSpec(1e-9, 1, rows_per_device=4), ["a", "b"], counts)
    assert g.rows_per_device == 4 and g.device_local_epsilon == 8.0
    assert g.evaluated.tolist()[0] == 10_000                                       # n = floor(N / m) per round
    assert g.epsilon[0] == amplification.composed_epsilon(2.0, 8410, 10_000, 1e-9, 4)
    assert g.epsilon[0] > amplification.central_epsilon(2.0, 8410, 10_000, 1e-9)
    tiny = G.compute(G.ANSWERS, 2.0, 8410, ShuffleSpec(1e-9, 1, rows_per_device=4), ["a"], np.array([3]))
    assert (tiny.central_epsilon, tiny.central_delta) == (8.0, 0.0)                # too few: 4 x eps0, delta 0


def test_an_unshuffled_collection_states_the_local_guarantee_only():
    g = G.compute(G.ANSWERS, 1.0, 5, None, ["all rows"], np.array([10]))
    assert not g.shuffled and g.central_epsilon is None and g.summary() == {}
    assert g.to_json()["central"] is None and g.to_json()["local"]["epsilon"] == 1.0


# ----- planning --------------------------------------------------------------------------------------
def test_planning_central_epsilon_and_its_inverse_round_trip():
    s = schema({"delta": 1e-9, "min_batch": 30_000}, epsilon=1.0)
    queries = Q.queries_from_json('[{"kind": "marginal", "attributes": ["rating"], "normalization": "mean"}]')
    p = plan_shuffle(plan(s, queries, 200_000), s, Q.compile_queries(queries, s), target_central_epsilon=0.5)
    sp = p.shuffle
    per_key = 200_000 // 8
    assert sp.at_planned.counts.tolist() == [per_key] and sp.below_min_batch.tolist() == [True]
    assert sp.at_planned.central_epsilon == amplification.central_epsilon(p.epsilon, 5, per_key, 1e-9)
    assert sp.epsilon0 == amplification.local_epsilon_for(0.5, 5, per_key, 1e-9)
    assert sp.central_at_epsilon0 <= 0.5 < amplification.central_epsilon(sp.epsilon0 * 1.001, 5, per_key, 1e-9)
    assert (sp.shuffled.se_worst < sp.plain.se_worst).all()                       # ε0 > 0.5: less noise
    np.testing.assert_allclose(sp.plain.se_worst, plan(s, queries, 200_000, epsilon=0.5).e.se_worst)
    plain = plan(s, queries, 200_000, epsilon=0.5)          # the oracles at the central ε, without a shuffler
    assert [c.mechanism for c in sp.oracles] == ["OUE", "OLH", "HR", "SS"]
    for c in sp.oracles:
        np.testing.assert_allclose(c.figures.se_worst, plain.oracle(c.mechanism).se_worst)
    ratios = {"E": 1.0, **{c.mechanism: c.error_ratio for c in sp.oracles}}      # against E behind the shuffler
    assert ratios[sp.recommended] <= min(ratios.values()) * 1.05 and sp.recommended in sp.recommendation
    wide = Schema.from_json({"name": "w", "epsilon": 1.0, "shuffle": {"delta": 1e-9, "min_batch": 1}, "attributes": [
        {"name": "movie", "type": "integer", "min": 1, "max": 1682}, {"name": "rating", "type": "integer", "min": 1,
                                                                       "max": 5}]})
    marginal = Q.queries_from_json('[{"kind": "marginal", "attributes": ["rating"]}]')
    w = plan_shuffle(plan(wide, marginal, 100_000), wide, Q.compile_queries(marginal, wide)).shuffle
    assert w.recommended == "E" and w.recommendation.startswith("E behind the shuffler at")   # a large domain amplifies
    assert min(c.error_ratio for c in w.oracles) > 50
    rows = SampleRows.from_columns(s, {"movie": [0, 0, 0, 1], "genre": ["a", "a", "a", "b"], "rating": [1, 2, 3, 4]})
    q = plan_shuffle(plan(s, queries, 100_000, prior=rows), s, Q.compile_queries(queries, s), prior=rows)
    assert q.shuffle.at_planned.counts.tolist() == [75_000, 25_000]
    assert q.shuffle.epsilon0 == amplification.local_epsilon_for(q.epsilon, 5, 25_000, 1e-9)


def test_planning_inverse_with_several_rows_per_device():
    e0 = G.local_epsilon_for(0.5, 8410, 40_000, 1e-9, rows_per_device=2)
    assert amplification.composed_epsilon(e0, 8410, 20_000, 1e-9, 2) <= 0.5
    assert amplification.composed_epsilon(e0 * 1.001, 8410, 20_000, 1e-9, 2) > 0.5
