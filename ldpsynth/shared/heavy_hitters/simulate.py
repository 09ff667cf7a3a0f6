"""A seeded simulation of the whole protocol over a population of codes (not for devices: numpy Generators).

Each device i (key ``device-i``) reports in the round its key's HMAC gives
(:func:`~ldpsynth.shared.heavy_hitters.rounds.assign_rounds`, salt drawn from ``rng``); each round's
devices map their codes to cells against the server's current candidates and randomize them with the
round's mechanism on the Generator's exact draws; the server decodes and extends. With ``server_repeats``
R > 1 the server's work (every round's decoding and choice, then the answer) is timed R times on the same
reports, each time by a new server (decoding is deterministic: the same candidates, estimates and answer), and the
least time is reported: the machine's other load only ever adds time.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..validation import check_int
from .encoding import StringEncoding
from .rounds import RoundSchedule, assign_rounds
from .server import HeavyHitters, HeavyHitterServer

__all__ = ["Simulation", "simulate"]


@dataclass(frozen=True, eq=False)
class Simulation:
    """A simulated discovery: the server (its rounds' estimates), its answer and the seconds spent
    randomizing (``device_seconds``, all devices) and decoding and choosing (``server_seconds``, the least of
    ``server_repeats`` runs)."""

    server: HeavyHitterServer
    result: HeavyHitters
    device_seconds: float
    server_seconds: float


def simulate(codes: np.ndarray, encoding: StringEncoding, schedule: RoundSchedule, epsilon: float,
             rng: np.random.Generator, *, top_k: int | None = None, threshold: float | None = None,
             cap: int | None = None, prune_z: float = 1.959963984540054, server_repeats: int = 1) -> Simulation:
    """Run the protocol over the devices' ``codes`` (uint8 ``(n, code_bytes)``, :meth:`StringEncoding.encode`)."""
    codes = encoding.check_codes(codes)
    check_int(server_repeats, "server_repeats", 1)

    def new_server() -> HeavyHitterServer:
        return HeavyHitterServer(encoding, schedule, epsilon, len(codes), top_k=top_k, threshold=threshold,
                                 cap=cap, prune_z=prune_z)

    server = new_server()
    salt = rng.bytes(32)
    rounds = assign_rounds([f"device-{i}".encode() for i in range(len(codes))], salt, schedule.rounds)
    order = np.argsort(rounds, kind="stable")
    bounds = np.searchsorted(rounds[order], np.arange(schedule.rounds + 1))
    device = decoding = 0.0
    sent = []
    while not server.finished:
        spec = server.spec()
        mine = codes[order[bounds[spec.index]:bounds[spec.index + 1]]]
        start = time.perf_counter()
        reports = spec.mechanism.perturb(spec.cells_of(mine), rng)
        sent.append(reports)
        middle = time.perf_counter()
        server.receive(reports)
        device += middle - start
        decoding += time.perf_counter() - middle
    start = time.perf_counter()
    result = server.result()
    best = decoding + time.perf_counter() - start
    for _ in range(server_repeats - 1):
        start = time.perf_counter()
        again = new_server()
        for reports in sent:
            again.receive(reports)
        again.result()
        best = min(best, time.perf_counter() - start)
    return Simulation(server, result, device, best)
