"""The server's fast paths equal the direct computations they replace (exact: integers and booleans)."""

from __future__ import annotations

import numpy as np
import pytest

from ldpsynth.shared.heavy_hitters.candidates import extend_prefixes
from ldpsynth.shared.heavy_hitters.encoding import StringEncoding
from ldpsynth.shared.mechanisms.bits import walsh_hadamard


@pytest.mark.parametrize("t", range(0, 11))
def test_walsh_hadamard_is_the_hadamard_matrix_product(t: int) -> None:
    x = np.random.default_rng(t).integers(-1000, 1000, (3, 1 << t))
    u = np.arange(1 << t)
    hadamard = 1 - 2 * (np.bitwise_count(u[:, None] & u[None, :]) & 1).astype(np.int64)
    assert np.array_equal(walsh_hadamard(x), x @ hadamard)
    assert np.array_equal(walsh_hadamard(x[0]), x[0] @ hadamard)


@pytest.mark.parametrize(("alphabet", "length", "start", "width"), [
    ("ab", 6, 0, 5), ("ab", 6, 4, 3), ("abcdefghijklmnopqrstuvwxyz", 6, 12, 7),
    ("abcdefghijklmnopqrstuvwxyz", 6, 20, 10), (None, 4, 8, 12), (None, 4, 13, 6), ("abc", 5, 3, 1)])
def test_valid_extensions_are_valid_prefixes_of_the_extended(alphabet: str | None, length: int, start: int,
                                                             width: int) -> None:
    enc = StringEncoding(length, alphabet)
    rng = np.random.default_rng(start * 100 + width)
    parents = rng.integers(0, 256, (40, -(-start // 8)), dtype=np.uint8) if start else np.zeros((1, 0), np.uint8)
    if start % 8:
        parents[:, -1] &= np.uint8((0xFF << (8 - start % 8)) & 0xFF)
    words = ["".join(rng.choice(list(alphabet or "aé€z"), size=rng.integers(0, length + 1))) for _ in range(40)]
    if start:                                          # real prefixes too (random bytes are mostly invalid)
        parents = np.unique(np.concatenate([parents, enc.encode(words)[:, :parents.shape[1]]]), axis=0)
        parents[:, -1] &= np.uint8((0xFF << (8 - start % 8)) & 0xFF) if start % 8 else np.uint8(0xFF)
        parents = np.unique(parents, axis=0)
    cells = np.arange(len(parents) << width, dtype=np.int64)
    expected = enc.valid_prefixes(extend_prefixes(parents, start, width, cells, sort=False), start + width)
    got = enc.valid_extensions(parents, start, width, cells)
    assert got.any() and not got.all()
    assert np.array_equal(got, expected)
    some = rng.permutation(len(cells))[:len(cells) // 5]   # a few cells, in any order (each cell scanned alone)
    assert np.array_equal(enc.valid_extensions(parents, start, width, cells[some]), expected[some])


@pytest.mark.parametrize("scale", [1, 1 << 20, 1 << 40])
def test_walsh_hadamard_is_exact_near_and_past_the_int32_switch(scale: int) -> None:
    x = np.random.default_rng(scale % 97).integers(-scale, scale + 1, (2, 1 << 12))
    x[0, :3] = [scale, -scale, scale]
    u = np.arange(1 << 12)
    hadamard = 1 - 2 * (np.bitwise_count(u[:, None] & u[None, :]) & 1).astype(np.int64)
    got = walsh_hadamard(x)
    assert got.dtype == np.int64
    assert np.array_equal(got, x @ hadamard)
