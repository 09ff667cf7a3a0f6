"""What one shuffler process exposes on ``--metrics-port`` (docs/deployment.md, "Monitoring and alerts").

On a registry of its own, served by :class:`~ldpsynth.serving.observe.metrics.MetricsEndpoint` as
the replicas' metrics are:

* ``grpc_server_*`` of ``ldpsynth.v1.ShufflerService`` (calls by method and status code, durations,
  calls in flight: :class:`~ldpsynth.serving.observe.metrics.CallMetrics`, which the one
  error-to-status mapping drives);
* ``ldpsynth_shuffler_reports_total{collection, outcome}``: reports of devices' calls that reached a
  pool, by how their call ended: ``acknowledged`` (the replicas acknowledged them) or
  ``not_acknowledged`` (the pool missed its threshold within ``--max-wait``, the replicas refused or
  could not be reached, the shuffler stopped, the device went away);
* ``ldpsynth_shuffler_pooled_reports{collection}``: reports waiting in pools now;
* ``ldpsynth_shuffler_wait_seconds{collection}``: from a call's reports entering a pool to their
  acknowledgement (the threshold's wait and the forward).

Labels name only collections the replicas serve this shuffler (a call naming another is refused
before it is counted), never a device, a token, an address or a report.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ldpsynth.serving.observe.metrics import CALL_BUCKETS, CallMetrics, ServiceCalls

__all__ = ["ShufflerMetrics"]


class ShufflerMetrics:
    """Every metric of one shuffler (module docstring), on :attr:`registry`.

    Parameters
    ----------
    service : str
        The gRPC service's full name (``ldpsynth.v1.ShufflerService``).
    version : str
        The ldpsynth version the shuffler runs (``ldpsynth_build_info``).
    """

    def __init__(self, service: str, version: str):
        self.registry = registry = CollectorRegistry()
        self.calls: ServiceCalls = CallMetrics(registry).service(service, ("SubmitSealed",))
        Gauge("ldpsynth_build_info", "The ldpsynth version this shuffler runs.", ("version",),
              registry=registry).labels(version).set(1)
        self.reports = Counter("ldpsynth_shuffler_reports_total", "Reports of devices' calls that reached a pool, by "
                               "how the call ended.", ("collection", "outcome"), registry=registry)
        self.pooled = Gauge("ldpsynth_shuffler_pooled_reports", "Reports waiting in pools now.", ("collection",),
                            registry=registry)
        self.wait_seconds = Histogram("ldpsynth_shuffler_wait_seconds", "From a call's reports entering a pool to "
                                      "their acknowledgement.", ("collection",), buckets=CALL_BUCKETS,
                                      registry=registry)

    def pooled_call(self, collection: str, reports: int) -> None:
        """A call's ``reports`` entered a pool of ``collection``."""
        self.pooled.labels(collection).inc(reports)
        for outcome in ("acknowledged", "not_acknowledged"):  # series start at 0 (rate() sees the first call)
            self.reports.labels(collection, outcome)

    def ended_call(self, collection: str, reports: int, acknowledged: bool, seconds: float) -> None:
        """A pooled call of ``reports`` reports ended after ``seconds``: acknowledged or not."""
        self.pooled.labels(collection).dec(reports)
        self.reports.labels(collection, "acknowledged" if acknowledged else "not_acknowledged").inc(reports)
        if acknowledged:
            self.wait_seconds.labels(collection).observe(seconds)
