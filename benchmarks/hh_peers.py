"""pure-ldp's heavy-hitter protocols (PEM, TreeHist, SFP) as peers of ``bench_heavy_hitters.py``, in one format.

Each peer runs pure-ldp 1.2's own client and server classes with Apple's count-mean sketch (``CMSClient`` /
``CMSServer``, 64 hash functions, m = 1024) as its frequency oracle: pure-ldp's default oracle (OLH) keeps a tally
over the whole domain (27^10 cells for the words), which no machine holds. Strings are over ``letters`` and padded
with ``*`` to ``length`` characters; ``*`` is a symbol of every peer's alphabet, so a string shorter than ``length``
can be found, and the padding is stripped from the answers.

* PEM (WLJ19): start length 0, fragments of 2 characters (``length / 2`` groups of devices, each with the full ε).
* TreeHist (BNST17): fragments of 2 characters; each device reports a random prefix level and its whole string, ε/2
  each. pure-ldp refuses its padding character inside the alphabet and never extends a prefix by it, so the values
  are padded with ``*`` before the client sees them and pure-ldp's own padding is ``#`` (never used on a full-length
  string); its candidates then include ``*``.
* SFP (Apple2017): fragments of 1 character with pure-ldp's 256-value word hash; ε/2 for the fragment, ε/2 for the
  string. Fragments of 2 would mean 27^2 * 256 sketch estimates a position in Python (about 5 minutes a decoding on
  the shared machine).

Candidates: pure-ldp keeps the top k at each level (``find_heavy_hitters(k)``); the benchmark can widen that
to a multiple of k (``--peer-width``; 2 by default, as ours keeps up to 2k) and keeps the k with the largest counts.

What is timed: client seconds are ``privatise`` over every report; server seconds are ``aggregate`` over every
report (kept apart: it grows with the reports) plus ``find_heavy_hitters(k)`` (fixed: it depends on k and the
alphabet only), from the reports in memory to the top k with their counts, as ours is timed.
"""

from __future__ import annotations

import random
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["PEERS", "PeerAnswer", "PureLdpPeer"]

PEERS = ("PEM", "TreeHist", "SFP")
PAD = "*"
#: TreeHist's own padding character: never used, since its values arrive padded with PAD.
TREEHIST_PAD = "#"
FRAGMENT = {"PEM": 2, "TreeHist": 2, "SFP": 1}
HASHES, WIDTH = 64, 1024


@dataclass(frozen=True, eq=False)
class PeerAnswer:
    """A peer's top k: distinct values (padding stripped), their estimated counts among the ``n`` reports it ran
    on in descending order, at most k of them; its client seconds, and its server seconds split into aggregating
    the reports and finding the top k."""

    values: list[str]
    counts: np.ndarray
    n: int
    client_seconds: float
    aggregate_seconds: float
    find_seconds: float


class _Numpy1Zeros:
    """numpy with numpy 1's ``zeros(None)`` (a 0-d array): pure-ldp 1.2's server base class calls
    ``np.zeros(self.d)`` with d None for its sketch oracles, which numpy 2 refuses."""

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    @staticmethod
    def zeros(shape: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        return np.zeros(() if shape is None else shape, *args, **kwargs)


class PureLdpPeer:
    """One pure-ldp protocol (``method`` in PEERS) over strings of ``letters``, at most ``length`` characters."""

    def __init__(self, method: str, epsilon: float, letters: str, length: int, seed: int) -> None:
        import pure_ldp.core._freq_oracle_server as base
        from pure_ldp.frequency_oracles.apple_cms import CMSClient, CMSServer
        from pure_ldp.heavy_hitters.apple_sfp.sfp_client import SFPClient
        from pure_ldp.heavy_hitters.apple_sfp.sfp_server import SFPServer
        from pure_ldp.heavy_hitters.prefix_extending import PEMClient, PEMServer
        from pure_ldp.heavy_hitters.treehistogram.treehist_client import TreeHistClient
        from pure_ldp.heavy_hitters.treehistogram.treehist_server import TreeHistServer

        if method not in PEERS:
            raise ValueError(f"method must be one of {PEERS}, not {method!r}")
        fragment = FRAGMENT[method]
        if length % fragment:
            raise ValueError(f"{method}: length {length} is not a multiple of its fragment of {fragment}")
        base.np = _Numpy1Zeros()
        self.method, self.length = method, length
        server_fo = CMSServer(epsilon, HASHES, WIDTH)
        client_fo = CMSClient(epsilon, server_fo.get_hash_funcs(), WIDTH)
        alphabet = [*letters, PAD]
        if method == "PEM":
            self.client = PEMClient(epsilon, 0, length, fragment, alphabet=alphabet, fo_client=client_fo)
            self.server = PEMServer(epsilon, 0, length, fragment, alphabet=alphabet, fo_server=server_fo)
        elif method == "TreeHist":
            self.client = TreeHistClient(epsilon, fragment, length, alphabet=set(alphabet), fo_client=client_fo,
                                         padding_char=TREEHIST_PAD)
            self.server = TreeHistServer(epsilon, length, fragment, alphabet=set(alphabet), fo_server=server_fo,
                                         padding_char=TREEHIST_PAD)
        else:
            self.client = SFPClient(epsilon, fragment, length, alphabet=set(alphabet), fo_client=client_fo)
            self.server = SFPServer(epsilon, fragment, length, alphabet=set(alphabet), fo_server=server_fo)
        random.seed(seed)                   # pure-ldp draws from random and np.random
        np.random.seed(seed % 2**32)
        self.n = 0
        self.client_seconds = self.aggregate_seconds = 0.0

    def collect(self, values: Sequence[str], block: int = 10_000) -> None:
        """Privatise every value and aggregate the reports, ``block`` at a time (a sketch report is m = 1024
        integers: 8 KB). Successive calls add to the same collection."""
        padded = [(v[:self.length] + PAD * self.length)[:self.length] for v in values]
        for lo in range(0, len(padded), block):
            start = time.perf_counter()
            reports = [self.client.privatise(v) for v in padded[lo:lo + block]]
            middle = time.perf_counter()
            for rep in reports:
                self.server.aggregate(rep)
            self.client_seconds += middle - start
            self.aggregate_seconds += time.perf_counter() - middle
        self.n += len(padded)

    def top_k(self, k: int, width: int | None = None) -> PeerAnswer:
        """The peer's ``find_heavy_hitters(width)`` (width: the candidates it keeps at each level, k unless
        given), padding stripped, duplicates after stripping dropped (the higher count kept), then at most k
        values by estimated count (SFP can return more or fewer than its width)."""
        with warnings.catch_warnings():       # pure-ldp warns on every estimate below 10,000 reports
            warnings.filterwarnings("ignore", "FrequencyOracle has only aggregated small amounts", RuntimeWarning)
            start = time.perf_counter()
            found, freqs = self.server.find_heavy_hitters(k=k if width is None else width)
            find = time.perf_counter() - start
        found = [str(v).split(PAD)[0] for v in found]
        counts = np.asarray(freqs, dtype=np.float64).reshape(-1)
        values: list[str] = []
        kept: list[float] = []
        for i in np.argsort(-counts, kind="stable"):
            if found[i] not in values:
                values.append(found[i])
                kept.append(float(counts[i]))
            if len(values) == k:
                break
        return PeerAnswer(values, np.asarray(kept, dtype=np.float64), self.n, self.client_seconds,
                          self.aggregate_seconds, find)
