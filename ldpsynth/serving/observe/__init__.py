"""Operating the serving tiers (the aggregator's replicas and shard workers, the shuffler): what every
serving process records, and how it is read.

* :mod:`~ldpsynth.serving.observe.events`: log events (an event name and fields per line), as JSON
  lines or text (``--log-format``), through the standard library's ``logging``.
* :mod:`~ldpsynth.serving.observe.metrics`: a Prometheus registry's ``/metrics`` endpoint
  (``--metrics-port``) and the record of every gRPC call, which
  :func:`~ldpsynth.serving.status.rpc` drives.
* :mod:`~ldpsynth.serving.observe.tracing`: OpenTelemetry spans over OTLP/HTTP (``--otlp-endpoint``),
  their context carried across processes as W3C headers.
* :mod:`~ldpsynth.serving.observe.histogram`: latency histograms kept where Prometheus does not
  scrape (a shard worker), read through a status call.

Another ``grpc.aio`` service (a shuffler) reuses them as a replica does: its command line takes
:func:`ldpsynth.cli.options.add_observability_arguments`; it calls ``events.configure`` and
``tracing.configure``, keeps a ``CollectorRegistry`` with a ``CallMetrics`` and its own metrics, serves
it with ``MetricsEndpoint``, and gives its servicer ``calls = CallMetrics.service(NAME, METHODS)`` so
that its handlers, wrapped by ``rpc``, are recorded (labels and fields: never a token, a peer
address or a report).
"""
