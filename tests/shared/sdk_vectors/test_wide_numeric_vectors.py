"""conformance/wide.json and numeric.json are worth running: they reach every branch an SDK must get right.

(The files' freshness against the reference is tests/client/test_conformance.py's; these tests read the
committed files, so a weakened generator fails here.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from ldpsynth.shared.mechanisms.coins import Coins
from ldpsynth.shared.numeric.samplers import HybridMechanism

VECTORS = Path(__file__).resolve().parents[3] / "conformance"


def load(name: str) -> dict[str, Any]:
    return json.loads((VECTORS / name).read_text(encoding="utf-8"))


def test_wide_vectors_cover_the_counts_and_spread_the_views() -> None:
    doc = load("wide.json")
    counts = {int(c["count"]) for c in doc["assignments"]}
    assert {1, 2, 3, 28, 1000, 1 << 32} <= counts
    views28 = {c["view"] for c in doc["assignments"] if c["count"] == "28"}
    assert len(views28) >= 20
    assert all(int(c["view"]) < int(c["count"]) for c in doc["assignments"])
    # no first word is rejected: at most 2^-32 per key even at the worst count (module docstring of
    # conformance/vectors/wide.py); the rejection step is tested in each SDK with given words
    assert not any(c["first_word_rejected"] for c in doc["assignments"])
    assert {c["field"] for c in doc["refused"]} == {"salt", "device_key", "count"}


def test_numeric_draws_reach_both_sides_of_every_boundary() -> None:
    doc = load("numeric.json")
    kinds = {c["mechanism"] for c in doc["samplers"]}
    assert kinds == {"duchi", "pm", "sw", "hm"}
    for case in doc["samplers"]:
        parts = [case["pm"], case["duchi"]] if case["mechanism"] == "hm" else [case]
        for part in parts:
            outs = {d["output"] for d in part["draws"]}
            assert len(outs) >= 2, case["id"]          # both ±B, or cells inside and outside the window
            assert part["law_sha256"] is not None
    hashed_mixtures = [c for c in doc["samplers"] if c["mechanism"] == "hm" and c["law_sha256"]]
    assert len(hashed_mixtures) >= 2
    assert sum(not c["exp_used"]["correctly_rounded"] for c in doc["samplers"]) >= 3


def test_numeric_streams_hit_a_coin_tie_and_a_rejected_u() -> None:
    """Replay the two crafted streams word by word: the tie reads a fourth word for the coin, the rejected
    U a fourth word for U."""
    doc = load("numeric.json")
    hm = HybridMechanism(1.0)
    by_id = {c["id"]: c for c in doc["streams"]}
    for case_id in ("hm-coin-tie", "hm-u-rejected"):
        data = bytes.fromhex(by_id[case_id]["random_hex"])
        words = np.frombuffer(data, "<u8")
        assert len(words) == 4, case_id
        calls: list[int] = []

        def read(count: int, calls: list[int] = calls, data: bytes = data) -> np.ndarray:
            start = 8 * sum(calls)
            calls.append(count)
            return np.frombuffer(data[start:start + 8 * count], "<u8")

        out = int(hm._sample(np.asarray([by_id[case_id]["x"]["value"]]), Coins(read))[0])
        assert out == by_id[case_id]["output"] and sum(calls) == 4
    tie = np.frombuffer(bytes.fromhex(by_id["hm-coin-tie"]["random_hex"]), "<u8")
    assert int(tie[1]) & 0xFF == hm.alpha_weight >> 24
    rejected = np.frombuffer(bytes.fromhex(by_id["hm-u-rejected"]["random_hex"]), "<u8")
    assert int(rejected[2]) >= (1 << 64) - (1 << 64) % hm.pm.denominator


def test_level_vectors_reach_both_sides_of_each_tolerance() -> None:
    """numeric.json's declared levels: values 0.9e-6 step from a level on it and 1.1e-6 off (both directions), the
    bound N = 255 taken and 256 refused, (hi - lo)/step 2e-9 from an integer taken and 4e-9 refused (at N = 3)."""
    cases = {c["id"]: c for c in load("numeric.json")["levels"]}
    assert cases["rating"]["index"][4:8] == [2, 2, -1, -1]
    assert cases["widest"]["intervals"] == 255 and "error" in cases["256-intervals"]
    assert cases["3-plus-2e-9"]["intervals"] == 3 and "error" in cases["3-plus-4e-9"]
    codes = {c["id"]: c for c in load("collections.json")["numeric_codes"]}
    tenth = codes["range=[0.0, 1.0]-step=0.1"]
    assert len(set(tenth["codes"])) < len(tenth["codes"])    # 0.1 + 0.2, 0.3 and 0.3 + 9e-8 share level 3's code
