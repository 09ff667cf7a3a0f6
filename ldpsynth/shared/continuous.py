"""Mechanism E on continuous data (WYZ §V-A, Prop. 1): discretise, release, answer Lipschitz queries.

A row :math:`x \\in [lo, hi]^d` is discretised coordinate-wise to ``k`` bits
(:class:`~ldpsynth.shared.attributes.ContinuousAttribute`, one per coordinate), released with E over the
product domain of :math:`2^{kd}` cells, and a statistical query with row function :math:`\\varphi`
is answered by the companion estimator (eq. 17) applied to the weight table
:math:`W[v] = \\varphi(\\hat x_v)`, :math:`\\hat x_v` the representative of cell :math:`v`. Everything
goes through the normal collection schema, so the same release can come from devices over gRPC.

**Discretisation error.** For an :math:`L`-Lipschitz :math:`\\varphi` (Euclidean norm) and cell
representative the centre, :math:`|\\varphi(x) - \\varphi(\\hat x)| \\le L\\,\\|x-\\hat x\\|_2 \\le
\\frac L2\\sqrt{\\sum_i w_i^2}` with :math:`w_i` the bucket widths (:func:`discretisation_bound`); WYZ §V-A
uses the lower edge, for which the bound is twice that (``representative="lower"``).

**Bits.** WYZ §V-A balances the two error terms for :math:`d = 1` with :math:`2^{2k} = \\sqrt n`
(:func:`~ldpsynth.shared.attributes.bits_for_rows`). For :math:`d` coordinates the estimation error grows
like :math:`|D|/\\sqrt n = 2^{kd}/\\sqrt n` (eq. 20 with :math:`g(\\epsilon) \\approx |D|e^{-\\epsilon}`) while
the discretisation error is :math:`O(2^{-k})`; balancing gives :math:`2^{k(d+1)} = \\sqrt n`,
:math:`k = \\log_2 n / (2(d+1))` (derived here), which is WYZ's choice (§V-A) at :math:`d = 1`
(:func:`bits_for_dimension`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.schema import MAX_BITS, ContinuousAttribute, Schema
from ldpsynth.shared.validation import check_choice, check_epsilon, check_int

__all__ = [
    "bits_for_dimension",
    "continuous_schema",
    "cell_representatives",
    "function_weights",
    "discretisation_bound",
]

REPRESENTATIVES = ("centre", "lower")
#: Largest private domain whose cell representatives we materialise (|D| x d floats).
MAX_CELLS = 1 << 22


def bits_for_dimension(n: int, d: int) -> int:
    """:math:`k = \\mathrm{round}(\\log_2 n / (2(d+1)))`, at least 1: :math:`2^{k(d+1)} \\approx \\sqrt n`
    (= :func:`bits_for_rows` at d = 1)."""
    n = check_int(n, "n", 1)
    d = check_int(d, "d", 1)
    return int(min(MAX_BITS, max(1, round(math.log2(n) / (2 * (d + 1))))))


def continuous_schema(names: Sequence[str], lo: npt.ArrayLike, hi: npt.ArrayLike, epsilon: float, *,
                      n: int | None = None, bits: int | None = None, name: str = "continuous") -> Schema:
    """A collection whose private row is ``d`` continuous attributes on public bounds ``[lo_i, hi_i]``.

    ``bits`` per attribute, or :func:`bits_for_dimension` of the expected number of rows ``n``.
    """
    names = list(names)
    low = np.atleast_1d(np.asarray(lo, dtype=np.float64))
    high = np.atleast_1d(np.asarray(hi, dtype=np.float64))
    if not names or low.shape != (len(names),) or high.shape != (len(names),):
        raise ValidationError("bounds", f"one lo and one hi per attribute ({len(names)} names)",
                              f"got shapes {low.shape} and {high.shape}")
    if bits is None:
        if n is None:
            raise ValidationError("bits", "an integer in [1, 24], or give the expected number of rows n", "neither")
        bits = bits_for_dimension(n, len(names))
    attrs = tuple(ContinuousAttribute(a, False, float(x), float(y), bits) for a, x, y in zip(names, low, high))
    return Schema(name, check_epsilon(epsilon), attrs)


def _continuous_private(schema: Schema) -> tuple[ContinuousAttribute, ...]:
    attrs = schema.private_attributes
    bad = [a.name for a in attrs if not isinstance(a, ContinuousAttribute)]
    if bad:
        raise ValidationError("schema", "private attributes that are all continuous", f"{bad[0]!r} is not")
    if schema.private_domain_size > MAX_CELLS:
        raise ValidationError("schema", f"a private domain of at most {MAX_CELLS} cells (fewer bits)",
                              f"got {schema.private_domain_size}")
    return attrs  # type: ignore[return-value]


def cell_representatives(schema: Schema, representative: str = "centre") -> np.ndarray:
    """The point :math:`\\hat x_v` of every private code ``v`` (mixed-radix order), shape ``(|D|, d)``.

    ``"centre"``: bucket centres (halves WYZ's discretisation error); ``"lower"``: lower edges
    (WYZ's :math:`\\hat x` of §V-A, what :meth:`ContinuousAttribute.decode` returns).
    """
    check_choice(representative, "representative", REPRESENTATIVES)
    attrs = _continuous_private(schema)
    digits = schema.private_digits(np.arange(schema.private_domain_size, dtype=np.int64))
    shift = 0.5 if representative == "centre" else 0.0
    return np.stack([a.lo + (digits[a.name] + shift) * a.width for a in attrs], axis=1)


def function_weights(schema: Schema, function: Callable[[np.ndarray], np.ndarray],
                     representative: str = "centre") -> np.ndarray:
    """Weight tables :math:`W_q[v] = f_q(\\hat x_v)` for a batch of row functions, shape ``(Q, |D|)``.

    ``function`` maps ``(|D|, d)`` points (in the attributes' own units) to ``(|D|,)`` or ``(|D|, Q)``
    values. Use with :func:`~ldpsynth.shared.queries.packed.linear_batch` (``normalization="mean"`` for
    :math:`\\frac1n\\sum_i f(x_i)`) and :func:`~ldpsynth.shared.estimators.engine.estimate`.
    """
    points = cell_representatives(schema, representative)
    values = np.asarray(function(points), dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2 or values.shape[0] != len(points) or not np.isfinite(values).all():
        raise ValidationError("function", f"finite values of shape ({len(points)},) or ({len(points)}, Q)",
                              f"returned shape {values.shape}")
    return np.ascontiguousarray(values.T)


def discretisation_bound(schema: Schema, lipschitz: float, representative: str = "centre") -> float:
    """:math:`\\max_x |\\varphi(x) - \\varphi(\\hat x)| \\le L\\,c\\sqrt{\\sum_i w_i^2}`, :math:`c = 1/2` (centre)
    or 1 (lower)."""
    check_choice(representative, "representative", REPRESENTATIVES)
    lip = check_epsilon(lipschitz, "lipschitz")
    widths = np.array([a.width for a in _continuous_private(schema)])
    return lip * (0.5 if representative == "centre" else 1.0) * float(np.sqrt((widths**2).sum()))
