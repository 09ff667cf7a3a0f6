"""Prometheus metrics of a gRPC service process: the ``/metrics`` endpoint and the record of every call.

Any ``grpc.aio`` service of ldpsynth (a replica; a shuffler) keeps one :class:`CollectorRegistry`
(its own, not the process-wide default: several servers may share a test process), serves it with
:class:`MetricsEndpoint` when ``--metrics-port`` is given, and records its calls with
:class:`CallMetrics`, which :func:`~ldpsynth.serving.status.rpc` drives: one place sees
every call end, with the status the error mapping chose.

Call metrics follow the names of the grpc-ecosystem's Prometheus interceptors
(``grpc_server_started_total``, ``grpc_server_handled_total``, ``grpc_server_handling_seconds``),
so dashboards written for them work. Labels are the service, the method and the status code: never
a peer, a credential or anything a caller sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from ldpsynth.serving.observe import tracing

#: gRPC's status codes, by name (every method's series start at 0 for each).
GRPC_CODES = ("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
              "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
              "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED")
#: Buckets (seconds) of call durations: 1 ms to 5 min (a report stream lasts as long as a device sends).
CALL_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class MetricsEndpoint:
    """``GET /metrics`` of ``registry`` over HTTP on ``host:port`` (port 0: a free one), in a thread."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int):
        self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        self.host = host
        self.port = int(self._server.server_port)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


@dataclass
class Call:
    """One call being served: its status code once known (``OK`` unless set)."""

    code: str = "OK"
    span: Any = field(default=None, repr=False)


class CallMetrics:
    """Calls started, handled (by status code) and their durations, per service and method."""

    def __init__(self, registry: CollectorRegistry):
        labels = ("grpc_service", "grpc_method")
        self.started = Counter("grpc_server_started_total", "Calls started on the server.", labels,
                               registry=registry)
        self.handled = Counter("grpc_server_handled_total", "Calls completed on the server, by status code.",
                               (*labels, "grpc_code"), registry=registry)
        self.seconds = Histogram("grpc_server_handling_seconds", "Duration of calls until their status was sent.",
                                 labels, buckets=CALL_BUCKETS, registry=registry)
        self.in_flight = Gauge("grpc_server_in_flight_calls", "Calls being served now.", labels, registry=registry)

    def service(self, name: str, methods: tuple[str, ...]) -> ServiceCalls:
        """The recorder of the calls of service ``name`` (what a servicer keeps as ``calls``); the series of
        its ``methods`` start at 0 (so that a first call counts in ``rate()`` and ``increase()``)."""
        for method in methods:
            self.started.labels(name, method)
            self.seconds.labels(name, method)
            self.in_flight.labels(name, method)
            for code in GRPC_CODES:
                self.handled.labels(name, method, code)
        return ServiceCalls(self, name)


class ServiceCalls:
    """:class:`CallMetrics` for one service; :meth:`call` wraps one call (metrics and its trace span)."""

    def __init__(self, metrics: CallMetrics, service: str):
        self.metrics = metrics
        self.service = service
        self._series: dict[str, tuple[Any, Any, Any]] = {}  # method -> its started, in-flight and seconds series

    def _of(self, method: str) -> tuple[Any, Any, Any]:
        series = self._series.get(method)
        if series is None:
            labels = (self.service, method)
            series = self._series[method] = (self.metrics.started.labels(*labels),
                                             self.metrics.in_flight.labels(*labels),
                                             self.metrics.seconds.labels(*labels))
        return series

    @contextmanager
    def call(self, method: str, metadata: Callable[[], Any], current: bool = True) -> Iterator[Call]:
        """Record one call of ``method``: started, in flight, then handled with ``Call.code`` and its
        duration. With tracing on, a span named ``service/method`` continues the caller's trace
        (``traceparent`` in the call's metadata, read with ``metadata()`` only then); it is the current
        span inside when ``current`` (a coroutine handler; an async generator's span cannot be current
        across its yields)."""
        started, in_flight, seconds = self._of(method)
        started.inc()
        in_flight.inc()
        if tracing.enabled():
            span = tracing.tracer().start_span(f"{self.service}/{method}", context=tracing.extract(metadata() or ()),
                                               kind=trace.SpanKind.SERVER,
                                               attributes={"rpc.system": "grpc", "rpc.service": self.service,
                                                           "rpc.method": method})
        else:
            span = trace.INVALID_SPAN
        record = Call(span=span)
        start = time.perf_counter()
        try:
            if current and span is not trace.INVALID_SPAN:
                with trace.use_span(span, end_on_exit=False):
                    yield record
            else:
                yield record
        except BaseException as exc:
            if record.code == "OK":  # not a status the handler chose: the caller went away, or a bug
                record.code = "CANCELLED" if isinstance(exc, asyncio.CancelledError) else "UNKNOWN"
            raise
        finally:
            in_flight.dec()
            self.metrics.handled.labels(self.service, method, record.code).inc()
            seconds.observe(time.perf_counter() - start)
            span.set_attribute("rpc.grpc.status_code", record.code)
            if record.code != "OK":
                span.set_status(trace.Status(trace.StatusCode.ERROR, record.code))
            span.end()
