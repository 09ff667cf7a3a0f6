"""How much of the top k a discovery will find, before it runs: the rounds emulated with the oracles' exact laws.

A discovery (docs/heavy-hitters.md) splits N devices across R rounds by key, uniformly: round r holds
:math:`n_r` devices, :math:`(n_0, \\dots, n_{R-1}) \\sim \\mathrm{Multinomial}(N, 1/R)`. Given the prior π over
strings (a list of values with weights, e.g. Zipf(s) by rank), round r's devices hold cell v (their prefix's
candidate and fragment, or "other") with sample counts :math:`c \\sim \\mathrm{Multinomial}(n_r, \\pi_r)`,
:math:`\\pi_r(v)` the prior's share of the codes in cell v. The oracle's unbiased count of a cell is a sum of
:math:`n_r` independent reports with mean :math:`c_v` and the exact variance :math:`a\\,n_r + b\\,c_v`
(:meth:`~ldpsynth.shared.mechanisms.pure.PureProtocol.point_coefficients`, WBLJ17 §3); the emulation draws it
as :math:`\\hat c_v = c_v + \\sqrt{a n_r + b c_v}\\,Z` (the normal limit of that sum: exact in its first two
moments, approximate in its tails), turns it into the round's population estimates exactly as a decoded round
(:func:`~ldpsynth.shared.heavy_hitters.server.round_estimate`) and hands it to the same
:class:`~ldpsynth.shared.heavy_hitters.server.HeavyHitterServer` a deployment runs, so the candidates are kept by
the deployment's own rule. No device is simulated: a trial costs a few draws per cell of each round.

Reported over ``trials`` independent emulations: the mean recall of the prior's top k (the share of them
found), precision (the share of the answer that is in the prior's top k), F1, each with its standard error over
the trials, and per rank the share of trials that found that value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ..errors import ValidationError
from ..heavy_hitters.encoding import StringEncoding
from ..heavy_hitters.rounds import RoundSchedule
from ..heavy_hitters.server import HeavyHitterServer, round_estimate
from ..mechanisms.registry import protocol_of
from ..validation import check_int, check_real

__all__ = ["RecallPlan", "zipf_weights", "prior_codes", "plan_recall"]


@dataclass(frozen=True, eq=False)
class RecallPlan:
    """The predicted outcome of a discovery (module docstring): ``wanted``, the values to find (the top k, or the
    prior's values at or above the threshold), found per rank in ``found_by_rank``."""

    wanted: int
    trials: int
    recall: float
    recall_se: float
    precision: float
    precision_se: float
    f1: float
    f1_se: float
    found_by_rank: np.ndarray
    devices_per_round: float


def zipf_weights(count: int, exponent: float) -> np.ndarray:
    """Zipf(s) weights :math:`r^{-s}` of ranks :math:`r = 1 \\dots` ``count``, normalised to sum to 1."""
    check_int(count, "count", 1)
    check_real(exponent, "zipf", low=0.0)
    weights = np.arange(1, count + 1, dtype=np.float64) ** -exponent
    return weights / weights.sum()


def prior_codes(encoding: StringEncoding, values: Sequence[str],
                weights: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """The prior as distinct codes (values that truncate to one code merged) and their shares, largest first."""
    shares = np.asarray(weights, np.float64)
    if shares.shape != (len(values),) or not len(values) or not np.all(np.isfinite(shares)) or (shares < 0).any() \
            or shares.sum() <= 0:
        raise ValidationError("prior", "one finite weight ≥ 0 per value, not all 0, at least one value",
                              f"got {len(values)} values and weights of shape {shares.shape}")
    codes = encoding.encode(list(values))
    distinct, inverse = np.unique(codes, axis=0, return_inverse=True)
    merged = np.bincount(inverse.ravel(), weights=shares, minlength=len(distinct)) / shares.sum()
    order = np.argsort(-merged, kind="stable")
    return distinct[order], merged[order]


def _rows(codes: np.ndarray) -> set[bytes]:
    return {row.tobytes() for row in codes}


def plan_recall(encoding: StringEncoding, schedule: RoundSchedule, epsilon: float, population: int,
                values: Sequence[str], weights: npt.ArrayLike, *, top_k: int | None = None,
                threshold: float | None = None, cap: int | None = None, mechanism: str | None = None,
                trials: int = 20, rng: np.random.Generator) -> RecallPlan:
    """Emulate ``trials`` discoveries among ``population`` devices whose values follow the prior (``values`` with
    ``weights``) and summarise them (module docstring): of the top ``top_k``, or of the values whose share is at
    least ``threshold`` (the server's rules for either); ``mechanism``: every round's (E behind a shuffler),
    default the least-variance oracle per round."""
    check_int(trials, "trials", 2)
    codes, shares = prior_codes(encoding, values, weights)
    if top_k is not None:
        check_int(top_k, "top_k", 1)
        if len(codes) < top_k:
            raise ValidationError("top_k", f"at most the prior's {len(codes)} distinct codes", f"got {top_k}")
        wanted = top_k
    else:
        check_real(threshold, "threshold", low=0.0, high=1.0, low_open=True)
        wanted = int(np.count_nonzero(shares >= threshold))
        if wanted == 0:
            raise ValidationError("threshold", f"at most the prior's largest share, {shares[0]:.4g}",
                                  f"got {threshold}: no value of the prior reaches it")
    truth = [row.tobytes() for row in codes[:wanted]]
    rounds = schedule.rounds
    recall, precision, f1 = np.zeros(trials), np.zeros(trials), np.zeros(trials)
    found_by_rank = np.zeros(wanted)
    for t in range(trials):
        server = HeavyHitterServer(encoding, schedule, epsilon, population, top_k=top_k, threshold=threshold, cap=cap,
                                   mechanism=mechanism)
        sizes = rng.multinomial(population, np.full(rounds, 1.0 / rounds))
        while not server.finished:
            spec = server.spec()
            n = int(sizes[spec.index])
            if n == 0:
                raise ValidationError("population", f"enough devices for {rounds} rounds", f"got {population}")
            share = np.bincount(spec.cells_of(codes), weights=shares, minlength=spec.domain_size)
            sample = rng.multinomial(n, share / share.sum()).astype(np.float64)
            a, b = protocol_of(spec.mechanism).point_coefficients()
            noisy = sample + np.sqrt(np.maximum(a * n + b * sample, 0.0)) * rng.standard_normal(len(sample))
            server.accept(round_estimate(spec, noisy, n, population))
        found = _rows(server.result().codes)
        hits = np.array([key in found for key in truth])
        found_by_rank += hits
        recall[t] = hits.mean()
        precision[t] = hits.sum() / len(found) if found else 0.0
        f1[t] = 0.0 if recall[t] + precision[t] == 0 else 2 * recall[t] * precision[t] / (recall[t] + precision[t])
    se = math.sqrt(trials)
    return RecallPlan(wanted, trials, float(recall.mean()), float(recall.std(ddof=1) / se), float(precision.mean()),
                      float(precision.std(ddof=1) / se), float(f1.mean()), float(f1.std(ddof=1) / se),
                      found_by_rank / trials, population / rounds)
