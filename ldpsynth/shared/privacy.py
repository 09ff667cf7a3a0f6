"""The privacy-boundary checker: does a mechanism E really deliver ε-DP? (OpenDP style.)

The math and the reasoning behind it: docs/internals.md, ``ldpsynth.shared.privacy``.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Protocol

from ldpsynth.shared.errors import LdpsynthError, ValidationError
from ldpsynth.shared.validation import check_epsilon, check_int

__all__ = [
    "ExactRandomizedResponse",
    "PrivacyGuaranteeError",
    "max_privacy_loss",
    "log_ratio_exceeds",
    "delivered_epsilon",
    "ratio_within_epsilon",
    "satisfies_epsilon_dp",
    "assert_epsilon_dp",
]

#: Significant digits of the value returned by :func:`max_privacy_loss` (a figure to print; decisions use
#: :func:`log_ratio_exceeds`).
DEFAULT_DIGITS = 60
#: Precision at which the exact comparison starts, and beyond which it gives up (never reached:
#: see the module docstring; a guard against malformed input only).
_START_DIGITS = 40
_MAX_DIGITS = 20_000


class ExactRandomizedResponse(Protocol):
    """What the checker reads: the integer weights of a k-ary randomized response."""

    domain_size: int
    keep_weight: int
    lie_weight: int
    total_weight: int


class PrivacyGuaranteeError(LdpsynthError):
    """A mechanism does not satisfy the ε-DP guarantee it was checked against."""


def _weights(mechanism: ExactRandomizedResponse) -> tuple[int, int, int]:
    """``(k, A, L)`` after checking that they describe a probability distribution over ``k`` outputs."""
    k = check_int(getattr(mechanism, "domain_size", None), "mechanism.domain_size", 2)
    a, l, n = (check_int(getattr(mechanism, name, None), f"mechanism.{name}", 0)
               for name in ("keep_weight", "lie_weight", "total_weight"))
    if a + l == 0:
        raise ValidationError("mechanism.keep_weight", "non-negative weights, not both zero",
                              f"got keep_weight={a}, lie_weight={l}")
    if n != a + (k - 1) * l:
        raise ValidationError("mechanism.total_weight", "keep_weight + (domain_size - 1) * lie_weight",
                              f"got {n}, expected {a + (k - 1) * l}")
    return k, a, l


def max_privacy_loss(mechanism: ExactRandomizedResponse, *, digits: int = DEFAULT_DIGITS) -> Decimal:
    """The worst-case privacy loss :math:`\\max_{x,x',y} \\ln(\\Pr[y \\mid x]/\\Pr[y \\mid x']) = |\\ln(A/L)|`.

    Computed from the integer weights ``A = keep_weight``, ``L = lie_weight`` (eq. 16: the keep and
    lie probabilities are :math:`A/N` and :math:`L/N`), to ``digits`` significant digits
    (``Decimal``: a figure to print). ``Decimal(0)`` when
    :math:`A = L` (the output ignores the input); ``Decimal('Infinity')`` when one weight is 0
    (some output is possible under one input and impossible under another). To compare with an ε,
    use :func:`satisfies_epsilon_dp`, which is exact rather than ``digits``-accurate.

    >>> from ldpsynth.shared.mechanism import MechanismE
    >>> m = MechanismE(1.0, 5)
    >>> float(max_privacy_loss(m)) <= m.epsilon <= 1.0
    True
    """
    _, a, l = _weights(mechanism)
    digits = check_int(digits, "digits", 10, _MAX_DIGITS)
    if a == l:
        return Decimal(0)
    if min(a, l) == 0:
        return Decimal("Infinity")
    big, small = max(a, l), min(a, l)
    with localcontext() as ctx:
        ctx.prec = digits + 10
        loss = Decimal(big).ln() - Decimal(small).ln()
    with localcontext() as ctx:
        ctx.prec = digits
        return +loss


def _log_ratio_interval(big: int, small: int, digits: int) -> tuple[Fraction, Fraction]:
    """Exact rational bounds ``lo <= ln(big/small) <= hi`` from ``digits``-digit logarithms.

    ``Decimal.ln`` is correctly rounded (half an ulp); one whole ulp per logarithm is allowed.
    """
    with localcontext() as ctx:
        ctx.prec = digits
        ln_big, ln_small = Decimal(big).ln(), Decimal(small).ln()

    def ulp(x: Decimal) -> Fraction:
        return Fraction(10) ** (x.adjusted() - digits + 1)

    mid = Fraction(ln_big) - Fraction(ln_small)
    err = ulp(ln_big) + ulp(ln_small)
    return mid - err, mid + err


def _loss_exceeds(mechanism: ExactRandomizedResponse, epsilon: float) -> bool:
    """Exactly whether :math:`|\\ln(A/L)| > \\epsilon` (``epsilon`` taken as the exact value of the float)."""
    _, a, l = _weights(mechanism)
    if a == l:
        return False  # loss 0 < ε
    if min(a, l) == 0:
        return True  # infinite loss
    return log_ratio_exceeds(max(a, l), min(a, l), epsilon)


def log_ratio_exceeds(big: int, small: int, epsilon: float) -> bool:
    """Exactly whether :math:`\\ln(\\mathrm{big}/\\mathrm{small}) > \\epsilon` for integers
    ``big >= small >= 1`` and the exact value of the float ``epsilon`` (module docstring: the
    interval of :func:`_log_ratio_interval` is narrowed until it lies on one side)."""
    if big == small:
        return epsilon < 0
    bound = Fraction(epsilon)  # exact: Fraction(float) is the float's exact binary value
    digits = _START_DIGITS
    while digits <= _MAX_DIGITS:
        lo, hi = _log_ratio_interval(big, small, digits)
        if hi <= bound:
            return False
        if lo > bound:
            return True
        digits *= 2
    raise ValidationError("epsilon", "a float not within 10^-20000 of the privacy loss",
                          "undecidable at the maximum precision")  # pragma: no cover (impossible, see module doc)


def delivered_epsilon(big: int, small: int) -> float:
    """The ε an exact ratio delivers: the smallest float ``x`` with :math:`\\ln(\\mathrm{big}/\\mathrm{small}) \\le x`,
    decided by :func:`log_ratio_exceeds` (the one exact comparison), for integers ``big >= small >= 1``.

    >>> x = delivered_epsilon(3, 1)
    >>> log_ratio_exceeds(3, 1, x), log_ratio_exceeds(3, 1, math.nextafter(x, 0.0))
    (False, True)
    >>> delivered_epsilon(7, 7)
    0.0
    """
    big = check_int(big, "big", 1)
    small = check_int(small, "small", 1, big)
    if big == small:
        return 0.0
    x = math.log1p((big - small) / small)  # within a few ulps (int / int rounds correctly): walk to the exact value
    while not log_ratio_exceeds(big, small, below := math.nextafter(x, 0.0)):
        x = below
    while log_ratio_exceeds(big, small, x):
        x = math.nextafter(x, math.inf)
    return x


def ratio_within_epsilon(ratio: Fraction | None, epsilon: float) -> bool:
    """Whether a law whose worst output ratio over two inputs is ``ratio`` (``None``: unbounded, an output
    possible under one input and impossible under another) is ``epsilon``-DP: :math:`\\ln(\\mathrm{ratio})
    \\le` ``epsilon`` (the float's exact value), decided by :func:`log_ratio_exceeds`.

    >>> at = delivered_epsilon(9, 1)
    >>> ratio_within_epsilon(Fraction(9), at), ratio_within_epsilon(Fraction(9), math.nextafter(at, 0.0))
    (True, False)
    >>> ratio_within_epsilon(None, 40.0)
    False
    """
    eps = check_epsilon(epsilon, "epsilon")
    return ratio is not None and not log_ratio_exceeds(ratio.numerator, ratio.denominator, eps)


def satisfies_epsilon_dp(mechanism: ExactRandomizedResponse, epsilon: float) -> bool:
    """True iff the mechanism is ``epsilon``-DP: :math:`|\\ln(A/L)| \\le` ``Decimal(epsilon)``, decided exactly.

    ``epsilon`` must be a finite number > 0 (:class:`~ldpsynth.shared.errors.ValidationError`
    otherwise); its float value is used exactly. The mechanism's own ``epsilon`` attribute is
    ignored: only its integer weights count (WYZ Lemma 1 / eq. 16).

    >>> from ldpsynth.shared.mechanism import MechanismE
    >>> m = MechanismE(1.0, 5)
    >>> satisfies_epsilon_dp(m, m.epsilon), satisfies_epsilon_dp(m, 0.9)
    (True, False)
    """
    eps = check_epsilon(epsilon, "epsilon")
    return not _loss_exceeds(mechanism, eps)


def assert_epsilon_dp(mechanism: ExactRandomizedResponse, epsilon: float) -> Decimal:
    """Raise :class:`PrivacyGuaranteeError` unless :func:`satisfies_epsilon_dp`; return the loss.

    The message names the mechanism's weights, its privacy loss and the ε it was checked against
    (all public quantities: no data is involved).
    """
    if satisfies_epsilon_dp(mechanism, epsilon):
        return max_privacy_loss(mechanism)
    loss = max_privacy_loss(mechanism, digits=30)
    raise PrivacyGuaranteeError(
        f"mechanism is not {float(epsilon)!r}-DP: its worst-case privacy loss |ln(keep_weight/lie_weight)| = "
        f"|ln({mechanism.keep_weight}/{mechanism.lie_weight})| = {loss} exceeds epsilon = {float(epsilon)!r} "
        f"(domain_size {mechanism.domain_size}; WYZ Lemma 1 / eq. 16)"
    )
