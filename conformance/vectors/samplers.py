"""sampler.json: the exact sampler of E fed given byte streams, round by round."""

from __future__ import annotations

import random
from typing import Any

import numpy as np

from ldpsynth.shared.mechanism import MechanismE
from vectors.common import FORMAT, dec


class ByteStream:
    """Hands out a fixed byte string in order, as ``os.urandom`` would hand out fresh bytes."""

    def __init__(self, data: bytes):
        self.data = data
        self.read = 0
        self.calls: list[int] = []

    def __call__(self, n: int) -> bytes:
        if self.read + n > len(self.data):
            raise AssertionError(f"the stream holds {len(self.data)} bytes; {self.read + n} asked for")
        chunk = self.data[self.read:self.read + n]
        self.read += n
        self.calls.append(n)
        return chunk


def _word(u: int) -> bytes:
    return u.to_bytes(8, "little")


def _sampler_case(case_id: str, mechanism: MechanismE, codes: list[int], stream: bytes) -> dict[str, Any]:
    source = ByteStream(stream)
    outputs = mechanism._perturb_exact(np.asarray(codes, dtype=np.int64), source)
    assert source.read == len(stream), f"{case_id}: {len(stream) - source.read} bytes of the stream unread"
    words = [int.from_bytes(stream[i:i + 8], "little") for i in range(0, len(stream), 8)]
    return {"id": case_id, "domain_size": dec(mechanism.domain_size), "keep_weight": str(mechanism.keep_weight),
            "lie_weight": str(mechanism.lie_weight), "total_weight": str(mechanism.total_weight),
            "accept_below": str(mechanism._accept_below), "codes": dec(codes), "random_hex": stream.hex(),
            "words_read": len(words), "rounds": [n // 8 for n in source.calls],
            "rejections": sum(u >= mechanism._accept_below for u in words), "outputs": dec(outputs.tolist())}


def _high_rejection_mechanism() -> MechanismE:
    """A small |D| whose N makes about a fifth of the 64-bit words rejected (near the most, 1/4)."""
    m = MechanismE(0.7, 3)
    assert (1 << 64) - m._accept_below > (1 << 64) * 0.199
    return m


def sampler_vectors() -> dict[str, Any]:
    cases = []
    worked = MechanismE(1.0, 24)
    a, l_, n = worked.keep_weight, worked.lie_weight, worked.total_weight
    limit = worked._accept_below
    table = [2**64 - 1, 2**62, 10**18, 12345678901234567890, a + 14 * l_ + 5]
    cases.append(_sampler_case("worked-example-contract-12", worked, [14, 14, 14, 14],
                               b"".join(_word(u) for u in table)))
    # Every boundary of R = u mod N for x = 14, and words around the rejection threshold.
    boundary = [0, a - 1, a, a + l_ - 1, a + 14 * l_ - 1, a + 14 * l_, n - 1, n, limit - 1]
    rejected = [limit, 2**64 - 1, limit + 1]
    stream = b"".join(_word(u) for u in boundary + rejected) + b"".join(_word(u) for u in [a, a + l_, 5])
    cases.append(_sampler_case("boundaries-and-rejections-in-rounds", worked, [14] * 9 + [0, 23, 5], stream))
    # Rounds: rows 0, 2, 3 rejected in round 1, row 2 again in round 2.
    stream = b"".join(_word(u) for u in [limit, 7, 2**64 - 2, limit + 99, 3 * n + 1]) + \
        b"".join(_word(u) for u in [a, 2**64 - 3, n + a]) + _word(2 * n + a + 3 * l_)
    cases.append(_sampler_case("rejections-over-three-rounds", worked, [0, 1, 2, 23, 11], stream))
    hi = _high_rejection_mechanism()
    for seed, rows in ((1, 64), (2, 500)):
        rng = random.Random(seed)
        codes = [rng.randrange(hi.domain_size) for _ in range(rows)]
        cases.append(_stream_case(f"high-rejection-seeded-{seed}", hi, codes, rng))
    for eps, k, seed, rows in ((1.0, 24, 3, 200), (0.5, 2, 4, 200), (45.0, 2, 5, 50), (0.001, 2**28, 6, 100),
                               (8.0, 2**20, 7, 100)):
        m = MechanismE(eps, k)
        rng = random.Random(seed)
        codes = [rng.randrange(k) for _ in range(rows)]
        cases.append(_stream_case(f"eps={eps!r},D={k},seeded-{seed}", m, codes, rng))
    return {"format": FORMAT, "file": "sampler", "cases": cases}


def draw_stream(m: MechanismE, rows: int, rng: random.Random) -> bytes:
    """The bytes E reads for ``rows`` rows, drawn round by round from ``rng`` until every row is accepted."""
    stream = b""
    todo = rows
    while todo:
        chunk = rng.randbytes(8 * todo)
        stream += chunk
        todo = sum(int.from_bytes(chunk[i:i + 8], "little") >= m._accept_below for i in range(0, len(chunk), 8))
    return stream


def _stream_case(case_id: str, m: MechanismE, codes: list[int], rng: random.Random) -> dict[str, Any]:
    """A case whose stream is drawn round by round from ``rng`` until every row is accepted."""
    return _sampler_case(case_id, m, codes, draw_stream(m, len(codes), rng))
