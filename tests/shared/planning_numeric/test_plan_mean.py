"""The numeric planner's predicted errors of the mean (planning.numeric) against repeated collections."""

import math

import numpy as np
import pytest
from scipy import stats

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms.pure import PureProtocol
from ldpsynth.shared.numeric.estimators import estimate_mean
from ldpsynth.shared.numeric.samplers import HybridMechanism
from ldpsynth.shared.numeric.scale import NumericRange
from ldpsynth.shared.planning.numeric import plan_mean

RATINGS = NumericRange(1, 5, "rating")
SHARES = [0.06, 0.11, 0.27, 0.34, 0.22]


def variance_within(samples: np.ndarray, predicted_se: float) -> bool:
    # (R - 1) s^2 / sigma^2 ~ chi-square(R - 1) for normal estimates; two-sided at alpha = 0.001
    r = len(samples)
    statistic = (r - 1) * np.var(samples, ddof=1) / predicted_se**2
    return bool(stats.chi2.ppf(0.0005, r - 1) <= statistic <= stats.chi2.ppf(0.9995, r - 1))


def test_predicted_standard_errors_match_repeated_collections():
    # 400 collections of 2,000 devices with MovieLens-like ratings, eps = 1, fixed seeds
    rng = np.random.default_rng(7)
    values = rng.choice([1, 2, 3, 4, 5], 2000, p=SHARES).astype(float)
    plan = plan_mean(1.0, len(values), RATINGS, prior=values, levels=[1, 2, 3, 4, 5])
    by_name = {c.mechanism: c for c in plan.choices}
    hm = HybridMechanism(1.0)
    hm_means = [estimate_mean(hm, hm.perturb(RATINGS.to_unit(values), rng), RATINGS).mean for _ in range(400)]
    assert variance_within(np.array(hm_means), by_name["HM"].std_error)
    e = MechanismE(1.0, 5)
    protocol = PureProtocol.for_mechanism_e(e)
    codes = (values - 1).astype(np.int64)
    e_means = [1 + protocol.count_estimates(np.bincount(e.perturb(codes, rng), minlength=5), len(codes))
               @ np.arange(5) / len(codes) for _ in range(400)]
    assert variance_within(np.array(e_means), by_name["E/5"].std_error)
    assert by_name["E/5"].bias == 0.0                       # the values are E's levels
    assert plan.sum_std_error("HM") == pytest.approx(2000 * by_name["HM"].std_error)


def test_recommendations_follow_the_closed_forms():
    values = np.random.default_rng(1).choice([1, 2, 3, 4, 5], 5000, p=SHARES).astype(float)
    # five levels: HM below eps = 2, E/5 at eps = 4 (its variance falls like k e^-eps), docs/numeric.md
    assert plan_mean(1.0, 10**5, RATINGS, prior=values, levels=[1, 2, 3, 4, 5]).recommended == "HM"
    assert plan_mean(4.0, 10**5, RATINGS, prior=values, levels=[1, 2, 3, 4, 5]).recommended == "E/5"
    # no prior: the worst case decides, HM's is the least of the three (Wang2019ICDE Corollary 1)
    hours = NumericRange(0, 100, "hours")
    for eps in (0.5, 1.0, 2.0, 4.0):
        plan = plan_mean(eps, 32561, hours)
        assert plan.recommended == "HM", eps
        hm, pm, duchi = plan.choices[:3]
        assert hm.worst_case_std_error <= min(pm.worst_case_std_error, duchi.worst_case_std_error) * (1 + 1e-9)


def test_bucketing_bias_is_reported_apart():
    # every value at 0.1 on [0, 1], two buckets with centres 0.25 and 0.75: bias 0.15 on the value scale
    plan = plan_mean(2.0, 1000, NumericRange(0, 1, "share"), prior=np.full(50, 0.1), levels=2)
    e = plan.choices[-1]
    assert e.mechanism == "E/2" and e.bias == pytest.approx(0.15)
    assert e.rmse == pytest.approx(math.hypot(e.std_error, 0.15))


def test_errors_name_the_field():
    with pytest.raises(ValidationError, match="prior"):
        plan_mean(1.0, 10, RATINGS, prior=[])
    with pytest.raises(ValidationError, match="rating"):
        plan_mean(1.0, 10, RATINGS, prior=[7.0])
    with pytest.raises(ValidationError, match="devices"):
        plan_mean(1.0, 0, RATINGS)
    with pytest.raises(ValidationError, match="levels"):
        plan_mean(1.0, 10, RATINGS, levels=1)
