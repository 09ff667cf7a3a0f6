"""wide.json: the view a device reports (``wide.assignment.assign_view``) and the cell of a view (``View.cells``).

No key here has its first HMAC word rejected: a word is rejected with probability (2^64 mod m)/2^64 < 2^-32
for every count m <= 2^32, so finding such a key takes about 2^32 HMACs (over an hour here). Each SDK
tests its rejection step with given words instead (TypeScript: ``selectView``).
"""

from __future__ import annotations

import hashlib
import hmac
import random
from typing import Any

import numpy as np

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.wide.assignment import MIN_SALT_BYTES, assign_view
from ldpsynth.shared.wide.views import WideDomain
from vectors.common import FORMAT

#: Counts of views: the smallest, tiny ones, the 28 pairs of 8 attributes, a large one, the largest (2^32),
#: and 2^32 - 1 and 3 * 2^30 + 1, whose rejection thresholds are not multiples of a power of two.
COUNTS = [1, 2, 3, 28, 1000, (1 << 32) - 1, 3 * (1 << 30) + 1, 1 << 32]


def _first_word(salt: bytes, key: bytes) -> int:
    """The first HMAC word (r = 0), to state which cases are decided by it (informational)."""
    return int.from_bytes(hmac.new(salt, key + b"\x00", hashlib.sha256).digest()[:8], "big")


def _assignment_case(case_id: str, salt: bytes, key: bytes, count: int) -> dict[str, Any]:
    accept_below = ((1 << 64) // count) * count
    return {"id": case_id, "salt": salt.hex(), "device_key": key.hex(), "count": str(count),
            "accept_below": str(accept_below), "first_word": str(_first_word(salt, key)),
            "first_word_rejected": _first_word(salt, key) >= accept_below,
            "view": str(assign_view(salt, key, count))}


def _refusal(case_id: str, salt: bytes, key: bytes, count: int) -> dict[str, Any]:
    try:
        assign_view(salt, key, count)
    except ValidationError as err:
        return {"id": case_id, "salt": salt.hex(), "device_key": key.hex(), "count": str(count), "field": err.field}
    raise AssertionError(f"{case_id}: not refused")


def _cell_case(case_id: str, sizes: list[int], rows: list[list[int]]) -> dict[str, Any]:
    domain = WideDomain(tuple(f"a{j}" for j in range(len(sizes))), tuple(sizes))
    view = domain.view(range(len(sizes)))
    cells = view.cells(domain.check_rows(np.asarray(rows, np.int64)))
    return {"id": case_id, "sizes": sizes, "rows": rows, "cells": [str(c) for c in cells.tolist()]}


def wide_vectors() -> dict[str, Any]:
    rng = random.Random(20261206)
    salts = [bytes(MIN_SALT_BYTES), bytes(range(32)), rng.randbytes(16), rng.randbytes(64), rng.randbytes(100)]
    keys = [b"\x00", b"device-0001", rng.randbytes(16), rng.randbytes(32), rng.randbytes(65), rng.randbytes(200)]
    assignments = [_assignment_case(f"salt{s}-key{k}-count{count}", salt, key, count)
                   for s, salt in enumerate(salts) for k, key in enumerate(keys) for count in COUNTS]
    for n in range(40):   # many keys at two counts: the views spread over [0, count)
        key = rng.randbytes(16)
        assignments += [_assignment_case(f"spread{n}-count{count}", salts[2], key, count) for count in (3, 28)]
    refused = [_refusal("salt-too-short", bytes(MIN_SALT_BYTES - 1), b"k", 2),
               _refusal("key-empty", salts[0], b"", 2),
               _refusal("count-zero", salts[0], b"k", 0),
               _refusal("count-above-2^32", salts[0], b"k", (1 << 32) + 1)]
    cells = [_cell_case("one-attribute", [5], [[0], [4], [2]]),
             _cell_case("pair", [3, 7], [[0, 0], [0, 6], [1, 0], [2, 6], [1, 3]]),
             _cell_case("triple", [2, 3, 4], [[1, 2, 3], [0, 0, 0], [1, 0, 2], [0, 2, 1]]),
             _cell_case("large", [65536, 65536, 1024], [[65535, 65535, 1023], [1, 0, 0], [0, 1, 0]])]
    return {"format": FORMAT, "file": "wide.json",
            "min_salt_bytes": MIN_SALT_BYTES, "assignments": assignments, "refused": refused, "cells": cells}
