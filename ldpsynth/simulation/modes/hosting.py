"""A hosted aggregator for one collection file's simulation, and the device groups that submit to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.heavy_hitters.collection import DiscoveryCard
from ldpsynth.shared.wide.collection import WideCard
from ldpsynth.simulation.devices import DeviceGroup
from ldpsynth.simulation.federation import SimulationSettings

if TYPE_CHECKING:
    from ldpsynth.aggregator.ingress.server import AggregatorServer


@asynccontextmanager
async def hosted(data_dir: Path, cards: tuple[MechanismCard, ...], settings: SimulationSettings, *,
                 wide: tuple[WideCard, ...] = (), discoveries: tuple[DiscoveryCard, ...] = ()
                 ) -> AsyncIterator[tuple[AggregatorServer, str]]:
    """An aggregator serving ``cards`` (and the parents ``wide``, ``discoveries``) on a free loopback port,
    its store in ``data_dir``: ``(server, address)``, stopped on exit."""
    from ldpsynth.aggregator.ingress.server import AggregatorServer
    from ldpsynth.aggregator.runtime.config import ServerConfig

    server = AggregatorServer(ServerConfig(data_dir=data_dir, collections=cards, wide=wide, discoveries=discoveries,
                                           shards=settings.shards, ray_address=settings.ray_address,
                                           verbose=settings.verbose))
    target = await server.start()
    try:
        yield server, target
    finally:
        await server.stop()


def device_groups(name: str, columns: dict[str, np.ndarray], devices: np.ndarray, target: str,
                  settings: SimulationSettings, *, wide: bool = False) -> list[DeviceGroup]:
    """Devices dealt round-robin over ``settings.processes`` worker processes, each with its own rows
    (``devices[i]``: the device of row i, 0-based)."""
    order = np.argsort(devices, kind="stable")
    count = int(devices.max()) + 1 if len(devices) else 0
    bounds = np.searchsorted(devices[order], np.arange(count + 1))
    groups = []
    for p in range(settings.processes):
        mine = tuple(d for d in range(p, count, settings.processes) if bounds[d + 1] > bounds[d])
        rows = tuple({attr: col[order[bounds[d]:bounds[d + 1]]] for attr, col in columns.items()} for d in mine)
        groups.append(DeviceGroup(target, name, None, mine, rows, settings.connections, settings.batch_size,
                                  settings.faults, settings.seed, None, wide))
    return [g for g in groups if g.devices]
