"""Where a running aggregator keeps its discovery collections' states, the commit point of their rounds
(:mod:`ldpsynth.aggregator.operate.rounds`).

* One machine (:class:`FileStates`): the state file ``DIR/discovery/<...>.json``
  (:mod:`ldpsynth.aggregator.runtime.discovery`), written durably; the results file too after the last round.
* A cluster (:class:`LogStates`): the key ``discovery.<hex name>`` of the log's KV bucket (JetStream, replicated
  as the log is; :mod:`ldpsynth.aggregator.storage.log_registry`). Every replica reads it; a close stores its
  state by compare-and-set on the revision the replica last read, so two replicas closing the same round at once
  store one state (the other reads it back and serves it). The first replica to serve a discovery creates its
  round-0 state the same way.

Both read a state back verified (:meth:`DiscoveryState.from_json` replays it) and refuse one of another schema.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from ldpsynth.aggregator.runtime.backend import when_available
from ldpsynth.aggregator.runtime.discovery import open_state, store
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import LogSettings
from ldpsynth.aggregator.storage.log_registry import LogRegistry, StateConflict
from ldpsynth.serving.errors import ConfigError
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.heavy_hitters.collection import DiscoverySchema, DiscoveryState

__all__ = ["States", "FileStates", "LogStates", "StateConflict", "cluster_states"]


class States(Protocol):
    """The discovery states of one aggregator."""

    async def read(self, schema: DiscoverySchema) -> DiscoveryState:
        """The stored state of ``schema``'s discovery (a new one at round 0, stored, if none is)."""
        ...

    async def store(self, state: DiscoveryState) -> None:
        """Store ``state``, which closed a round of the state last :meth:`read` (the commit point).
        :class:`StateConflict`: another state was stored since (a cluster's other replica closed the round)."""
        ...


class FileStates:
    """A one-machine aggregator's states, in its data directory."""

    def __init__(self, data_dir: Path):
        self._data_dir = data_dir

    async def read(self, schema: DiscoverySchema) -> DiscoveryState:
        return await asyncio.to_thread(open_state, self._data_dir, schema)

    async def store(self, state: DiscoveryState) -> None:
        await asyncio.to_thread(store, self._data_dir, state)


class LogStates:
    """A cluster's states, in the log's KV bucket (module docstring)."""

    def __init__(self, log: LogRegistry):
        self._log = log
        self._revisions: dict[str, int] = {}

    async def read(self, schema: DiscoverySchema) -> DiscoveryState:
        name = schema.name
        text, revision = await self._log.discovery_state(name)
        if text is None:
            state = DiscoveryState(schema)
            try:
                self._revisions[name] = await self._log.swap_discovery_state(name, state.dumps(), 0)
                return state
            except StateConflict:  # another replica created it meanwhile
                text, revision = await self._log.discovery_state(name)
                assert text is not None
        try:
            state = DiscoveryState.from_json(text)
        except ValidationError as exc:
            raise ConfigError(f"the log's state of the discovery {name!r} is not sound ({exc})") from None
        if state.schema != schema:
            raise ConfigError(f"--collection: the discovery {name!r} differs from the one the cluster was started "
                              "with (a discovery's schema cannot change while it runs)")
        self._revisions[name] = revision
        return state

    async def store(self, state: DiscoveryState) -> None:
        name = state.schema.name
        self._revisions[name] = await self._log.swap_discovery_state(name, state.dumps(), self._revisions[name])

    async def read_all(self, schemas: Iterable[DiscoverySchema]) -> dict[str, DiscoveryState]:
        """:meth:`read` of each schema: name -> state."""
        return {schema.name: await self.read(schema) for schema in schemas}


async def cluster_states(settings: LogSettings, schemas: Iterable[DiscoverySchema]) -> dict[str, DiscoveryState]:
    """The states of a cluster's discoveries ``schemas`` (name -> state), read from the log of ``settings``
    (round 0 created for a new one), for ``serve --nats`` to build the cards it serves."""
    log = await ReplicatedLog.connect(settings, name="ldpsynth-discovery")
    try:
        states = LogStates(log)
        wanted = list(schemas)
        return await when_available(lambda: states.read_all(wanted))   # a cluster may still be electing leaders
    finally:
        await log.close()
