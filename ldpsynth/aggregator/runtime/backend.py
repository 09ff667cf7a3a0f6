"""What a replica stands on: the replicated log, the Ray runtime and the shard workers.

Two deployments, one code path for routing, deduplication and statistics:

* **One machine** (the default, no ``--nats``): the replica owns a data directory
  (:mod:`~ldpsynth.aggregator.storage.datadir`), starts an embedded NATS server on 127.0.0.1 as the log
  (:mod:`~ldpsynth.aggregator.runtime.nats_process`, one copy of each stream), its own local Ray runtime
  (or the one this process is connected to, or ``--ray-address``), and the shard workers, whose
  snapshots live in the data directory. It stops them all when it stops.
* **Cluster** (``--nats URL,...``): replicas are stateless. The log is the NATS cluster (three
  copies of each stream), the workers are the named, detached actors of the Ray cluster
  (``--ray-address``), created by the first replica and shared by all, with node-local snapshot
  directories and snapshots uploaded to the cluster's object store. A replica that stops leaves
  them running.

Opening refuses, with one line naming what is wrong and what to do (:class:`BackendError`), a log
whose layout, streams, collection cards or records do not match, a data directory of another
log, and (one machine, before any worker starts: :func:`~ldpsynth.aggregator.storage.store_check.check_data_dir`,
the check ``verify`` runs too) a log that lost acknowledged records, unless the operator accepts
the loss (``--accept-lost-records``, recorded in the data directory). What each shard worker did
at start (its snapshot restored, or refused and rebuilt from the log) is logged here, by the
replica: the workers' own log lines stay in Ray's logs.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from ldpsynth.aggregator.errors import ShardDamaged, ShardUnavailable, WorkerStartFailed
from ldpsynth.aggregator.runtime.config import Catalog, ServerConfig
from ldpsynth.aggregator.runtime.nats_process import EMBEDDED_MAX_PAYLOAD, EmbeddedNats, StoreSpace
from ldpsynth.aggregator.runtime.ray_cluster import RayRuntime, RayWorkers, end_actor, keep_signal_handlers, worker_name
from ldpsynth.aggregator.storage.datadir import DataDir
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import Layout, LayoutError, LogSettings, LogUnavailable
from ldpsynth.aggregator.storage.log_records import LogCorruption
from ldpsynth.aggregator.storage.refusals import damaged_log, layout_edited
from ldpsynth.aggregator.storage.sealing_key import SealingKeyError, data_dir_key, read_key_file
from ldpsynth.aggregator.storage.shard_worker import WorkerSpec
from ldpsynth.aggregator.storage.store_check import check_data_dir
from ldpsynth.serving.observe import events
from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.sealing import OpeningKey

log = events.get(__name__)

#: Seconds a replica waits at start for every worker to restore its state, and for the log to answer.
WORKERS_READY_TIMEOUT = 300.0
LOG_WAIT_SECONDS = 120.0
#: Free bytes the embedded log's file system needs before a replica that found it full takes batches
#: again (two of the largest messages the log accepts).
RESUME_FREE_BYTES = 2 * EMBEDDED_MAX_PAYLOAD
T = TypeVar("T")


class BackendError(LdpsynthError):
    """The log, the data directory or a shard cannot be served (the message says which and why)."""


class WorkersDidNotStart(BackendError):
    """A shard worker could not be created, raised while starting or kept dying (the message names
    the shard and the worker's exception), or did not become ready in time."""


@dataclass
class Backend:
    """An opened backend (use :meth:`open`; :meth:`close` when done)."""

    layout: Layout
    log: ReplicatedLog
    runtime: RayRuntime
    workers: RayWorkers
    owns_workers: bool
    embedded: EmbeddedNats | None
    datadir: DataDir | None
    #: The key sealed reports are opened with (``None``: this deployment takes none): one machine's
    #: ``DIR/sealing-key``, a cluster's ``--shuffle-key``; its id is registered in the log.
    opening_key: OpeningKey | None = None
    #: Why the log cannot store anything now (its storage is full), or ``None``: see :meth:`check_storage`.
    storage_full: str | None = None

    def __post_init__(self) -> None:
        self._space = StoreSpace(self.embedded.store_dir) if self.embedded is not None else None

    @classmethod
    async def open(cls, config: ServerConfig, catalog: Catalog, on_fatal: Callable[[str], object]) -> Backend:
        """Open the log, register the collections, start or find the workers, wait until they are ready."""
        parts: dict[str, object] = {}
        try:
            return await cls._open(config, catalog, on_fatal, parts)
        except BaseException:
            await _release(parts)
            raise

    @classmethod
    async def _open(cls, config: ServerConfig, catalog: Catalog, on_fatal: Callable[[str], object],
                    parts: dict[str, object]) -> Backend:
        cluster = config.cluster
        recorded = None
        datadir = None
        if cluster is None:
            assert config.data_dir is not None
            datadir = DataDir(config.data_dir)
            datadir.acquire()
            parts["datadir"] = datadir
            interrupted = datadir.interrupted_retirement()
            if interrupted is not None:
                raise BackendError(interrupted)
            recorded = datadir.recorded_layout()
            embedded = EmbeddedNats(datadir.log_dir)
            parts["embedded"] = embedded
            try:
                url = embedded.start()
            except OSError as exc:
                raise BackendError(f"--data-dir {datadir.path}: cannot start the embedded log "
                                   f"({exc.strerror})") from None
            settings = LogSettings((url,), replicas=1)
        else:
            settings = cluster.log_settings()
        replicated = await ReplicatedLog.connect(settings, name="ldpsynth-replica")
        parts["log"] = replicated
        try:
            layout = await when_available(lambda: replicated.open_layout(config.shards, os.cpu_count() or 1,
                                                                          None if recorded is None else recorded[0]))
            if datadir is not None:
                if recorded is not None and recorded[1] != layout.shards:
                    raise BackendError(layout_edited(str(datadir.path / "layout.json"), recorded[1], layout.shards))
                upgrade = recorded is None or not datadir.keeps_acknowledged()
                check = await check_data_dir(datadir, replicated, layout, write=True,
                                             accept_loss=config.accept_lost_records)
                if check.problems:
                    raise BackendError(check.problems[0])
                for line in check.losses:
                    log.warning("log.loss_accepted", line)
                if upgrade:  # the acknowledged files are written: from now on a missing one is refused
                    datadir.record_layout(layout.id, layout.shards)
            opening_key = await _open_sealing_key(config, datadir, replicated)
            for name, card_json in catalog.cards_json().items():
                await replicated.register_card(name, card_json)
            if cluster is not None:  # before the workers: they would race to create it
                bucket = await when_available(replicated.snapshots)
                await when_available(bucket.probe)
        except LayoutError as exc:
            raise BackendError(str(exc)) from None
        except LogCorruption as exc:
            raise BackendError(damaged_log(str(exc))) from None
        runtime = await _finish_in_thread(parts, "runtime", RayRuntime.connect, config.ray_address,
                                          verbose=config.verbose)
        keep_signal_handlers()
        if cluster is None:
            assert datadir is not None
            specs = [WorkerSpec(layout, k, settings, str(datadir.shard_dir(k)), flush_ids=config.snapshot_ids,
                                acknowledged=str(datadir.acknowledged_file(k)), otlp_endpoint=config.otlp_endpoint)
                     for k in range(layout.shards)]
            await asyncio.to_thread(_end_stale_workers, layout)  # left by an earlier run of this directory
        else:
            specs = [WorkerSpec(layout, k, settings, str(cluster.worker_dir), publish_snapshots=True,
                                flush_ids=config.snapshot_ids, otlp_endpoint=config.otlp_endpoint)
                     for k in range(layout.shards)]
        workers = await _finish_in_thread(parts, "workers" if cluster is None else "", RayWorkers.attach, specs,
                                          cluster is not None, cluster.worker_resource if cluster is not None else None)
        try:
            statuses = await workers.wait_ready(WORKERS_READY_TIMEOUT)
        except ShardDamaged as exc:
            raise BackendError(str(exc)) from None
        except WorkerStartFailed as exc:
            raise WorkersDidNotStart(str(exc)) from None
        except ShardUnavailable as exc:
            raise WorkersDidNotStart(f"the shard workers did not start: {exc}") from None
        for status in statuses:  # what each worker did with its snapshot, in this replica's log
            for level, text in status.notes:
                (log.warning if level == "warning" else log.info)("shard.start", text, shard=status.shard)
        runtime.guard(on_fatal)
        return cls(layout, replicated, runtime, workers, cluster is None, parts.get("embedded"),  # type: ignore[arg-type]
                   datadir, opening_key)

    def check_storage(self) -> None:
        """Follow the embedded log's storage (call every second or so): full as soon as its
        nats-server logs that a write failed for want of space (its publishes then go unanswered,
        and a stream whose write failed stays broken until the server restarts); once the file
        system has :data:`RESUME_FREE_BYTES` free again, the server is restarted on its port (every
        client reconnects; what it acknowledged was fsynced) and the log takes records again. (A
        cluster's NATS servers report their own storage: docs/deployment.md, "Full disk".)"""
        if self._space is None:
            return
        if self.storage_full is None:
            reason = self._space.out_of_space()
            if reason is not None:
                self.storage_full = (f"the log's storage is full ({self._space.store_dir}: "
                                     f"{self._space.free_bytes()} bytes free; {reason})")
                log.error("log.full", f"{self.storage_full}: batches are refused until there is room again",
                          free_bytes=self._space.free_bytes())
            return
        free = self._space.free_bytes()
        if free < RESUME_FREE_BYTES:
            return
        assert self.embedded is not None
        self.embedded.stop()
        self.embedded.restart()  # in this (the event loop's) thread: the child lives as long as it
        self._space.out_of_space()  # what the server said until now is known
        self.storage_full = None
        log.warning("log.room_again", f"the log's storage has room again ({free >> 20} MiB free at "
                    f"{self._space.store_dir}): the embedded log restarted, batches are taken again", free_bytes=free)

    async def abandon(self) -> None:
        """After the runtime died: stop the embedded log and release the data directory only."""
        if self.embedded is not None:
            self.embedded.stop()
        if self.datadir is not None:
            self.datadir.release()

    async def close(self) -> None:
        """Stop what this replica owns: on one machine the workers, the runtime and the log."""
        parts: dict[str, object] = {"log": self.log, "runtime": self.runtime}
        if self.owns_workers:
            parts["workers"] = self.workers
        if self.embedded is not None:
            parts["embedded"] = self.embedded
        if self.datadir is not None:
            parts["datadir"] = self.datadir
        await _release(parts)


async def _open_sealing_key(config: ServerConfig, datadir: DataDir | None,
                            replicated: ReplicatedLog) -> OpeningKey | None:
    """The deployment's sealing key, checked against the id the log registered (and registered if it
    has none): one machine's ``DIR/sealing-key`` (created at the first start), a cluster's
    ``--shuffle-key`` file, or none (a cluster without the flag, whose log names no key)."""
    registered = await when_available(replicated.sealing_key_id)
    try:
        if datadir is not None:
            key, _ = data_dir_key(datadir.path, registered, create=True)  # the "serving" line names it
        elif config.shuffle_key is not None:
            key = read_key_file(config.shuffle_key, "--shuffle-key")
        else:
            key = None
    except SealingKeyError as exc:
        raise BackendError(str(exc)) from None
    try:
        await when_available(lambda: replicated.register_sealing_key(None if key is None else key.key_id.hex()))
    except LayoutError as exc:
        raise BackendError(str(exc)) from None
    return key


async def when_available(call: Callable[[], Awaitable[T]]) -> T:
    """``await call()``, again while the log does not answer yet (a cluster electing its leaders)."""
    deadline = time.monotonic() + LOG_WAIT_SECONDS
    while True:
        try:
            return await call()
        except LogUnavailable as exc:
            if time.monotonic() > deadline:
                raise BackendError(f"the log did not answer within {LOG_WAIT_SECONDS:g} s: {exc}") from None
            log.info("log.waiting", f"waiting for the log: {exc}", detail=str(exc))
            await asyncio.sleep(1.0)


async def _finish_in_thread(parts: dict[str, object], name: str, call: Callable[..., T], *args: object,
                            **kwargs: object) -> T:
    """``call(*args, **kwargs)`` in a thread, its result kept in ``parts[name]`` (unless ``name`` is
    empty) so that it is released with the rest. A thread cannot be interrupted: if the start is
    cancelled (SIGTERM while starting), this waits for the call to finish, keeps what it made, and
    only then lets the cancellation go on, so nothing it started is left running."""
    task = asyncio.ensure_future(asyncio.to_thread(call, *args, **kwargs))
    try:
        result = await asyncio.shield(task)
    except asyncio.CancelledError:
        result = await task
        if name:
            parts[name] = result
        raise
    if name:
        parts[name] = result
    return result


def _end_stale_workers(layout: Layout) -> None:
    for shard in range(layout.shards):
        end_actor(worker_name(layout.id, shard))


async def _release(parts: dict[str, object]) -> None:
    """Stop the parts that were started, in reverse order, each at most once."""
    workers = parts.get("workers")
    if isinstance(workers, RayWorkers):
        await workers.stop_workers()
    runtime = parts.get("runtime")
    if isinstance(runtime, RayRuntime):
        await asyncio.to_thread(runtime.shutdown)
    replicated = parts.get("log")
    if isinstance(replicated, ReplicatedLog):
        await replicated.close()
    embedded = parts.get("embedded")
    if isinstance(embedded, EmbeddedNats):
        embedded.stop()
    datadir = parts.get("datadir")
    if isinstance(datadir, DataDir):
        datadir.release()

