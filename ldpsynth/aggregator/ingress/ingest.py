"""The ingestion handler: validate -> authorize -> quota -> route by report id -> group commit -> ack.

Independent of gRPC transport and of Ray (the shards are any
:class:`~ldpsynth.aggregator.runtime.shards.Shards`), so it is tested without a server. Per batch
(docs/contract.md §6 "What the server does with a batch", §7):

1. **Admission** (:meth:`Ingestor.admit`), in stream order: the collection must be served
   (else FAILED_PRECONDITION) and allowed for the credential (PERMISSION_DENIED), and take reports
   now by the injected clock (its ``opens``/``closes``; else FAILED_PRECONDITION naming the time); the
   ``mechanism_version`` must match (FAILED_PRECONDITION); the batch must have at most
   ``max_batch_reports`` reports (RESOURCE_EXHAUSTED); every field is decoded and checked
   against the schema (INVALID_ARGUMENT naming the field, position and legal range, never a
   value); the credential's quota must hold the batch's new reports (RESOURCE_EXHAUSTED). A
   rejected batch has touched nothing.
2. **Commit** (:meth:`Ingestor.commit`): the reports are routed to shards by their id (first
   8 bytes, little-endian, modulo the shard count: a retried report always meets its earlier
   copy), each shard's part joins that shard's next group commit, and the ack is built once
   *every* part is durable. If any shard fails, the batch is not acknowledged (UNAVAILABLE);
   parts that did commit are found as duplicates when the client retries. The commit is one trace
   span; each shard's group commit continues it (the first batch's trace, links to the others').
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import numpy as np
from opentelemetry import trace

from ldpsynth.aggregator.errors import ClosedToReports, OutsideLifecycle, ShardFull, ShardUnavailable
from ldpsynth.aggregator.ingress.group_commit import GroupCommitter
from ldpsynth.aggregator.ingress.quota import QuotaBook, QuotaKey
from ldpsynth.aggregator.runtime.config import Catalog
from ldpsynth.aggregator.runtime.shards import Shards
from ldpsynth.aggregator.storage.idindex import repeats, sort_ids
from ldpsynth.aggregator.storage.segments import CommitOutcome, Segment
from ldpsynth.serving.auth import Credential
from ldpsynth.serving.errors import LimitExceeded, QuotaExceeded, TryLater, WrongState
from ldpsynth.serving.observe import events, tracing
from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.protocol import CollectionInfo, reports_from_proto
from ldpsynth.shared.reports import REPORT_ID_BYTES, Reports
from ldpsynth.shared.wire import collection_pb2 as pb

log = events.get(__name__)

#: Seconds a batch refused as closed waits at most for its replica to read the discoveries' states.
FOLLOW_DEADLINE = 2.0

#: Least seconds between the starts of two group commits of a shard from one replica (one Ray call, one
#: worker commit and one log append each), per batch the replica is committing (up to the replica's
#: ``max_commit_interval``): a lone device's batch waits 4 ms at most, 75 batches in flight or more make
#: groups of what arrives in 0.3 s (benchmarks/bench_scale.py --shape concurrent256).
COMMIT_INTERVAL_PER_BATCH = 0.004


def route(report_ids: np.ndarray, num_shards: int) -> np.ndarray:
    """Shard of every report: its id's first 8 bytes as a little-endian uint64, modulo ``num_shards``."""
    head = np.ascontiguousarray(report_ids[:, :8]).view("<u8").reshape(-1)
    return (head % np.uint64(num_shards)).astype(np.int64)


def split_by_shard(report_ids: np.ndarray, keys: np.ndarray, codes: np.ndarray, num_shards: int
                   ) -> list[tuple[int, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """The reports of each shard that gets any (:func:`route`), in arrival order: ``(shard, (ids, keys, codes))``.

    One stable sort by shard and one gather per column (the ids as 16-byte items), then views (no
    boolean mask per shard and column)."""
    shards = route(report_ids, num_shards)
    order = np.argsort(shards, kind="stable")
    sizes = np.bincount(shards, minlength=num_shards)
    ids = np.ascontiguousarray(report_ids).view(f"V{REPORT_ID_BYTES}").reshape(-1)[order]
    ids, keys, codes = ids.view(np.uint8).reshape(-1, REPORT_ID_BYTES), keys[order], codes[order]
    ends = np.cumsum(sizes)
    parts = []
    for shard in np.flatnonzero(sizes).tolist():
        rows = slice(int(ends[shard] - sizes[shard]), int(ends[shard]))
        parts.append((shard, (ids[rows], keys[rows], codes[rows])))
    return parts


@dataclass(frozen=True)
class Admitted:
    """A batch that passed admission: its parts per shard and the quota each reserved (released as the
    part's commit ends, when the shard's counters that include it are in the mirror)."""

    sequence: int
    quota_key: QuotaKey
    reserved: tuple[int, ...]
    parts: tuple[tuple[int, Segment], ...]

    @property
    def reports(self) -> int:
        return sum(len(segment) for _, segment in self.parts)


class _BatchCommit:
    """One admitted batch being committed: the sums of its parts' results, settled once the last part is
    (one future per batch, whatever the number of shards it spans)."""

    __slots__ = ("ingestor", "quota", "admitted", "future", "remaining", "accepted", "duplicates", "failed", "span",
                 "trace")

    def __init__(self, ingestor: Ingestor, quota: QuotaBook, admitted: Admitted):
        self.ingestor = ingestor
        self.quota = quota
        self.admitted = admitted
        self.future: asyncio.Future[pb.BatchAck] = asyncio.get_running_loop().create_future()
        self.remaining = len(admitted.parts)
        self.accepted = self.duplicates = 0
        self.failed: BaseException | None = None
        self.span: trace.Span | None = None
        self.trace: dict[str, str] = {}

    def start(self) -> asyncio.Future[pb.BatchAck]:
        """Queue every part with its shard's group commit (in a span of its own when tracing is on)."""
        if tracing.enabled():
            self.span = tracing.tracer().start_span("ldpsynth.ingest.commit", attributes={
                "ldpsynth.collection": self.admitted.quota_key[0], "ldpsynth.reports": self.admitted.reports})
            self.trace = tracing.carrier(self.span)
        if not self.remaining:
            self.ingestor._finish(self)
        committers = self.ingestor.committers
        for (shard, segment), reserved in zip(self.admitted.parts, self.admitted.reserved):
            committers[shard].enqueue(_ShardPart(self, segment, reserved))
        return self.future

    def settle(self, outcome: tuple[int, int] | BaseException, reserved: int) -> None:
        """A part's outcome; its reservation is released in the same step as the group's counters,
        which count it, entered the mirror (no moment when both count it)."""
        if reserved:
            self.quota.release(self.admitted.quota_key, reserved)
        if isinstance(outcome, BaseException):
            self.failed = outcome
        else:
            self.accepted += outcome[0]
            self.duplicates += outcome[1]
        self.remaining -= 1
        if not self.remaining:
            self.ingestor._finish(self)


class _ShardPart:
    """A batch's reports bound for one shard, as its group commit carries them."""

    __slots__ = ("batch", "segment", "rows", "reserved")

    def __init__(self, batch: _BatchCommit, segment: Segment, reserved: int):
        self.batch = batch
        self.segment = segment
        self.rows = len(segment)
        self.reserved = reserved

    def __len__(self) -> int:
        return self.rows

    def settle(self, outcome: tuple[int, int] | BaseException) -> None:
        self.batch.settle(outcome, self.reserved)


class Ingestor:
    """Admits and commits report batches for the collections of a :class:`Catalog`."""

    def __init__(self, catalog: Catalog, backend: Shards, quota: QuotaBook, max_group_rows: int,
                 sole_replica: bool = True, clock: Callable[[], float] = time.time, max_commit_interval: float = 0.0):
        self._catalog = catalog
        self._backend = backend
        self._quota = quota
        self._sole_replica = sole_replica
        self._clock = clock
        self._max_commit_interval = max_commit_interval
        self._in_flight: set[_BatchCommit] = set()
        self._settled = asyncio.Event()  # set as each batch's commit settles (:meth:`settled`)
        self._committers = [GroupCommitter(self._commit_to(s), max_group_rows, self._commit_interval)
                            for s in range(backend.num_shards)]
        #: Awaited (within :data:`FOLLOW_DEADLINE`) before a batch refused by the shard workers as closed is
        #: answered: a cluster's replica reads its discoveries' states, so the device that fetches the card
        #: again is served the next round (:meth:`~ldpsynth.aggregator.operate.rounds.RoundKeeper.refresh`).
        self.on_closed: Callable[[], Awaitable[None]] | None = None
        self._following: set[asyncio.Future[None]] = set()

    def _commit_interval(self) -> float:
        """Seconds between the starts of two group commits of a shard: grows with the batches in flight."""
        return min(self._max_commit_interval, COMMIT_INTERVAL_PER_BATCH * len(self._in_flight))

    def _commit_to(self, shard: int) -> Callable[[list[_ShardPart]], Awaitable[CommitOutcome]]:
        """The commit of ``shard``'s groups: through the backend as it is at call time (in a span that
        continues the first batch's trace and links the others' when tracing is on); the quota
        counters it returns go into the mirror, which a failure marks stale for the shard."""
        async def commit(parts: list[_ShardPart]) -> CommitOutcome:
            segments = [part.segment for part in parts]
            try:
                if not tracing.enabled():
                    outcome = await self._backend.commit(shard, segments, {})
                else:
                    carriers = [part.batch.trace for part in parts if part.batch.trace]
                    with tracing.tracer().start_as_current_span(
                            "ldpsynth.shard.commit_call", context=tracing.extract(carriers[0]) if carriers else None,
                            links=tracing.links(carriers[1:]),
                            attributes={"ldpsynth.shard": shard, "ldpsynth.batches": len(segments),
                                        "ldpsynth.reports": sum(len(s) for s in segments)}):
                        outcome = await self._backend.commit(shard, segments, tracing.carrier())
            except BaseException:
                self._quota.stale.add(shard)
                raise
            self._quota.observe(shard, outcome.quota)
            return outcome
        return commit

    @property
    def committers(self) -> list[GroupCommitter[_ShardPart]]:
        return self._committers

    async def load_quota(self, shards: Iterable[int] | None = None) -> None:
        """Read the quota counters of ``shards`` (default: all, at start) into the mirror."""
        for shard in range(self._backend.num_shards) if shards is None else shards:
            try:
                counters = await self._backend.quota_usage(shard)
            except ShardUnavailable as exc:
                raise TryLater("a storage shard is unavailable; retry later") from exc
            self._quota.observe(shard, counters)
            self._quota.stale.discard(shard)

    async def _refresh_quota(self, key: QuotaKey) -> None:
        """Read ``key``'s counters from every shard (other replicas store reports too)."""
        try:
            counts = await asyncio.gather(*(self._backend.quota_of(shard, *key)
                                            for shard in range(self._backend.num_shards)))
        except ShardUnavailable as exc:
            raise TryLater("a storage shard is unavailable; retry later") from exc
        for shard, count in enumerate(counts):
            self._quota.observe(shard, {key: count})

    def check_open(self, collection: str) -> CollectionInfo:
        """The collection's description, if it takes reports now (its lifecycle: ``OutsideLifecycle``)."""
        info = self._catalog.get(collection)
        refusal = info.schema.lifecycle.refusal(collection, self._clock())
        if refusal is not None:
            raise OutsideLifecycle(refusal, info.schema.lifecycle.state(self._clock()))
        return info

    async def admit(self, credential: Credential, batch: pb.ReportBatch) -> Admitted:
        """Check a batch and reserve its quota; raise (an error with its status) to reject it whole.

        A shuffled collection takes no report in clear (FAILED_PRECONDITION): its central guarantee
        counts only reports that reached it sealed through a shuffler (docs/shuffle-accountant.md §6)."""
        credential.require_collection(batch.collection)
        info = self.check_open(batch.collection)
        if info.schema.shuffle is not None:
            raise WrongState(f"collection {batch.collection!r} is shuffled: it takes reports only sealed, through a "
                             "shuffler (ShufflerService.SubmitSealed), never in clear; a report sent in clear would "
                             "be linked to its sender and would weaken every other device's central guarantee")
        if batch.mechanism_version != info.card.version:
            raise WrongState(f"mechanism_version: expected {info.card.version!r} for collection "
                             f"{batch.collection!r}, got {batch.mechanism_version[:64]!r}")
        claimed = len(batch.report_ids) // REPORT_ID_BYTES
        if claimed > info.limits.max_batch_reports:
            raise LimitExceeded(f"report_ids: at most max_batch_reports = {info.limits.max_batch_reports} "
                                f"reports per batch, got {claimed}")
        return await self.admit_reports(credential, batch.collection, reports_from_proto(batch, info.schema),
                                        int(batch.sequence))

    async def admit_reports(self, credential: Credential, collection: str, reports: Reports,
                            sequence: int) -> Admitted:
        """Route validated ``reports`` of ``collection`` to their shards and reserve their quota: the
        admission every batch ends with, a device's (:meth:`admit`) or a shuffler's opened reports
        (:mod:`~ldpsynth.aggregator.ingress.shuffled`). The caller checked the collection and the reports."""
        info = self._catalog.get(collection)
        parts = [(shard, Segment(collection, credential.id, ids, keys, codes))
                 for shard, (ids, keys, codes) in split_by_shard(
                     reports.report_ids, info.schema.fold_public_codes(reports.public_codes), reports.private_codes,
                     self._backend.num_shards)]
        quota_key = (collection, credential.id)
        reserved = await self._admit_quota(quota_key, info.limits.max_rows_per_client, parts)
        try:  # still served once the quota is settled (a discovery's round may have closed meanwhile)
            self._catalog.get(collection)
        except LdpsynthError:
            self._quota.release(quota_key, sum(reserved))
            raise
        return Admitted(sequence, quota_key, reserved, tuple(parts))

    async def _admit_quota(self, key: QuotaKey, limit: int, parts: list[tuple[int, Segment]]) -> tuple[int, ...]:
        """Reserve the batch's new reports under ``limit``, per part: its distinct ids (a repeated id is
        stored once, on the one shard its id routes to), less those already stored when that matters. The
        shard workers hold the exact
        counters; the mirror is exact while this is the only replica, otherwise the credential's
        counters are read from every worker before each batch (replicas admitting the same
        credential at the same moment can together pass the limit by their batches in flight)."""
        if not limit:
            return (0,) * len(parts)
        news = [int((~repeats(sort_ids(segment.report_ids))).sum()) for _, segment in parts]
        new = sum(news)
        if not self._sole_replica:
            await self._refresh_quota(key)
        elif self._quota.stale:  # a shard failed mid-commit: its counter may be ahead of the mirror
            await self.load_quota(sorted(self._quota.stale))
        if new > self._quota.available(key, limit):
            try:
                existing = await asyncio.gather(*(self._backend.count_existing(shard, seg.collection, seg.report_ids)
                                                  for shard, seg in parts))
            except ShardUnavailable as exc:
                raise TryLater("a storage shard is unavailable; retry the batch") from exc
            news = [n - stored for n, stored in zip(news, existing)]
            new = sum(news)
            if new > self._quota.available(key, limit):
                raise QuotaExceeded(f"max_rows_per_client: credential {key[1]!r} may store at most {limit} "
                                    f"reports in collection {key[0]!r}; {self._quota.used(key)} are stored and this "
                                    f"batch adds {new}")
        self._quota.reserve(key, new)
        return tuple(news)

    def commit(self, admitted: Admitted) -> asyncio.Future[pb.BatchAck]:
        """Commit an admitted batch: its ack (a future) once every shard part is durable.

        The commit goes on whatever happens to the caller (the shards' group committers own it): if
        the caller stops waiting, the batch is still stored and the quota mirror settled."""
        commit = _BatchCommit(self, self._quota, admitted)
        self._in_flight.add(commit)
        return commit.start()

    def refuse_waiting(self, error: LdpsynthError) -> None:
        """Answer every batch being committed with ``error`` now (the log's storage is full: its
        appends wait for an answer that does not come); the commits go on, and settle the quota."""
        for commit in self._in_flight:
            if not commit.future.done():
                commit.future.set_exception(error)

    async def settled(self, collection: str) -> None:
        """Wait until no batch of ``collection`` is being committed (each committed or failed). With the
        collection no longer admitted (:meth:`Catalog.close_round`), every batch of it acknowledged by this
        replica is then in the shards' statistics."""
        while any(commit.admitted.quota_key[0] == collection for commit in self._in_flight):
            self._settled.clear()
            await self._settled.wait()

    def _finish(self, commit: _BatchCommit) -> None:
        """Every part of ``commit`` settled (each released its quota reservation): answer its caller."""
        self._in_flight.discard(commit)
        self._settled.set()
        admitted, failed = commit.admitted, commit.failed
        if isinstance(failed, ShardFull):
            log.error("log.full", f"the log's storage is full ({failed}): batches are refused until an operator "
                      "adds space", detail=str(failed))
        elif isinstance(failed, ShardUnavailable):
            log.warning("batch.unacknowledged", f"batch not acknowledged: {failed}", detail=str(failed))
        if commit.span is not None:
            commit.span.end()
        if commit.future.done():  # the caller went away
            return
        if isinstance(failed, ClosedToReports) and self.on_closed is not None:
            follow = asyncio.ensure_future(self._refuse_closed(commit.future, failed, self.on_closed))
            self._following.add(follow)
            follow.add_done_callback(self._following.discard)
        elif failed is not None:
            commit.future.set_exception(failed)
        else:
            commit.future.set_result(pb.BatchAck(sequence=admitted.sequence, accepted=commit.accepted,
                                                 duplicates=commit.duplicates))

    @staticmethod
    async def _refuse_closed(future: asyncio.Future[pb.BatchAck], failed: ClosedToReports,
                             follow: Callable[[], Awaitable[None]]) -> None:
        """Answer ``failed`` once ``follow`` has read the new state (or failed, or taken too long)."""
        try:
            await asyncio.wait_for(follow(), FOLLOW_DEADLINE)
        except (LdpsynthError, asyncio.TimeoutError) as exc:
            log.warning("discovery.follow_failed", f"the discoveries' states could not be read ({exc!r})",
                        detail=repr(exc))
        finally:
            if not future.done():
                future.set_exception(failed)

    async def close(self) -> None:
        """Let queued group commits finish."""
        await asyncio.gather(*(c.close() for c in self._committers))

