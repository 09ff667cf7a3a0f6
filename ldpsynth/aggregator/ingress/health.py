"""A replica's health: the standard gRPC health service (``grpc.health.v1``) and the loop that keeps it true.

The whole server (``""``) and ``ldpsynth.v1.CollectionService`` are SERVING when batches can be stored,
``ldpsynth.v1.QueryService`` when queries can be answered: both NOT_SERVING while a shard worker is
unreachable or damaged (checked every :data:`HEALTH_INTERVAL` seconds), ingest alone while the log's
storage is full (:meth:`~ldpsynth.aggregator.runtime.backend.Backend.check_storage`), and all of them
as a graceful stop begins. The loop refreshes the shard workers' metrics on the way; the
``ldpsynth_replica_serving`` gauge follows what the service says.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ldpsynth.aggregator.errors import ShardDamaged, ShardFull, ShardUnavailable
from ldpsynth.aggregator.ingress.collection_service import SERVICE_NAME
from ldpsynth.aggregator.ingress.ingest import Ingestor
from ldpsynth.aggregator.ingress.query_service import QUERY_SERVICE_NAME
from ldpsynth.aggregator.ingress.replica_metrics import ReplicaMetrics
from ldpsynth.aggregator.runtime.backend import Backend
from ldpsynth.aggregator.storage.segments import WorkerStatus
from ldpsynth.aggregator.storage.shard_worker import READY
from ldpsynth.serving.observe import events

log = events.get(__name__)

#: Seconds between two health checks of the shard workers.
HEALTH_INTERVAL = 1.0
#: The health service's own name (for reflection).
HEALTH_SERVICE_NAME = health.SERVICE_NAME


class ReplicaHealth:
    """The health service of one replica; ``serving`` is (ingest, queries) as it says them."""

    def __init__(self, metrics: ReplicaMetrics):
        self.serving = (False, False)
        self._metrics = metrics
        self._servicer = health.aio.HealthServicer()
        self._monitor: asyncio.Task[None] | None = None

    def add_to(self, server: grpc.aio.Server) -> None:
        """Serve the health service on ``server``."""
        health_pb2_grpc.add_HealthServicer_to_server(self._servicer, server)

    async def set(self, ingest: bool, queries: bool) -> None:
        """The whole server ("") and CollectionService are SERVING when batches can be stored, the
        QueryService when queries can be answered (a full log stops the first, not the second)."""
        self.serving = (ingest, queries)
        for service, serving in (("", ingest), (SERVICE_NAME, ingest), (QUERY_SERVICE_NAME, queries)):
            self._metrics.serving.labels(service or "all").set(1 if serving else 0)
            await self._servicer.set(service, health_pb2.HealthCheckResponse.SERVING if serving
                                     else health_pb2.HealthCheckResponse.NOT_SERVING)

    async def enter_graceful_shutdown(self) -> None:
        """Every service NOT_SERVING for good (a graceful stop begins)."""
        await self._servicer.enter_graceful_shutdown()
        for service in ("all", SERVICE_NAME, QUERY_SERVICE_NAME):
            self._metrics.serving.labels(service).set(0)

    def watch(self, backend: Backend, ingestor: Ingestor, stopping: Callable[[], bool]) -> None:
        """Start the loop that keeps the health true (:meth:`_watch_workers`) until :meth:`unwatch`, or until
        ``stopping()``."""
        self._monitor = asyncio.create_task(self._watch_workers(backend, ingestor, stopping))

    async def unwatch(self) -> None:
        """Stop the loop."""
        if self._monitor is not None:
            self._monitor.cancel()
            await asyncio.gather(self._monitor, return_exceptions=True)

    async def _watch_workers(self, backend: Backend, ingestor: Ingestor, stopping: Callable[[], bool]) -> None:
        """Health follows the shard workers (NOT_SERVING while one cannot answer or is damaged) and the
        log's storage (ingest NOT_SERVING while it is full; :meth:`Backend.check_storage`); the metrics
        of the workers are refreshed on the way."""
        while not stopping():
            await asyncio.sleep(HEALTH_INTERVAL)
            backend.check_storage()
            full = backend.storage_full
            if full is not None:
                ingestor.refuse_waiting(ShardFull(full))
            self._metrics.storage_full.set(1 if full is not None else 0)
            statuses = await self._observe_workers(backend)
            unsettled = [shard for shard, status in enumerate(statuses)
                         if not isinstance(status, WorkerStatus) or status.state != READY]
            try:  # a worker not ready now is given STATUS_DEADLINE to become so
                if unsettled:
                    await backend.workers.status(shards=unsettled)
                healthy, reason = True, ""
            except (ShardUnavailable, ShardDamaged) as exc:
                healthy, reason = False, str(exc)
            if stopping():
                return
            serving = (healthy and full is None, healthy)
            if serving != self.serving:
                if serving == (True, True):
                    log.info("replica.health", "every shard worker answers and the log has room: SERVING",
                             ingest="SERVING", queries="SERVING")
                elif not healthy:
                    log.warning("replica.health", f"NOT_SERVING: {reason}", ingest="NOT_SERVING",
                                queries="NOT_SERVING", detail=reason)
                else:
                    log.warning("replica.health", f"ingest NOT_SERVING, queries SERVING: {full}",
                                ingest="NOT_SERVING", queries="SERVING", detail=full)
                await self.set(*serving)

    async def _observe_workers(self, backend: Backend) -> list[WorkerStatus | ShardUnavailable]:
        """The workers' statuses as they are (a restarted one says it is restoring), the logs' last
        sequences and Ray's restart counts, for the metrics; the statuses."""
        statuses = await backend.workers.statuses()
        states = await asyncio.gather(*(backend.log.state(k) for k in range(backend.workers.num_shards)),
                                      return_exceptions=True)
        restarts = await asyncio.to_thread(backend.workers.restarts)
        self._metrics.workers.update(statuses, [None if isinstance(s, BaseException) else s.last for s in states],
                                     restarts)
        return statuses
