"""numeric.json: the exact numeric samplers (``ldpsynth.shared.numeric``): weights, laws, draws given U, ranges,
declared levels (``step``)."""

from __future__ import annotations

import hashlib
import math
import random
from typing import Any

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanisms.coins import Coins
from ldpsynth.shared.numeric.grid import GridLaw, round_to_grid
from ldpsynth.shared.numeric.levels.declared import LEVEL_TOLERANCE, NumericLevels
from ldpsynth.shared.numeric.samplers import Duchi, HybridMechanism, PiecewiseMechanism, SlidingWindow, SquareWave
from ldpsynth.shared.numeric.scale import NumericRange
from vectors.cards import correctly_rounded_exp
from vectors.common import FORMAT, exact_float, float_bits

#: HM laws with more entries are fingerprinted per component only (HM at 2^10 steps: 77 MB of text).
MAX_HASHED_ENTRIES = 50_000


def law_sha256(law: GridLaw) -> str:
    """SHA-256 of the law's canonical text: each row's weights in decimal joined by ``,`` and ended by a
    newline, then the denominator and a newline."""
    digest = hashlib.sha256()
    for row in law.weights.tolist():
        digest.update((",".join(str(int(w)) for w in row) + "\n").encode())
    digest.update(f"{law.denominator}\n".encode())
    return digest.hexdigest()


def _growth(epsilon: float) -> dict[str, Any]:
    g = math.exp(min(epsilon, 45.0))
    return {**exact_float(g), "correctly_rounded": g == correctly_rounded_exp(min(epsilon, 45.0))}


def _u_values(denominator: int, cuts: list[int], rng: random.Random) -> list[int]:
    """The boundaries of the selection (each cut and the integer below it), the ends, a few random U."""
    us = {0, 1, denominator - 1, *(rng.randrange(denominator) for _ in range(4))}
    us |= {c + d for c in cuts for d in (-1, 0) if 0 <= c + d < denominator}
    return sorted(us)


def _inputs(n: int) -> list[int]:
    return sorted({0, 1, n // 2, n - 2, n - 1})


def _duchi(d: Duchi, rng: random.Random) -> dict[str, Any]:
    draws = []
    for i in _inputs(d.steps + 1):
        plus = i * d.keep + (d.steps - i) * d.lie
        for u in _u_values(d.denominator, [plus], rng):
            out = int(d._select(np.asarray([i]), np.asarray([u], np.int64))[0])
            draws.append({"input": i, "u": str(u), "output": out})
    return {"keep_weight": str(d.keep), "lie_weight": str(d.lie), "denominator": str(d.denominator),
            "inputs": d.steps + 1, "reports": d.reports, "epsilon_delivered": exact_float(d.epsilon),
            "law_sha256": law_sha256(d.law()), "draws": draws}


def _window(s: SlidingWindow, rng: random.Random) -> dict[str, Any]:
    draws = []
    wa = s.window * s.keep
    for i in _inputs(s.inputs):
        cuts = [s.keep, wa - s.keep, wa, wa + s.lie, wa + i * s.lie, wa + (i + 1) * s.lie]
        for u in _u_values(s.denominator, cuts, rng):
            out = int(s._select(np.asarray([i]), np.asarray([u], np.int64))[0])
            draws.append({"input": i, "u": str(u), "output": out})
    return {"keep_weight": str(s.keep), "lie_weight": str(s.lie), "denominator": str(s.denominator),
            "inputs": s.inputs, "window": s.window, "reports": s.reports,
            "epsilon_delivered": exact_float(s.epsilon), "law_sha256": law_sha256(s.law()), "draws": draws}


def _hybrid(h: HybridMechanism, rng: random.Random) -> dict[str, Any]:
    law = h.law() if (h.steps + 1) * h.reports <= MAX_HASHED_ENTRIES else None
    return {"alpha_weight": str(h.alpha_weight), "reports": h.reports, "inputs": h.steps + 1,
            "epsilon_delivered": exact_float(h.epsilon),
            "denominator": str((1 << 32) * h.pm.denominator * h.duchi.denominator),
            "law_sha256": law_sha256(law) if law is not None else None,
            "pm": _window(h.pm, rng), "duchi": _duchi(h.duchi, rng)}


def _sampler_case(kind: str, epsilon: float, grid_bits: int, rng: random.Random) -> dict[str, Any]:
    head = {"id": f"{kind}-eps={epsilon!r}-bits={grid_bits}", "mechanism": kind,
            "epsilon": exact_float(epsilon), "grid_bits": grid_bits, "exp_used": _growth(epsilon)}
    if kind == "duchi":
        return {**head, **_duchi(Duchi(epsilon, grid_bits), rng)}
    if kind == "pm":
        return {**head, **_window(PiecewiseMechanism(epsilon, grid_bits), rng)}
    if kind == "sw":
        return {**head, **_window(SquareWave(epsilon, grid_bits), rng)}
    return {**head, **_hybrid(HybridMechanism(epsilon, grid_bits), rng)}


SAMPLERS: list[tuple[str, float, int]] = [
    ("duchi", 0.5, 10), ("duchi", 1.0, 4), ("duchi", 4.0, 10), ("duchi", 5.66, 10), ("duchi", 13.08, 2),
    ("pm", 0.5, 10), ("pm", 1.0, 10), ("pm", 2.0, 10), ("pm", 4.0, 10), ("pm", 1.0, 4), ("pm", 5.66, 6),
    ("pm", 22.08, 3),
    ("sw", 0.5, 8), ("sw", 1.0, 8), ("sw", 2.0, 8), ("sw", 4.0, 8), ("sw", 1.0, 4), ("sw", 7.5, 10),
    ("hm", 0.5, 10), ("hm", 0.61, 10), ("hm", 1.0, 10), ("hm", 2.0, 10), ("hm", 4.0, 10), ("hm", 1.0, 4),
    ("hm", 3.0, 6), ("hm", 0.6, 4),
]


class _Given:
    """Coins whose ``below`` returns one given integer (the rounding's 53-bit draw)."""

    def __init__(self, draw: int):
        self.draw = draw

    def below(self, bound: int, shape: int | tuple[int, ...]) -> np.ndarray:
        assert 0 <= self.draw < bound
        return np.full(shape, self.draw, np.int64)

    def bernoulli(self, numerator: int, denominator: int, shape: int | tuple[int, ...]) -> np.ndarray:
        raise AssertionError("the rounding draws no coin")


def _rounding_cases(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for points in (1025, 65, 2):
        steps = points - 1
        xs = [-1.0, 1.0, 0.0, -1.0 + 2.0 / steps, 0.1, -0.3, 1.0 - 2.0**-53, -1.0 + 2.0**-52,
              *(rng.uniform(-1, 1) for _ in range(4))]
        for x in xs:
            t = (x + 1.0) * (steps / 2.0)
            base = min(math.floor(t), steps - 1)
            up = math.floor((t - base) * 2.0**53)
            for draw in sorted({0, max(up - 1, 0), min(up, 2**53 - 1), 2**53 - 1}):
                index = int(round_to_grid(np.asarray([x]), points, _Given(draw))[0])
                out.append({"x": exact_float(x), "points": points, "draw": str(draw), "index": index})
    return out


class _Stream:
    def __init__(self, data: bytes):
        self.data, self.read = data, 0

    def __call__(self, count: int) -> np.ndarray:
        assert self.read + 8 * count <= len(self.data), "read past the end of the stream"
        self.read += 8 * count
        return np.frombuffer(self.data[self.read - 8 * count:self.read], "<u8")


def _stream_case(case_id: str, sampler: Any, x: float, data: bytes) -> dict[str, Any]:
    stream = _Stream(data)
    out = int(sampler._sample(np.asarray([x]), Coins(stream))[0])
    return {"id": case_id, "x": exact_float(x), "random_hex": data[:stream.read].hex(), "output": out}


def _stream_cases(rng: random.Random) -> list[dict[str, Any]]:
    """One value per call on a given byte stream (64-bit little-endian words): the rounding's word (low 53
    bits), for HM the component's coin (the word's first byte against α's top byte; a tie reads one more
    word), then U (64-bit words, rejected at or above the largest multiple of W)."""
    made = {"duchi": Duchi(1.0), "pm": PiecewiseMechanism(1.0), "sw": SquareWave(1.0), "hm": HybridMechanism(1.0)}
    out = []
    for name, sampler in made.items():
        for n in range(12):
            x = [-1.0, 1.0, 0.0][n] if n < 3 else rng.uniform(-1, 1)
            out.append(_stream_case(f"{name}-{n}", sampler, x, rng.randbytes(64)))
    hm = made["hm"]
    top = hm.alpha_weight >> 24
    tie = rng.randbytes(8) + bytes([top]) + rng.randbytes(7) + rng.randbytes(48)
    out.append(_stream_case("hm-coin-tie", hm, 0.25, tie))
    below = (1 << 64) - ((1 << 64) % hm.pm.denominator)
    rejected = rng.randbytes(8) + bytes([0]) + rng.randbytes(7) + (below + 5).to_bytes(8, "little") + rng.randbytes(40)
    out.append(_stream_case("hm-u-rejected", hm, -0.5, rejected))
    return out


def _range_case(case_id: str, lo: float, hi: float, field: str, values: list[float]) -> dict[str, Any]:
    case: dict[str, Any] = {"id": case_id, "lo": float_bits(lo), "hi": float_bits(hi), "field": field,
                            "values": [float_bits(v) for v in values]}
    try:
        r = NumericRange(lo, hi, field)
        case["half_width"] = float_bits(r.half_width)
        case["unit"] = [float_bits(x) for x in r.to_unit(values).tolist()]
    except ValidationError as err:
        case["error"] = {"field": err.field, "legal": err.legal, "position": err.position, "message": str(err)}
    return case


def _range_cases(rng: random.Random) -> list[dict[str, Any]]:
    return [
        _range_case("rating", 1.0, 5.0, "rating", [1.0, 5.0, 3.0, 2.5, 4.999999999999999]),
        _range_case("age", 17.0, 90.0, "age", [17.0, 90.0, *(rng.uniform(17, 90) for _ in range(6))]),
        _range_case("tiny-range", 1e-5, 3.0000000000000004e-5, "x", [1e-5, 2e-5, 3.0000000000000004e-5]),
        _range_case("huge-range", -1e20, 1.5e300, "x", [0.0, -1e20, 1.5e300, 7.25e299]),
        _range_case("negative", -2.5, -0.125, "temp", [-2.5, -0.125, -1.0]),
        _range_case("above", 1.0, 5.0, "rating", [3.0, 5.000000000000001]),
        _range_case("below", 1.0, 5.0, "rating", [0.9999999999999999]),
        _range_case("nan", 0.0, 1.0, "share", [0.5, 0.25, math.nan]),
        _range_case("infinite", 0.0, 1.0, "share", [math.inf]),
        _range_case("shown-exactly", 0.1, 1e16, "x", [-3.0]),
        _range_case("shown-small", 1e-7, 2.5e-5, "x", [1.0]),
        _range_case("empty-range", 2.0, 2.0, "x", [2.0]),
        _range_case("reversed", 3.0, 1.0, "x", [2.0]),
        _range_case("infinite-lo", -math.inf, 1.0, "x", [0.0]),
        _range_case("width-overflows", -1.7e308, 1.7e308, "x", [0.0]),
    ]


def _levels_case(case_id: str, lo: float, hi: float, step: float, values: list[float]) -> dict[str, Any]:
    """Declared levels of [lo, hi] every ``step``: their N and values, and each value's level k (−1: off them;
    the range itself is the attribute's check), or the refusal."""
    field = f"attributes[{case_id}].step"
    case: dict[str, Any] = {"id": case_id, "lo": float_bits(lo), "hi": float_bits(hi), "step": float_bits(step),
                            "field": field, "values": [float_bits(v) for v in values]}
    try:
        levels = NumericLevels(lo, hi, step, field)
        case["intervals"] = levels.intervals
        case["levels"] = [float_bits(v) for v in levels.values().tolist()]
        case["index"] = levels.index(values).tolist()
    except ValidationError as err:
        case["error"] = {"field": err.field, "legal": err.legal}
    return case


def _level_cases() -> list[dict[str, Any]]:
    """Steps 1, 0.5, 0.1 (not exact in binary), 0.25 on a negative range, 1/3, the bound N = 255, and refusals;
    values on a level, within 1e-6 step of one (accepted) and just beyond (off), between levels, outside."""
    tol = LEVEL_TOLERANCE
    return [
        _levels_case("rating", 1.0, 5.0, 1.0, [1.0, 5.0, 3.0, 2.5, 3 + 0.9 * tol, 3 - 0.9 * tol, 3 + 1.1 * tol,
                                               3 - 1.1 * tol, 5 + 0.5 * tol, 1 - 0.5 * tol, 0.0, 6.0, math.nan,
                                               math.inf, -math.inf, 4.5]),
        _levels_case("half", 0.0, 100.0, 0.5, [0.0, 0.5, 99.5, 100.0, 33.25, 50.0000004, 49.9999996, 0.2500001]),
        _levels_case("tenth", 0.0, 1.0, 0.1, [0.1, 0.2, 0.1 + 0.2, 0.7, 0.1 * 7, 1.0, 0.9999999, 0.35,
                                              0.3 + 0.11 * tol, 0.3 + 0.09 * tol, 1 - 1e-16]),
        _levels_case("quarter", -5.5, 12.25, 0.25, [-5.5, -5.25, 12.25, 0.0, 12.0, -5.375, 3.1, 12.2500001]),
        _levels_case("third", 0.0, 1.0, 1 / 3, [0.0, 1 / 3, 2 / 3, 1.0, 0.5, 0.3333336]),
        _levels_case("widest", 0.0, 25.5, 0.1, [0.0, 25.5, 12.3, 25.4, 0.05, 12.35]),
        _levels_case("one-interval", 0.0, 1.0, 1.0, [0.0, 1.0, 0.5]),
        _levels_case("3-plus-2e-9", 0.0, 1.0, 1 / (3 + 2e-9), [0.0, 1.0, 1 / (3 + 2e-9)]),
        _levels_case("3-plus-4e-9", 0.0, 1.0, 1 / (3 + 4e-9), [0.0]),
        _levels_case("256-intervals", 0.0, 25.6, 0.1, [0.0]),
        _levels_case("not-dividing", 1.0, 5.0, 0.3, [1.0]),
        _levels_case("above-the-range", 1.0, 5.0, 8.0, [1.0]),
        _levels_case("zero", 1.0, 5.0, 0.0, [1.0]),
        _levels_case("negative", 1.0, 5.0, -1.0, [1.0]),
        _levels_case("nan", 1.0, 5.0, math.nan, [1.0]),
        _levels_case("infinite", 1.0, 5.0, math.inf, [1.0]),
        _levels_case("tiny", 1.0, 5.0, 1e-300, [1.0]),
    ]


def numeric_vectors() -> dict[str, Any]:
    rng = random.Random(20261207)
    samplers = [_sampler_case(kind, eps, bits, rng) for kind, eps, bits in SAMPLERS]
    return {"format": FORMAT, "file": "numeric.json", "alpha_bits": 32, "round_bits": 53,
            "samplers": samplers, "rounding": _rounding_cases(rng), "streams": _stream_cases(rng),
            "ranges": _range_cases(rng), "levels": _level_cases()}
