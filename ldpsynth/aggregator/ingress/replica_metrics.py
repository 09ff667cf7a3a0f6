"""A replica's Prometheus metrics: its calls, the reports it admits, acknowledges and refuses, its
queries, the shard workers it stands on and the collections it serves.

One :class:`ReplicaMetrics` per replica, on a registry of its own, served on ``--metrics-port``
(:class:`~ldpsynth.serving.observe.metrics.MetricsEndpoint`). The shard workers run in Ray's
processes: they keep counters and latency histograms in their
:class:`~ldpsynth.aggregator.storage.segments.WorkerStatus`, which the replica already asks for every
second for its health, and :class:`ShardCollector` exposes the last answers (one port per replica,
none per actor: Prometheus scrapes the replicas it knows, wherever Ray places or restarts workers).
Several replicas expose the same workers' series: aggregate them with ``max by (shard)``.

Labels: ``collection`` (a served collection's name, else ``unknown``: a client cannot create series),
``reason`` (:data:`REASONS`), ``outcome``, ``kind``, ``shard``, ``state``, and the gRPC service,
method and code. Never a credential, a peer address, a report id or a report's value.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from ldpsynth.aggregator.errors import OutsideLifecycle, ShardDamaged, ShardFull, ShardUnavailable
from ldpsynth.aggregator.runtime.config import Catalog
from ldpsynth.aggregator.storage.segments import WorkerStatus
from ldpsynth.serving.errors import (
    BadRequest,
    LimitExceeded,
    PermissionDenied,
    QuotaExceeded,
    TryLater,
    Unauthenticated,
    WrongState,
)
from ldpsynth.serving.observe.histogram import LATENCY_BUCKETS, HistogramSnapshot
from ldpsynth.serving.observe.metrics import CallMetrics
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.lifecycle import OPEN

#: Why a batch was refused or not acknowledged, most specific error first (the label ``reason``).
REASONS: tuple[tuple[type[BaseException], str], ...] = (
    (QuotaExceeded, "quota"), (LimitExceeded, "too_large"), (OutsideLifecycle, "lifecycle"),
    (WrongState, "wrong_state"), (BadRequest, "invalid"), (ValidationError, "invalid"),
    (Unauthenticated, "unauthenticated"), (PermissionDenied, "permission_denied"), (ShardFull, "storage_full"),
    (ShardDamaged, "shard_damaged"), (TryLater, "try_later"), (ShardUnavailable, "shard_unavailable"))
#: Buckets of reports per batch.
BATCH_BUCKETS = (1, 10, 100, 1_000, 4_096, 16_384, 65_536, 262_144, 1_048_576)
#: Buckets (seconds) of query durations.
QUERY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
#: States of a shard worker as the replica sees it: the worker's own, or ``unreachable``.
WORKER_STATES = ("ready", "starting", "damaged", "unreachable")


def reason_of(exc: BaseException) -> str:
    """The ``reason`` label of an error that refused a batch or left it unacknowledged."""
    return next((reason for kind, reason in REASONS if isinstance(exc, kind)), "other")


class ReplicaMetrics:
    """Every metric of one replica (see the module docstring); ``clock`` tells which collections are open."""

    def __init__(self, catalog: Catalog, clock: Callable[[], float], version: str):
        self.registry = registry = CollectorRegistry()
        self._names = frozenset(catalog.names).union(*catalog.rounds.values())  # a discovery's later rounds too
        self.calls = CallMetrics(registry)
        Gauge("ldpsynth_build_info", "The ldpsynth version this replica runs.", ("version",),
              registry=registry).labels(version).set(1)
        self.serving = Gauge("ldpsynth_replica_serving", "1 while the health service says SERVING for the service.",
                             ("service",), registry=registry)
        self.draining = Gauge("ldpsynth_replica_draining", "1 from a graceful stop's start until the replica exits.",
                              registry=registry)
        self.storage_full = Gauge("ldpsynth_log_storage_full", "1 while the log's storage is full (batches refused).",
                                  registry=registry)
        self.streams = Gauge("ldpsynth_ingest_streams", "Report streams open on this replica.", registry=registry)
        self.batch_reports = Histogram("ldpsynth_ingest_batch_reports", "Reports per admitted batch.", ("collection",),
                                       buckets=BATCH_BUCKETS, registry=registry)
        self.reports = Counter("ldpsynth_ingest_reports_total", "Reports of acknowledged batches: stored (accepted) "
                               "or already stored (duplicate).", ("collection", "outcome"), registry=registry)
        self.rejected_batches = Counter("ldpsynth_ingest_rejected_batches_total", "Batches refused in admission "
                                        "(nothing of them stored), by reason.", ("collection", "reason"),
                                        registry=registry)
        self.rejected_reports = Counter("ldpsynth_ingest_rejected_reports_total", "Reports of batches refused in "
                                        "admission, by reason.", ("collection", "reason"), registry=registry)
        self.unacknowledged = Counter("ldpsynth_ingest_unacknowledged_reports_total", "Reports of admitted batches "
                                      "that were not acknowledged (a shard failed, the log was full, the stream "
                                      "ended): devices resend them; some may be stored.", ("collection", "reason"),
                                      registry=registry)
        self.quota_refusals = Counter("ldpsynth_quota_refusals_total", "Batches refused because they would take a "
                                      "credential over max_rows_per_client.", ("collection",), registry=registry)
        self.commit_seconds = Histogram("ldpsynth_ingest_commit_duration_seconds", "From a batch's admission to its "
                                        "acknowledgement (every shard part durable in the log).", ("collection",),
                                        buckets=LATENCY_BUCKETS, registry=registry)
        self.query_seconds = Histogram("ldpsynth_query_duration_seconds", "Duration of answered queries and exports.",
                                       ("collection", "kind"), buckets=QUERY_BUCKETS, registry=registry)
        self.query_rows = Counter("ldpsynth_query_rows_scanned_total", "Stored reports the answered queries and "
                                  "exports read.", ("collection", "kind"), registry=registry)
        for name in (*catalog.names, "unknown"):  # every series from 0: a first increment counts in rate()
            for _, reason in REASONS:
                self.rejected_batches.labels(name, reason)
                self.rejected_reports.labels(name, reason)
                self.unacknowledged.labels(name, reason)
            if name != "unknown":
                self.quota_refusals.labels(name)
                self.batch_reports.labels(name)
                self.commit_seconds.labels(name)
                for outcome in ("accepted", "duplicate"):
                    self.reports.labels(name, outcome)
                for kind in ("estimate", "export"):
                    self.query_rows.labels(name, kind)
                    self.query_seconds.labels(name, kind)
        self.workers = ShardCollector()
        registry.register(self.workers)
        registry.register(CollectionCollector(catalog, clock, self.workers))

    def collection(self, name: str) -> str:
        """The ``collection`` label of ``name``: itself if served here, else ``unknown``."""
        return name if name in self._names else "unknown"

    def admitted(self, collection: str, reports: int) -> None:
        self.batch_reports.labels(self.collection(collection)).observe(reports)

    def committed(self, collection: str, started: float, ack: asyncio.Future[Any]) -> None:
        """A batch's commit ended (``ack`` done): its duration since ``started`` (``time.perf_counter``)
        if it was acknowledged."""
        if not ack.cancelled() and ack.exception() is None:
            self.commit_seconds.labels(self.collection(collection)).observe(time.perf_counter() - started)

    def acknowledged(self, collection: str, accepted: int, duplicates: int) -> None:
        label = self.collection(collection)
        self.reports.labels(label, "accepted").inc(accepted)
        self.reports.labels(label, "duplicate").inc(duplicates)

    def rejected(self, collection: str, reports: int, exc: BaseException) -> None:
        label, reason = self.collection(collection), reason_of(exc)
        self.rejected_batches.labels(label, reason).inc()
        self.rejected_reports.labels(label, reason).inc(reports)
        if reason == "quota":
            self.quota_refusals.labels(label).inc()

    def not_acknowledged(self, collection: str, reports: int, exc: BaseException) -> None:
        self.unacknowledged.labels(self.collection(collection), reason_of(exc)).inc(reports)

    def query(self, collection: str, kind: str, rows: int, seconds: float) -> None:
        label = self.collection(collection)
        self.query_seconds.labels(label, kind).observe(seconds)
        self.query_rows.labels(label, kind).inc(rows)


class ShardCollector(Collector):
    """The shard workers' metrics, from the replica's last look at them (:meth:`update`, every second)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._statuses: list[WorkerStatus | BaseException] = []
        self._log_last: list[int | None] = []
        self._restarts: list[int | None] = []
        self._ready: dict[int, WorkerStatus] = {}

    def update(self, statuses: Sequence[WorkerStatus | BaseException], log_last: Sequence[int | None],
               restarts: Sequence[int | None]) -> None:
        """Every worker's status (or why it did not answer), every shard's last log sequence and Ray's
        restart count of every worker (``None``: unknown), in shard order."""
        with self._lock:
            self._statuses, self._log_last, self._restarts = list(statuses), list(log_last), list(restarts)
            self._ready.update({s.shard: s for s in statuses if isinstance(s, WorkerStatus) and s.state == "ready"})

    def rows(self) -> dict[str, int] | None:
        """Stored reports per collection over every shard (a ready status of each), or None before."""
        with self._lock:
            if not self._statuses or len(self._ready) < len(self._statuses):
                return None
            total: dict[str, int] = {}
            for status in self._ready.values():
                for name, count in status.rows.items():
                    total[name] = total.get(name, 0) + count
            return total

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            statuses, log_last, restarts = self._statuses, self._log_last, self._restarts
        state = GaugeMetricFamily("ldpsynth_shard_worker_state", "1 for the state each shard's worker is in (ready, "
                                  "starting: restoring its state, damaged: refusing service, unreachable).",
                                  labels=("shard", "state"))
        gauges = {name: GaugeMetricFamily(f"ldpsynth_shard_{name}", text, labels=("shard",)) for name, text in (
            ("log_sequence", "The last sequence of the shard's log."),
            ("applied_sequence", "The last log sequence the shard's worker applied."),
            ("lag_records", "Log records the shard's worker has not applied yet (restoring after a restart)."),
            ("snapshot_sequence", "The log sequence the worker's last snapshot reflects."),
            ("replayed_records", "Log records the worker replayed at its last start."),
            ("memory_ids", "Report ids the worker holds in memory, not yet in a snapshot."))}
        restart = CounterMetricFamily("ldpsynth_shard_worker_restarts", "Times Ray restarted the shard's worker.",
                                      labels=("shard",))
        groups = CounterMetricFamily("ldpsynth_shard_group_commits", "Group commits the worker made since it started.",
                                     labels=("shard",))
        reports = CounterMetricFamily("ldpsynth_shard_reports", "Reports the worker's commits stored or found stored "
                                      "already, since it started.", labels=("shard", "outcome"))
        commit = HistogramMetricFamily("ldpsynth_shard_commit_duration_seconds", "Duration of the worker's group "
                                       "commits (dedup, log appends, apply).", labels=("shard",))
        append = HistogramMetricFamily("ldpsynth_log_append_duration_seconds", "Duration of log appends, until the "
                                       "log confirmed the record durable.", labels=("shard",))
        for shard, status in enumerate(statuses):
            label = str(shard)
            current = status.state if isinstance(status, WorkerStatus) else "unreachable"
            for name in WORKER_STATES:
                state.add_metric((label, name), 1.0 if name == current else 0.0)
            last = log_last[shard] if shard < len(log_last) else None
            if last is not None:
                gauges["log_sequence"].add_metric((label,), last)
            count = restarts[shard] if shard < len(restarts) else None
            if count is not None:
                restart.add_metric((label,), count)
            if not isinstance(status, WorkerStatus):
                continue
            gauges["applied_sequence"].add_metric((label,), status.offset)
            if last is not None:
                gauges["lag_records"].add_metric((label,), max(0, last - status.offset))
            gauges["snapshot_sequence"].add_metric((label,), status.snapshot_offset)
            gauges["replayed_records"].add_metric((label,), status.replayed)
            gauges["memory_ids"].add_metric((label,), status.memory_ids)
            groups.add_metric((label,), status.groups)
            reports.add_metric((label, "stored"), status.stored)
            reports.add_metric((label, "duplicate"), status.duplicates)
            for family, snapshot in ((commit, status.commit_seconds), (append, status.append_seconds)):
                if snapshot is not None:
                    family.add_metric((label,), _buckets(snapshot), snapshot.total)
        yield from (state, *gauges.values(), restart, groups, reports, commit, append)


def _buckets(snapshot: HistogramSnapshot) -> list[tuple[str, float]]:
    return [*((repr(float(b)), float(c)) for b, c in zip(snapshot.bounds, snapshot.cumulative)),
            ("+Inf", float(snapshot.count))]


class CollectionCollector(Collector):
    """Per served collection: the ε its card delivers, whether it takes reports now, its minimum batch,
    when it opens and closes, and the reports stored (from the shard workers' last statuses). Read from the
    catalog at each scrape, so a discovery's round opened by ``AdvanceRound`` is listed and its closed one not."""

    def __init__(self, catalog: Catalog, clock: Callable[[], float], workers: ShardCollector):
        self._catalog = catalog
        self._clock = clock
        self._workers = workers

    def collect(self) -> Iterator[Metric]:
        labels = ("collection",)
        epsilon = GaugeMetricFamily("ldpsynth_collection_epsilon", "The epsilon per report the collection's card "
                                    "delivers.", labels=labels)
        open_ = GaugeMetricFamily("ldpsynth_collection_open", "1 while the collection takes reports (between its "
                                  "opens and closes).", labels=labels)
        minimum = GaugeMetricFamily("ldpsynth_collection_min_batch", "Fewest reports a release is computed from.",
                                    labels=labels)
        opens = GaugeMetricFamily("ldpsynth_collection_opens_timestamp_seconds", "When the collection opens.",
                                  labels=labels)
        closes = GaugeMetricFamily("ldpsynth_collection_closes_timestamp_seconds", "When the collection closes.",
                                   labels=labels)
        rows = GaugeMetricFamily("ldpsynth_collection_rows", "Reports stored in the collection.", labels=labels)
        now = self._clock()
        stored = self._workers.rows()
        for info, taking in self._catalog.served():
            schema, name = info.schema, (info.schema.name,)
            epsilon.add_metric(name, info.card.mechanism.epsilon)
            open_.add_metric(name, 1.0 if taking and schema.lifecycle.state(now) == OPEN else 0.0)
            minimum.add_metric(name, schema.minimum_batch[0])
            if schema.opens is not None:
                opens.add_metric(name, schema.opens)
            if schema.closes is not None:
                closes.add_metric(name, schema.closes)
            if stored is not None:
                rows.add_metric(name, stored.get(schema.name, 0))
        yield from (epsilon, open_, minimum, opens, closes, rows)

