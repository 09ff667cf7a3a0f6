"""Closing a discovery collection's open round on a running one-machine replica (``QueryService.AdvanceRound``,
role ``operate``; docs/heavy-hitters.md, "The lifecycle on a running server").

:meth:`RoundKeeper.advance` of the discovery ``name`` whose open round r is served as ``name/round-r``:

1. **Enough reports?** The round's reports are counted from the shards' statistics; below
   ``min_reports_per_round`` the call is refused (:class:`~ldpsynth.shared.heavy_hitters.collection.RoundNotReady`,
   FAILED_PRECONDITION with the counts) and nothing changes.
2. **Intake stops** (:meth:`~ldpsynth.aggregator.runtime.config.Catalog.close_round`, synchronous): no batch of the
   round is admitted from then on (FAILED_PRECONDITION telling the device to fetch the card again; a batch that
   passed admission before is re-checked once its quota is settled, :meth:`~ldpsynth.aggregator.ingress.ingest.
   Ingestor.admit_reports`, so none slips in between).
3. **In-flight batches settle** (:meth:`~ldpsynth.aggregator.ingress.ingest.Ingestor.settled`): every batch of the
   round this replica acknowledged is then in the shards' statistics.
4. **The tallies** are read on one pin of every shard (the statistics queries use: E's counts, an oracle's tallies
   per public key) and turned into the round's support counts
   (:func:`~ldpsynth.shared.heavy_hitters.server.stored_support`, equal to ``support_counts`` of its reports);
   :meth:`~ldpsynth.shared.heavy_hitters.collection.DiscoveryState.close_round` decodes them.
5. **Commit point**: the state (and, after the last round, the results) is written durably
   (:func:`~ldpsynth.aggregator.runtime.discovery.store`), as the offline ``advance`` writes it. On any failure
   the state file is read back and decides: not stored, round r takes reports again with the state as it was
   (the call fails); stored (a write that landed and then reported an error), the close goes on. A crash before
   it restarts serving round r.
6. **Publish**: the next round's card is registered in the log (the shard workers read it from there) and served
   (its sub-collection takes reports, ``GetCollection(name)`` answers the new discovery card). A crash after the
   commit point restarts serving the next round (``serve`` registers it); a failure to register here answers
   UNAVAILABLE and the next call publishes without closing anything more.

Advances of one discovery run one at a time (a lock each), each to its end even if its caller goes away.
A cluster (``--nats``) serves no discovery yet: its replicas would have to agree on the state, which this
one-machine state file does not give.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ldpsynth.aggregator.errors import PinExpired
from ldpsynth.aggregator.query.engine import merge_statistics
from ldpsynth.aggregator.runtime.config import Catalog
from ldpsynth.aggregator.runtime.discovery import open_state, store, summary
from ldpsynth.aggregator.runtime.shards import Shards
from ldpsynth.aggregator.storage.datadir import DataDirError
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import LayoutError, LogUnavailable
from ldpsynth.serving.errors import NotFound, TryLater, WrongState
from ldpsynth.serving.observe import events
from ldpsynth.shared.heavy_hitters.collection import DiscoveryCard, DiscoveryState, round_name
from ldpsynth.shared.heavy_hitters.device import RoundSpec
from ldpsynth.shared.heavy_hitters.server import stored_support

__all__ = ["RoundKeeper", "Intake", "PIN_ATTEMPTS"]

log = events.get(__name__)

#: Reads of a round's tallies whose pins a worker restart released, before the call is answered UNAVAILABLE.
PIN_ATTEMPTS = 3


class Intake(Protocol):
    """What takes the replica's batches (:class:`~ldpsynth.aggregator.ingress.ingest.Ingestor`)."""

    async def settled(self, collection: str) -> None:
        """Wait until no batch of ``collection`` is being committed."""
        ...


class RoundKeeper:
    """The discovery collections of one running replica and their states (module docstring).

    ``data_dir``: the one-machine data directory the states live in (``None``: a cluster, which serves no
    discovery). ``catalog``, ``ingestor`` (its batches' intake), ``shards`` and ``log`` are the replica's.
    """

    def __init__(self, data_dir: Path | None, discoveries: Iterable[DiscoveryCard], catalog: Catalog,
                 ingestor: Intake, shards: Shards, log: ReplicatedLog):
        self._data_dir = data_dir
        self._catalog = catalog
        self._ingestor = ingestor
        self._shards = shards
        self._log = log
        self._states: dict[str, DiscoveryState] = {}
        for card in discoveries:
            assert data_dir is not None, "a discovery is served only with --data-dir"
            state = open_state(data_dir, card.schema)
            if state.card().dumps() != card.dumps():
                raise WrongState(f"the discovery {card.schema.name!r} is served at another round than its stored "
                                 "state's (the state file changed after the server started)")
            self._states[card.schema.name] = state
        self._locks = {name: asyncio.Lock() for name in self._states}

    async def advance(self, name: str) -> dict[str, Any]:
        """Close the open round of the discovery ``name`` (module docstring); what was done, as the offline
        ``advance`` prints it (:func:`~ldpsynth.aggregator.runtime.discovery.summary`)."""
        if name not in self._states:
            if self._data_dir is None:
                raise WrongState("AdvanceRound: a cluster (--nats) serves no discovery collection; discoveries "
                                 "run on a one-machine aggregator (--data-dir)")
            try:
                self._catalog.get(name)
            except WrongState:
                if self._catalog.wide(name) is None:
                    raise NotFound(f"collection: {name[:128]!r} is not served here") from None
            raise WrongState(f"collection: {name[:128]!r} is not a discovery collection (it has no rounds to close)")
        # Shielded: a caller that goes away (a cancelled call, a stop) does not cut a close short between the
        # state's write (in a thread, which runs on) and what follows; the close ends as it would have.
        return await asyncio.shield(self._advance(name))

    async def _advance(self, name: str) -> dict[str, Any]:
        async with self._locks[name]:
            state = self._states[name]
            served = self._catalog.discovery(name)
            if served is None or served.dumps() != state.card().dumps():
                return await self._publish(state)  # an earlier call stored the state but could not publish it
            return await self._close(state)

    async def _close(self, state: DiscoveryState) -> dict[str, Any]:
        name = state.schema.name
        spec = state.spec()  # RoundNotReady once finished
        collection = round_name(name, spec.index)
        support, n = await self._tally(collection, spec)
        need = state.schema.discovery.min_reports_per_round
        if n < need:
            state.close_round(support, n)  # refused (RoundNotReady, the counts): nothing changed
        data_dir = self._data_dir
        assert data_dir is not None
        self._catalog.close_round(name)
        try:
            await self._ingestor.settled(collection)
            support, n = await self._tally(collection, spec)
            state.close_round(support, n)
            try:
                await asyncio.to_thread(store, data_dir, state)
            except DataDirError as exc:
                raise TryLater(f"round {spec.index} of {name!r} was not closed: its state could not be stored "
                               f"({exc}); the round takes reports again") from None
        except BaseException:
            # The state file decides (the commit point): read back, the round is open again unless it was stored.
            self._states[name] = state = await asyncio.to_thread(open_state, data_dir, state.schema)
            if state.round == spec.index:
                self._catalog.reopen_round(name)
                raise
            log.warning("discovery.stored_despite", f"discovery {name!r}: round {spec.index} was stored although its "
                        "close reported a failure; it is closed", collection=name, round=spec.index)
        log.info("discovery.round_closed", f"discovery {name!r}: round {spec.index} closed with {n} reports",
                 collection=name, round=spec.index, reports=n)
        return await self._publish(state)

    async def _publish(self, state: DiscoveryState) -> dict[str, Any]:
        """Register the stored state's open round in the log and serve its card (module docstring, step 6)."""
        card = state.card()
        if card.card is not None:
            try:
                await self._log.register_card(card.card.schema.name, card.card.dumps())
            except LogUnavailable as exc:
                raise TryLater(f"round {state.round - 1} of {state.schema.name!r} is closed and stored, but the log "
                               f"did not register round {state.round} ({exc}); call AdvanceRound again to serve it") \
                    from None
            except LayoutError as exc:
                raise WrongState(str(exc)) from None
        self._catalog.open_round(card)
        return summary(state)

    async def _tally(self, collection: str, spec: RoundSpec) -> tuple[np.ndarray, int]:
        """The round's support counts and reports, from every shard's statistics on one pin each."""
        for _ in range(PIN_ATTEMPTS):
            pins = await self._shards.pin(collection)
            try:
                return stored_support(spec, merge_statistics(await self._shards.pinned_stats(pins, collection)))
            except PinExpired:
                continue
            finally:
                await self._shards.unpin(pins)
        raise TryLater(f"shard workers restarted while {collection!r} was read {PIN_ATTEMPTS} times in a row; retry")

