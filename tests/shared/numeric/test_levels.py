"""Declared levels of a numeric attribute (``step``): the schema's boundary, the card, the device's refusal, SW's
transition matrix from each level (exact, and against a Monte Carlo of the sampler), the EM on the levels on a spiky
law, the choice of smoothing, the answers, and the coverage of the bootstrap intervals."""

from __future__ import annotations

import hashlib
import json

import jsonschema
import numpy as np
import pytest
from scipy import stats

from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.attributes import NumericAttribute, attribute_from_json
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import SchemaError, ValidationError
from ldpsynth.shared.estimators.offline import estimate_release
from ldpsynth.shared.numeric import SquareWave
from ldpsynth.shared.numeric.collection import numeric_quantiles
from ldpsynth.shared.numeric.estimators import bootstrap_from_counts, ems
from ldpsynth.shared.numeric.levels import MAX_INTERVALS, LevelModel, NumericLevels
from ldpsynth.shared.queries import histogram, quantiles, variance
from ldpsynth.shared.release import Release
from ldpsynth.shared.schema import Schema
from tests.test_json_schemas import COLLECTION, VALIDATORS

#: A MovieLens-like law of 5 ratings (spiky: atoms).
RATINGS = np.array([0.06, 0.11, 0.27, 0.34, 0.22])


def rating(step: float | None = 1.0, mechanism: str = "SW", lo: float = 1, hi: float = 5) -> dict:
    out = {"name": "rating", "type": "numeric", "range": [lo, hi], "mechanism": mechanism}
    if step is not None:
        out["step"] = step
    return out


def card(step: float | None = 1.0, mechanism: str = "SW", epsilon: float = 1.0) -> MechanismCard:
    return MechanismCard.for_schema(Schema.from_json({"name": "c", "epsilon": epsilon,
                                                      "attributes": [rating(step, mechanism)]}))


def model(attribute: NumericAttribute, epsilon: float, smoothing: bool = False) -> LevelModel:
    assert attribute.levels is not None
    return LevelModel.of(SquareWave(epsilon), attribute.levels, attribute.level_units(), smoothing)


# --- the schema's boundary --------------------------------------------------------------------------------------

def test_a_step_declares_the_levels_and_round_trips() -> None:
    a = attribute_from_json(rating(0.5), 0)
    assert isinstance(a, NumericAttribute) and a.levels is not None
    assert a.levels.values().tolist() == [1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0]
    assert a._type_json()["step"] == 0.5
    assert "step" not in attribute_from_json(rating(None), 0)._type_json()
    # decimal steps are not exact in binary: 0.1 on [0, 1] is 10 intervals, the last level hi exactly
    tenth = NumericLevels(0.0, 1.0, 0.1)
    assert tenth.count == 11 and tenth.values()[-1] == 1.0


@pytest.mark.parametrize("step, lo, hi", [(0.3, 1, 5), (0, 1, 5), (-1, 1, 5), (1, 0, 256), (10, 1, 5)])
def test_a_step_not_dividing_the_range_into_1_to_255_steps_is_refused(step: float, lo: float, hi: float) -> None:
    with pytest.raises(SchemaError) as err:
        attribute_from_json(rating(step, lo=lo, hi=hi), 0)
    assert err.value.field == "attributes[rating].step"
    assert f"an integer in [1, {MAX_INTERVALS}]" in str(err.value)


def test_the_largest_number_of_levels_is_accepted_and_their_buckets_are_distinct() -> None:
    a = attribute_from_json(rating(1, lo=0, hi=MAX_INTERVALS), 0)
    assert isinstance(a, NumericAttribute) and a.levels is not None and a.levels.count == 256
    assert np.unique(SquareWave(1.0).bucket(a.level_units())).size == 256


@pytest.mark.parametrize("step", [True, "1", None])
def test_a_step_that_is_not_a_number_is_refused(step: object) -> None:
    doc = {**rating(None), "step": step}
    with pytest.raises(SchemaError) as err:
        attribute_from_json(doc, 0)
    assert err.value.field == "attributes[rating].step"


def test_the_json_schema_takes_the_step_and_refuses_a_non_positive_one() -> None:
    doc = {"name": "c", "epsilon": 1.0, "attributes": [rating(1)]}
    VALIDATORS[COLLECTION].validate(doc)
    for bad in (0, -1, "1"):
        with pytest.raises(jsonschema.ValidationError):
            VALIDATORS[COLLECTION].validate({**doc, "attributes": [{**rating(None), "step": bad}]})


# --- the card ---------------------------------------------------------------------------------------------------

def test_the_card_carries_the_step_and_is_unchanged_without_it() -> None:
    with_step = card(1.0)
    assert with_step.to_json()["numeric"]["step"] == 1.0
    assert MechanismCard.from_json(with_step.dumps()).dumps() == with_step.dumps()
    # byte for byte the card of the code before levels existed (sha256 of its dumps() at d965cc7)
    for mechanism, digest in (("SW", "e558caf4a89c4e2648ef2e52864c9f18a02fb94af824d133edcc1877a4d63a54"),
                              ("HM", "d2cf0b0477bb23db565cdfd93709fcefc339e3d76b094de427c432626c2676a8")):
        assert hashlib.sha256(card(None, mechanism).dumps().encode()).hexdigest() == digest


def test_a_card_whose_step_differs_from_its_schema_is_refused() -> None:
    doc = card(1.0).to_json()
    doc["numeric"]["step"] = 2.0
    with pytest.raises(Exception, match="numeric"):
        MechanismCard.from_json(json.dumps(doc))


# --- the device -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mechanism", ["SW", "HM"])
def test_the_device_refuses_a_value_off_the_levels_naming_the_field(mechanism: str) -> None:
    schema = card(1.0, mechanism).schema
    encode_columns(schema, {"rating": np.array([1.0, 3.0, 5.0])})
    with pytest.raises(ValidationError) as err:
        encode_columns(schema, {"rating": np.array([1.0, 3.5, 5.0])})
    assert err.value.field == "rating" and err.value.position == 1
    assert "levels every 1.0" in str(err.value) and "3.5" not in str(err.value)


def test_a_value_on_a_level_is_encoded_as_the_level() -> None:
    a = attribute_from_json(rating(0.1, lo=0, hi=1), 0)
    assert isinstance(a, NumericAttribute) and a.levels is not None
    near = 0.1 + 0.2                                   # 0.30000000000000004: level 3 up to rounding
    assert a.encode(np.array([near])).tolist() == a.encode(a.levels.values()[[3]]).tolist()


# --- the transition matrix --------------------------------------------------------------------------------------

@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
def test_each_levels_column_sums_to_one_and_is_its_buckets_column(epsilon: float) -> None:
    a = attribute_from_json(rating(1, lo=17, hi=90), 0)
    assert isinstance(a, NumericAttribute)
    m = model(a, epsilon)
    assert m.transition.shape == (m.sampler.reports, 74)
    assert np.allclose(m.transition.sum(axis=0), 1.0, atol=1e-12)
    buckets = m.sampler.bucket(a.level_units())
    assert np.array_equal(m.transition, m.sampler.transition()[:, buckets])


def test_the_transition_matches_a_monte_carlo_of_the_sampler() -> None:
    a = attribute_from_json(rating(1), 0)
    assert isinstance(a, NumericAttribute) and a.levels is not None
    m = model(a, 1.0)
    rng = np.random.default_rng(42)
    draws = 200_000                                    # the least expected count per cell is above 100
    for k, x in enumerate(a.level_units()):
        counts = np.bincount(m.sampler.perturb(np.full(draws, x), rng), minlength=m.sampler.reports)
        expected = draws * m.transition[:, k]
        assert expected.min() >= 5
        # α = 0.001 per level (5 tests): the sampler's reports follow the level's column
        assert stats.chisquare(counts, expected).pvalue > 0.001
    # and not its neighbour's: the test can fail
    counts = np.bincount(m.sampler.perturb(np.full(draws, a.level_units()[2]), rng), minlength=m.sampler.reports)
    assert stats.chisquare(counts, draws * m.transition[:, 3]).pvalue < 1e-6


# --- the fit ----------------------------------------------------------------------------------------------------

def sample_ratings(n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.choice(np.arange(1.0, 6.0), size=n, p=RATINGS)


def test_em_on_the_levels_recovers_a_spiky_law() -> None:
    a = attribute_from_json(rating(1), 0)
    assert isinstance(a, NumericAttribute) and a.levels is not None
    rng = np.random.default_rng(3)
    m = model(a, 2.0)
    values = sample_ratings(50_000, rng)
    counts = np.bincount(m.sampler.perturb(a.unit(a.encode(values)), rng), minlength=m.sampler.reports)
    truth = np.bincount(values.astype(int) - 1, minlength=5) / values.size
    theta = m.fit(counts)
    assert np.abs(theta - truth).max() < 0.015
    levels_w1 = stats.wasserstein_distance(values, a.levels.values(), v_weights=theta)
    centres = a.range.from_unit(-1 + (2 * np.arange(m.sampler.buckets) + 1) / m.sampler.buckets)
    buckets_w1 = stats.wasserstein_distance(values, centres, v_weights=ems(m.sampler, counts))
    assert levels_w1 < buckets_w1 / 5                  # EMS on the buckets spreads each spike
    assert m.chosen(counts, rng).smoothing is False    # the held-out likelihood keeps the spikes
    smoothed = model(a, 2.0, smoothing=True).fit(counts)
    assert np.abs(smoothed - truth).max() > 0.05       # smoothing 5 levels moves mass between ratings


def test_the_cross_validation_smooths_a_smooth_law_on_many_levels() -> None:
    a = attribute_from_json(rating(1, lo=17, hi=90), 0)
    assert isinstance(a, NumericAttribute)
    rng = np.random.default_rng(5)
    values = np.rint(17 + 73 * rng.beta(3.0, 5.0, 30_000))
    m = model(a, 1.0)
    counts = np.bincount(m.sampler.perturb(a.unit(a.encode(values)), rng), minlength=m.sampler.reports)
    assert m.chosen(counts, rng).smoothing is True


def test_the_statistics_of_a_known_law_on_the_levels() -> None:
    a = attribute_from_json(rating(1), 0)
    assert isinstance(a, NumericAttribute)
    m = model(a, 1.0)
    assert m.quantiles(RATINGS, [0.0, 0.06, 0.0601, 0.5, 1.0]).tolist() == [1.0, 1.0, 2.0, 4.0, 5.0]
    assert m.bin_shares(RATINGS, 2).tolist() == pytest.approx([0.17, 0.83])     # [1, 3) and [3, 5]
    assert m.bin_shares(RATINGS, 4).tolist() == pytest.approx([0.06, 0.11, 0.27, 0.56])
    v = np.arange(1.0, 6.0)
    assert m.variance(RATINGS) == pytest.approx(RATINGS @ v**2 - (RATINGS @ v) ** 2)


# --- the answers ------------------------------------------------------------------------------------------------

def test_the_answers_on_levels_are_the_level_fit_and_deterministic() -> None:
    rng = np.random.default_rng(11)
    c = card(1.0, "SW", 2.0)
    values = sample_ratings(3000, rng)
    rows = encode_columns(c.schema, {"rating": values})
    r = Release(c, {}, None, c.mechanism.perturb(rows.private_codes, rng))
    queries = [quantiles("rating", q=[0.25, 0.5]), histogram("rating", bins=5), variance("rating")]
    first, again = estimate_release(r, queries), estimate_release(r, queries)
    assert np.array_equal(first.estimate, again.estimate) and np.array_equal(first.std_error, again.std_error)
    assert set(first.estimate[:2].tolist()) <= {1.0, 2.0, 3.0, 4.0, 5.0}       # a level, not an interpolation
    attribute = c.schema.numeric
    assert attribute is not None
    m = LevelModel.of(SquareWave(2.0), attribute.levels, attribute.level_units(), False)  # type: ignore[arg-type]
    counts = np.bincount(np.asarray(r.private_reports()), minlength=m.sampler.reports)
    theta = m.chosen(counts).fit(counts)               # the choice is seeded by the counts: the same for every query
    assert first.estimate[2:7] == pytest.approx(theta, abs=1e-9)               # one bin per level
    assert first.estimate[7] == pytest.approx(m.variance(theta), rel=1e-9)
    assert (first.std_error[2:] > 0).all() and (first.std_error[:2] >= 0).all()   # a quantile's may be 0


# --- coverage ---------------------------------------------------------------------------------------------------

def test_the_bootstrap_intervals_cover_at_their_level() -> None:
    """Over 300 seeded collections (n = 4,000, ε = 2, the 5-rating law), the 95 % bootstrap interval (40 resamples)
    of the variance and of each rating's share covers the law's (the resamples redraw the reports, so the interval is
    for the law the rows are drawn from, as the SW path's); each count is within the binomial range at
    α = 0.001 (two-sided: 274 to 295 of 300)."""
    a = attribute_from_json(rating(1), 0)
    assert isinstance(a, NumericAttribute)
    rng = np.random.default_rng(2026)
    m = model(a, 2.0)
    reps, n = 300, 4000
    v = np.arange(1.0, 6.0)
    truth = np.append(RATINGS, RATINGS @ v**2 - (RATINGS @ v) ** 2)     # the law the rows are drawn from
    covered = np.zeros(6, np.int64)
    for _ in range(reps):
        values = sample_ratings(n, rng)
        counts = np.bincount(m.sampler.perturb(a.unit(a.encode(values)), rng), minlength=m.sampler.reports)
        chosen = m.chosen(counts, rng)
        value, se = bootstrap_from_counts(m.sampler, counts, lambda t: np.append(t, chosen.variance(t)), rng,
                                          replicates=40, fit=chosen.fit)
        covered += np.abs(value - truth) <= 1.96 * se
    low, high = stats.binom.ppf([0.0005, 0.9995], reps, 0.95)
    assert ((covered >= low) & (covered <= high)).all(), covered


def test_numeric_quantiles_on_levels_are_levels_and_match_the_answers() -> None:
    rng = np.random.default_rng(13)
    c = card(1.0, "SW", 2.0)
    rows = encode_columns(c.schema, {"rating": sample_ratings(3000, rng)})
    r = Release(c, {}, None, c.mechanism.perturb(rows.private_codes, rng))
    (group,) = numeric_quantiles(c.schema, r.public_keys(), r.private_reports(), [0.25, 0.5, 0.9], rng,
                                 replicates=20)
    assert group.n == 3000 and set(group.estimate.value.tolist()) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    answers = estimate_release(r, [quantiles("rating", q=[0.25, 0.5, 0.9])])
    assert np.array_equal(answers.estimate, group.estimate.value)      # the same fit (the choice is the counts')
