"""Pins a small seeded discovery's every output bit for bit (candidates, every round's counts and standard
errors, the answer's values, counts and CIs), so that speeding up the server cannot change a result.

The digests were recorded on the server before its speed-ups (branch hh-speed, first commit; the ε = 4 ones
on branch hh-eps4's first commit, before its speed-ups); a change to a digest means a changed result, never a
flaky test (seeded Generators, no OS randomness)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.heavy_hitters.encoding import StringEncoding
from ldpsynth.shared.heavy_hitters.rounds import RoundSchedule
from ldpsynth.shared.heavy_hitters.simulate import simulate


def _population(enc: StringEncoding, letters: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    words = ["".join(rng.choice(list(letters), size=rng.integers(1, enc.max_length + 1))) for _ in range(300)]
    weights = 1.0 / np.arange(1, len(words) + 1) ** 1.1
    ids = rng.choice(len(words), size=n, p=weights / weights.sum())
    return enc.encode([words[i] for i in ids])


def _digest(enc: StringEncoding, schedule: RoundSchedule, eps: float, letters: str, **select: float) -> str:
    codes = _population(enc, letters, 20_000, 7)
    sim = simulate(codes, enc, schedule, eps, np.random.default_rng(11), **select)  # type: ignore[arg-type]
    h = hashlib.sha256()
    for estimate in sim.server.estimates:
        h.update(np.ascontiguousarray(estimate.spec.candidates).tobytes())
        h.update(estimate.counts.tobytes())
        h.update(estimate.std_errors.tobytes())
    result = sim.result
    h.update("\n".join(result.values).encode())
    for array in (result.codes, result.counts, result.std_errors, result.ci_low, result.ci_high):
        h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()


@pytest.mark.parametrize(("alphabet", "schedule", "eps", "select", "digest"), [
    # 3 OLH rounds, top 10; 4 rounds (OLH x 3, then E), a threshold; UTF-8, 3 OLH rounds, top 20
    ("abcdefghijklmnopqrstuvwxyz", (30, 10, 10), 2.0, {"top_k": 10},
     "999ff72939f0bb376281bb4c21172a4fa8186a691c4ac05edfbbe8cef7964ef7"),
    ("abcdefghijklmnopqrstuvwxyz", (30, 12, 7), 4.0, {"threshold": 0.01},
     "7fcb35c3f71e2405ba3999e252a6a40c618fd1cae349a5304a01be86966135c8"),
    (None, (48, 16, 16), 2.0, {"top_k": 20, "cap": 30},
     "24f8d8bcad0959479e6311f265f4b537fe230d0df05da14fc668f28e2f93b619"),
    # eps = 4 (OLH with g = 64 in every round): 3 rounds, top 10; the benchmark's shape (50 bits, 20 then 15 a
    # round, top 50 capped at 63: tallies of 2^21)
    ("abcdefghijklmnopqrstuvwxyz", (30, 10, 10), 4.0, {"top_k": 10},
     "366d5645616aaf5f881c62b46dad2d957344116e388872e92747f7f78744d6fb"),
    ("abcdefghijklmnopqrstuvwxyz", (50, 20, 15), 4.0, {"top_k": 50, "cap": 63},
     "ecf1e938d3bb6b0eefff42c83c321f7b15e7de4955cd34d6d10a02663e27b798"),
])
def test_seeded_discovery_is_pinned(alphabet: str | None, schedule: tuple[int, int, int], eps: float,
                                    select: dict[str, float], digest: str) -> None:
    letters = alphabet or "abcdéfgh"
    enc = StringEncoding(schedule[0] // (8 if alphabet is None else 5), alphabet)
    assert _digest(enc, RoundSchedule(*schedule), eps, letters, **select) == digest


def test_timing_repeats_leave_the_outputs_alone() -> None:
    enc = StringEncoding(6, "abcdefghijklmnopqrstuvwxyz")
    assert _digest(enc, RoundSchedule(30, 10, 10), 2.0, enc.alphabet or "", top_k=10, server_repeats=3) == (
        "999ff72939f0bb376281bb4c21172a4fa8186a691c4ac05edfbbe8cef7964ef7")
    codes = _population(enc, enc.alphabet or "", 1_000, 7)
    with pytest.raises(ValidationError):
        simulate(codes, enc, RoundSchedule(30, 10, 10), 2.0, np.random.default_rng(1), top_k=3, server_repeats=0)
    sim = simulate(codes, enc, RoundSchedule(30, 10, 10), 2.0, np.random.default_rng(1), top_k=3, server_repeats=2)
    assert sim.server_seconds > 0
