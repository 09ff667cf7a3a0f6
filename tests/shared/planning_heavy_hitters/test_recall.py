"""The discovery planner's emulation (ldpsynth.shared.planning.heavy_hitters) against whole simulated discoveries."""

import math

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.heavy_hitters.encoding import StringEncoding
from ldpsynth.shared.heavy_hitters.rounds import RoundSchedule
from ldpsynth.shared.heavy_hitters.server import HeavyHitterServer, decode_round
from ldpsynth.shared.heavy_hitters.simulate import simulate
from ldpsynth.shared.planning.heavy_hitters import plan_recall, prior_codes, zipf_weights

ALPHABET = "abcdefghijklmnopqrstuvwxyz"


def population(seed: int, count: int) -> list[str]:
    rng = np.random.default_rng(seed)
    values = sorted({"".join(rng.choice(list(ALPHABET), rng.integers(3, 7))) for _ in range(count)})
    rng.shuffle(values)
    return values


def test_emulated_recall_agrees_with_simulated_discoveries():
    # Zipf(1.1) over 3,000 strings, 30,000 devices, eps = 2, top 10 (recall near 0.4, where it moves most with
    # the noise). Emulated: 20 trials; simulated: 10 whole discoveries with devices' reports. Two-sample z test
    # of equal means at alpha = 0.001 (|z| <= 3.29); fixed seeds.
    values = population(5, 3000)
    weights = zipf_weights(len(values), 1.1)
    encoding = StringEncoding(6, ALPHABET)
    schedule = RoundSchedule(encoding.bits, 10, 10)
    plan = plan_recall(encoding, schedule, 2.0, 30_000, values, weights, top_k=10, trials=20,
                       rng=np.random.default_rng(1))
    codes, _ = prior_codes(encoding, values, weights)
    truth = {row.tobytes() for row in codes[:10]}
    recalls = []
    for seed in range(10):
        rng = np.random.default_rng(100 + seed)
        draws = rng.choice(len(values), 30_000, p=weights)
        found = simulate(encoding.encode([values[i] for i in draws]), encoding, schedule, 2.0, rng, top_k=10).result
        recalls.append(len({row.tobytes() for row in found.codes} & truth) / 10)
    simulated, simulated_se = np.mean(recalls), np.std(recalls, ddof=1) / math.sqrt(len(recalls))
    assert 0.2 < plan.recall < 0.7 and plan.recall_se > 0
    assert abs(plan.recall - simulated) <= 3.29 * math.hypot(plan.recall_se, simulated_se)
    assert plan.found_by_rank.shape == (10,) and plan.found_by_rank[0] >= plan.found_by_rank[-1]
    assert plan.devices_per_round == 30_000 / schedule.rounds


def test_recall_grows_with_epsilon_and_devices():
    values = population(6, 2000)
    weights = zipf_weights(len(values), 1.1)
    encoding = StringEncoding(6, ALPHABET)
    schedule = RoundSchedule(encoding.bits, 10, 10)

    def recall(eps: float, n: int) -> float:
        return plan_recall(encoding, schedule, eps, n, values, weights, top_k=10, trials=10,
                           rng=np.random.default_rng(2)).recall

    assert recall(1.0, 20_000) < recall(4.0, 20_000) and recall(2.0, 5_000) < recall(2.0, 200_000)
    assert recall(8.0, 1_000_000) == 1.0


def test_prior_merges_values_that_truncate_to_one_code():
    encoding = StringEncoding(3, ALPHABET)
    codes, shares = prior_codes(encoding, ["abcd", "abce", "xyz"], [1, 1, 1])
    assert len(codes) == 2 and shares.tolist() == pytest.approx([2 / 3, 1 / 3])
    assert encoding.decode(codes) == ["abc", "xyz"]
    with pytest.raises(ValidationError, match="prior"):
        prior_codes(encoding, ["a", "b"], [1.0])
    with pytest.raises(ValidationError, match="prior"):
        prior_codes(encoding, ["a"], [-1.0])
    with pytest.raises(ValidationError, match="top_k"):
        plan_recall(encoding, RoundSchedule(encoding.bits, 10, 5), 1.0, 100, ["a", "b"], [1, 1], top_k=3,
                    rng=np.random.default_rng(0))


def test_zipf_weights():
    w = zipf_weights(4, 1.0)
    assert w.sum() == pytest.approx(1.0) and w[0] / w[1] == pytest.approx(2.0) and w[0] / w[3] == pytest.approx(4.0)
    with pytest.raises(ValidationError, match="zipf"):
        zipf_weights(4, -1.0)


def test_the_server_takes_only_its_current_rounds_estimate():
    encoding = StringEncoding(4, ALPHABET)
    schedule = RoundSchedule(encoding.bits, 10, 10)
    server = HeavyHitterServer(encoding, schedule, 2.0, 1000, top_k=2)
    other = HeavyHitterServer(encoding, schedule, 2.0, 999, top_k=2)
    estimate = decode_round(other.spec(), np.zeros(10, np.int64), 999)
    with pytest.raises(ValidationError, match="estimate"):
        server.accept(estimate)


def test_threshold_mode_and_a_fixed_round_mechanism():
    values = population(8, 500)
    weights = zipf_weights(len(values), 1.5)
    encoding = StringEncoding(6, ALPHABET)
    schedule = RoundSchedule(encoding.bits, 10, 10)
    _, shares = prior_codes(encoding, values, weights)
    plan = plan_recall(encoding, schedule, 4.0, 200_000, values, weights, threshold=0.02, trials=5,
                       rng=np.random.default_rng(4))
    assert plan.wanted == int((shares >= 0.02).sum()) >= 3
    clear = int((shares >= 0.03).sum())                         # well above the threshold: found every time
    assert plan.found_by_rank[:clear].tolist() == [1.0] * clear and plan.precision == 1.0
    shuffled = plan_recall(encoding, schedule, 4.0, 200_000, values, weights, top_k=3, mechanism="E", trials=3,
                           rng=np.random.default_rng(4))
    assert shuffled.wanted == 3 and 0.0 <= shuffled.recall <= 1.0
    with pytest.raises(ValidationError, match="threshold"):
        plan_recall(encoding, schedule, 4.0, 1000, values, weights, threshold=0.9, rng=np.random.default_rng(0))
