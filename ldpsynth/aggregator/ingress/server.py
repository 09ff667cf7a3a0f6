"""The aggregator's gRPC server, one *ingress replica*: a thin ``grpc.aio`` layer over the ingest
handler and the query engine, standing on a :class:`~ldpsynth.aggregator.runtime.backend.Backend`.
This module is its lifecycle (start, graceful stop) and the wiring of its parts, each a module:

* ``ldpsynth.v1.CollectionService`` (:mod:`~ldpsynth.aggregator.ingress.collection_service`):
  ``GetCollection``, ``SubmitReports``, ``SubmitBatch`` and ``SubmitShuffled``, registered with a generic
  handler that receives raw request bytes and parses them itself, so garbage bytes end as
  INVALID_ARGUMENT rather than the INTERNAL a failing deserializer produces. Every error a request
  can cause says its status (:mod:`ldpsynth.serving.errors`, :mod:`ldpsynth.aggregator.errors`);
  :func:`~ldpsynth.serving.status.rpc` maps it, and only a bug yields INTERNAL. The web port
  (:mod:`~ldpsynth.aggregator.ingress.web`) calls the same handlers.
* ``ldpsynth.v1.QueryService`` (:mod:`~ldpsynth.aggregator.ingress.query_service`) answers query batches
  and exports the release (role "query"), each on one snapshot of the shards, and closes a discovery
  collection's open round for an operator (``AdvanceRound``, role "operate";
  :mod:`~ldpsynth.aggregator.operate.rounds`).
* Standard health service (:mod:`~ldpsynth.aggregator.ingress.health`): SERVING once every shard worker
  is ready; NOT_SERVING while one is unreachable or damaged (checked every
  :data:`~ldpsynth.aggregator.ingress.health.HEALTH_INTERVAL` seconds) and as a graceful stop
  begins. Reflection only when asked for; message size limits as server options.
* Any number of replicas may serve the same collections (cluster mode): they keep no state, a
  report retried through another replica is still stored once (the shard workers deduplicate).
* Graceful stop (:meth:`AggregatorServer.stop`, SIGTERM): health NOT_SERVING; new report streams
  get UNAVAILABLE; every open report stream is drained: the batches it had admitted are committed
  and acknowledged, then it ends with UNAVAILABLE (clients resend the rest elsewhere or later); the
  streams get ``grace`` seconds for that, then ``stop`` cancels what is left (queries too); then the
  backend closes. No stream ends without a status, no acknowledged report is lost.
* Operating it (:mod:`ldpsynth.serving.observe`): Prometheus metrics on ``--metrics-port``
  (:mod:`~ldpsynth.aggregator.ingress.replica_metrics`), trace spans to ``--otlp-endpoint``, log
  events (JSON lines with ``--log-format json``). Logs, labels and spans carry counts, names of
  collections, shards and statuses; never tokens, peer addresses or report values.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from importlib.metadata import version
from typing import TYPE_CHECKING

import grpc
from grpc_reflection.v1alpha import reflection

from ldpsynth.aggregator.ingress.collection_service import METHODS, SERVICE_NAME, CollectionServicer
from ldpsynth.aggregator.ingress.cors import Cors
from ldpsynth.aggregator.ingress.health import HEALTH_SERVICE_NAME, ReplicaHealth
from ldpsynth.aggregator.ingress.ingest import Ingestor
from ldpsynth.aggregator.ingress.query_service import QUERY_METHODS, QUERY_SERVICE_NAME, QueryServicer
from ldpsynth.aggregator.ingress.quota import QuotaBook
from ldpsynth.aggregator.ingress.replica_metrics import ReplicaMetrics
from ldpsynth.aggregator.ingress.shuffled import ShuffledIngest
from ldpsynth.aggregator.ingress.web import WebApp
from ldpsynth.aggregator.ingress.web_server import WebServer
from ldpsynth.aggregator.operate.rounds import RoundKeeper
from ldpsynth.aggregator.operate.states import FileStates, LogStates, States
from ldpsynth.aggregator.query.engine import QueryEngine, merge_statistics
from ldpsynth.aggregator.runtime.backend import Backend
from ldpsynth.aggregator.runtime.config import Catalog, ConfigError, ServerConfig
from ldpsynth.serving.auth import Authenticator, TokenTable
from ldpsynth.serving.observe import events, tracing
from ldpsynth.serving.observe.metrics import MetricsEndpoint
from ldpsynth.serving.tls import server_credentials
from ldpsynth.shared.estimators.engine import Statistics

if TYPE_CHECKING:
    from ldpsynth.aggregator.runtime.ray_cluster import RayWorkers

log = events.get(__name__)


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class AggregatorServer:
    """One replica: backend, ingest, queries, gRPC server.

    Use ``await start()``, then ``address``; ``await stop()`` for a graceful stop; ``failed`` is
    set (with ``failure``) when the replica cannot go on (its embedded Ray runtime died). ``clock``
    (seconds since the epoch) decides which collections take reports; tests inject one.
    """

    def __init__(self, config: ServerConfig, clock: Callable[[], float] = time.time):
        self.config = config
        self.catalog = Catalog(config.collections, config.limits, wide=config.wide, discoveries=config.discoveries)
        self.clock = clock
        self.metrics = ReplicaMetrics(self.catalog, clock, version("ldpsynth"))
        self.calls = self.metrics.calls.service(SERVICE_NAME, METHODS)
        self.backend: Backend | None = None
        self._ingestor: Ingestor | None = None
        self._shuffled: ShuffledIngest | None = None
        self._collections: CollectionServicer | None = None
        self._queries: QueryServicer | None = None
        self._following: asyncio.Future[None] | None = None  # a cluster's replica reading its discoveries' states
        self._server: grpc.aio.Server | None = None
        self._web: WebServer | None = None
        self._endpoint: MetricsEndpoint | None = None
        self._health = ReplicaHealth(self.metrics)
        self._stopping = False
        self._stopped = asyncio.Event()
        self.failed = asyncio.Event()
        self.failure = ""
        self.address = ""
        self.web_address = ""

    # ----- lifecycle --------------------------------------------------------------------------
    @property
    def metrics_url(self) -> str | None:
        """``http://HOST:PORT/metrics`` when metrics are served."""
        return None if self._endpoint is None else self._endpoint.url

    async def start(self) -> str:
        """Open the backend, then listen; return ``HOST:PORT``."""
        config = self.config
        tokens = (TokenTable.load(config.tokens_file).with_views({**self.catalog.views, **self.catalog.rounds})
                  if config.tokens_file else None)
        authenticator = Authenticator(tokens, mutual_tls=bool(config.tls and config.tls.client_ca))
        credentials = server_credentials(config.tls)
        tracing.configure(config.otlp_endpoint, "ldpsynth-replica")
        await self._health.set(False, False)
        loop = asyncio.get_running_loop()
        try:
            if config.metrics_port is not None:  # first: a scrape sees the replica start (NOT_SERVING)
                try:
                    self._endpoint = MetricsEndpoint(self.metrics.registry, config.metrics_host, config.metrics_port)
                except OSError as exc:
                    where = _host_port(config.metrics_host, config.metrics_port)
                    raise ConfigError(f"--metrics-host/--metrics-port: cannot listen on {where} ({exc.strerror})") \
                        from None
            self.backend = await Backend.open(config, self.catalog,
                                              lambda reason: loop.call_soon_threadsafe(self._fail, reason))
            workers = self.backend.workers
            quota = QuotaBook(workers.num_shards)
            self._ingestor = Ingestor(self.catalog, workers, quota, config.max_group_rows,
                                      sole_replica=self.backend.owns_workers, clock=self.clock,
                                      max_commit_interval=config.max_commit_interval)
            await self._ingestor.load_quota()
            self.catalog.publish_sealing(None if self.backend.opening_key is None else self.backend.opening_key.public)
            self._shuffled = ShuffledIngest(self.catalog, self._ingestor, self.backend.opening_key,
                                            config.open_processes)
            self._collections = CollectionServicer(
                self.catalog, self._ingestor, self._shuffled, authenticator, self.calls, self.metrics,
                config.max_inflight_batches, stopping=lambda: self._stopping, serving=lambda: self.serving,
                storage_full=lambda: None if self.backend is None else self.backend.storage_full)
            if config.cluster is None:
                assert config.data_dir is not None
                states: States = FileStates(config.data_dir)
            else:
                states = LogStates(self.backend.log)
            rounds = await RoundKeeper.open(states, config.discoveries, self.catalog, self._ingestor, workers,
                                            self.backend.log, sole_replica=config.cluster is None)
            if config.cluster is not None and config.discoveries:
                self._following = asyncio.ensure_future(rounds.follow())
                self._ingestor.on_closed = rounds.refresh
            self._queries = QueryServicer(QueryEngine(self.catalog, workers, config.wide_fit),
                                          self._collections.authenticate,
                                          self.metrics.calls.service(QUERY_SERVICE_NAME, QUERY_METHODS), self.metrics,
                                          rounds)
            self._server = self._build_server(self._collections, self._queries)
            port = self._bind(credentials)
            await self._server.start()
            if config.web_port is not None:
                self._web = WebServer(WebApp(self._collections, Cors(config.web_origins),
                                             config.limits.max_message_bytes),
                                      config.host, config.web_port, config.tls)
                self.web_address = _host_port(config.host, await self._web.start())
        except BaseException:
            if self._server is not None:
                await self._server.stop(0)
            await self._release()
            raise
        self.address = _host_port(config.host, port)
        await self._health.set(True, True)
        self._health.watch(self.backend, self._ingestor, lambda: self._stopping)
        key = self.backend.opening_key
        log.info("replica.serving", f"serving {self.catalog.names} on {self.address}: layout {self.backend.layout.id}, "
                 f"{workers.num_shards} shards, "
                 + ("no sealed reports" if key is None else f"sealing key {key.key_id.hex()}"),
                 collections=self.catalog.names, layout=self.backend.layout.id, shards=workers.num_shards,
                 metrics=self.metrics_url is not None, tracing=config.otlp_endpoint is not None,
                 sealing_key=None if key is None else key.key_id.hex())
        if self._web is not None:
            log.info("replica.web_port", f"web port (Connect, gRPC-Web) on {self.web_address}, origins allowed: "
                     + (", ".join(config.web_origins) or "none"), web_address=self.web_address,
                     origins=list(config.web_origins))
        return self.address

    def _fail(self, reason: str) -> None:
        self.failure = reason
        self.failed.set()

    def _build_server(self, collections: CollectionServicer, queries: QueryServicer) -> grpc.aio.Server:
        limit = self.config.limits.max_message_bytes
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", limit),
                                          ("grpc.max_send_message_length", limit),
                                          ("grpc.so_reuseport", 0)])
        server.add_generic_rpc_handlers((collections.handlers(), queries.handlers()))
        self._health.add_to(server)
        if self.config.reflection:
            reflection.enable_server_reflection(
                (SERVICE_NAME, QUERY_SERVICE_NAME, HEALTH_SERVICE_NAME, reflection.SERVICE_NAME), server)
        return server

    def _bind(self, credentials: grpc.ServerCredentials | None) -> int:
        assert self._server is not None
        target = _host_port(self.config.host, self.config.port)
        try:
            if credentials is None:
                return self._server.add_insecure_port(target)
            return self._server.add_secure_port(target, credentials)
        except RuntimeError as exc:
            raise ConfigError(f"--host/--port: cannot listen on {target} ({exc})") from None

    async def stop(self, grace: float | None = None) -> None:
        """Graceful stop (see the module docstring): NOT_SERVING, drain the report streams within
        ``grace`` seconds (default ``--grace``), ``stop`` the server, close the backend."""
        if self._stopping:
            await self._stopped.wait()
            return
        self._stopping = True
        loop = asyncio.get_running_loop()
        grace = self.config.grace_seconds if grace is None else grace
        deadline = loop.time() + grace
        self.metrics.draining.set(1)
        await self._health.enter_graceful_shutdown()
        streams = 0 if self._collections is None else self._collections.streams
        log.info("replica.stopping", f"stopping: NOT_SERVING, draining {streams} report streams (grace "
                 f"{grace:.1f} s)", grace_seconds=grace, streams=streams)
        if self._collections is not None:
            self._collections.drain()
        await self._health.unwatch()
        left_open = 0 if self._collections is None else await self._collections.drained(grace)
        if left_open:
            log.warning("replica.drain_incomplete", f"{left_open} report streams still committing after the "
                        f"grace of {grace:.1f} s: they are cancelled (their unacknowledged batches are resent)",
                        streams=left_open)
        left = max(0.0, deadline - loop.time())
        await asyncio.gather(*(server.stop(left) for server in (self._server, self._web) if server is not None))
        await self._release()
        self._stopped.set()
        log.info("replica.stopped", "stopped")

    async def abandon(self) -> None:
        """Stop after a fatal failure (the Ray runtime is gone): no graceful stop of the workers, which
        cannot be reached; close the port and the embedded log, release the data directory. The
        caller exits (the reaper ends what is left of the runtime)."""
        self._stopping = True
        await self._health.set(False, False)
        await asyncio.gather(*(server.stop(0) for server in (self._server, self._web) if server is not None))
        if self.backend is not None:
            await self.backend.abandon()

    async def _release(self) -> None:
        if self._following is not None:
            self._following.cancel()
            self._following = None
        if self._shuffled is not None:
            self._shuffled.close()
        if self._ingestor is not None:
            await self._ingestor.close()
        if self.backend is not None:
            await self.backend.close()
            self.backend = None
        if self._endpoint is not None:
            self._endpoint.stop()
            self._endpoint = None
        tracing.flush()

    # ----- data access (tests, the simulator) -----------------------------------------------
    @property
    def workers(self) -> RayWorkers:
        if self.backend is None:
            raise RuntimeError("the server is not started")
        return self.backend.workers

    async def statistics(self, collection: str) -> Statistics:
        """Sufficient statistics of ``collection`` over all shards, on one snapshot (a frequency oracle's:
        its tallies per public key)."""
        self.catalog.get(collection)
        workers = self.workers
        pins = await workers.pin(collection)
        try:
            return merge_statistics(await workers.pinned_stats(pins, collection))
        finally:
            await workers.unpin(pins)

    async def stored(self, collection: str) -> int:
        """Reports of ``collection`` stored (applied by the shard workers)."""
        return sum(status.rows.get(collection, 0) for status in await self.workers.status())

    @property
    def serving(self) -> bool:
        """Whether batches can be stored now (the health of ``ldpsynth.v1.CollectionService``)."""
        return self._health.serving[0] and not self._stopping
