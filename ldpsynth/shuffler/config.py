"""The configuration of one shuffler process (``ldpsynth shuffler serve``; docs/contract.md §16):
:class:`ShufflerConfig`, which checks itself as the replicas' ``ServerConfig`` does, so the command
only maps its flags to fields; :class:`~ldpsynth.shuffler.server.ShufflerServer` runs it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ldpsynth.serving.errors import ConfigError, flag_checks
from ldpsynth.serving.observe.tracing import check_endpoint
from ldpsynth.serving.tls import TlsFiles, check_pair
from ldpsynth.shared.validation import check_int, check_seconds
from ldpsynth.shuffler.quota_nats import QuotaNats


@dataclass(frozen=True)
class ShufflerConfig:
    """How one shuffler process runs (the flags of ``ldpsynth shuffler serve``), checked as it is made:
    a value out of its range is a ConfigError naming its flag, as the replicas' ``ServerConfig``.

    Parameters
    ----------
    listen : str
        ``HOST:PORT`` to serve devices on (port 0: a free one).
    aggregator : str
        ``HOST:PORT`` of the replicas (a load balancer, or one replica), or several comma-separated
        (round robin; a replica that fails drops out of the rotation, its batches are resent to the others).
    token : str or None
        The shuffler's own bearer token toward the replicas (a credential with the role ``shuffler``).
    threshold : int
        T: the fewest reports a pool is released with, before its noise (>= 1).
    max_wait : float
        Seconds a pool may wait for its threshold before its calls end UNAVAILABLE.
    tokens_file : Path or None, default None
        The devices' tokens (the replicas' format); ``None``: devices are not authenticated.
    tls : TlsFiles or None, default None
        The shuffler's certificate and key toward devices (with a client CA: mutual TLS), as the
        replicas' ``--tls-*``; ``None``: an insecure port (loopback only).
    aggregator_ca, aggregator_cert, aggregator_key : Path or None, default None
        TLS toward the replicas: the CA of their certificate, and for mutual TLS the shuffler's own
        certificate and key; no CA and no certificate: an insecure channel (loopback only).
    patience : float, default 30.0
        Seconds a forwarded batch is retried while the replicas answer UNAVAILABLE.
    grace : float, default 5.0
        Seconds in-flight calls may finish when the shuffler stops.
    metrics_host : str, default "127.0.0.1"
        Address of the metrics port.
    metrics_port : int or None, default None
        Serve Prometheus metrics on ``metrics_host:metrics_port`` (``/metrics``; 0: a free port);
        ``None``: off (:mod:`~ldpsynth.shuffler.metrics`).
    otlp_endpoint : str or None, default None
        Send the calls' trace spans to this OTLP/HTTP collector; ``None``: no tracing.
    max_reports_per_device : int or None, default None
        The most reports one device credential may send of one collection (:mod:`~ldpsynth.shuffler.quota`);
        ``None``: a shuffled collection's ``rows_per_device``, no limit for the others; 0: no limit. A
        limit needs device credentials (``tokens_file`` or mutual TLS).
    anonymous_devices : bool, default False
        Forward shuffled collections' reports from devices it cannot tell apart (no device credentials):
        their central guarantee then assumes a per-device bound nobody enforces. Without it, such calls
        are refused FAILED_PRECONDITION.
    quota_nats : QuotaNats or None, default None
        Count the per-device quota in this NATS JetStream store, shared by every shuffler process of the
        tier (:mod:`~ldpsynth.shuffler.quota_nats`); ``None``: in this process (a device then gets one
        quota per shuffler process).
    """

    listen: str
    aggregator: str
    token: str | None
    threshold: int
    max_wait: float
    tokens_file: Path | None = None
    tls: TlsFiles | None = None
    aggregator_ca: Path | None = None
    aggregator_cert: Path | None = None
    aggregator_key: Path | None = None
    patience: float = 30.0
    grace: float = 5.0
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = None
    otlp_endpoint: str | None = None
    max_reports_per_device: int | None = None
    anonymous_devices: bool = False
    quota_nats: QuotaNats | None = None

    def __post_init__(self) -> None:
        check_pair(self.aggregator_cert, self.aggregator_key, "--aggregator-tls-cert", "--aggregator-tls-key")
        with flag_checks():
            check_int(self.threshold, "--threshold", 1, 10**12)
            check_seconds(self.max_wait, "--max-wait")
            check_seconds(self.patience, "--patience")
            check_seconds(self.grace, "--grace")
            if self.metrics_port is not None:
                check_int(self.metrics_port, "--metrics-port", 0, 65535)
        check_endpoint(self.otlp_endpoint)
        with flag_checks():
            if self.max_reports_per_device is not None:
                check_int(self.max_reports_per_device, "--max-reports-per-device", 0)
        if self.max_reports_per_device and not self.identified_devices:
            raise ConfigError("--max-reports-per-device: needs device credentials (--tokens, or --tls-client-ca): "
                                  "without them every device is 'anonymous' and one limit would bound them all")

    @property
    def identified_devices(self) -> bool:
        """Whether devices present credentials the shuffler tells apart (a tokens file, or mutual TLS)."""
        return self.tokens_file is not None or bool(self.tls and self.tls.client_ca)
