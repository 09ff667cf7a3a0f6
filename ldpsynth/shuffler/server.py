"""The shuffler's gRPC server: ``ldpsynth.v1.ShufflerService.SubmitSealed`` on ``grpc.aio``
(docs/contract.md §16; ``ldpsynth shuffler serve``).

Registered with a generic handler that receives the raw request bytes (as the replicas do), so bytes
that are not a ``SealedBatch`` end INVALID_ARGUMENT; every error ends the call through the one
error-to-status mapping (:func:`~ldpsynth.serving.status.rpc`), the replicas' vocabulary. A call is
checked, in this order, before any of it is pooled:

1. the caller's credential, when the shuffler has a tokens file (devices' tokens, as on the
   replicas; :mod:`~ldpsynth.serving.auth`): UNAUTHENTICATED / PERMISSION_DENIED (role ``submit``, the
   collection);
2. the collection: one the replicas serve to this shuffler and that takes sealed reports
   (FAILED_PRECONDITION otherwise; :mod:`~ldpsynth.shuffler.directory`);
3. ``key_id``: 16 bytes (INVALID_ARGUMENT), the collection's key (FAILED_PRECONDITION: seal to the
   key the aggregator publishes);
4. ``pool_key`` below the collection's public domain size (INVALID_ARGUMENT);
5. at most ``max_batch_reports`` reports (RESOURCE_EXHAUSTED), ``reports`` a non-zero multiple of
   ``sealed_report_bytes`` (INVALID_ARGUMENT);
6. for a shuffled collection, a device the shuffler can tell apart from others: without device
   credentials (no tokens file, no mutual TLS) FAILED_PRECONDITION, unless the shuffler was started
   with ``anonymous_devices`` (the collection's guarantee then rests on an assumption nobody enforces);
7. the device's quota (:mod:`~ldpsynth.shuffler.quota`: on by default for shuffled collections):
   RESOURCE_EXHAUSTED; counted in this process, or with ``quota_nats`` in a NATS JetStream bucket that
   every shuffler process of the tier shares (:mod:`~ldpsynth.shuffler.quota_nats`; a store that does
   not answer: UNAVAILABLE).

Then the reports wait in the pool of their collection and public key (:mod:`~ldpsynth.shuffler.pools`)
and the call is answered ``SealedAck{sequence, accepted = n}`` once the replicas acknowledged them.
Nothing of a call (its peer address, metadata, token, sequence, arrival order) is kept beyond it or
forwarded, and the log holds only counts and collection names: never ciphertexts, addresses or tokens.
The standard gRPC health service answers SERVING while the shuffler takes calls and NOT_SERVING once
it is stopping.
"""

from __future__ import annotations

import time
from importlib.metadata import version

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ldpsynth.client.transport import channel_credentials, grpc_target
from ldpsynth.serving.auth import SUBMIT, Authenticator, TokenTable
from ldpsynth.serving.errors import ConfigError, LimitExceeded, TryLater, WrongState
from ldpsynth.serving.observe import events, tracing
from ldpsynth.serving.observe.metrics import MetricsEndpoint
from ldpsynth.serving.status import NOT_ACKNOWLEDGED, parse, rpc
from ldpsynth.serving.tls import server_credentials
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.sealing import KEY_ID_BYTES, split_sealed
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import shuffler_pb2 as spb
from ldpsynth.shuffler.config import ShufflerConfig
from ldpsynth.shuffler.directory import Directory
from ldpsynth.shuffler.forward import Forwarder
from ldpsynth.shuffler.metrics import ShufflerMetrics
from ldpsynth.shuffler.pools import Pools
from ldpsynth.shuffler.quota import DeviceQuota, LocalQuotas, QuotaStore
from ldpsynth.shuffler.quota_nats import LEASE_MARGIN, NatsQuotas

log = events.get(__name__)

SERVICE_NAME = spb.DESCRIPTOR.services_by_name["ShufflerService"].full_name
#: Largest message the shuffler takes or sends (a collection's own limit is checked per batch).
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class ShufflerServer:
    """One shuffler process: ``await start()`` (returns the address), ``await stop()``."""

    def __init__(self, config: ShufflerConfig, quotas: QuotaStore | None = None):
        self.config = config
        self.address = ""
        self.metrics = ShufflerMetrics(SERVICE_NAME, version("ldpsynth"))
        self.calls = self.metrics.calls
        self._endpoint: MetricsEndpoint | None = None
        self._stopping = False
        self._server: grpc.aio.Server | None = None
        self._channel: grpc.aio.Channel | None = None
        self._pools: Pools | None = None
        self._directory: Directory | None = None
        self._authenticator: Authenticator | None = None
        self._quotas_given = quotas is not None
        self._quota = DeviceQuota(config.max_reports_per_device, quotas if quotas is not None else LocalQuotas())
        self._health = health.aio.HealthServicer()

    async def start(self) -> str:
        """Open the quota store (``quota_nats``: :class:`ConfigError` if it cannot be reached), the channel
        to the replicas, and listen.

        Returns
        -------
        str
            ``HOST:PORT`` the shuffler serves on (the real port when ``listen`` asked for port 0).
        """
        await self._open_quota_store()
        try:
            return await self._listen()
        except BaseException:
            await self._quota.store.close()
            raise

    async def _open_quota_store(self) -> None:
        config = self.config
        if self._quotas_given:
            return
        if config.quota_nats is not None:
            # A lease outlasts a call's wait for its pool and its forward's retries (quota_nats: LEASE_MARGIN).
            self._quota.store = await NatsQuotas.connect(
                config.quota_nats, lease=config.max_wait + config.patience + LEASE_MARGIN)
        elif config.max_reports_per_device != 0 and config.identified_devices:
            log.warning("shuffler.quota_per_process", "the per-device quota is counted in this process only: behind "
                        "several shuffler processes a device gets one quota per process; give every process of the "
                        "tier one store with --quota-nats")

    async def _listen(self) -> str:
        config = self.config
        tokens = TokenTable.load(config.tokens_file) if config.tokens_file else None
        self._authenticator = Authenticator(tokens, mutual_tls=bool(config.tls and config.tls.client_ca))
        credentials = server_credentials(config.tls)
        tracing.configure(config.otlp_endpoint, "ldpsynth-shuffler")
        if config.metrics_port is not None:
            try:
                self._endpoint = MetricsEndpoint(self.metrics.registry, config.metrics_host, config.metrics_port)
            except OSError as exc:
                raise ConfigError(f"--metrics-host/--metrics-port: cannot listen on {config.metrics_host}:"
                                  f"{config.metrics_port} ({exc.strerror})") from None
        toward_replicas = channel_credentials(config.aggregator_ca, config.aggregator_cert, config.aggregator_key)
        metadata = (("authorization", f"Bearer {config.token}"),) if config.token else ()
        sizes = [("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                 ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
        replicas, balancing = grpc_target(config.aggregator)  # several replicas: round robin, as the SDK's
        self._channel = (grpc.aio.insecure_channel(replicas, options=sizes + balancing) if toward_replicas is None
                         else grpc.aio.secure_channel(replicas, toward_replicas, options=sizes + balancing))
        self._directory = Directory(self._channel, metadata)
        self._pools = Pools(Forwarder(self._channel, metadata, config.patience), config.threshold, config.max_wait)
        server = grpc.aio.server(options=[*sizes, ("grpc.so_reuseport", 0)])
        handler = grpc.unary_unary_rpc_method_handler(self._submit_sealed,
                                                      response_serializer=spb.SealedAck.SerializeToString)
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE_NAME, {"SubmitSealed": handler}),))
        health_pb2_grpc.add_HealthServicer_to_server(self._health, server)
        host = config.listen.rpartition(":")[0]
        try:
            bound = (server.add_insecure_port(config.listen) if credentials is None
                     else server.add_secure_port(config.listen, credentials))
        except RuntimeError as exc:
            if self._endpoint is not None:
                self._endpoint.stop()
                self._endpoint = None
            raise ConfigError(f"--listen: cannot listen on {config.listen} ({exc})") from None
        self._server = server
        await server.start()
        for service in ("", SERVICE_NAME):
            await self._health.set(service, health_pb2.HealthCheckResponse.SERVING)
        self.address = f"{host}:{bound}"
        log.info("shuffler.serving", f"shuffling on {self.address} toward the aggregator (threshold "
                 f"{config.threshold}, max wait {config.max_wait:g} s)", threshold=config.threshold,
                 max_wait=config.max_wait, metrics=self.metrics_url is not None)
        return self.address

    @property
    def metrics_url(self) -> str | None:
        """``http://HOST:PORT/metrics`` when metrics are served."""
        return None if self._endpoint is None else self._endpoint.url

    async def stop(self, grace: float | None = None) -> None:
        """Refuse new calls (UNAVAILABLE), answer the waiting ones UNAVAILABLE, let the forwards under way
        finish within ``grace`` seconds, close the channel.

        Parameters
        ----------
        grace : float or None, default None
            Seconds; ``None``: the configured grace.

        Returns
        -------
        None
        """
        self._stopping = True
        await self._health.enter_graceful_shutdown()
        if self._pools is not None:
            await self._pools.close()
        if self._server is not None:
            await self._server.stop(self.config.grace if grace is None else grace)
        if self._channel is not None:
            await self._channel.close()
        if self._endpoint is not None:
            self._endpoint.stop()
            self._endpoint = None
        await self._quota.store.close()
        tracing.flush()

    @rpc("SubmitSealed", NOT_ACKNOWLEDGED)
    async def _submit_sealed(self, raw: bytes, context: grpc.aio.ServicerContext) -> spb.SealedAck:
        assert self._authenticator is not None and self._directory is not None and self._pools is not None
        credential = self._authenticator.authenticate(context.invocation_metadata() or (), context.auth_context())
        credential.require_role(SUBMIT)
        batch = parse(pb.SealedBatch, raw)
        credential.require_collection(batch.collection)
        if self._stopping:
            raise TryLater("the shuffler is stopping; retry the batch")
        route = await self._directory.route(batch.collection)
        key_id = bytes(batch.key_id)
        if len(key_id) != KEY_ID_BYTES:
            raise ValidationError("key_id", f"{KEY_ID_BYTES} bytes (Collection.sealing.key_id)",
                                  f"got {len(key_id)} bytes")
        if key_id != route.key_id:
            raise WrongState(f"key_id: the reports are sealed to key {key_id.hex()!r}, the aggregator's key for "
                             f"collection {route.name!r} is {route.key_id.hex()!r}; fetch the collection again "
                             "(GetCollection: Collection.sealing) and seal to its key")
        if batch.pool_key >= route.public_keys:
            raise ValidationError("pool_key", f"the reports' public key, an integer in [0, {route.public_keys})",
                                  f"got {batch.pool_key}")
        claimed = len(batch.reports) // route.sealed_report_bytes
        if claimed > route.limits.max_batch_reports:
            raise LimitExceeded(f"reports: at most max_batch_reports = {route.limits.max_batch_reports} reports per "
                                f"batch, got {claimed}")
        rows = split_sealed(batch.reports, route.sealed_report_bytes)
        if route.shuffled and not self.config.identified_devices and not self.config.anonymous_devices:
            raise WrongState(f"collection {route.name!r} is shuffled: its central guarantee assumes each device sends "
                             f"at most {route.rows_per_device} reports, which this shuffler cannot enforce without "
                             "device credentials (--tokens or --tls-client-ca); its operator may start it with "
                             "--anonymous-devices to forward them anyway")
        # Devices the shuffler cannot tell apart share no quota: one limit would bound them all together.
        reservation = (await self._quota.reserve(credential.id, route, len(rows))
                       if self.config.identified_devices else None)
        self.metrics.pooled_call(route.name, len(rows))
        start, acknowledged = time.perf_counter(), False
        try:
            await self._pools.submit(route, int(batch.pool_key), rows)
            acknowledged = True
        except WrongState:
            self._directory.forget(route.name)
            raise
        finally:
            if reservation is not None and not acknowledged:
                await self._quota.release(reservation)
            self.metrics.ended_call(route.name, len(rows), acknowledged, time.perf_counter() - start)
        if reservation is not None:
            await self._quota.confirm(reservation)  # TryLater if the store does not answer: the device resends
        return spb.SealedAck(sequence=batch.sequence, accepted=len(rows))

