"""Companion estimators of mechanism E (WYZ §IV-A), the math: unbiased (eq. 17), proper (eq. 21), error bars.

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.estimators.formulas``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms.registry import Mechanism
from ldpsynth.shared.queries.batch import QueryBatch
from ldpsynth.shared.queries.model import MEAN, NORMALIZATIONS, RANGE, normalization_name
from ldpsynth.shared.validation import check_epsilon, check_int, check_probability

if TYPE_CHECKING:
    from ldpsynth.shared.guarantees import Guarantees

__all__ = [
    "ANSWER_CHUNK",
    "ANSWER_FIELDS",
    "Debias",
    "BlockSums",
    "cut_block_sums",
    "AnswerColumns",
    "Answers",
    "rms_bound",
    "minimax_lower_bound",
    "answers_from_sums",
]

#: Queries per step of :func:`answers_from_sums`: its temporaries stay in cache and are reused.
ANSWER_CHUNK = 1 << 15
#: Fields of one answer, in output order.
ANSWER_FIELDS = ("label", "estimate", "proper_estimate", "proper_kind", "std_error", "ci_low", "ci_high", "level",
                 "bound", "bound_proper", "n", "epsilon")


@dataclass(frozen=True)
class Debias:
    """The constants of eq. 17 for mechanism E: :math:`p, q, r = p - q, s = 1 - r = kq`."""

    p: float
    q: float
    k: int

    @classmethod
    def of(cls, mechanism: MechanismE) -> Debias:
        return cls(mechanism.keep_probability, mechanism.lie_probability, mechanism.domain_size)

    @property
    def r(self) -> float:
        return self.p - self.q

    @property
    def s(self) -> float:
        return self.k * self.q


# ----- per-query sums over one block ---------------------------------------------------------
@dataclass
class BlockSums:
    """Per-query sums over the rows of a block (un-normalised), merged across blocks' row sets.

    ``t_hat`` is :math:`\\sum_{g,v} W\\hat h` (eq. 17 times Z); ``v_hat`` is
    :math:`\\sum_{g,v}(W - m_g)^2 (N + r n_g/k)` (the variance times :math:`(rZ)^2/s`); ``low``,
    ``high``, ``spread`` are :math:`\\sum_i a_i, \\sum_i b_i, \\sum_i c_i`; ``a_min``, ``b_max``,
    ``c_min`` and ``varying`` are :math:`a, b, c, n'` of eq. 20 over the non-constant rows, except
    that when every row is constant (:math:`n' = 0`) ``a_min`` and ``b_max`` are the least and the
    greatest of the rows' constants (equal: the query is one known number on every row);
    ``step`` is the common lattice step :math:`d` (0: every row constant; NaN: no lattice).

    A frequency oracle's sums (docs/internals.md, ``ldpsynth.shared.estimators.tallies``) hold the same
    fields with its estimates: ``t_hat`` over the projected counts :math:`\\hat c'`, ``v_hat`` the unbiased
    plug-in variance itself (times :math:`Z^2`), ``step`` NaN (its answers are clipped), and ``v_worst``
    the largest variance over the true values with the same group sizes (times :math:`Z^2`): the square of
    its bound. ``v_worst`` is 0 for E, whose bound is eq. 20.
    """

    t_hat: np.ndarray
    v_hat: np.ndarray
    low: np.ndarray
    high: np.ndarray
    spread: np.ndarray
    a_min: np.ndarray
    b_max: np.ndarray
    c_min: np.ndarray
    varying: np.ndarray
    step: np.ndarray
    v_worst: np.ndarray = None  # type: ignore[assignment]  # zeros when not given (E)

    def __post_init__(self) -> None:
        if self.v_worst is None:
            self.v_worst = np.zeros(len(self.t_hat))

    @classmethod
    def empty(cls, size: int) -> BlockSums:
        """The sums over no rows (the identity of :meth:`merge`); ``step`` NaN until computed."""
        return cls(np.zeros(size), np.zeros(size), np.zeros(size), np.zeros(size), np.zeros(size),
                   np.full(size, np.inf), np.full(size, -np.inf), np.full(size, np.inf), np.zeros(size),
                   np.full(size, np.nan))

    def rows(self, part: slice) -> BlockSums:
        """The sums of the queries ``part`` (views, no copies)."""
        return BlockSums(*(getattr(self, f.name)[part] for f in fields(self)))

    def merge(self, other: BlockSums) -> BlockSums:
        """The sums over the union of two disjoint row sets."""
        a, b = self.step, other.step
        with np.errstate(invalid="ignore"):
            step = np.where((a == b) | (b == 0), a, np.where(a == 0, b, np.nan))
        # a, b over the non-constant rows once either side has some; over the constants while neither has
        mine, theirs = self.varying > 0, other.varying > 0
        a_min = np.where(mine == theirs, np.minimum(self.a_min, other.a_min), np.where(mine, self.a_min, other.a_min))
        b_max = np.where(mine == theirs, np.maximum(self.b_max, other.b_max), np.where(mine, self.b_max, other.b_max))
        return BlockSums(self.t_hat + other.t_hat, self.v_hat + other.v_hat, self.low + other.low,
                      self.high + other.high, self.spread + other.spread, a_min, b_max,
                      np.minimum(self.c_min, other.c_min), self.varying + other.varying, step,
                      self.v_worst + other.v_worst)


def cut_block_sums(m: npt.ArrayLike, y1: npt.ArrayLike, mechanism: MechanismE) -> BlockSums:
    """Cut queries (eqs. 33-34) from their pair totals
    (:func:`~ldpsynth.shared.estimators.engine.cut_pair_totals`).

    With :math:`\\varphi(v) = [\\mathrm{edge}(v) = 1]`, :math:`\\sum_v \\varphi(v) = k/2`, so eq. 17 reads
    :math:`(y_1 - q\\,(k/2)\\,m)/r` with :math:`y_1 = \\sum_{(i,j) \\in S \\times T} \\varphi(Y_{ij})`; for
    :math:`k = 2` this is eq. 34, :math:`\\frac{1+e^{-\\epsilon}}{1-e^{-\\epsilon}} y_1 -
    \\frac{e^{-\\epsilon}}{1 - e^{-\\epsilon}} m` (m = |S||T| when every pair has one row). Here
    :math:`(\\varphi(v) - m_g)^2 = 1/4` for every v, so the variance sum is :math:`m(1 + r)/4`.
    """
    debias = Debias.of(mechanism)
    m, y1 = np.asarray(m, dtype=np.float64), np.asarray(y1, dtype=np.float64)
    ones, zeros = np.ones(len(m)), np.zeros(len(m))
    live = m > 0
    return BlockSums(t_hat=(y1 - debias.q * (debias.k / 2) * m) / debias.r,    # eq. 34 (times Z)
                     v_hat=m * (1.0 + debias.r) / 4.0, low=zeros, high=m, spread=m.copy(),
                     a_min=np.where(live, 0.0, np.inf), b_max=np.where(live, 1.0, -np.inf),
                     c_min=np.where(live, 1.0, np.inf), varying=m.copy(), step=ones)


# ----- answers -------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class AnswerColumns:
    """Answers to a batch of queries, one entry per compiled query, as columns in batch order.

    ``exact[j]`` says whether ``proper_estimate[j]`` is the exact nearest point of
    :math:`q_\\varphi(D^n)` (eq. 21) or the estimate clipped to the feasible range. ``bound`` is
    the RMS bound of eq. 20, ``bound_proper`` that of eq. 22. Compiled query ``j`` is labelled
    ``q<j>`` unless a subclass knows better (:class:`Answers`: the batch's labels). ``guarantees``
    (:class:`~ldpsynth.shared.guarantees.Guarantees`, when stated): the local ε0 and, for a shuffled
    collection, the central (ε, δ) of the batch with the group counts it comes from; every record
    then carries ``local_epsilon``, ``rows_per_device`` and, shuffled, ``central_epsilon`` and
    ``central_delta`` (the batch's weakest group).
    """

    estimate: np.ndarray
    proper_estimate: np.ndarray
    exact: np.ndarray
    std_error: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    bound: np.ndarray
    bound_proper: np.ndarray
    level: float
    n: int
    epsilon: float
    guarantees: Guarantees | None = field(default=None, kw_only=True)

    def __len__(self) -> int:
        return len(self.estimate)

    def label(self, j: int) -> str:
        """The label of answer ``j``."""
        return f"q{j}"

    def labels_sent(self) -> tuple[str, ...] | None:
        """The labels the query service sends with the answers.

        Returns
        -------
        tuple of str or None
            One label per answer; ``None``: the default ``q<j>`` (none sent).
        """
        return None

    def methods_sent(self) -> tuple[str, ...] | None:
        """How each answer was computed, as the query service sends it.

        Returns
        -------
        tuple of str or None
            ``"analytic"`` or ``"model"`` per answer of a wide collection's parent
            (:class:`~ldpsynth.shared.wide.parent.WideAnswers`); ``None`` for every other collection
            (nothing sent, and no ``method`` in the records).
        """
        return None

    def rows_sent(self) -> np.ndarray | None:
        """The rows each answer reads, as the query service sends them.

        Returns
        -------
        numpy.ndarray or None
            One count per answer (int64), e.g. a grouped numeric answer's group size :math:`n_g`
            (:class:`~ldpsynth.shared.numeric.answering.answers.NumericAnswers`); ``None``: every answer reads
            ``n`` (nothing sent, and no ``rows`` in the records).
        """
        return None

    def origin(self, j: int) -> int:
        """The index of the input query answer ``j`` comes from (a marginal gives several answers).

        Parameters
        ----------
        j : int
            The answer's index in batch order.

        Returns
        -------
        int
        """
        return j

    def record(self, j: int, *, _summary: dict[str, Any] | None = None) -> dict[str, Any]:
        """Answer ``j`` as a JSON-ready dict with the fields :data:`ANSWER_FIELDS` (and the guarantees').

        Parameters
        ----------
        j : int
            The answer's index in batch order.

        Returns
        -------
        dict
            Field name -> value: ``label``, ``estimate``, ``proper_estimate``, ``proper_kind``,
            ``std_error``, ``ci_low``, ``ci_high``, ``level``, ``bound``, ``bound_proper``, ``n``,
            ``epsilon`` and the guarantees' fields.

        Raises
        ------
        IndexError
            ``j`` outside the answers.
        """
        if _summary is None:
            _summary = self.guarantees.summary() if self.guarantees is not None else {}
        return {"label": self.label(j), "estimate": float(self.estimate[j]),
                "proper_estimate": float(self.proper_estimate[j]),
                "proper_kind": "exact" if self.exact[j] else "clipped", "std_error": float(self.std_error[j]),
                "ci_low": float(self.ci_low[j]), "ci_high": float(self.ci_high[j]), "level": self.level,
                "bound": float(self.bound[j]), "bound_proper": float(self.bound_proper[j]), "n": self.n,
                "epsilon": self.epsilon, **_summary}

    def records(self) -> list[dict[str, Any]]:
        """Every answer as a JSON-ready dict (:meth:`record`), in batch order.

        Returns
        -------
        list of dict
            With each answer's ``method`` too when :meth:`methods_sent` states them (a wide parent's), and its
            ``rows`` when :meth:`rows_sent` states them (a numeric collection's).
        """
        summary = self.guarantees.summary() if self.guarantees is not None else {}
        records = [self.record(j, _summary=summary) for j in range(len(self))]
        methods = self.methods_sent()
        if methods is not None:     # a wide parent's answers: how each was computed
            for record, method in zip(records, methods):
                record["method"] = method
        rows = self.rows_sent()
        if rows is not None:        # the rows each answer reads (a group's n_g)
            for record, count in zip(records, rows.tolist()):
                record["rows"] = count
        return records


@dataclass(frozen=True, eq=False)
class Answers(AnswerColumns):
    """The answers :func:`~ldpsynth.shared.estimators.engine.estimate` gives to a
    :class:`~ldpsynth.shared.queries.batch.QueryBatch` (labelled by it)."""

    batch: QueryBatch

    def label(self, j: int) -> str:
        return self.batch.label(j)

    def labels_sent(self) -> tuple[str, ...] | None:
        return self.batch.labels

    def origin(self, j: int) -> int:
        return int(self.batch.origins[j])


def _normalizers(parts: BlockSums, norms: np.ndarray, n: int, positions: np.ndarray, origins: np.ndarray) -> np.ndarray:
    """:math:`Z`: eq. 10 (:math:`\\sum_i c_i`), 1 or n."""
    z = np.where(norms == RANGE, parts.spread, np.where(norms == MEAN, float(n), 1.0))
    bad = np.flatnonzero(z <= 0)
    if bad.size:
        raise ValidationError(f"queries[{origins[positions[bad[0]]]}].normalization",
                              "'sum' or 'mean' for a query that is constant on every row",
                              "the 'range' normaliser sum_i c_i (WYZ eq. 10) is 0 on this synthetic database")
    return z


def _proper(parts: BlockSums, est: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eq. 21: nearest lattice point where :math:`q_\\varphi(D^n)` is a lattice, else clip to its range."""
    proper = np.clip(est, parts.low / z, parts.high / z)
    exact = np.isfinite(parts.step)
    idx = np.flatnonzero(exact)
    step = parts.step[idx]
    unit = np.where(step > 0, step, 1.0)
    j = np.clip(np.rint((parts.t_hat[idx] - parts.low[idx]) / unit), 0.0, (parts.high[idx] - parts.low[idx]) / unit)
    proper[idx] = (parts.low[idx] + np.where(step > 0, j * step, 0.0)) / z[idx]
    return proper, exact


def _known_value(parts: BlockSums, z: np.ndarray, n: int) -> np.ndarray:
    """The answer of a query whose row function is constant on every row (:math:`n' = 0`), where it
    needs no estimate: :math:`q_\\varphi(x) = \\sum_i a_i / Z` whatever the data. When every row holds
    the same constant :math:`c` (``a_min == b_max``) this is :math:`c\\,n/Z` with :math:`n/Z` = 1 or
    n: :math:`c` itself for ``mean`` and :math:`c n` rounded once for ``sum``, the float nearest the
    exact answer (``t_hat / z`` misses it by an ulp or more: the debiasing of eq. 17 rounds). Other
    constant queries get ``low / z`` (their constants summed in floating point). Meaningful only
    where ``varying == 0``."""
    return np.where(parts.a_min == parts.b_max, parts.a_min * (n / z), parts.low / z)


def rms_bound(varying: npt.ArrayLike, a: npt.ArrayLike, b: npt.ArrayLike, c: npt.ArrayLike, normalizer: str,
              n: int, mechanism: MechanismE) -> np.ndarray:
    """Square root of the worst-case squared error, eq. 20, for the normalisation ``normalizer``
    (a name of :data:`~ldpsynth.shared.queries.model.NORMALIZATIONS` or a former name).

    .. math::  \\sqrt{n'}\\,(b - a) / (r Z_{20}), \\quad Z_{20} = n'c\\ (\\texttt{range}),\\ 1\\ (\\texttt{sum}),
               \\ n\\ (\\texttt{mean});

    with ``range`` and :math:`n' = n` this is :math:`\\sqrt{(b-a)^2 g(\\epsilon)^2 / (c^2 (1 - e^{-\\epsilon})^2 n)}`,
    eq. 20 itself. ``varying`` is :math:`n'`, the number of rows whose row function is not constant.
    """
    nv, a_, b_, c_ = (np.asarray(x, dtype=np.float64) for x in (varying, a, b, c))
    r = Debias.of(mechanism).r
    with np.errstate(invalid="ignore", divide="ignore"):  # rows with n' = 0 hold a = inf, b = -inf
        z20 = {"range": nv * c_, "sum": np.ones_like(nv),
               "mean": np.full_like(nv, float(n))}[normalization_name(normalizer, "normalizer")]
        return np.where(nv > 0, np.sqrt(nv) * (b_ - a_) / (r * z20), 0.0)


def minimax_lower_bound(n: int, epsilon: float, domain_size: int) -> float:
    """Leading term of the minimax lower bound eq. 29 on the worst-case squared error (``range`` queries).

    .. math::  \\frac{(1 - \\Phi(1))^2}{16\\,k\\,(1 + e^{\\epsilon}/(k - 1))^3}\\,\\frac1n

    For :math:`k = 2^l` this is eq. 29's :math:`2^{l+4}` form. The proof (Lemma 4, Appendix C:
    uniform :math:`X, Z` on :math:`D^n`, Hamming-distance queries, :math:`\\sigma^2 = \\rho = 2/k`)
    uses :math:`k` only through these expressions, so it holds verbatim for any :math:`|D| = k \\ge 2`;
    the :math:`o(1/n)` term is dropped, so this is the asymptotic value. It bounds every
    ε-DP mechanism, E included, from below; compare it with ``bound**2``.
    """
    n = check_int(n, "n", 1)
    eps = check_epsilon(epsilon)
    k = check_int(domain_size, "domain_size", 2)
    tail = 1.0 - NormalDist().cdf(1.0)
    return tail**2 / (16.0 * k * (1.0 + math.exp(eps) / (k - 1)) ** 3) / n


def _as_slice(positions: np.ndarray) -> np.ndarray | slice:
    """``positions`` as a slice when they are consecutive (array-built batches): assignments through a
    slice copy memory, through an index array they gather and scatter."""
    if len(positions) and positions[-1] - positions[0] + 1 == len(positions) and \
            (len(positions) == 1 or bool((np.diff(positions) == 1).all())):
        return slice(int(positions[0]), int(positions[-1]) + 1)
    return positions


def answers_from_sums(batch: QueryBatch, sums: Sequence[BlockSums], n: int, mechanism: Mechanism, *,
                      level: float = 0.95) -> Answers:
    """The answers of ``batch`` from the :class:`BlockSums` of each of its blocks over ``n`` rows:
    eq. 17 estimates, standard errors and normal intervals, eq. 21 proper estimates, eq. 20/22 bounds.

    A frequency oracle's sums (``mechanism`` not E) give its estimates, the square root of its plug-in
    variance as standard error, the estimate clipped to the feasible range as proper estimate, and
    ``sqrt(v_worst)`` as both bounds (docs/internals.md, ``ldpsynth.shared.estimators.tallies``).

    This is the last step of :func:`~ldpsynth.shared.estimators.engine.estimate`; a distributed
    evaluator computes the sums where the data is (shards), merges them, and calls it once.
    """
    level = check_probability(level, "level")
    n = check_int(n, "n", 1)
    if len(sums) != len(batch.blocks):
        raise ValidationError("sums", f"one BlockSums per block ({len(batch.blocks)})", f"got {len(sums)}")
    e_mechanism = mechanism if isinstance(mechanism, MechanismE) else None
    debias = None if e_mechanism is None else Debias.of(e_mechanism)
    z_level = NormalDist().inv_cdf(0.5 + level / 2.0)
    columns: dict[str, Any] = {name: np.empty(batch.size) for name in
               ("estimate", "proper_estimate", "std_error", "ci_low", "ci_high", "bound", "bound_proper")}
    exact_all = np.zeros(batch.size, bool)
    for block, block_sums in zip(batch.blocks, sums):
        for start in range(0, len(block.positions), ANSWER_CHUNK):
            part = slice(start, start + ANSWER_CHUNK)
            parts, norms, positions = block_sums.rows(part), block.normalization[part], block.positions[part]
            z = _normalizers(parts, norms, n, positions, batch.origins)
            est = parts.t_hat / z                                              # eq. 17
            if debias is None:  # a frequency oracle: the plug-in variance (can be negative by chance: 0)
                se = np.sqrt(np.maximum(parts.v_hat, 0.0)) / z
            else:
                se = np.sqrt(debias.s * parts.v_hat) / (debias.r * z)
            proper, exact = _proper(parts, est, z)                             # eq. 21
            known = parts.varying == 0
            if known.any():  # constant on every row: the value itself, no error
                value = _known_value(parts, z, n)
                est, proper = np.where(known, value, est), np.where(known, value, proper)
                se, exact = np.where(known, 0.0, se), exact | known
            bound = np.empty(len(z))
            for code in np.unique(norms) if e_mechanism is not None else ():
                assert e_mechanism is not None
                name = NORMALIZATIONS[code]
                if (norms == code).all():     # one normalisation: no masking of every array
                    bound[:] = rms_bound(parts.varying, parts.a_min, parts.b_max, parts.c_min, name, n, e_mechanism)
                    continue
                sel = norms == code
                bound[sel] = rms_bound(parts.varying[sel], parts.a_min[sel], parts.b_max[sel], parts.c_min[sel],
                                       name, n, e_mechanism)                   # eq. 20 (RMS)
            if debias is None:  # the worst case over the true values; clipping to an interval that holds the
                bound = np.sqrt(parts.v_worst) / z  # truth never moves an estimate away from it
            pos = _as_slice(positions)
            columns["estimate"][pos], columns["std_error"][pos], columns["proper_estimate"][pos] = est, se, proper
            columns["ci_low"][pos], columns["ci_high"][pos] = est - z_level * se, est + z_level * se
            columns["bound"][pos] = bound
            columns["bound_proper"][pos] = bound if debias is None else 2.0 * bound  # eq. 22 (RMS)
            exact_all[pos] = exact
    return Answers(batch=batch, exact=exact_all, level=level, n=n, epsilon=mechanism.epsilon, guarantees=None,
                   **columns)
