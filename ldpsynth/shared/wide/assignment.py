"""Which view a device reports: one, chosen deterministically from its device key, without spending ε.

.. math::  w_r = \\mathrm{first\\ 8\\ bytes}\\big(\\mathrm{HMAC\\text{-}SHA256}(\\mathrm{salt},\\
           \\mathrm{key} \\,\\|\\, r)\\big) \\text{ as a big-endian } u \\in [0, 2^{64}),

for :math:`r = 0, 1, \\dots` (one byte), the first word below :math:`\\lfloor 2^{64}/m \\rfloor m`, taken
modulo m: exactly uniform over the m views (rejection; a word is rejected with probability below
:math:`m/2^{64}`). The salt is the collection's, public; the view is public (it reveals no more than
which marginal the device answers, a function of its key alone), so the full ε goes to the cell.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

import numpy as np

from ..errors import ValidationError
from ..validation import check_int

__all__ = ["MIN_SALT_BYTES", "assign_view", "assign_views"]

#: A collection's salt has at least this many bytes.
MIN_SALT_BYTES = 16
_WORD = 1 << 64


def _check_salt(salt: bytes) -> bytes:
    if not isinstance(salt, bytes) or len(salt) < MIN_SALT_BYTES:
        raise ValidationError("salt", f"bytes, at least {MIN_SALT_BYTES} of them",
                              f"got {type(salt).__name__} of length {len(salt) if isinstance(salt, bytes) else '-'}")
    return salt


def assign_view(salt: bytes, device_key: bytes, count: int) -> int:
    """The view (in ``[0, count)``) of the device ``device_key`` (module docstring)."""
    _check_salt(salt)
    m = check_int(count, "count", 1, 1 << 32)
    if not isinstance(device_key, bytes) or not device_key:
        raise ValidationError("device_key", "non-empty bytes", f"got {type(device_key).__name__}")
    accept_below = (_WORD // m) * m
    for r in range(256):
        word = int.from_bytes(hmac.new(salt, device_key + bytes((r,)), hashlib.sha256).digest()[:8], "big")
        if word < accept_below:
            return word % m
    raise AssertionError("256 rejections in a row (probability below 2^-4096)")


def assign_views(salt: bytes, device_keys: Sequence[bytes], count: int) -> np.ndarray:
    """:func:`assign_view` of every key, int64 of shape (n,) (simulations and the aggregator's check)."""
    return np.fromiter((assign_view(salt, key, count) for key in device_keys), np.int64, len(device_keys))
