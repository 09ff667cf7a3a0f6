"""The aggregator's gRPC server, one *ingress replica*: a thin ``grpc.aio`` layer over the ingest
handler and the query engine, standing on a :class:`~ldpsynth.aggregator.runtime.backend.Backend`.

* ``ldpsynth.v1.CollectionService`` is registered with a generic handler that receives raw
  request bytes and parses them itself, so garbage bytes end as INVALID_ARGUMENT rather than
  the INTERNAL a failing deserializer produces. Every error a request can cause says its status
  (:mod:`ldpsynth.serving.errors`, :mod:`ldpsynth.aggregator.errors`); :func:`~ldpsynth.serving.status.rpc` maps it, and
  only a bug yields INTERNAL.
* ``SubmitShuffled`` (role ``shuffler``) takes one shuffled batch of sealed reports, opens them with
  the deployment's sealing key (:mod:`~ldpsynth.aggregator.ingress.shuffled`), and admits and commits
  what opened valid through the same :class:`Ingestor` as ``SubmitReports``; one ``ShuffledAck`` once
  durable, with the reports dropped as undecryptable or invalid.
* ``SubmitReports`` reads batches in order, admits each (validation, authorization, quota),
  lets up to ``max_inflight_batches`` of them commit concurrently, and writes one ``BatchAck``
  per batch, in order, each after its batch is durable in the replicated log. A rejected batch
  ends the stream with its status after the acks of the batches before it; nothing of it is stored.
* ``ldpsynth.v1.QueryService`` (:mod:`~ldpsynth.aggregator.ingress.query_service`) answers query batches
  and exports the release (role "query"), each on one snapshot of the shards.
* Standard health service: SERVING once every shard worker is ready; NOT_SERVING while one is
  unreachable or damaged (checked every :data:`HEALTH_INTERVAL` seconds) and as a graceful stop
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
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from importlib.metadata import version
from typing import TYPE_CHECKING, NamedTuple

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from ldpsynth.aggregator.errors import ShardDamaged, ShardFull, ShardUnavailable
from ldpsynth.aggregator.ingress.cors import Cors
from ldpsynth.aggregator.ingress.ingest import Admitted, Ingestor
from ldpsynth.aggregator.ingress.query_service import QUERY_METHODS, QUERY_SERVICE_NAME, QueryServicer
from ldpsynth.aggregator.ingress.quota import QuotaBook
from ldpsynth.aggregator.ingress.replica_metrics import ReplicaMetrics
from ldpsynth.aggregator.ingress.shuffled import ShuffledIngest
from ldpsynth.aggregator.ingress.web import WebApp
from ldpsynth.aggregator.ingress.web_server import WebServer
from ldpsynth.aggregator.query.engine import QueryEngine, merge_statistics
from ldpsynth.aggregator.runtime.backend import Backend
from ldpsynth.aggregator.runtime.config import Catalog, ConfigError, ServerConfig
from ldpsynth.aggregator.storage.segments import WorkerStatus
from ldpsynth.aggregator.storage.shard_worker import READY
from ldpsynth.serving.auth import QUERY, SHUFFLER, SUBMIT, Authenticator, Credential, TokenTable
from ldpsynth.serving.errors import TryLater
from ldpsynth.serving.observe import events, tracing
from ldpsynth.serving.observe.metrics import MetricsEndpoint
from ldpsynth.serving.status import COLLECTION_NOT_READ, NOT_ACKNOWLEDGED, parse, rpc
from ldpsynth.serving.tls import server_credentials
from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.estimators.engine import Statistics
from ldpsynth.shared.reports import REPORT_ID_BYTES
from ldpsynth.shared.wire import collection_pb2 as pb

if TYPE_CHECKING:
    from ldpsynth.aggregator.runtime.ray_cluster import RayWorkers

log = events.get(__name__)

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["CollectionService"].full_name
#: Seconds between two health checks of the shard workers.
HEALTH_INTERVAL = 1.0
#: The message a graceful stop cancels a stream's reader with while it waits for the next batch.
_DRAIN = "ldpsynth: draining"
_SERVICES = ("", SERVICE_NAME, QUERY_SERVICE_NAME)


class _Pending(NamedTuple):
    """A stream's batch being committed: what it is and its ack (a future)."""

    admitted: Admitted
    ack: asyncio.Future[pb.BatchAck]


def _drained() -> TryLater:
    return TryLater("the server is shutting down; resend the unacknowledged batches to another replica or later")


def _retrieve(future: asyncio.Future[pb.BatchAck]) -> None:
    """Mark the outcome of a commit nobody waits for any more as seen (no "never retrieved" warning)."""
    if not future.cancelled():
        future.exception()


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
        self.catalog = Catalog(config.collections, config.limits)
        self.clock = clock
        self.metrics = ReplicaMetrics(self.catalog, clock, version("ldpsynth"))
        self.calls = self.metrics.calls.service(SERVICE_NAME, ("GetCollection", "SubmitReports", "SubmitBatch",
                                                                         "SubmitShuffled"))
        self.backend: Backend | None = None
        self._ingestor: Ingestor | None = None
        self._shuffled: ShuffledIngest | None = None
        self._queries: QueryServicer | None = None
        self._server: grpc.aio.Server | None = None
        self._web: WebServer | None = None
        self._endpoint: MetricsEndpoint | None = None
        self._health = health.aio.HealthServicer()
        self._authenticator: Authenticator | None = None
        self._monitor: asyncio.Task[None] | None = None
        self._serving = (False, False)  # (ingest, queries) as the health service says
        self._stopping = False
        self._draining = asyncio.Event()  # set as a graceful stop begins: open report streams end
        self._idle_readers: set[asyncio.Task[LdpsynthError | None]] = set()  # streams' readers awaiting a batch
        self._streams = 0  # report streams open
        self._no_streams = asyncio.Event()
        self._no_streams.set()
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
        tokens = TokenTable.load(config.tokens_file) if config.tokens_file else None
        self._authenticator = Authenticator(tokens, mutual_tls=bool(config.tls and config.tls.client_ca))
        credentials = server_credentials(config.tls)
        tracing.configure(config.otlp_endpoint, "ldpsynth-replica")
        await self._set_health(False, False)
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
            self._queries = QueryServicer(QueryEngine(self.catalog, workers), self._authenticate,
                                          self.metrics.calls.service(QUERY_SERVICE_NAME, QUERY_METHODS), self.metrics)
            self._server = self._build_server()
            port = self._bind(credentials)
            await self._server.start()
            if config.web_port is not None:
                self._web = WebServer(WebApp(self, Cors(config.web_origins), config.limits.max_message_bytes),
                                      config.host, config.web_port, config.tls)
                self.web_address = _host_port(config.host, await self._web.start())
        except BaseException:
            if self._server is not None:
                await self._server.stop(0)
            await self._release()
            raise
        self.address = _host_port(config.host, port)
        await self._set_health(True, True)
        self._monitor = asyncio.create_task(self._watch_workers())
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

    async def _set_health(self, ingest: bool, queries: bool) -> None:
        """The whole server ("") and CollectionService are SERVING when batches can be stored, the
        QueryService when queries can be answered (a full log stops the first, not the second)."""
        self._serving = (ingest, queries)
        for service, serving in (("", ingest), (SERVICE_NAME, ingest), (QUERY_SERVICE_NAME, queries)):
            self.metrics.serving.labels(service or "all").set(1 if serving else 0)
            await self._health.set(service, health_pb2.HealthCheckResponse.SERVING if serving
                                   else health_pb2.HealthCheckResponse.NOT_SERVING)

    async def _watch_workers(self) -> None:
        """Health follows the shard workers (NOT_SERVING while one cannot answer or is damaged) and the
        log's storage (ingest NOT_SERVING while it is full; :meth:`Backend.check_storage`); the metrics
        of the workers are refreshed on the way."""
        assert self.backend is not None
        while not self._stopping:
            await asyncio.sleep(HEALTH_INTERVAL)
            self.backend.check_storage()
            full = self.backend.storage_full
            if full is not None and self._ingestor is not None:
                self._ingestor.refuse_waiting(ShardFull(full))
            self.metrics.storage_full.set(1 if full is not None else 0)
            statuses = await self._observe_workers()
            unsettled = [shard for shard, status in enumerate(statuses)
                         if not isinstance(status, WorkerStatus) or status.state != READY]
            try:  # a worker not ready now is given STATUS_DEADLINE to become so
                if unsettled:
                    await self.backend.workers.status(shards=unsettled)
                healthy, reason = True, ""
            except (ShardUnavailable, ShardDamaged) as exc:
                healthy, reason = False, str(exc)
            if self._stopping:
                return
            serving = (healthy and full is None, healthy)
            if serving != self._serving:
                if serving == (True, True):
                    log.info("replica.health", "every shard worker answers and the log has room: SERVING",
                             ingest="SERVING", queries="SERVING")
                elif not healthy:
                    log.warning("replica.health", f"NOT_SERVING: {reason}", ingest="NOT_SERVING",
                                queries="NOT_SERVING", detail=reason)
                else:
                    log.warning("replica.health", f"ingest NOT_SERVING, queries SERVING: {full}",
                                ingest="NOT_SERVING", queries="SERVING", detail=full)
                await self._set_health(*serving)

    async def _observe_workers(self) -> list[WorkerStatus | ShardUnavailable]:
        """The workers' statuses as they are (a restarted one says it is restoring), the logs' last
        sequences and Ray's restart counts, for the metrics; the statuses."""
        assert self.backend is not None
        backend = self.backend
        statuses = await backend.workers.statuses()
        states = await asyncio.gather(*(backend.log.state(k) for k in range(backend.workers.num_shards)),
                                      return_exceptions=True)
        restarts = await asyncio.to_thread(backend.workers.restarts)
        self.metrics.workers.update(statuses, [None if isinstance(s, BaseException) else s.last for s in states],
                                    restarts)
        return statuses

    def _build_server(self) -> grpc.aio.Server:
        limit = self.config.limits.max_message_bytes
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", limit),
                                          ("grpc.max_send_message_length", limit),
                                          ("grpc.so_reuseport", 0)])
        handlers = {
            "GetCollection": grpc.unary_unary_rpc_method_handler(
                self._get_collection, response_serializer=pb.Collection.SerializeToString),
            "SubmitReports": grpc.stream_stream_rpc_method_handler(
                self._submit_reports, response_serializer=pb.BatchAck.SerializeToString),
            "SubmitBatch": grpc.unary_unary_rpc_method_handler(
                self._submit_batch, response_serializer=pb.BatchAck.SerializeToString),
            "SubmitShuffled": grpc.unary_unary_rpc_method_handler(
                self._submit_shuffled, response_serializer=pb.ShuffledAck.SerializeToString),
        }
        assert self._queries is not None
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),
                                         self._queries.handlers()))
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        if self.config.reflection:
            reflection.enable_server_reflection(
                (SERVICE_NAME, QUERY_SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
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
        for service in ("all", SERVICE_NAME, QUERY_SERVICE_NAME):
            self.metrics.serving.labels(service).set(0)
        log.info("replica.stopping", f"stopping: NOT_SERVING, draining {self._streams} report streams (grace "
                 f"{grace:.1f} s)", grace_seconds=grace, streams=self._streams)
        self._draining.set()
        for reader in list(self._idle_readers):
            reader.cancel(_DRAIN)
        if self._monitor is not None:
            self._monitor.cancel()
            await asyncio.gather(self._monitor, return_exceptions=True)
        try:
            if self._streams:
                await asyncio.wait_for(self._no_streams.wait(), grace)
        except asyncio.TimeoutError:
            log.warning("replica.drain_incomplete", f"{self._streams} report streams still committing after the "
                        f"grace of {grace:.1f} s: they are cancelled (their unacknowledged batches are resent)",
                        streams=self._streams)
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
        await self._set_health(False, False)
        await asyncio.gather(*(server.stop(0) for server in (self._server, self._web) if server is not None))
        if self.backend is not None:
            await self.backend.abandon()

    async def _release(self) -> None:
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

    def _authenticate(self, context: grpc.aio.ServicerContext) -> Credential:
        assert self._authenticator is not None
        return self._authenticator.authenticate(context.invocation_metadata() or (), context.auth_context())

    def authenticate_headers(self, headers: Sequence[tuple[str, str]]) -> Credential:
        """The credential of a web call's HTTP headers (no TLS peer identity on the web port)."""
        assert self._authenticator is not None
        return self._authenticator.authenticate(headers, {})

    @property
    def serving(self) -> bool:
        """Whether batches can be stored now (the health of ``ldpsynth.v1.CollectionService``)."""
        return self._serving[0] and not self._stopping

    # ----- the collection service, whatever the transport (gRPC here, the web port in web.py) --------
    def collection(self, credential: Credential, request: pb.GetCollectionRequest) -> pb.Collection:
        """GetCollection: the collection the request names, if the credential may read it."""
        credential.require_role(SUBMIT, QUERY, SHUFFLER)
        credential.require_collection(request.collection)
        return self.catalog.proto(request.collection)

    async def submit_batch(self, credential: Credential, batch: pb.ReportBatch) -> pb.BatchAck:
        """SubmitBatch: one batch, admitted and committed exactly as a batch of SubmitReports; its ack
        once every report of it is durable. Raises the error (with its status) that refuses it."""
        credential.require_role(SUBMIT)
        try:
            admitted = await self._admit(credential, batch)
        except LdpsynthError as exc:
            self.metrics.rejected(batch.collection, len(batch.report_ids) // REPORT_ID_BYTES, exc)
            raise
        return await self._commit_counted(admitted)

    async def _commit_counted(self, admitted: Admitted) -> pb.BatchAck:
        """:meth:`_commit` of a batch admitted outside a report stream, counted in the metrics
        as a stream's batches are."""
        collection = admitted.quota_key[0]
        self.metrics.admitted(collection, admitted.reports)
        try:
            ack = await self._commit(admitted)
        except LdpsynthError as exc:
            self.metrics.not_acknowledged(collection, admitted.reports, exc)
            raise
        self.metrics.acknowledged(collection, ack.accepted, ack.duplicates)
        return ack

    async def _admit(self, credential: Credential, batch: pb.ReportBatch) -> Admitted:
        """A batch's admission: refused while stopping (UNAVAILABLE) or while the log is full, then
        :meth:`Ingestor.admit` (validation, authorization, quota)."""
        assert self._ingestor is not None
        if self._stopping:
            raise TryLater("the server is shutting down; retry the batch")
        self._refuse_if_full()
        return await self._ingestor.admit(credential, batch)

    # ----- gRPC handlers ---------------------------------------------------------------------------
    @rpc("GetCollection", COLLECTION_NOT_READ)
    async def _get_collection(self, raw: bytes, context: grpc.aio.ServicerContext) -> pb.Collection:
        credential = self._authenticate(context)
        return self.collection(credential, parse(pb.GetCollectionRequest, raw))

    @rpc("SubmitBatch", NOT_ACKNOWLEDGED)
    async def _submit_batch(self, raw: bytes, context: grpc.aio.ServicerContext) -> pb.BatchAck:
        credential = self._authenticate(context)
        return await self.submit_batch(credential, parse(pb.ReportBatch, raw))

    @rpc("SubmitReports", NOT_ACKNOWLEDGED)
    async def _submit_reports(self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> None:
        if self._stopping:
            raise TryLater("the server is shutting down; send the batches to another replica or retry later")
        credential = self._authenticate(context)
        credential.require_role(SUBMIT)
        self._streams += 1
        self._no_streams.clear()
        self.metrics.streams.inc()
        try:
            failure = await self._stream(credential, requests, context)
        finally:
            self._streams -= 1
            self.metrics.streams.dec()
            if not self._streams:
                self._no_streams.set()
        if failure is not None:
            raise failure

    @rpc("SubmitShuffled", NOT_ACKNOWLEDGED)
    async def _submit_shuffled(self, raw: bytes, context: grpc.aio.ServicerContext) -> pb.ShuffledAck:
        """One shuffled batch of sealed reports (:mod:`~ldpsynth.aggregator.ingress.shuffled`): opened,
        validated, admitted and committed by the device path's admission and commit; acknowledged once durable."""
        credential = self._authenticate(context)
        credential.require_role(SHUFFLER)
        if self._stopping:
            raise TryLater("the server is shutting down; retry the batch")
        self._refuse_if_full()
        assert self._shuffled is not None
        admission = await self._shuffled.admit(credential, parse(pb.SealedBatch, raw))
        if admission.admitted is None:
            return admission.ack()
        ack = await self._commit_counted(admission.admitted)
        return admission.ack(ack.accepted, ack.duplicates)

    async def _stream(self, credential: Credential, requests: AsyncIterator[bytes],
                      context: grpc.aio.ServicerContext) -> LdpsynthError | None:
        """Admit batches in order, commit up to ``max_inflight_batches`` at once, ack in order.

        One reader task admits; this task writes the acks as the commits (futures, no task each) end.
        Returns the error that ends the stream (``None``: the client closed it)."""
        commits: asyncio.Queue[_Pending | None] = asyncio.Queue()
        reader = asyncio.create_task(self._read(credential, requests, commits))
        failure: LdpsynthError | None = None
        try:
            while (item := await commits.get()) is not None:
                try:
                    ack = await item.ack
                except LdpsynthError as exc:
                    self.metrics.not_acknowledged(item.admitted.quota_key[0], item.admitted.reports, exc)
                    failure = exc
                    break
                await context.write(ack)
                self.metrics.acknowledged(item.admitted.quota_key[0], ack.accepted, ack.duplicates)
        finally:
            if not reader.done():
                reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            while not commits.empty():  # batches admitted after a failed one: never acknowledged
                if (item := commits.get_nowait()) is not None:
                    self.metrics.not_acknowledged(item.admitted.quota_key[0], item.admitted.reports,
                                                  failure or TryLater("the stream ended"))
                    item.ack.add_done_callback(_retrieve)
        return failure if failure is not None else reader.result()

    def _refuse_if_full(self, full: str | None = None) -> None:
        """RESOURCE_EXHAUSTED at once while the log's storage is full (nothing of the batch is stored)."""
        full = full or (self.backend.storage_full if self.backend is not None else None)
        if full is not None:
            raise ShardFull(full)

    async def _read(self, credential: Credential, requests: AsyncIterator[bytes],
                    commits: asyncio.Queue[_Pending | None]) -> LdpsynthError | None:
        """Read and admit the stream's batches until it ends, one is refused, or a graceful stop
        begins (then :class:`TryLater`: what was admitted is still committed and acknowledged). At most
        ``max_inflight_batches`` of them are being committed: the reader waits for the oldest first.
        While it waits for the next batch a graceful stop cancels it (:data:`_DRAIN`)."""
        batches = requests.__aiter__()
        window: deque[asyncio.Future[pb.BatchAck]] = deque()
        task = asyncio.current_task()
        assert task is not None
        try:
            while True:
                while window and window[0].done():
                    window.popleft()
                if len(window) >= self.config.max_inflight_batches:
                    await asyncio.wait((window[0],))
                    continue
                if self._draining.is_set():
                    return _drained()
                self._idle_readers.add(task)
                try:
                    raw = await batches.__anext__()
                except StopAsyncIteration:
                    return None
                except asyncio.CancelledError as exc:
                    if exc.args == (_DRAIN,):
                        return _drained()
                    raise
                finally:
                    self._idle_readers.discard(task)
                collection, reports = "", 0
                try:
                    batch = parse(pb.ReportBatch, raw)
                    collection, reports = batch.collection, len(batch.report_ids) // REPORT_ID_BYTES
                    admitted = await self._admit(credential, batch)
                except LdpsynthError as exc:
                    self.metrics.rejected(collection, reports, exc)
                    return exc
                self.metrics.admitted(collection, admitted.reports)
                pending = _Pending(admitted, self._commit(admitted))
                window.append(pending.ack)
                commits.put_nowait(pending)
        finally:
            commits.put_nowait(None)

    def _commit(self, admitted: Admitted) -> asyncio.Future[pb.BatchAck]:
        """The batch's commit (:meth:`Ingestor.commit`): its ack once durable, the commit's duration
        observed when it is acknowledged (:meth:`ReplicaMetrics.committed`)."""
        assert self._ingestor is not None
        ack = self._ingestor.commit(admitted)
        ack.add_done_callback(partial(self.metrics.committed, admitted.quota_key[0], time.perf_counter()))
        return ack
