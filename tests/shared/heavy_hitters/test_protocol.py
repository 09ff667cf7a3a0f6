"""The protocol end to end: planted heavy hitters found, the rounds' specs and reports checked."""

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.heavy_hitters.device import RoundSpec, choose_mechanism, report
from ldpsynth.shared.heavy_hitters.encoding import StringEncoding
from ldpsynth.shared.heavy_hitters.rounds import RoundSchedule
from ldpsynth.shared.heavy_hitters.simulate import simulate

PLANTED = {"apple": 0.2, "banana": 0.12, "cherry": 0.08}


def population(n: int, rng: np.random.Generator) -> list[str]:
    """The planted strings at their shares; the rest random 6-letter strings (each rare)."""
    out = []
    for value, share in PLANTED.items():
        out += [value] * int(share * n)
    rest = n - len(out)
    letters = rng.integers(97, 123, (rest, 6))
    out += ["".join(map(chr, row)) for row in letters]
    return out


def test_planted_heavy_hitters_are_found():
    rng = np.random.default_rng(7)
    enc = StringEncoding(6)
    codes = enc.encode(population(60_000, rng))
    sim = simulate(codes, enc, RoundSchedule(48, 12, 12), 4.0, rng, top_k=3)
    assert set(sim.result.values) == set(PLANTED)
    for value, count, low, high in zip(sim.result.values, sim.result.counts, sim.result.ci_low,
                                       sim.result.ci_high):
        assert low < count < high
        assert abs(count - PLANTED[value] * 60_000) < 5 * (high - low)


def test_threshold_mode_finds_the_planted_and_stops_on_nothing():
    rng = np.random.default_rng(8)
    enc = StringEncoding(6)
    codes = enc.encode(population(60_000, rng))
    sim = simulate(codes, enc, RoundSchedule(48, 12, 12), 4.0, rng, threshold=0.05)
    assert set(sim.result.values) == set(PLANTED)
    flat = enc.encode(["".join(map(chr, rng.integers(97, 123, 6))) for _ in range(5_000)])
    empty = simulate(flat, enc, RoundSchedule(48, 12, 12), 1.0, rng, threshold=0.5)
    assert empty.result.values == [] and empty.server.finished


def test_device_report_is_in_the_round_domain():
    spec = RoundSpec(1, 8, 8, np.array([[97], [98]], np.uint8), 2.0)
    enc = StringEncoding(3)
    assert spec.cells_of(enc.encode(["ab", "ba", "zz"])).tolist() == [98, 256 + 97, 512]
    for _ in range(20):
        assert 0 <= report(spec, "ab", enc) < 1 << (2 * 10 + spec.mechanism.hash_bits)


def test_spec_errors():
    with pytest.raises(ValidationError, match="candidates"):
        RoundSpec(1, 8, 8, np.array([[98], [97]], np.uint8), 2.0)
    with pytest.raises(ValidationError, match="candidates"):
        RoundSpec(1, 8, 20, np.arange(8, dtype=np.uint8)[:, None], 2.0)
    assert choose_mechanism(4.0, 3) == "E" and choose_mechanism(4.0, 4097) == "OLH"


def test_complete_strings_combine_the_rounds_that_estimated_them():
    # "ab" is complete after 3 symbols (9 bits): rounds 1 and 2 (ending at 9 and 12 bits) both estimate it
    rng = np.random.default_rng(9)
    enc = StringEncoding(4, "abcdefg")
    values = ["ab"] * 6_000 + ["abcd"] * 4_000 + ["".join(rng.choice(list("abcdefg"), 4)) for _ in range(10_000)]
    sim = simulate(enc.encode(values), enc, RoundSchedule(enc.bits, 6, 3), 4.0, rng, top_k=2)
    assert sim.result.values == ["ab", "abcd"]
    last = sim.server.estimates[-1]
    cells = last.spec.cells_of(sim.result.codes)
    alone = last.std_errors[cells]
    assert sim.result.std_errors[0] < 0.8 * alone[0]                  # "ab": rounds 1-3 combined
    assert sim.result.std_errors[1] == pytest.approx(alone[1])        # "abcd": only the last round
