"""The pure-ldp peers of ``benchmarks/bench_heavy_hitters.py`` (``benchmarks/hh_peers.py``) on a tiny domain: each
returns its top k in the common format (distinct unpadded values, counts descending, at most k, also when it keeps
more candidates a level) and finds a planted value. Seeded (pure-ldp draws from ``random`` and ``np.random``, seeded
by the adapter), so each run is the same."""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

pytest.importorskip("pure_ldp")
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def peers() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module("hh_peers")
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.mark.parametrize("method", ["PEM", "TreeHist", "SFP"])
def test_each_peer_returns_its_top_k_in_the_common_format(peers: ModuleType, method: str) -> None:
    # 1,000 devices over "ab" (60%), "ba" (25%), "bbab" (15%), strings of at most 4 of {a, b}; eps = 8. A
    # report's randomizing keeps the truth with probability about 1 - 1/(1 + e^2) = 0.88 a sketch coordinate, so
    # "ab" (600 devices) stands clear of every other candidate.
    values = ["ab"] * 600 + ["ba"] * 250 + ["bbab"] * 150
    peer = peers.PureLdpPeer(method, 8.0, "ab", 4, seed=7)
    peer.collect(values)
    for k, width in ((1, None), (3, None), (3, 6)):
        answer = peer.top_k(k, width)
        assert isinstance(answer, peers.PeerAnswer)
        assert answer.n == 1000
        assert 1 <= len(answer.values) <= k
        assert len(set(answer.values)) == len(answer.values)
        assert all(set(v) <= {"a", "b"} and 0 < len(v) <= 4 for v in answer.values), answer.values
        assert answer.counts.dtype == np.float64 and answer.counts.shape == (len(answer.values),)
        assert np.all(np.diff(answer.counts) <= 0)
        assert answer.values[0] == "ab"
        assert abs(answer.counts[0] - 600) < 300
        for seconds in (answer.client_seconds, answer.aggregate_seconds, answer.find_seconds):
            assert math.isfinite(seconds) and seconds > 0


def test_a_peer_refuses_what_it_cannot_run(peers: ModuleType) -> None:
    with pytest.raises(ValueError, match="method must be one of"):
        peers.PureLdpPeer("Bitstogram", 1.0, "ab", 4, seed=1)
    with pytest.raises(ValueError, match="not a multiple of its fragment"):
        peers.PureLdpPeer("TreeHist", 1.0, "ab", 5, seed=1)
