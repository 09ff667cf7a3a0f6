"""Traces (OpenTelemetry): a replica's call, the batch commits it makes, the shard worker's commit
and its log appends, in one trace (off unless an OTLP endpoint is given).

The API alone is a no-op; :func:`configure` installs the SDK's tracer provider with a batching
OTLP/HTTP exporter (``ENDPOINT/v1/traces``) for this process. The context crosses process
boundaries as a W3C ``traceparent`` carrier (a dict of strings): from a gRPC client's metadata into
the replica (:func:`extract`), and from the replica into a shard worker's Ray call (:func:`carrier`,
then :func:`extract` on the other side; the worker configures its own exporter from its spec).

Span attributes hold what the metrics' labels hold (method, status, collection, shard, counts);
never a token, a peer address or a report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from opentelemetry import context, propagate, trace

from ldpsynth.serving.errors import ConfigError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

TRACER_NAME = "ldpsynth"
#: Seconds between two exports of finished spans.
EXPORT_EVERY = 1.0
_provider: TracerProvider | None = None


def check_endpoint(endpoint: str | None) -> None:
    """``--otlp-endpoint``, the collector :func:`configure` is given (a replica's, a shuffler's): an
    ``http://`` or ``https://`` URL, or ``None`` (no tracing); ConfigError naming the flag otherwise."""
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise ConfigError(f"--otlp-endpoint: an OTLP/HTTP collector's URL, http://HOST:PORT or https://HOST:PORT "
                          f"(e.g. http://127.0.0.1:4318), got {endpoint[:200]!r}")


def configure(endpoint: str | None, service: str) -> None:
    """Export this process's spans to the OTLP/HTTP collector at ``endpoint`` (e.g.
    ``http://127.0.0.1:4318``) as service ``service``; ``None``: no tracing (the default). Once per
    process: a second call changes nothing."""
    global _provider
    if endpoint is None or _provider is not None:
        return
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces"),
                                                   schedule_delay_millis=EXPORT_EVERY * 1000))
    trace.set_tracer_provider(provider)
    _provider = provider


def flush() -> None:
    """Send the spans finished so far (before a process exits)."""
    if _provider is not None:
        _provider.force_flush()


def enabled() -> bool:
    """Whether this process exports spans (:func:`configure` was given an endpoint): the hot paths
    skip building spans and carriers otherwise."""
    return _provider is not None


def tracer() -> trace.Tracer:
    return trace.get_tracer(TRACER_NAME)


def carrier(span: trace.Span | None = None) -> dict[str, str]:
    """The context of ``span`` (default: the current span) as W3C headers (empty without tracing)."""
    headers: dict[str, str] = {}
    propagate.inject(headers, context=None if span is None else trace.set_span_in_context(span))
    return headers


def extract(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> context.Context:
    """The context a :func:`carrier` (or gRPC metadata, a sequence of pairs) carries."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    return propagate.extract({str(key).lower(): str(value) for key, value in pairs})


def links(carriers: Iterable[Mapping[str, str]]) -> list[trace.Link]:
    """Links to the spans the carriers name (a group commit serves batches of several traces)."""
    out = []
    for headers in carriers:
        span = trace.get_current_span(extract(headers)).get_span_context()
        if span.is_valid:
            out.append(trace.Link(span))
    return out
