"""A device's view: deterministic from its key, exactly uniform over the views."""

from __future__ import annotations

import hashlib
import hmac

import numpy as np
import pytest
from scipy.stats import chisquare

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.wide import assign_view, assign_views

SALT = bytes(range(16))


def test_the_view_is_hmac_sha256_modulo_the_count() -> None:
    word = int.from_bytes(hmac.new(SALT, b"device-7" + b"\x00", hashlib.sha256).digest()[:8], "big")
    assert assign_view(SALT, b"device-7", 28) == word % 28          # accepted: word < floor(2^64/28)*28


def test_deterministic_and_salted() -> None:
    keys = [f"device-{i}".encode() for i in range(300)]
    first = assign_views(SALT, keys, 28)
    assert np.array_equal(first, assign_views(SALT, keys, 28))
    assert not np.array_equal(first, assign_views(bytes(16), keys, 28))
    assert first.min() >= 0 and first.max() < 28


def test_uniform_over_the_views() -> None:
    # alpha = 0.001: chi-square goodness of fit, 28 views x 250 expected keys each (>= 5 per bin).
    keys = [i.to_bytes(8, "big") for i in range(28 * 250)]
    observed = np.bincount(assign_views(SALT, keys, 28), minlength=28)
    assert chisquare(observed).pvalue > 0.001


def test_arguments_are_checked() -> None:
    with pytest.raises(ValidationError, match="salt"):
        assign_view(b"short", b"k", 3)
    with pytest.raises(ValidationError, match="device_key"):
        assign_view(SALT, b"", 3)
    with pytest.raises(ValidationError, match="count"):
        assign_view(SALT, b"k", 0)
