"""A numeric batch's answers from counts (offline): equal to the collection functions on the same reports, the
sum n times the mean, empty groups, the minimum batch, and the coverage of the mean's interval over seeded
repetitions."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import LdpsynthError, ValidationError
from ldpsynth.shared.estimators.offline import estimate_release
from ldpsynth.shared.estimators.statistics import SufficientStatistics
from ldpsynth.shared.numeric.answering import NumericAnswers, answer_numeric, compile_numeric
from ldpsynth.shared.numeric.collection import numeric_means
from ldpsynth.shared.queries import histogram, mean, quantiles, sum_
from ldpsynth.shared.queries.wire import PAGE_ENVELOPE_BYTES, AnswerTable, answer_pages
from ldpsynth.shared.release import Release
from ldpsynth.shared.schema import Schema

REGIONS = ["north", "south", "east"]


def card(mechanism: str = "HM", epsilon: float = 1.0, min_batch: int | None = None) -> MechanismCard:
    doc = {"name": "c", "epsilon": epsilon, "attributes": [
        {"name": "hours", "type": "numeric", "range": [0, 99], "mechanism": mechanism},
        {"name": "region", "type": "categorical", "values": REGIONS, "public": True}]}
    if min_batch is not None:
        doc["min_batch"] = min_batch
    return MechanismCard.for_schema(Schema.from_json(doc))


def data(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Hours per row and region codes 0 (north) or 1 (south): "east" holds no row."""
    region = rng.integers(0, 2, n)
    return 99.0 * rng.beta(np.where(region == 0, 3.0, 6.0), np.where(region == 0, 6.0, 4.0)), region


def release(c: MechanismCard, hours: np.ndarray, region: np.ndarray, rng: np.random.Generator) -> Release:
    rows = encode_columns(c.schema, {"hours": hours, "region": np.array(REGIONS)[region]})
    return Release(c, {"region": region}, None, c.mechanism.perturb(rows.private_codes, rng))


def test_means_and_sums_are_the_collection_functions_per_group() -> None:
    rng = np.random.default_rng(7)
    c = card()
    r = release(c, *data(3000, rng), rng)
    answers = estimate_release(r, [mean("hours"), mean("hours", by="region"), sum_("hours", by="region")])
    assert isinstance(answers, NumericAnswers) and answers.n == 3000
    (overall,) = numeric_means(c.schema, r.public_keys(), r.private_reports())
    groups = numeric_means(c.schema, r.public_keys(), r.private_reports(), by="region")
    assert [g.value for g in groups] == ["north", "south"]        # the regions present
    assert answers.estimate[0] == overall.estimate.mean and answers.std_error[0] == overall.estimate.standard_error
    assert (answers.ci_low[0], answers.ci_high[0]) == pytest.approx((overall.estimate.low, overall.estimate.high))
    assert answers.estimate[1:3].tolist() == [g.estimate.mean for g in groups]
    assert answers.std_error[1:3].tolist() == [g.estimate.standard_error for g in groups]
    assert answers.estimate[4:6].tolist() == [g.estimate.sum for g in groups]
    assert answers.std_error[4:6].tolist() == [g.estimate.sum_standard_error for g in groups]
    # "east" has no row: its mean is undefined, its sum 0 exactly (n = 0 is public)
    assert np.isnan(answers.estimate[3]) and answers.estimate[6] == 0.0 and answers.std_error[6] == 0.0
    assert np.isnan(answers.bound).all() and not answers.exact.any()
    assert answers.label(6) == "sum#2[region=east]"
    sizes = np.bincount(r.codes["region"], minlength=3).tolist()
    assert answers.rows.tolist() == [3000, *sizes, *sizes]             # n, then n_g per group (east: 0)
    assert [record["rows"] for record in answers.records()] == answers.rows.tolist()


def test_rows_travel_in_the_answer_pages() -> None:
    rng = np.random.default_rng(10)
    c = card()
    r = release(c, *data(500, rng), rng)
    answers = estimate_release(r, [mean("hours", by="region")] * 4 + [sum_("hours")])
    pages = list(answer_pages(answers, max_bytes=PAGE_ENVELOPE_BYTES + 4 * 120))     # a few answers per page
    assert len(pages) > 2 and all(len(p.rows) == 8 * len(p.proper_exact) for p in pages)
    table = AnswerTable.from_pages(pages)
    assert table.rows_sent() is not None and table.rows_sent().tolist() == answers.rows.tolist()
    assert json.dumps(table.records()) == json.dumps(answers.records())              # NaN bounds
    pages[1].rows = pages[1].rows[:-8]                                  # a page one count short: refused
    with pytest.raises(ValidationError) as info:
        AnswerTable.from_pages(pages)
    assert info.value.field == "answers.rows"


def test_sw_quantiles_and_histogram_are_deterministic_and_consistent() -> None:
    rng = np.random.default_rng(8)
    c = card("SW", 2.0)
    hours, region = data(4000, rng)
    r = release(c, hours, region, rng)
    queries = [quantiles("hours", [0.25, 0.5, 0.75]), histogram("hours", 3), histogram("hours", 3, by="region")]
    first = estimate_release(r, queries)
    again = estimate_release(r, queries[:1])                      # the bootstrap's seed: the counts and the query
    np.testing.assert_array_equal(again.estimate, first.estimate[:3])
    np.testing.assert_array_equal(again.std_error, first.std_error[:3])
    assert np.all(np.diff(first.estimate[:3]) > 0) and (first.std_error[:6] > 0).all()
    assert first.estimate[3:6].sum() == pytest.approx(1.0)
    assert first.estimate[6:9].sum() == pytest.approx(1.0) and first.estimate[9:12].sum() == pytest.approx(1.0)
    assert np.isnan(first.estimate[12:15]).all()                  # "east": no row
    # the median within 4 bootstrap SEs of the data's (α ≈ 6e-5 if the SE were exact; EMS's smoothing bias aside)
    assert abs(first.estimate[1] - np.median(hours)) < 4 * first.std_error[1]
    assert first.label(7) == "histogram#2[region=north,bin=[33, 66)]"


def test_groups_below_the_minimum_batch_are_not_counted() -> None:
    rng = np.random.default_rng(9)
    c = card(min_batch=50)
    hours, region = data(400, rng)
    region[:30] = 2                                               # 30 rows in "east": below 50
    r = release(c, hours, region, rng)
    answers = estimate_release(r, [mean("hours", by="region"), mean("hours")])
    assert answers.n == 370 and np.isnan(answers.estimate[2])
    kept = region != 2
    (overall,) = numeric_means(c.schema, r.public_keys()[kept], r.private_reports()[kept])
    assert answers.estimate[3] == overall.estimate.mean
    few = Release(c, {"region": region[:30]}, None, r.private_reports()[:30])
    with pytest.raises(LdpsynthError) as info:
        estimate_release(few, [mean("hours")])
    assert "min_batch" in str(info.value)


def test_a_level_outside_zero_one_is_refused() -> None:
    c = card()
    batch = compile_numeric([mean("hours")], c.schema)
    stats_ = SufficientStatistics.from_schema(c.schema, np.zeros(3, np.int64), np.array([0, 1, 2]))
    with pytest.raises(ValidationError) as info:
        answer_numeric(batch, stats_, 1.0, level=1.0)
    assert info.value.field == "level"


def test_the_mean_interval_covers_the_truth_at_its_level() -> None:
    """1,000 seeded repetitions of 2,000 values through HM at ε = 1: the 95 % interval of the overall mean and of
    each region's covers the truth a number of times inside the two-sided binomial(1000, 0.95) range at
    α = 0.001 (per interval); the sum's interval is n times the mean's, so it covers on the same repetitions."""
    rng = np.random.default_rng(20261207)
    c = card()
    hours, region = data(2000, rng)
    truth = [hours.mean(), hours[region == 0].mean(), hours[region == 1].mean(), hours.sum()]
    rows = encode_columns(c.schema, {"hours": hours, "region": np.array(REGIONS)[region]})
    batch = compile_numeric([mean("hours"), mean("hours", by="region"), sum_("hours")], c.schema)
    keys = c.schema.public_keys_of({"region": region}, len(region))
    covered = np.zeros(4, np.int64)
    for _ in range(1000):
        reports = c.mechanism.perturb(rows.private_codes, rng)
        a = answer_numeric(batch, SufficientStatistics.from_schema(c.schema, keys, reports), c.mechanism.epsilon)
        covered += (a.ci_low[[0, 1, 2, 4]] <= truth) & (truth <= a.ci_high[[0, 1, 2, 4]])
    low, high = stats.binom.ppf([0.0005, 0.9995], 1000, 0.95)
    assert ((covered >= low) & (covered <= high)).all(), covered
