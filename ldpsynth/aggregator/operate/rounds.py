"""Closing a discovery collection's open round on a running aggregator, one machine or a cluster of replicas
(``QueryService.AdvanceRound``, role ``operate``; docs/heavy-hitters.md, "The lifecycle on a running server").

**Where the close is atomic.** Every replica commits its batches through the shard workers, and each shard has
one worker, the single writer of the shard's log (a named Ray actor every replica finds; its appends fenced on the
log's last sequence, :mod:`ldpsynth.aggregator.storage.shard_worker`). So the close is made there: the log's KV
bucket records the round's sub-collection as closed (``closed.<hex name>``, read by a worker that starts later),
then every worker closes it in turn with its commits (under its writer lock): a commit made before is applied
(in the statistics a pin reads), none after stores a report of the round (its segment is refused,
:class:`~ldpsynth.aggregator.errors.ClosedToReports`, FAILED_PRECONDITION, whichever replica sent it). The
tallies read after that are the round's reports in the log, for good: every report any replica acknowledged is in
them. A batch spanning shards can be refused by a worker that closed and committed by one that had not yet; its
stored part is a report of the round like any other and is counted, though its batch was not acknowledged.

The state is agreed through one commit point (:mod:`ldpsynth.aggregator.operate.states`): on one machine the state
file; on a cluster the key ``discovery.<hex name>`` of the log's KV bucket, stored by compare-and-set on the
revision the replica read. Two replicas closing one round at once read the same closed tallies and decode the same
state; one stores it, the other finds the revision changed and serves the stored state.

:meth:`RoundKeeper.advance` of the discovery ``name`` whose open round r is served as ``name/round-r``:

1. **Enough reports?** The round's reports are counted from the shards' statistics; below
   ``min_reports_per_round`` the call is refused (:class:`~ldpsynth.shared.heavy_hitters.collection.RoundNotReady`,
   FAILED_PRECONDITION with the counts) and nothing changes.
2. **Intake stops** here (:meth:`~ldpsynth.aggregator.runtime.config.Catalog.close_round`, synchronous; a batch
   that passed admission before is re-checked once its quota is settled, so none slips in between), this
   replica's in-flight batches settle (:meth:`~ldpsynth.aggregator.ingress.ingest.Ingestor.settled`), then the
   log and every shard worker close the round (above).
3. **The tallies** are read on one pin of every shard (E's counts, an oracle's tallies per public key) and turned
   into the round's support counts (:func:`~ldpsynth.shared.heavy_hitters.server.stored_support`, equal to
   ``support_counts`` of its reports); :meth:`~ldpsynth.shared.heavy_hitters.collection.DiscoveryState.close_round`
   decodes them.
4. **Commit point**: the state is stored. On any failure it is read back and decides: not stored, round r takes
   reports again (the log's record of the close removed, the workers reopened) and the call fails; stored (a write
   that landed and then reported an error, or another replica's close), the close goes on.
5. **Publish**: the next round's card is registered in the log (the shard workers read it from there) and served.
   A failure to register answers UNAVAILABLE and the next call publishes without closing anything more.

Each call first reads the stored state: a replica that has not yet followed another's close serves the stored
round, then closes it (the round open for every replica, never one already closed).

The other replicas of a cluster learn the new state by reading the key (:meth:`RoundKeeper.follow`, every
:data:`FOLLOW_SECONDS`): they register and serve the new round's card. Until then they may still hand out round
r's card, but the workers refuse its batches, so nothing is lost or counted late; polling keeps this off the
device path (nats-py's KV watcher can end early, nats-io/nats.py#842). A batch the workers refuse as closed makes
its replica read the state before it answers (``Ingestor.on_closed``), so a device that fetches the card again is
told its round has passed. A replica that starts reads the state.

Advances of one discovery run one at a time on a replica (a lock each), each to its end even if its caller goes
away.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np

from ldpsynth.aggregator.errors import PinExpired, ShardUnavailable
from ldpsynth.aggregator.operate.states import StateConflict, States
from ldpsynth.aggregator.query.engine import merge_statistics
from ldpsynth.aggregator.runtime.config import Catalog
from ldpsynth.aggregator.runtime.discovery import summary
from ldpsynth.aggregator.runtime.shards import Shards
from ldpsynth.aggregator.storage.datadir import DataDirError
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import LayoutError, LogUnavailable
from ldpsynth.serving.errors import NotFound, TryLater, WrongState
from ldpsynth.serving.observe import events
from ldpsynth.shared.heavy_hitters.collection import DiscoveryCard, DiscoveryState, round_name
from ldpsynth.shared.heavy_hitters.device import RoundSpec
from ldpsynth.shared.heavy_hitters.server import stored_support

__all__ = ["RoundKeeper", "Intake", "PIN_ATTEMPTS", "FOLLOW_SECONDS"]

log = events.get(__name__)

#: Reads of a round's tallies whose pins a worker restart released, before the call is answered UNAVAILABLE.
PIN_ATTEMPTS = 3
#: Seconds between two reads of a cluster's discovery states by a replica (:meth:`RoundKeeper.follow`).
FOLLOW_SECONDS = 0.5


class Intake(Protocol):
    """What takes the replica's batches (:class:`~ldpsynth.aggregator.ingress.ingest.Ingestor`)."""

    async def settled(self, collection: str) -> None:
        """Wait until no batch of ``collection`` is being committed."""
        ...


class RoundKeeper:
    """The discovery collections of one running replica and their states (module docstring); made by :meth:`open`.

    ``store`` keeps the states (the commit point); ``states`` the ones served now. ``catalog``, ``ingestor`` (its
    batches' intake), ``shards`` and ``log`` are the replica's.
    """

    def __init__(self, store: States, states: Iterable[DiscoveryState], catalog: Catalog, ingestor: Intake,
                 shards: Shards, log: ReplicatedLog):
        self._store = store
        self._catalog = catalog
        self._ingestor = ingestor
        self._shards = shards
        self._log = log
        self._states = {state.schema.name: state for state in states}
        self._locks = {name: asyncio.Lock() for name in self._states}

    @classmethod
    async def open(cls, store: States, discoveries: Iterable[DiscoveryCard], catalog: Catalog, ingestor: Intake,
                   shards: Shards, log: ReplicatedLog, sole_replica: bool = False) -> RoundKeeper:
        """The keeper of the discoveries served with the cards ``discoveries``, their states read from ``store``.
        A state stored at a later round (a cluster's other replica closed one since the cards were made) is
        served at once; any other change is refused (:class:`WrongState`).

        ``sole_replica`` (one machine): an open round a crash left closed before its commit point takes reports
        again, as no other replica can be closing it. A cluster leaves it closed (another replica may be between
        its close and its commit point): the next ``AdvanceRound`` decodes it."""
        states, later = [], []
        for card in discoveries:
            state = await store.read(card.schema)
            if state.card().dumps() != card.dumps():
                if card.round is None or state.round <= card.round:
                    raise WrongState(f"the discovery {card.schema.name!r} is served at another round than its "
                                     "stored state's (the state changed after the server started)")
                later.append(state)
            states.append(state)
        keeper = cls(store, states, catalog, ingestor, shards, log)
        for state in later:
            await keeper._publish(state)
        if sole_replica:
            for state in states:
                if not state.finished:
                    await keeper._reopen(state.schema.name, round_name(state.schema.name, state.round))
        return keeper

    async def advance(self, name: str) -> dict[str, Any]:
        """Close the open round of the discovery ``name`` (module docstring); what was done, as the offline
        ``advance`` prints it (:func:`~ldpsynth.aggregator.runtime.discovery.summary`)."""
        if name not in self._states:
            try:
                self._catalog.get(name)
            except WrongState:
                if self._catalog.wide(name) is None:
                    raise NotFound(f"collection: {name[:128]!r} is not served here") from None
            raise WrongState(f"collection: {name[:128]!r} is not a discovery collection (it has no rounds to close)")
        # Shielded: a caller that goes away (a cancelled call, a stop) does not cut a close short between the
        # state's store and what follows; the close ends as it would have.
        return await asyncio.shield(self._advance(name))

    async def _advance(self, name: str) -> dict[str, Any]:
        async with self._locks[name]:
            state = self._states[name]
            stored = await self._store.read(state.schema)
            if stored.round > state.round:  # another replica closed a round: serve it, then close the open one
                self._states[name] = state = stored
                await self._publish(state)
            else:
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
        self._catalog.close_round(name)
        try:
            await self._ingestor.settled(collection)
            try:
                await self._log.close_collection(collection)
            except LogUnavailable as exc:
                raise TryLater(f"round {spec.index} of {name!r} was not closed: the log did not record its close "
                               f"({exc}); the round takes reports again") from None
            await self._shards.close_collection(collection)
            support, n = await self._tally(collection, spec)
            state.close_round(support, n)
            try:
                await self._store.store(state)
            except (DataDirError, LogUnavailable) as exc:
                raise TryLater(f"round {spec.index} of {name!r} was not closed: its state could not be stored "
                               f"({exc}); the round takes reports again") from None
        except BaseException as exc:
            # The stored state decides (the commit point): read back, the round is open again unless it was stored.
            self._states[name] = state = await self._store.read(state.schema)
            if state.round == spec.index:
                await self._reopen(name, collection)
                if isinstance(exc, StateConflict):
                    raise TryLater(f"round {spec.index} of {name!r} was not closed: its state changed meanwhile; "
                                   "retry") from None
                raise
            if not isinstance(exc, StateConflict):
                log.warning("discovery.stored_despite", f"discovery {name!r}: round {spec.index} was stored although "
                            "its close reported a failure; it is closed", collection=name, round=spec.index)
        log.info("discovery.round_closed", f"discovery {name!r}: round {state.round - 1} closed with "
                 f"{state.closed[-1][1]} reports", collection=name, round=state.round - 1, reports=state.closed[-1][1])
        return await self._publish(state)

    async def _reopen(self, name: str, collection: str) -> None:
        """Round ``collection`` of ``name`` takes reports again: here, in the log's record, at the workers. If the
        log or a worker does not answer, the round stays closed where it is (its batches refused) until the next
        ``AdvanceRound`` closes it."""
        self._catalog.reopen_round(name)
        try:
            await self._log.reopen_collection(collection)
            await self._shards.reopen_collection(collection)
        except (LogUnavailable, ShardUnavailable) as exc:
            log.warning("discovery.reopen_failed", f"discovery {name!r}: {collection!r} could not be reopened ({exc}); "
                        "its batches are refused until AdvanceRound closes it", collection=name)

    async def _publish(self, state: DiscoveryState) -> dict[str, Any]:
        """Register the stored state's open round in the log and serve its card (module docstring, step 5)."""
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

    async def refresh(self) -> None:
        """Serve each discovery's stored state if it is past the one served here (another replica closed a round).
        """
        for name in self._states:
            async with self._locks[name]:
                stored = await self._store.read(self._states[name].schema)
                if stored.round > self._states[name].round:
                    self._states[name] = stored
                    await self._publish(stored)
                    log.info("discovery.round_followed", f"discovery {name!r}: round {stored.round} served, as "
                             "stored by another replica", collection=name, round=stored.round)

    async def follow(self, every: float = FOLLOW_SECONDS) -> None:
        """:meth:`refresh` every ``every`` seconds, until cancelled (a cluster's replica)."""
        while True:
            await asyncio.sleep(every)
            try:
                await self.refresh()
            except (LogUnavailable, TryLater, WrongState) as exc:
                log.warning("discovery.follow_failed", f"the discoveries' states could not be read ({exc})",
                            detail=str(exc))

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

