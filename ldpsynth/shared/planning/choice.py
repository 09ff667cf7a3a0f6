"""Which mechanism to choose: E beside the frequency oracles (OUE, OLH, HR, SS) at the same ε.

Each oracle's figures use its estimator's exact coefficients (WBLJ17 eq. 2 for OUE and OLH) in the
variance of :mod:`~ldpsynth.shared.planning.variances`; E stays unless an oracle's typical error (the
geometric mean over the queries of its standard errors over E's) is more than :data:`CLOSE` below the
best, then the smallest report and the cheapest decoding decide.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.planning.choice``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ldpsynth.shared.mechanisms.oracle import FrequencyOracle
from ldpsynth.shared.mechanisms.registry import Mechanism, make_mechanism, max_domain_size, private_wire
from ldpsynth.shared.planning.moments import Moments
from ldpsynth.shared.planning.variances import Figures, variances

__all__ = ["ORACLE_NAMES", "CLOSE", "Choice", "costs", "error_ratio", "recommend", "oracle_choices"]

#: The frequency oracles a plan sets beside E (:mod:`ldpsynth.shared.mechanisms`).
ORACLE_NAMES = ("OUE", "OLH", "HR", "SS")
#: Mechanisms whose typical standard error is within this factor of the best one's are told apart by the
#: bytes of a report, then by the cost of decoding.
CLOSE = 1.05


@dataclass(frozen=True, eq=False)
class Choice:
    """One mechanism for the planned collection: its predicted errors, the size of a report, its decoding.

    ``error_ratio``: the geometric mean, over the queries with a non-zero error, of its headline standard
    error over E's (1 for E; below 1: better). ``report_bytes``: the wire bytes of a report's private part.
    ``tally_operations``: work per report when a shard counts it (E, HR: one increment; OLH: g signed
    increments; OUE, SS: |D| bits). ``transform``: additions per public key a query batch adds (OLH, HR: a
    Walsh-Hadamard transform of 2^t integers, t 2^t; 0 otherwise). ``available``: False, with ``why``, when the
    mechanism cannot serve the schema (|D| over its largest domain).
    """

    mechanism: str
    epsilon: float
    figures: Figures | None
    report_bytes: int
    tally_operations: int
    transform: int
    error_ratio: float
    available: bool = True
    why: str = ""


def costs(mechanism: Mechanism) -> tuple[int, int, int]:
    """``(report bytes, tally operations per report, transform additions per key)`` of ``mechanism``."""
    wire = private_wire(mechanism)[0]
    if not isinstance(mechanism, FrequencyOracle):
        return wire, 1, 0
    name, size = mechanism.name, mechanism.tally_size
    transform = size * max(1, size.bit_length() - 1) if name in ("OLH", "HR") else 0
    per_report = {"OLH": int(getattr(mechanism, "hash_range", 1)), "HR": 1}.get(name, mechanism.domain_size)
    return wire, per_report, transform


def error_ratio(figures: Figures, e: Figures) -> float:
    """Geometric mean of ``figures``' headline standard errors over E's, where both are positive and finite."""
    mine, theirs = figures.headline, e.headline
    live = (mine > 0) & (theirs > 0) & np.isfinite(mine) & np.isfinite(theirs)
    return float(np.exp(np.mean(np.log(mine[live] / theirs[live])))) if live.any() else 1.0


def recommend(choices: Sequence[Choice]) -> tuple[str, str]:
    """The mechanism to choose and why: E (the default) while its typical error (``error_ratio``) is within
    :data:`CLOSE` of the smallest; otherwise, of the oracles within :data:`CLOSE` of the smallest, the one with
    the smallest report, then the cheapest decoding (``tally_operations``, ``transform``)."""
    usable = [c for c in choices if c.available]
    best = min(c.error_ratio for c in usable)
    close = [c for c in usable if c.error_ratio <= best * CLOSE]
    pick = min(close, key=lambda c: (c.mechanism != "E", c.report_bytes, c.tally_operations, c.transform,
                                     c.error_ratio))
    others = ", ".join(f"{c.mechanism} {c.error_ratio:.3g}" for c in usable if c is not pick)
    why = (f"{pick.mechanism}: standard errors {pick.error_ratio:.3g} x E's (geometric mean over the queries; "
           f"{others}), {pick.report_bytes} bytes per report")
    if len(close) > 1:
        why += (f"; of those within {CLOSE - 1:.0%} of the best error ({', '.join(c.mechanism for c in close)}) "
                + ("the default" if pick.mechanism == "E" else "the smallest report and decoding"))
    return pick.mechanism, why


def oracle_choices(m: Moments, eps: float, k: int, n: int, z: np.ndarray, with_prior: bool,
                   e: Figures) -> list[Choice]:
    """Each frequency oracle of :data:`ORACLE_NAMES` at ``eps`` (its exact probabilities): the variance of the
    estimator of its collections (weights centred per group: :math:`a\\,n S_2 + b H_2`), or unavailable."""
    out = []
    for name in ORACLE_NAMES:
        largest = max_domain_size(name)
        if k > largest:
            out.append(Choice(name, eps, None, 0, 0, 0, float("inf"), False, f"|D| = {k:,} > {largest:,}"))
            continue
        oracle = make_mechanism(name, eps, k)
        assert isinstance(oracle, FrequencyOracle)
        a, b = oracle.protocol.centred_coefficients()
        figures = Figures.of(*variances(m, a, b, n, z), with_prior)
        out.append(Choice(name, oracle.epsilon, figures, *costs(oracle), error_ratio(figures, e)))
    return out
