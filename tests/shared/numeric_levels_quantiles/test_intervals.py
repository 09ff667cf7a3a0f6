"""Quantile intervals on declared levels, inverted from the CDF's intervals (``levels.intervals``): the inversion on
known bands, the answers' ends (and every other answer's interval unchanged), and the coverage of the true quantile
over seeded runs of the device-side SW sampler (simulation path) on discrete laws of 5 and 20 levels."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest
from scipy import stats

from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.attributes import NumericAttribute, attribute_from_json
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators.offline import estimate_release
from ldpsynth.shared.numeric import SquareWave
from ldpsynth.shared.numeric.estimators import bootstrap_from_counts
from ldpsynth.shared.numeric.levels import LevelModel, invert_cdf, quantile_intervals
from ldpsynth.shared.queries import histogram, quantiles, variance
from ldpsynth.shared.release import Release
from ldpsynth.shared.schema import Schema

Q = np.array([0.1, 0.25, 0.5, 0.75, 0.9])
#: Discrete laws on the levels 0, 1, ..., L - 1 (step 1).
LAWS = {
    "ratings": np.array([0.06, 0.11, 0.27, 0.34, 0.22]),        # MovieLens-like: no q of Q at a jump
    "jumps": np.array([0.10, 0.15, 0.25, 0.25, 0.25]),          # F = 0.1, 0.25, 0.5, 0.75, 1: q = F(v_k) exactly
    "twenty": 0.7 * stats.binom.pmf(np.arange(20), 19, 0.35) + 0.3 / 20,
}
REPLICATES = 40                                                # the answers use 100; 40 keeps the test short


def attribute(levels: int, mechanism: str = "SW") -> NumericAttribute:
    a = attribute_from_json({"name": "x", "type": "numeric", "range": [0, levels - 1], "mechanism": mechanism,
                             "step": 1}, 0)
    assert isinstance(a, NumericAttribute) and a.levels is not None
    return a


def true_quantiles(law: np.ndarray, values: np.ndarray) -> np.ndarray:
    """:math:`\\min\\{v_k : F(v_k) \\ge q\\}` of the law itself, exact in rationals where q = F(v_k)."""
    cdf = np.cumsum(law)
    return values[np.searchsorted(cdf, Q - 1e-12)]


# --- the inversion ----------------------------------------------------------------------------------------------

def test_the_ends_are_the_first_levels_where_the_cdf_bands_reach_q() -> None:
    v = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    low_band = np.array([0.00, 0.10, 0.40, 0.70, 1.0])
    high_band = np.array([0.10, 0.30, 0.60, 0.90, 1.0])
    low, high = invert_cdf(v, low_band, high_band, [0.05, 0.1, 0.5, 0.95, 1.0])
    assert low.tolist() == [1.0, 1.0, 3.0, 5.0, 5.0]         # F_hi reaches q: 0.1 >= 0.1 at v_0 (a tie counts)
    assert high.tolist() == [2.0, 2.0, 4.0, 5.0, 5.0]        # F_lo reaches q; 0.95 only at the last level


def test_the_upper_end_is_the_last_level_when_no_lower_band_reaches_q() -> None:
    low, high = invert_cdf([0.0, 1.0], [0.2, 0.5], [0.6, 0.9], [0.8])
    assert low.tolist() == [1.0] and high.tolist() == [1.0]


def test_the_interval_holds_the_estimate_and_is_levels() -> None:
    a = attribute(5)
    rng = np.random.default_rng(1)
    m = LevelModel.of(SquareWave(1.0), a.levels, a.level_units(), False)  # type: ignore[arg-type]
    values = rng.choice(a.levels.values(), size=2000, p=LAWS["ratings"])  # type: ignore[union-attr]
    counts = np.bincount(m.sampler.perturb(a.unit(a.encode(values)), rng), minlength=m.sampler.reports)
    for model in (m, LevelModel.of(SquareWave(1.0), a.levels, a.level_units(), True)):  # type: ignore[arg-type]
        qi = quantile_intervals(model, counts, Q, 0.95, rng, replicates=REPLICATES)
        assert ((qi.low <= qi.value) & (qi.value <= qi.high)).all()
        assert set(np.concatenate([qi.low, qi.high]).tolist()) <= {0.0, 1.0, 2.0, 3.0, 4.0}
        assert (qi.se >= 0).all()


def test_the_bands_are_the_plain_fits_whatever_the_chosen_smoothing() -> None:
    a = attribute(5)
    assert a.levels is not None
    rng = np.random.default_rng(3)
    plain = LevelModel.of(SquareWave(1.0), a.levels, a.level_units(), False)
    smooth = LevelModel.of(SquareWave(1.0), a.levels, a.level_units(), True)
    values = rng.choice(a.levels.values(), size=2000, p=LAWS["ratings"])
    counts = np.bincount(plain.sampler.perturb(a.unit(a.encode(values)), rng), minlength=plain.sampler.reports)
    qi = quantile_intervals(smooth, counts, Q, 0.95, np.random.default_rng(9), replicates=REPLICATES)
    # the same resamples (the same seed draws the same counts), fitted by the plain EM alone
    cdf, se = bootstrap_from_counts(plain.sampler, counts, plain.cdf, np.random.default_rng(9),
                                    replicates=REPLICATES, fit=plain.fit)
    low, high = invert_cdf(a.levels.values(), np.clip(cdf - 1.96 * se, 0, 1), np.clip(cdf + 1.96 * se, 0, 1), Q)
    value = smooth.quantiles(smooth.fit(counts), Q)
    np.testing.assert_array_equal(qi.value, value)                     # the estimate: the chosen (smoothed) fit's
    np.testing.assert_array_equal(qi.low, np.minimum(low, value))      # the ends: the plain fit's, widened
    np.testing.assert_array_equal(qi.high, np.maximum(high, value))


def test_the_smoothed_fits_bands_would_miss() -> None:
    """Why the bands are the plain EM's: inverted from the smoothed fit's own bands, the interval covers the 0.1- or
    0.25-quantile of the 5 ratings at ε = 1 far less often than 0.93 (100 seeded runs; the plain bands' coverage,
    in the same runs, is at least 0.93 at every q: ``test_the_intervals_cover_the_true_quantile``)."""
    a = attribute(5)
    assert a.levels is not None
    v = a.levels.values()
    smooth = LevelModel.of(SquareWave(1.0), a.levels, a.level_units(), True)
    truth = true_quantiles(LAWS["ratings"], v)
    rng = np.random.default_rng(17)
    held = np.zeros(Q.size)
    for _ in range(100):
        values = rng.choice(v, size=2000, p=LAWS["ratings"])
        counts = np.bincount(smooth.sampler.perturb(a.unit(a.encode(values)), rng), minlength=smooth.sampler.reports)
        cdf, se = bootstrap_from_counts(smooth.sampler, counts, smooth.cdf, rng, replicates=REPLICATES,
                                        fit=smooth.fit)
        low, high = invert_cdf(v, np.clip(cdf - 1.96 * se, 0, 1), np.clip(cdf + 1.96 * se, 0, 1), Q)
        held += (low <= truth) & (truth <= high)
    assert held.min() / 100 < 0.8, held


# --- the answers ------------------------------------------------------------------------------------------------

def test_the_answers_carry_the_inverted_ends_and_leave_other_intervals_alone() -> None:
    rng = np.random.default_rng(11)
    c = MechanismCard.for_schema(Schema.from_json({"name": "c", "epsilon": 2.0, "attributes": [
        {"name": "rating", "type": "numeric", "range": [1, 5], "mechanism": "SW", "step": 1},
        {"name": "region", "type": "categorical", "values": ["north", "south"], "public": True}]}))
    region = rng.integers(0, 2, 3000)
    rows = encode_columns(c.schema, {"rating": rng.choice(np.arange(1.0, 6.0), 3000, p=LAWS["jumps"]),
                                     "region": np.array(["north", "south"])[region]})
    r = Release(c, {"region": region}, None, c.mechanism.perturb(rows.private_codes, rng))
    queries = [quantiles("rating", q=list(Q)), quantiles("rating", q=[0.5], by="region"), histogram("rating", 5),
               variance("rating")]
    level = 0.9
    a = estimate_release(r, queries, level=level)
    z = NormalDist().inv_cdf((1 + level) / 2)
    quantile_rows = slice(0, 7)                                  # 5 overall, the median of each region
    ends = np.concatenate([a.ci_low[quantile_rows], a.ci_high[quantile_rows]])
    assert set(ends.tolist()) <= {1.0, 2.0, 3.0, 4.0, 5.0}      # the ends are levels
    assert (a.ci_low[quantile_rows] <= a.estimate[quantile_rows]).all()
    assert (a.estimate[quantile_rows] <= a.ci_high[quantile_rows]).all()
    # q = F(v_k) on this law: the interval spans a jump, not the single level of a zero SE
    assert (a.ci_high[quantile_rows] > a.ci_low[quantile_rows]).any()
    rest = slice(7, None)                                        # the histogram's shares and the variance
    np.testing.assert_array_equal(a.ci_low[rest], a.estimate[rest] - z * a.std_error[rest])
    np.testing.assert_array_equal(a.ci_high[rest], a.estimate[rest] + z * a.std_error[rest])
    # the server and the export answer through the same answer_numeric (tests/shared/numeric_answering/test_server)
    again = estimate_release(r, queries, level=level)
    np.testing.assert_array_equal(again.ci_low, a.ci_low)
    np.testing.assert_array_equal(again.ci_high, a.ci_high)


# --- coverage ---------------------------------------------------------------------------------------------------

def coverage(law: str, epsilon: float, runs: int, n: int, seed: int) -> dict[str, np.ndarray]:
    """Over ``runs`` seeded collections of ``n`` devices (the SW sampler with a seeded Generator), per q: how often
    the 95 % interval held the law's quantile, its mean width in levels, how often the estimate ± 1.96 SE (the old
    interval) did, and how often the interval held both levels around a jump of the law."""
    p = LAWS[law]
    a = attribute(p.size)
    assert a.levels is not None
    v = a.levels.values()
    m = LevelModel.of(SquareWave(epsilon), a.levels, a.level_units(), False)
    truth = true_quantiles(p, v)
    rng = np.random.default_rng(seed)
    held, width, old, both = (np.zeros(Q.size) for _ in range(4))
    for _ in range(runs):
        values = rng.choice(v, size=n, p=p)
        counts = np.bincount(m.sampler.perturb(a.unit(a.encode(values)), rng), minlength=m.sampler.reports)
        qi = quantile_intervals(m.chosen(counts, rng), counts, Q, 0.95, rng, replicates=REPLICATES)
        held += (qi.low <= truth) & (truth <= qi.high)
        width += qi.high - qi.low
        old += np.abs(qi.value - truth) <= 1.96 * qi.se
        both += (qi.low <= truth) & (np.minimum(truth + 1, v[-1]) <= qi.high)
    return {"held": held / runs, "width": width / runs, "old": old / runs, "both": both / runs}


#: The least coverage per q over 200 runs: 186 of 200. α: were the coverage 0.975 (what one side's level gives a
#: quantile at a jump of the CDF), a count of 185 or less has probability 1.8e-4 per q (binomial); a coverage of
#: 0.95 would fail it with probability 0.078 per q, so the test asks for the conservative coverage measured
#: (docs/numeric.md, "Declared levels": 0.96-1.00).
LEAST = 186


@pytest.mark.parametrize("law, epsilon", [("ratings", 1.0), ("ratings", 2.0), ("jumps", 1.0), ("jumps", 2.0),
                                          pytest.param("twenty", 2.0, marks=pytest.mark.slow),    # 36 s
                                          pytest.param("twenty", 1.0, marks=pytest.mark.slow)])   # 57 s
def test_the_intervals_cover_the_true_quantile(law: str, epsilon: float) -> None:
    runs = 200
    got = coverage(law, epsilon, runs, 2000, seed=2026)
    assert (got["held"] * runs >= LEAST).all(), got


def test_the_old_interval_misses_where_the_inverted_one_covers() -> None:
    """The test can fail: on the 5 ratings at ε = 1 the estimate ± 1.96 SE (a discrete quantile's bootstrap SE is
    often 0, and the chosen smoothing biases the level) covers far below 0.93 at some q, in the same runs."""
    got = coverage("ratings", 1.0, 100, 2000, seed=7)
    assert got["old"].min() < 0.8, got
    assert got["held"].min() >= 0.93, got


def test_a_quantile_at_a_jump_gets_both_levels_around_it() -> None:
    """q = F(v_k) exactly (the "jumps" law at q = 0.1, 0.25, 0.5, 0.75): the estimate is v_k or v_{k+1}, and the
    interval holds both in most runs (its width is about one level); at q = 0.9, strictly inside a step of F, it is
    mostly the single level."""
    got = coverage("jumps", 2.0, 100, 2000, seed=5)
    assert (got["both"][:4] >= 0.8).all(), got
    assert got["width"][4] < 0.2, got
