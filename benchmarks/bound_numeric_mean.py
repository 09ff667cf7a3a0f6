"""The least variance of the mean any ε-LDP mechanism can reach on data with few levels (issue 42's 0.5x goal).

Setting: each device holds one of L levels :math:`x_1 < \\dots < x_L` on [−1, 1], the share of devices on level k
is :math:`w_k` (known to the designer: the most favourable case), each device sends one report Y from a mechanism
Q (ε-LDP: :math:`Q(y \\mid x_k) \\le e^\\varepsilon Q(y \\mid x_l)` for all y, k, l) and the mean is estimated by
:math:`\\frac1n \\sum_i a(Y_i)` with :math:`E[a(Y) \\mid x_k] = x_k` for every level (a per-device unbiased
estimator: Duchi, PM, HM, SW's mean and E over the levels are all of this form). Its per-report variance is

.. math::  V(Q, a) = \\sum_k w_k \\sum_y a(y)^2 Q(y \\mid x_k) - \\sum_k w_k x_k^2 .

**Reduction.** A column :math:`q_y = Q(y \\mid \\cdot)` lies in the cone
:math:`C_\\varepsilon = \\{v \\ge 0 : v_k \\le e^\\varepsilon v_l\\}`, whose extreme rays are the vectors
:math:`d_S` equal to :math:`e^\\varepsilon` on a level set S and 1 off it (:math:`\\emptyset \\ne S \\ne` all:
:math:`2^L - 2` rays; a column with a value strictly between its least and e^ε times it, or with its two values
in a smaller ratio, is a mean of two others of the cone). For a fixed a, the constraints and V are linear in the
columns, so splitting an output into its rays (same a) changes neither: every mechanism is a measure
:math:`\\lambda \\ge 0` over pairs (S, a) with :math:`\\sum \\lambda\\, d_S = 1` (each level's probabilities sum to 1)
and :math:`\\sum \\lambda\\, a\\, d_S = x` (unbiased), of cost :math:`\\sum \\lambda\\, a^2 (w \\cdot d_S)`.

**Lower bound (LP duality).** For any :math:`\\nu, \\mu \\in \\mathbb R^L` with
:math:`a^2 (w\\cdot d_S) - a (\\mu\\cdot d_S) - \\nu\\cdot d_S \\ge 0` for every a, i.e.
:math:`(\\mu\\cdot d_S)^2 + 4 (w\\cdot d_S)(\\nu\\cdot d_S) \\le 0` for every S, summing the inequality against
λ gives :math:`\\sum\\lambda a^2 (w\\cdot d_S) \\ge \\sum_k \\nu_k + \\mu\\cdot x`, so

.. math::  V \\ge \\sum_k \\nu_k + \\mu \\cdot x - \\sum_k w_k x_k^2 .

The dual is solved numerically (SLSQP), then ν is lowered until every constraint holds with a margin
(:func:`certified_lower`), so the bound is exact up to the float evaluation of :math:`e^\\varepsilon`.

**Upper bound.** The primal LP over the rays and the outputs a on a grid plus the dual's touching points
:math:`a_S = \\mu\\cdot d_S / (2 w\\cdot d_S)` (HiGHS): a real mechanism (:class:`Bound` keeps its outputs),
whose variance the lower bound meets when the two agree.

Run: ``cd benchmarks && python bound_numeric_mean.py`` (MovieLens-100K's ratings on [1, 5]; seconds). Writes
``results/numeric_mean_bound/bound.md`` and ``.csv``: per ε the bound, the mechanism reaching it, HM at the data
(Wang2019ICDE §III-C), E over the 5 levels (WYZ eq. 16, exact) and the goal 0.5x E.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import itertools
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from machine import machine_info  # benchmarks/machine.py
from scipy.optimize import linprog, minimize

from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms.pure import PureProtocol
from ldpsynth.shared.numeric import HybridMechanism, NumericRange
from ldpsynth.simulation.datasets import DatasetNotFound, dataset_path

EPSILONS = (0.5, 1.0, 2.0, 4.0)
RESULTS = Path(__file__).resolve().parent / "results" / "numeric_mean_bound"
#: The most levels whose 2^L − 2 rays are enumerated.
MAX_LEVELS = 12


@dataclass(frozen=True)
class Bound:
    """The least per-report variance at (levels, shares, ε): ``lower`` (certified), ``upper`` (the mechanism
    ``outputs`` reaches: rows (a, weight λ, ray's set as a 0/1 vector))."""

    lower: float
    upper: float
    outputs: np.ndarray

    def mechanism(self, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
        """``(a, Q)``: the outputs' estimates and Q[y, k] = P(output y | level k)."""
        rays = np.where(self.outputs[:, 2:] > 0.5, math.exp(epsilon), 1.0)
        return self.outputs[:, 0], self.outputs[:, 1:2] * rays


def rays(levels: int, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """``(sets, D)``: the 2^L − 2 proper non-empty level sets as 0/1 rows, and the rays :math:`d_S` as rows."""
    if not 2 <= levels <= MAX_LEVELS:
        raise ValueError(f"levels: 2..{MAX_LEVELS}, got {levels}")
    sets = np.array([[1.0 if k in s else 0.0 for k in range(levels)]
                     for size in range(1, levels) for s in itertools.combinations(range(levels), size)])
    return sets, np.where(sets > 0.5, math.exp(epsilon), 1.0)


def certified_lower(x: np.ndarray, w: np.ndarray, d: np.ndarray, nu: np.ndarray, mu: np.ndarray) -> float:
    """The dual value of (ν, μ) after lowering ν by the least t ≥ 0 that makes every ray's constraint hold with
    a relative margin of 1e-12 (module docstring): a valid lower bound whatever (ν, μ) the solver returned."""
    wd, nd, md, ones = d @ w, d @ nu, d @ mu, d.sum(axis=1)
    slack = nd + md**2 / (4.0 * wd)                         # ≤ 0 when feasible
    shift = max(0.0, float(np.max((slack + 1e-12 * (np.abs(nd) + md**2 / wd)) / ones)))
    nu = nu - shift
    if np.any((d @ nu) + md**2 / (4.0 * wd) > 0.0):
        raise ArithmeticError("the shifted dual point is still infeasible")
    return float(nu.sum() + mu @ x - w @ x**2)


def least_variance(x: np.ndarray, w: np.ndarray, epsilon: float, grid: int = 2001) -> Bound:
    """:class:`Bound` for levels ``x`` (on [−1, 1]) with shares ``w`` at ``epsilon`` (module docstring)."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    sets, d = rays(len(x), epsilon)
    wd, L = d @ w, len(x)

    def negative_dual(z: np.ndarray) -> float:
        return -float(z[:L].sum() + z[L:] @ x)

    feasible = {"type": "ineq", "fun": lambda z: -(d @ z[:L]) - (d @ z[L:])**2 / (4.0 * wd)}
    best = -math.inf
    nu_mu = np.zeros(2 * L)
    for seed in range(8):                                   # a few starts: SLSQP may stop short on one
        start = np.concatenate([np.full(L, -10.0), np.random.default_rng(seed).normal(size=L)])
        fit = minimize(negative_dual, start, constraints=[feasible], method="SLSQP",
                       options={"maxiter": 5000, "ftol": 1e-15})
        value = certified_lower(x, w, d, fit.x[:L], fit.x[L:])
        if value > best:
            best, nu_mu = value, fit.x
    top = (math.exp(epsilon) + 1.0) / (math.exp(epsilon) - 1.0)
    reach = 4.0 * top * max(1.0, (math.exp(epsilon / 2) + 1.0) / (math.exp(epsilon / 2) - 1.0))
    touching = (d @ nu_mu[L:]) / (2.0 * wd)
    a = np.concatenate([np.repeat(np.linspace(-reach, reach, grid)[None, :], len(d), axis=0),
                        touching[:, None]], axis=1)          # (rays, outputs per ray)
    ray_of = np.repeat(np.arange(len(d)), a.shape[1])
    a = a.ravel()
    columns = d[ray_of]                                     # (variables, L)
    lp = linprog(a**2 * wd[ray_of], A_eq=np.vstack([columns.T, (columns * a[:, None]).T]),
                 b_eq=np.concatenate([np.ones(L), x]), bounds=(0, None), method="highs",
                 options={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})
    if not lp.success:
        raise RuntimeError(f"the primal LP failed at eps {epsilon}: {lp.message}")
    used = lp.x > 1e-12
    outputs = np.column_stack([a[used], lp.x[used], sets[ray_of[used]]])
    return Bound(best, float(lp.fun - w @ x**2), outputs)


def e_variance(x: np.ndarray, w: np.ndarray, epsilon: float) -> float:
    """Per-report variance of E's mean over the levels (WYZ eq. 16's linear query with weights x, exact)."""
    protocol = PureProtocol.for_mechanism_e(MechanismE(epsilon, len(x)))
    n = 1_000_000
    return float(protocol.linear_variance_estimate(x[None, :], w * n, n)[0]) / n


def hm_variance(w_second_moment: float, epsilon: float) -> float:
    """HM's per-report variance at the data, :math:`a\\,m_2 + c` (the sampler's grid-exact coefficients)."""
    c = HybridMechanism(epsilon).variance_coefficients()
    return c.a * w_second_moment + c.c + c.rounding


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    try:
        ratings = np.loadtxt(gzip.open(dataset_path("movielens-100k/u.data.gz"), "rt"), dtype=np.int64)[:, 2]
    except DatasetNotFound as exc:
        print(f"skipped: {exc}")
        return 0
    span = NumericRange(1, 5, "rating")
    x = span.to_unit(np.arange(1.0, 6.0))
    w = np.bincount(ratings, minlength=6)[1:] / ratings.size
    rows = []
    for eps in EPSILONS:
        bound = least_variance(x, w, eps)
        e = e_variance(x, w, eps)
        rows.append({"epsilon": eps, "lower": bound.lower, "upper": bound.upper, "outputs": len(bound.outputs),
                     "hm": hm_variance(float(w @ x**2), eps), "e_levels": e, "lower_over_e": bound.lower / e,
                     "goal_half_e": 0.5 * e})
        print(f"eps {eps}: least variance {bound.lower:.4f} (a mechanism with {len(bound.outputs)} outputs reaches "
              f"{bound.upper:.4f}); HM {rows[-1]['hm']:.4f}; E {e:.4f}; least / E {bound.lower / e:.3f}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "bound.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    lines = ["# The least variance of the mean on MovieLens's 5 ratings (any ε-LDP mechanism, per-device unbiased)",
             "", f"Command: `cd benchmarks && python bound_numeric_mean.py` (the script's docstring gives the proof). "
             f"Per-report variance on [−1, 1] (n × Var of the mean); shares of the ratings 1-5: "
             f"{', '.join(f'{v:.4f}' for v in w)}.", "",
             "| ε | least possible (certified) | reached by a mechanism with | outputs | HM at the data | E over the 5 "
             "levels | least / E | goal: 0.5x E |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['epsilon']} | {r['lower']:.4f} | {r['upper']:.4f} | {r['outputs']} | {r['hm']:.4f} | "
                     f"{r['e_levels']:.4f} | {r['lower_over_e']:.3f} | {r['goal_half_e']:.4f} |")
    lines += ["", *(f"- {k}: {v}" for k, v in machine_info().items())]
    (args.out / "bound.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
