"""Per-round estimates unbiased with the stated variance; the final CIs' coverage; the round's ε at its boundary."""

import numpy as np
import pytest
from scipy import stats

from ldpsynth.shared.heavy_hitters.device import RoundSpec
from ldpsynth.shared.heavy_hitters.encoding import StringEncoding
from ldpsynth.shared.heavy_hitters.rounds import RoundSchedule
from ldpsynth.shared.heavy_hitters.server import cell_variances, decode_round
from ldpsynth.shared.heavy_hitters.simulate import simulate
from ldpsynth.shared.mechanisms.exact import satisfies_epsilon_dp
from ldpsynth.shared.mechanisms.registry import protocol_of


def round_population(spec: RoundSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    """n codes of 2 bytes: half under the candidates (skewed fragments), half elsewhere ("other")."""
    first = np.where(rng.random(n) < 0.5, rng.choice(spec.candidates[:, 0], n), rng.integers(200, 256, n))
    second = rng.geometric(0.3, n).clip(1, 255)
    return np.stack([first, second], axis=1).astype(np.uint8)


@pytest.mark.parametrize(("epsilon", "width", "mechanism"), [(2.0, 2, "E"), (2.0, 5, "OLH"), (0.5, 6, "HR")])
def test_round_estimates_are_unbiased_with_the_stated_variance(epsilon, width, mechanism):
    spec = RoundSpec(1, 8, width, np.array([[10], [20], [30]], np.uint8), epsilon)
    assert getattr(spec.mechanism, "name", "E") == mechanism
    rng = np.random.default_rng(11)
    n, reps = 3_000, 400
    codes = round_population(spec, n, rng)
    cells = spec.cells_of(codes)
    truth = np.bincount(cells, minlength=spec.domain_size)
    protocol = protocol_of(spec.mechanism)
    variance = cell_variances(protocol, truth, n)
    estimates = np.stack([decode_round(spec, spec.mechanism.perturb(cells, rng), n).counts for _ in range(reps)])
    # alpha = 0.001 per test, Bonferroni over the cells: the mean's z-score and the variance's chi-square
    alpha = 0.001 / spec.domain_size
    z = (estimates.mean(axis=0) - truth) / np.sqrt(variance / reps)
    assert (np.abs(z) < stats.norm.ppf(1 - alpha / 2)).all(), spec.mechanism
    chi = (reps - 1) * estimates.var(axis=0, ddof=1) / variance
    assert (chi > stats.chi2.ppf(alpha / 2, reps - 1)).all() and (chi < stats.chi2.ppf(1 - alpha / 2, reps - 1)).all()


def test_plug_in_standard_errors_match_the_exact_ones():
    spec = RoundSpec(1, 8, 5, np.array([[10], [20], [30]], np.uint8), 2.0)
    rng = np.random.default_rng(12)
    codes = round_population(spec, 20_000, rng)
    cells = spec.cells_of(codes)
    exact = np.sqrt(cell_variances(protocol_of(spec.mechanism), np.bincount(cells, minlength=spec.domain_size),
                                   len(cells)))
    got = decode_round(spec, spec.mechanism.perturb(cells, rng), len(cells)).std_errors
    assert np.allclose(got, exact, rtol=0.05)


def test_final_confidence_intervals_cover_95_percent():
    # 120 seeded runs x 3 planted strings = 360 intervals; two-sided binomial test of coverage 0.95, alpha = 0.01
    enc = StringEncoding(3, "abcdefgh")
    planted = {"abc": 1_500, "bad": 900, "cafe"[:3]: 600}
    rng = np.random.default_rng(13)
    others = ["".join(rng.choice(list("abcdefgh"), 3)) for _ in range(5_000)]
    values = [v for v, c in planted.items() for _ in range(c)] + others
    codes = enc.encode(values)
    truth = {v: sum(1 for x in values if x == v) for v in planted}
    covered = total = 0
    for _ in range(120):
        sim = simulate(codes, enc, RoundSchedule(enc.bits, 6, 3), 4.0, rng, top_k=3)
        for value, low, high in zip(sim.result.values, sim.result.ci_low, sim.result.ci_high):
            if value in truth:
                covered += low <= truth[value] <= high
                total += 1
    assert total >= 350
    assert stats.binomtest(covered, total, 0.95).pvalue > 0.01, covered / total


def test_a_round_delivers_its_epsilon_and_no_less():
    spec = RoundSpec(1, 8, 2, np.array([[1], [2], [3]], np.uint8), 0.5)     # D = 13: HR at eps = 0.5
    assert spec.mechanism.name == "HR"
    assert satisfies_epsilon_dp(spec.mechanism, 0.5)
    assert not satisfies_epsilon_dp(spec.mechanism, 0.5 * (1 - 1e-6))
