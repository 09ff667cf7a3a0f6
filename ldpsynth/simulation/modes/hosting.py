"""A hosted aggregator for one collection file's simulation."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.heavy_hitters.collection import DiscoveryCard
from ldpsynth.shared.wide.collection import WideCard
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
