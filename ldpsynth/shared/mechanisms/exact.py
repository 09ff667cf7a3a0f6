"""Exact output distributions of the oracles' samplers, and their privacy boundary, on small domains.

:func:`output_distribution` runs an oracle's own sampler (the code :meth:`perturb_secure` runs) on
coins that enumerate every outcome: the sampler draws the same sequence of ``below`` / ``bernoulli``
calls whatever the outcomes (it is vectorized over rows), so a first run on one row records them, and
a second run on one row per combination of outcomes (mixed radix) yields every possible report with
the exact probability of its path (integers over a common denominator). Summing the paths per report
gives :math:`P[y \\mid x]` exactly. A sampler whose probabilities are off, or whose subset is not
uniform, shows in these distributions: :func:`worst_case_ratio` is the largest
:math:`P[y \\mid x]/P[y \\mid x']` over all x, x' and reports y (None when some report is possible
under one input and impossible under another), and :func:`satisfies_epsilon_dp` compares its log with
an ε exactly (:func:`~ldpsynth.shared.privacy.log_ratio_exceeds`).

The enumeration is exponential: it is for small domains (k <= 16) and at most
:data:`MAX_PATHS` paths per input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from ..errors import ValidationError
from ..privacy import ratio_within_epsilon
from ..validation import check_int
from .coins import Shape
from .oracle import FrequencyOracle

__all__ = [
    "OutputDistribution",
    "output_distribution",
    "worst_case_ratio",
    "satisfies_epsilon_dp",
]

#: Largest number of outcome combinations enumerated per input.
MAX_PATHS = 1 << 21
#: Largest domain enumerated.
MAX_DOMAIN = 16


@dataclass(frozen=True)
class _Draw:
    kind: str            # "below" or "bernoulli"
    radix: int           # outcomes per element
    parameters: tuple[int, ...]
    elements: int        # per row


@dataclass
class _Recorder:
    """Coins that return zeros and record the calls (run on one row)."""

    draws: list[_Draw] = field(default_factory=list)

    def below(self, bound: int, shape: Shape) -> np.ndarray:
        self.draws.append(_Draw("below", int(bound), (int(bound),), _per_row(shape)))
        return np.zeros(shape, np.int64)

    def bernoulli(self, numerator: int, denominator: int, shape: Shape) -> np.ndarray:
        self.draws.append(_Draw("bernoulli", 2, (int(numerator), int(denominator)), _per_row(shape)))
        return np.zeros(shape, bool)


class _Replayer:
    """Coins that return, for path i (row i), the digits of i in the recorded mixed radix, and keep them."""

    def __init__(self, draws: list[_Draw], paths: int):
        self.draws, self.paths = draws, paths
        self.digits: list[np.ndarray] = []       # per call: (paths, elements)
        self._stride = 1

    def _next(self, kind: str, parameters: tuple[int, ...], shape: Shape) -> np.ndarray:
        call = len(self.digits)
        draw = self.draws[call] if call < len(self.draws) else None
        if draw is None or (draw.kind, draw.parameters, draw.elements) != (kind, parameters, _per_row(shape)):
            raise ValidationError("oracle", "a sampler whose draws do not depend on their outcomes",
                                  f"draw {call} differs between runs")
        strides = self._stride * draw.radix ** np.arange(draw.elements, dtype=object)
        self._stride *= draw.radix**draw.elements
        path = np.arange(self.paths, dtype=object)[:, None]
        digits = ((path // strides[None, :]) % draw.radix).astype(np.int64)
        self.digits.append(digits)
        return digits.reshape(shape)

    def below(self, bound: int, shape: Shape) -> np.ndarray:
        return self._next("below", (int(bound),), shape)

    def bernoulli(self, numerator: int, denominator: int, shape: Shape) -> np.ndarray:
        return self._next("bernoulli", (int(numerator), int(denominator)), shape) == 1


def _per_row(shape: Shape) -> int:
    dims = shape if isinstance(shape, tuple) else (shape,)
    return int(np.prod(dims[1:], dtype=np.int64))


@dataclass(frozen=True)
class OutputDistribution:
    """:math:`P[y \\mid x]` of one input: report keys (bytes) -> integer weights over a common ``denominator``."""

    weights: dict[bytes, int]
    denominator: int

    def probability(self, report: bytes) -> Fraction:
        return Fraction(self.weights.get(report, 0), self.denominator)


def output_distribution(oracle: FrequencyOracle, code: int) -> OutputDistribution:
    """The exact law of :meth:`oracle.perturb_secure([code])` (module docstring). The keys are
    ``report.tobytes()`` of one report (one row of the sampler's output)."""
    if not isinstance(oracle, FrequencyOracle):
        raise ValidationError("oracle", "a FrequencyOracle", f"got a {type(oracle).__name__}")
    check_int(oracle.domain_size, "oracle.domain_size", 2, MAX_DOMAIN)
    x = check_int(code, "code", 0, oracle.domain_size - 1)
    recorder = _Recorder()
    oracle._sample(np.array([x], np.int64), recorder)
    paths = 1
    for draw in recorder.draws:
        paths *= draw.radix**draw.elements
    if paths > MAX_PATHS:
        raise ValidationError("oracle", f"a sampler of at most {MAX_PATHS} outcome combinations per input",
                              f"got {paths}")
    replay = _Replayer(recorder.draws, paths)
    reports = oracle._sample(np.full(paths, x, np.int64), replay)
    if len(replay.digits) != len(recorder.draws):
        raise ValidationError("oracle", "a sampler whose draws do not depend on their outcomes",
                              "a different number of draws between runs")
    numerators = np.ones(paths, dtype=object)
    denominator = 1
    for draw, digits in zip(recorder.draws, replay.digits):
        if draw.kind == "below":
            denominator *= draw.radix**draw.elements
            continue
        numerator, den = draw.parameters
        table = np.array([numerator**j * (den - numerator) ** (draw.elements - j) for j in range(draw.elements + 1)],
                         dtype=object)
        numerators = numerators * table[digits.sum(axis=1)]
        denominator *= den**draw.elements
    rows = reports.reshape(paths, -1)
    keys, inverse = np.unique(rows, axis=0, return_inverse=True)
    weights: dict[bytes, int] = {}
    for index, weight in zip(inverse.ravel().tolist(), numerators.tolist()):
        key = keys[index].tobytes()
        weights[key] = weights.get(key, 0) + weight
    return OutputDistribution(weights, denominator)


def worst_case_ratio(oracle: FrequencyOracle) -> Fraction | None:
    """:math:`\\max_{x, x', y} P[y \\mid x]/P[y \\mid x']` exactly, over every report y possible under some
    input; None (unbounded) when a report is possible under one input and impossible under another."""
    laws = [output_distribution(oracle, x) for x in range(oracle.domain_size)]
    worst = Fraction(1)
    for report in set().union(*(law.weights for law in laws)):
        values = [law.probability(report) for law in laws]
        low, high = min(values), max(values)
        if low == 0:
            return None
        worst = max(worst, high / low)
    return worst


def satisfies_epsilon_dp(oracle: FrequencyOracle, epsilon: float) -> bool:
    """Whether :math:`\\ln` :func:`worst_case_ratio` :math:`\\le` ``epsilon`` (the float's exact value),
    decided exactly."""
    return ratio_within_epsilon(worst_case_ratio(oracle), epsilon)
