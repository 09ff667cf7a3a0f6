"""Encoding round trips and errors; the rounds' schedule and the uniformity of the device assignment."""

import numpy as np
import pytest
from scipy import stats

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.heavy_hitters.encoding import StringEncoding, bit_fragment, prefix_bytes, truncate_utf8
from ldpsynth.shared.heavy_hitters.rounds import RoundSchedule, assign_rounds, round_of


@pytest.mark.parametrize("value", ["", "a", "hello", "naïve", "日本語", "😀x", "abcdefgh"])
def test_round_trip(value):
    enc = StringEncoding(12)
    assert enc.decode(enc.encode([value])) == [value]


def test_truncation_keeps_whole_characters():
    enc = StringEncoding(5)
    assert enc.decode(enc.encode(["日本語"])) == ["日"]          # 9 bytes: cut to 3, not 5
    assert enc.decode(enc.encode(["abcdefg"])) == ["abcde"]
    assert truncate_utf8("ab😀".encode(), 5) == b"ab"
    for n in range(1, 12):
        truncate_utf8("é日😀abc".encode(), n).decode("utf-8")      # never splits a character


@pytest.mark.parametrize(("value", "problem"), [("a\x00b", "U+0000"), ("\ud800", "surrogate"), (3, "int")])
def test_invalid_values_are_refused(value, problem):
    with pytest.raises(ValidationError) as info:
        StringEncoding(4).encode(["ok", value])
    assert info.value.field == "values" and info.value.position == 1 and problem in str(info.value)


@pytest.mark.parametrize("bad", [0, 65, 1.5, True])
def test_max_bytes_range(bad):
    with pytest.raises(ValidationError, match=r"max_length.*\[1, 64\]"):
        StringEncoding(bad)


def test_prefix_and_fragments_agree_with_bit_strings():
    rng = np.random.default_rng(1)
    codes = rng.integers(0, 256, (50, 6), dtype=np.uint8)
    bits = ["".join(f"{b:08b}" for b in row) for row in codes]
    for start, width in [(0, 3), (5, 11), (7, 17), (16, 32), (40, 8)]:
        assert bit_fragment(codes, start, width).tolist() == [int(s[start:start + width], 2) for s in bits]
    for b in (1, 8, 13):
        got = prefix_bytes(codes, b)
        want = [int(s[:b].ljust(8 * got.shape[1], "0"), 2) for s in bits]
        assert [int.from_bytes(bytes(r), "big") for r in got] == want


def test_schedule_covers_every_bit_once():
    s = RoundSchedule(80, 16, 12)
    ends = [s.end_bits(r) for r in range(s.rounds)]
    assert ends[-1] == 80 and all(s.start_bits(r + 1) == ends[r] for r in range(s.rounds - 1))
    assert s.rounds == 1 + 6 and sum(s.width(r) for r in range(s.rounds)) == 80
    with pytest.raises(ValidationError, match="fragment_bits"):
        RoundSchedule(80, 16, 33)


def test_assignment_is_uniform_and_deterministic():
    # chi-square goodness of fit of 20,000 keys over 7 rounds (~2,857 expected per bin), alpha = 0.01
    salt = bytes(range(16))
    keys = [f"device-{i}".encode() for i in range(20_000)]
    rounds = assign_rounds(keys, salt, 7)
    assert rounds.tolist()[:50] == [round_of(k, salt, 7) for k in keys[:50]]
    counts = np.bincount(rounds, minlength=7)
    assert stats.chisquare(counts).pvalue > 0.01
    other = assign_rounds(keys, bytes(16), 7)                        # another salt: another split
    assert (other != rounds).mean() > 0.5


def test_assignment_errors():
    with pytest.raises(ValidationError, match="salt"):
        assign_rounds([b"a"], b"short", 3)
    with pytest.raises(ValidationError, match="device_keys") as info:
        assign_rounds([b"a", b""], bytes(16), 3)
    assert info.value.position == 1


def test_alphabet_round_trip_truncation_and_errors():
    enc = StringEncoding(5, "abcdefghijklmnopqrstuvwxyz")
    assert enc.symbol_bits == 5 and enc.bits == 25 and enc.code_bytes == 4
    assert enc.decode(enc.encode(["hello", "hi", "", "abcdefg"])) == ["hello", "hi", "", "abcde"]
    with pytest.raises(ValidationError, match="outside the alphabet") as info:
        enc.encode(["ok", "Ok"])
    assert info.value.field == "values" and info.value.position == 1
    with pytest.raises(ValidationError, match="alphabet"):
        StringEncoding(5, "aa")


def test_valid_prefixes_accept_every_real_prefix_and_refuse_impossible_ones():
    enc = StringEncoding(4, "abcde")                                   # 3-bit symbols, 5 letters: 6, 7 illegal
    codes = enc.encode(["a", "abc", "edcb", ""])
    for bits in range(1, enc.bits + 1):
        assert enc.valid_prefixes(prefix_bytes(codes, bits), bits).all()
    bad = np.array([[0b11100000, 0], [0b00000100, 0], [0b00100000, 0b01000000]], np.uint8)
    # an illegal symbol (7); a letter after the padding; a legal prefix 001 000 000 01 (the last symbol partial)
    assert enc.valid_prefixes(bad, 11).tolist() == [False, False, False]
    assert enc.valid_prefixes(bad[2:], 6).tolist() == [True]
    utf8 = StringEncoding(3)
    assert utf8.valid_prefixes(np.array([[0xC0, 0, 0], [0x61, 0, 0x62], [0xC3, 0xA9, 0]], np.uint8), 24).tolist() \
        == [False, False, True]
