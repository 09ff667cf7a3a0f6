"""The variance query: builder and JSON form, the refusal of HM at ε ≤ ε* naming ``epsilon``, and its answers
through the shared answering (``estimate_release``, ``answer_numeric``): the library's estimate per group, empty
groups, SW's bootstrap, and the grouped intervals' coverage over seeded repetitions."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.estimators.offline import estimate_release
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.numeric.answering import answer_numeric, compile_numeric
from ldpsynth.shared.numeric.variance import estimate_variance
from ldpsynth.shared.queries import dumps_queries, mean, queries_from_json, query_from_json, query_to_json, variance
from ldpsynth.shared.release import Release
from ldpsynth.shared.schema import Schema

REGIONS = ["north", "south", "east"]


def card(mechanism: str = "HM", epsilon: float = 1.0) -> MechanismCard:
    return MechanismCard.for_schema(Schema.from_json({"name": "c", "epsilon": epsilon, "attributes": [
        {"name": "hours", "type": "numeric", "range": [0, 99], "mechanism": mechanism},
        {"name": "region", "type": "categorical", "values": REGIONS, "public": True}]}))


def data(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Hours per row and region codes 0 (north) or 1 (south): "east" holds no row."""
    region = rng.integers(0, 2, n)
    return 99.0 * rng.beta(np.where(region == 0, 3.0, 6.0), np.where(region == 0, 6.0, 4.0)), region


def release(c: MechanismCard, hours: np.ndarray, region: np.ndarray, rng: np.random.Generator) -> Release:
    rows = encode_columns(c.schema, {"hours": hours, "region": np.array(REGIONS)[region]})
    return Release(c, {"region": region}, None, c.mechanism.perturb(rows.private_codes, rng))


def test_the_builder_and_its_json_round_trip() -> None:
    built = [variance("hours"), variance("hours", by="region", label="v")]
    as_json = [query_to_json(q) for q in built]
    assert as_json == [{"kind": "variance", "attribute": "hours"},
                       {"kind": "variance", "attribute": "hours", "by": "region", "label": "v"}]
    assert [query_from_json(obj) for obj in as_json] == built
    assert queries_from_json(dumps_queries(built)) == built
    with pytest.raises(ValidationError) as info:
        queries_from_json([{"kind": "variance", "attribute": "hours", "bins": 3}])
    assert info.value.field == "queries[0].bins"


def test_hm_below_the_crossover_is_refused_naming_epsilon_and_sw_is_not() -> None:
    with pytest.raises(ValidationError) as info:
        compile_numeric([mean("hours"), variance("hours")], card("HM", 0.5).schema)
    assert info.value.field == "epsilon" and "0.6094" in info.value.legal
    assert info.value.problem.startswith("queries[1] asks a variance of 'hours'")
    assert compile_numeric([variance("hours")], card("SW", 0.5).schema).labels == ("variance#0",)
    batch = compile_numeric([variance("hours", by="region")], card("HM", 0.7).schema)
    assert batch.labels == ("variance#0[region=north]", "variance#0[region=south]", "variance#0[region=east]")


def test_hm_answers_are_the_librarys_estimate_per_group() -> None:
    rng = np.random.default_rng(21)
    c = card()
    hours, region = data(3000, rng)
    r = release(c, hours, region, rng)
    answers = estimate_release(r, [variance("hours"), variance("hours", by="region")])
    sampler = c.mechanism.sampler
    span = c.schema.numeric.range  # type: ignore[union-attr]
    reports = r.private_reports()
    expected = [estimate_variance(sampler, reports, span), estimate_variance(sampler, reports[region == 0], span),
                estimate_variance(sampler, reports[region == 1], span)]
    assert answers.estimate[:3].tolist() == [e.variance for e in expected]
    assert answers.std_error[:3].tolist() == [e.standard_error for e in expected]
    assert np.isnan(answers.estimate[3]) and np.isnan(answers.std_error[3])          # "east": no row
    assert (answers.proper_estimate[:3] >= 0).all() and (answers.proper_estimate[:3] <= 49.5**2).all()
    assert answers.label(3) == "variance#1[region=east]"


def test_sw_answers_are_the_ems_histograms_variance_with_a_bootstrap_se() -> None:
    rng = np.random.default_rng(22)
    c = card("SW", 2.0)
    hours, region = data(4000, rng)
    r = release(c, hours, region, rng)
    first = estimate_release(r, [variance("hours"), variance("hours", by="region")])
    again = estimate_release(r, [variance("hours")])          # the bootstrap's seed: the counts and the query
    assert again.estimate[0] == first.estimate[0] and again.std_error[0] == first.std_error[0]
    assert (first.std_error[:3] > 0).all() and np.isnan(first.estimate[3])
    for j, rows in enumerate([np.ones(len(hours), bool), region == 0, region == 1]):
        # within 4 bootstrap SEs of the truth (α ≈ 6e-5 were the SE exact and EMS unbiased: its bias is about +3 %)
        assert abs(first.estimate[j] - hours[rows].var()) < 4 * first.std_error[j], j


def test_the_grouped_intervals_cover_the_truth() -> None:
    """400 seeded repetitions of 4,000 values through HM at ε = 2: each region's 95 % interval of the variance
    covers its truth in [0.93, 0.97] of them (binomial SD 0.011 at 0.95)."""
    rng = np.random.default_rng(20261208)
    c = card(epsilon=2.0)
    hours, region = data(4000, rng)
    truth = np.array([hours[region == 0].var(), hours[region == 1].var()])
    rows = encode_columns(c.schema, {"hours": hours, "region": np.array(REGIONS)[region]})
    batch = compile_numeric([variance("hours", by="region")], c.schema)
    keys = c.schema.public_keys_of({"region": region}, len(region))
    covered = np.zeros(2, np.int64)
    for _ in range(400):
        reports = c.mechanism.perturb(rows.private_codes, rng)
        a = answer_numeric(batch, SufficientStatistics.from_schema(c.schema, keys, reports), c.mechanism.epsilon)
        covered += (a.ci_low[:2] <= truth) & (truth <= a.ci_high[:2])
    assert ((covered >= 372) & (covered <= 388)).all(), covered
