"""A numeric attribute's declared step in its plan (ldpsynth/shared/planning/declared_levels.py): E over the declared
levels (its SE exactly E's linear-query variance at the prior, no bias; checked once against repeated collections),
other levels refused, a prior checked by the device's own check (the tolerance's boundary and the refusal's fields
are the device's), the shuffled plan likewise."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ldpsynth.shared.attributes import NumericAttribute
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms.pure import PureProtocol
from ldpsynth.shared.numeric.levels.declared import LEVEL_TOLERANCE
from ldpsynth.shared.planning.declared_levels import DEFAULT_BUCKETS, plan_levels
from ldpsynth.shared.planning.numeric import plan_mean
from ldpsynth.shared.planning.shuffled_numeric import plan_mean_shuffled
from ldpsynth.shared.schema import Schema
from ldpsynth.simulation.datasets import DatasetNotFound, dataset_path

RATING = NumericAttribute("rating", False, 1.0, 5.0, "SW", 1.0)
HALVES = NumericAttribute("score", False, 0.0, 2.5, "HM", 0.5)          # six levels, a decimal step
SHARES = [0.06, 0.11, 0.27, 0.34, 0.22]                                 # MovieLens-like ratings


def e_standard_error(attribute: NumericAttribute, prior: np.ndarray, epsilon: float, n: int) -> float:
    """E's SE of the mean over the declared levels at the prior's level shares, from PureProtocol directly."""
    levels = attribute.levels
    assert levels is not None
    centres = attribute.range.to_unit(levels.values())
    shares = np.bincount(levels.index(prior), minlength=levels.count) / len(prior)
    protocol = PureProtocol.for_mechanism_e(MechanismE(epsilon, levels.count))
    variance = float(protocol.linear_variance_estimate(centres[None, :], shares * n, n)[0]) / n**2
    return (attribute.hi - attribute.lo) / 2.0 * math.sqrt(variance)


def test_without_a_step_the_prior_and_levels_are_as_given():
    hours = NumericAttribute("hours", False, 0.0, 100.0)
    chosen = plan_levels(hours, ["10", "38.5"])
    assert chosen.levels == DEFAULT_BUCKETS and chosen.count == 16 and chosen.step is None
    assert chosen.prior is not None and chosen.prior.tolist() == [10.0, 38.5]
    assert plan_levels(hours, None, 8).levels == 8
    assert plan_levels(hours, None, [10, 40, 40]).count == 2


def test_a_step_plans_e_over_the_declared_levels():
    chosen = plan_levels(RATING)
    assert chosen.prior is None and chosen.step == 1.0 and chosen.count == 5
    assert chosen.levels.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    e = plan_mean(1.0, 10_000, RATING.range, levels=chosen.levels).choices[-1]
    assert e.mechanism == "E/5" and e.bias == 0.0


def test_an_on_level_prior_is_snapped_and_e_is_exactly_its_linear_query_variance():
    # a decimal step, and values within the device's tolerance of a level: each is replaced by the level exactly
    near = 1.5 + 0.5 * LEVEL_TOLERANCE / 2
    raw = np.array([0.0, 0.5, 1.0, near, 1.5, 2.0, 2.5, 0.1 + 0.2 + 0.2, 2.0])
    chosen = plan_levels(HALVES, raw)
    assert chosen.prior is not None and chosen.prior.tolist() == [0.0, 0.5, 1.0, 1.5, 1.5, 2.0, 2.5, 0.5, 2.0]
    e = plan_mean(2.0, 50_000, HALVES.range, prior=chosen.prior, levels=chosen.levels).choices[-1]
    assert e.mechanism == "E/6" and e.bias == 0.0
    assert e.std_error == e_standard_error(HALVES, chosen.prior, 2.0, 50_000)       # exact, no tolerance


@pytest.mark.parametrize("bad, position", [([1.0, 2.0, 3.5], 2), ([1.0, 1.0 + 2 * LEVEL_TOLERANCE], 1),
                                           ([6.0], 0), (["4", "x"], 1), ([float("nan")], 0)])
def test_a_prior_off_the_levels_is_refused_as_the_device_refuses_it(bad, position):
    with pytest.raises(ValidationError) as device:
        RATING.encode(bad)                                                 # the device's check
    with pytest.raises(ValidationError) as planned:
        plan_levels(RATING, bad, prior_field="--prior rows.csv")
    assert planned.value.field == "--prior rows.csv: rating" and planned.value.position == position
    assert (planned.value.legal, planned.value.problem, planned.value.position) == \
        (device.value.legal, device.value.problem, device.value.position)
    assert "on the levels every 1.0 from 1.0" in str(planned.value)


def test_other_levels_are_refused_with_a_step_and_the_declared_ones_accepted():
    for levels in (16, 5, [1, 2, 3, 4], [1.0, 2.0, 3.0, 4.0, 5.5]):
        with pytest.raises(ValidationError, match=r"--levels: given.*declares step 1: E is planned over its 5 levels"):
            plan_levels(RATING, None, levels, levels_field="--levels")
    assert plan_levels(RATING, [3, 4], [5, 4, 3, 2, 1]).count == 5             # idempotent: the declared levels


def per_report_variances(prior: np.ndarray, epsilon: float) -> tuple[dict[str, float], str]:
    """Each mechanism's per-report variance of the mean on [-1, 1] at the prior, and the recommendation."""
    chosen = plan_levels(RATING, prior)
    n = 10**5
    plan = plan_mean(epsilon, n, RATING.range, prior=chosen.prior, levels=chosen.levels)
    return {c.mechanism: n * (c.std_error / 2.0) ** 2 for c in plan.choices}, plan.recommended


def test_movielens_like_ratings_at_eps_1_keep_hm():
    # per-report variance on [-1, 1] at eps = 1: HM 4.29, E over the 5 declared levels 6.83, so HM stays recommended
    prior = np.random.default_rng(3).choice([1.0, 2.0, 3.0, 4.0, 5.0], 20_000, p=SHARES)
    variances, recommended = per_report_variances(prior, 1.0)
    assert variances["HM"] == pytest.approx(4.289, abs=0.001) and variances["E/5"] == pytest.approx(6.83, abs=0.02)
    assert recommended == "HM"
    assert per_report_variances(prior, 4.0)[1] == "E/5"


def test_movielens_ratings_at_eps_1_keep_hm():
    try:
        path = dataset_path("movielens-100k/u.data.gz")
    except DatasetNotFound as exc:
        pytest.skip(str(exc))
    ratings = np.loadtxt(path, dtype=np.int64)[:, 2].astype(np.float64)
    variances, recommended = per_report_variances(ratings, 1.0)
    assert variances["HM"] == pytest.approx(4.289, abs=0.001) and variances["E/5"] == pytest.approx(6.815, abs=0.001)
    assert recommended == "HM"


def test_the_predicted_se_matches_repeated_e_collections_over_the_levels():
    # 400 collections of 2,000 devices on the six levels at eps = 1, fixed seed; chi-square test of the variance,
    # two-sided at alpha = 0.001
    rng = np.random.default_rng(11)
    prior = rng.choice(np.arange(6) * 0.5, 2000, p=[0.1, 0.3, 0.25, 0.15, 0.15, 0.05])
    chosen = plan_levels(HALVES, prior)
    se = plan_mean(1.0, len(prior), HALVES.range, prior=chosen.prior, levels=chosen.levels).choices[-1].std_error
    e = MechanismE(1.0, 6)
    protocol = PureProtocol.for_mechanism_e(e)
    codes = np.rint(prior / 0.5).astype(np.int64)
    means = np.array([0.5 * (protocol.count_estimates(np.bincount(e.perturb(codes, rng), minlength=6), len(codes))
                             @ np.arange(6)) / len(codes) for _ in range(400)])
    statistic = 399 * np.var(means, ddof=1) / se**2
    assert stats.chi2.ppf(0.0005, 399) <= statistic <= stats.chi2.ppf(0.9995, 399)
    assert abs(means.mean() - prior.mean()) <= 4 * se / math.sqrt(400)    # unbiased: |z| <= 4 (alpha ~ 6e-5)


STARS = {"name": "stars", "epsilon": 1.0, "attributes": [{"name": "rating", "type": "numeric", "range": [1, 5],
                                                          "mechanism": "SW", "step": 1}]}


def test_the_shuffled_plan_reads_the_step():
    prior = [1, 3, 4, 4, 5]
    p = plan_mean_shuffled(Schema.from_json(STARS), 100_000, prior=prior, min_batch=20_000)
    e = p.row("E/5")
    assert e.domain_size == 5 and e.shuffled.bias == 0.0
    assert e.shuffled.std_error == e_standard_error(RATING, np.array(prior, float), e.epsilon0, 100_000)
    with pytest.raises(ValidationError, match="levels: given"):
        plan_mean_shuffled(Schema.from_json(STARS), 100_000, levels=16, min_batch=20_000)
    with pytest.raises(ValidationError, match="prior: rating at position 1"):
        plan_mean_shuffled(Schema.from_json(STARS), 100_000, prior=[1, 2.5], min_batch=20_000)
