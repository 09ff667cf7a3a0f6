"""The round schedule of the prefix-extension protocol and which round a device reports in.

Round 0 reports the first ``first_bits`` bits of a code; each later round r extends the prefix by
``fragment_bits`` bits (the last round by what is left of the B bits):

.. math::  b_0 = \\min(\\texttt{first\\_bits}, B), \\qquad b_r = \\min(b_{r-1} + g, B), \\qquad
           R = 1 + \\lceil (B - b_0)/g \\rceil .

Devices are split across the R rounds, not ε (the prefix-extension protocols: WLJ19's PEM and BNST17's
TreeHist): a device reports once, in round

.. math::  r(\\mathrm{key}) = \\lfloor R \\cdot U / 2^{64} \\rfloor, \\qquad
           U = \\text{the first 8 bytes (big-endian) of } \\mathrm{HMAC\\text{-}SHA256}(\\mathrm{salt}, \\mathrm{key}),

so its round is a public function of its device key and the collection's salt (it costs no ε and reveals
nothing about its value), each round holds a 1/R share of the devices up to :math:`R/2^{64}`, and a
device cannot pick its round.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ValidationError
from ..validation import check_int
from .encoding import MAX_BITS, MAX_FRAGMENT_BITS

__all__ = ["RoundSchedule", "round_of", "assign_rounds"]


@dataclass(frozen=True)
class RoundSchedule:
    """Which bits each round discovers (module docstring).

    >>> s = RoundSchedule(total_bits=32, first_bits=12, fragment_bits=8)
    >>> s.rounds, [(s.start_bits(r), s.end_bits(r)) for r in range(s.rounds)]
    (4, [(0, 12), (12, 20), (20, 28), (28, 32)])
    """

    total_bits: int
    first_bits: int
    fragment_bits: int

    def __post_init__(self) -> None:
        check_int(self.total_bits, "total_bits", 1, MAX_BITS)
        check_int(self.first_bits, "first_bits", 1, MAX_FRAGMENT_BITS)
        check_int(self.fragment_bits, "fragment_bits", 1, MAX_FRAGMENT_BITS)

    @property
    def rounds(self) -> int:
        """R."""
        first = min(self.first_bits, self.total_bits)
        return 1 + -(-(self.total_bits - first) // self.fragment_bits)

    def end_bits(self, r: int) -> int:
        """:math:`b_r`: the prefix length known after round r."""
        check_int(r, "round", 0, self.rounds - 1)
        return min(self.first_bits + r * self.fragment_bits, self.total_bits)

    def start_bits(self, r: int) -> int:
        """:math:`b_{r-1}` (0 for round 0): the prefix length of round r's candidates."""
        return 0 if check_int(r, "round", 0, self.rounds - 1) == 0 else self.end_bits(r - 1)

    def width(self, r: int) -> int:
        """Bits round r discovers, :math:`b_r - b_{r-1}`."""
        return self.end_bits(r) - self.start_bits(r)


def _check_salt(salt: bytes) -> bytes:
    if not isinstance(salt, bytes) or len(salt) < 16:
        raise ValidationError("salt", "at least 16 bytes", f"got {type(salt).__name__} of length "
                              f"{len(salt) if isinstance(salt, bytes) else 'n/a'}")
    return salt


def round_of(device_key: bytes, salt: bytes, rounds: int) -> int:
    """The round of one device (module docstring).

    >>> round_of(b"device-1", bytes(16), 5)
    2
    """
    _check_salt(salt)
    check_int(rounds, "rounds", 1)
    if not isinstance(device_key, bytes) or not device_key:
        raise ValidationError("device_key", "non-empty bytes", f"got {type(device_key).__name__}")
    u = int.from_bytes(hmac.digest(salt, device_key, hashlib.sha256)[:8], "big")
    return (rounds * u) >> 64


def assign_rounds(device_keys: Sequence[bytes], salt: bytes, rounds: int) -> np.ndarray:
    """:func:`round_of` of every key, int64 (one HMAC per device)."""
    _check_salt(salt)
    check_int(rounds, "rounds", 1)
    out = np.empty(len(device_keys), np.int64)
    for i, key in enumerate(device_keys):
        if not isinstance(key, bytes) or not key:
            raise ValidationError("device_keys", "non-empty bytes", f"got {type(key).__name__}", i)
        out[i] = (rounds * int.from_bytes(hmac.digest(salt, key, hashlib.sha256)[:8], "big")) >> 64
    return out
