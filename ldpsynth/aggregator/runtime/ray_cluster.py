"""The Ray seam: the only module that imports Ray. The runtime, and the shard workers as Ray actors.

Runtime (:class:`RayRuntime`). If this process is already connected to Ray (a test session's
cluster) it is used as is. With an address it joins that cluster. Otherwise it starts its own
runtime, *always local* (``address="local"``: never a cluster that ``ray start`` left on the host),
bound to 127.0.0.1 only: Ray binds all interfaces and rewrites a loopback node address to the
host's routable one unless cluster mode is off (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``), and a
Ray runtime reachable from the network runs whatever code it is sent. That runtime's processes
(GCS, raylet, agents) and the embedded NATS server are listed to a reaper
(:mod:`~ldpsynth.aggregator.runtime.reaper`), which ends them if this process dies by SIGKILL; a thread
watches the raylet and logs its death (the aggregator cannot go on without it). Ray's own log
lines are kept out of the output unless ``verbose``.

Workers (:class:`RayWorkers`, the :class:`~ldpsynth.aggregator.runtime.shards.Shards` of a replica).
One :class:`~ldpsynth.aggregator.storage.shard_worker.ShardWorker` per shard runs in a *named,
detached* actor of the ``ldpsynth`` namespace (``ldpsynth-<layout>-shard-<k>``), which forwards
calls to it by name: every replica of the deployment finds the same workers by name
(``get_if_exists``), they outlive the replica that created them, Ray spreads them over the nodes
(``SPREAD``) and restarts one whose process or node died (``max_restarts=-1``), elsewhere if need
be. Calls in flight when a worker dies fail, and every call has a deadline: both surface as
:class:`~ldpsynth.aggregator.errors.ShardUnavailable` (the replica answers UNAVAILABLE; devices retry).
A worker restarted on another node starts from its snapshot in the object store.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import ray

from ldpsynth.aggregator.errors import ShardDamaged, ShardUnavailable, WorkerStartFailed
from ldpsynth.aggregator.runtime.config import ConfigError
from ldpsynth.aggregator.runtime.reaper import descendants, describe, start_reaper, start_time, stop_reaper
from ldpsynth.aggregator.runtime.shards import COMMIT_DEADLINE, READ_DEADLINE, STATUS_DEADLINE, Shards
from ldpsynth.aggregator.storage.segments import CommitOutcome, Segment, SegmentPack, WorkerStatus
from ldpsynth.aggregator.storage.shard_worker import ShardWorker, WorkerSpec
from ldpsynth.serving.observe import events
from ldpsynth.shared.errors import LdpsynthError

log = events.get(__name__)

NAMESPACE = "ldpsynth"
_RAYLET_POLL = 0.5
#: A worker that died this many times before it first answered will not start: the replica gives up.
START_DEATHS = 3
#: The last line of a Python traceback: ``ModuleNotFoundError: No module named 'x'``.
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)(?::.*)?$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")



def worker_name(layout_id: str, shard: int) -> str:
    return f"ldpsynth-{layout_id}-shard-{shard:03d}"


def _creation_failure(exc: BaseException) -> str | None:
    """The exception a worker's creation task raised, as its traceback's last line, if that is why
    the actor died (Ray keeps such an actor dead: ``actor_init_failed``); else ``None``."""
    if not getattr(exc, "actor_init_failed", False):
        return None
    lines = [line.strip() for line in _ANSI.sub("", str(exc)).splitlines()]
    causes = [line for line in lines if _EXCEPTION_LINE.match(line) and not line.startswith("ray.")]
    return causes[-1] if causes else next((line for line in lines if line), type(exc).__name__)


def _private_ray() -> Any:
    """Ray's private modules, the only place this module reaches them (ray is pinned to the release CI
    tests, pyproject.toml): ``ray_constants`` (cluster mode off, so a loopback node address is kept)
    and ``state`` (an actor's restarts from the GCS's actor table, which no public API gives without
    the dashboard the local runtime does not start)."""
    import ray._private.ray_constants
    import ray._private.state

    return ray._private


def _restarts(actor: Any) -> int:
    """How often Ray has restarted ``actor``."""
    record = _private_ray().state.actors(actor_id=actor._actor_id.hex())
    return int(record.get("NumRestarts") or 0)


def keep_signal_handlers() -> None:
    """Re-install this process's Python handlers of SIGTERM and SIGINT (call from the main thread
    after the runtime started): ``ray.init`` installs a C++ failure handler over them that prints a
    stack dump for a plain ``docker stop``. (A loop in another thread has no signal handlers to keep.)"""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGINT):
        handler = signal.getsignal(sig)
        if callable(handler) or handler in (signal.SIG_IGN, signal.SIG_DFL):
            signal.signal(sig, handler)


def end_actor(name: str, timeout: float = 30.0) -> None:
    """End the named actor of the ``ldpsynth`` namespace, if there is one, and wait until its name is free."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            actor = ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            return
        ray.kill(actor, no_restart=True)
        if time.monotonic() > deadline:
            raise ConfigError(f"the stale shard worker {name} did not end within {timeout:g} s")
        time.sleep(0.1)


class RayRuntime:
    """This process's connection to Ray (see the module docstring)."""

    def __init__(self, started_here: bool, connected_here: bool):
        self.started_here = started_here
        self.connected_here = connected_here
        self._reaper: subprocess.Popen[bytes] | None = None
        self._watch: threading.Thread | None = None
        self._stopping = threading.Event()

    @classmethod
    def connect(cls, address: str | None, *, verbose: bool = False, num_cpus: int | None = None) -> RayRuntime:
        """Use the current connection, join ``address``, or start a local loopback-only runtime."""
        level = logging.INFO if verbose else logging.ERROR
        logging.getLogger("ray").setLevel(level)
        if ray.is_initialized():
            return cls(started_here=False, connected_here=False)
        try:
            if address:
                ray.init(address=address, namespace=NAMESPACE, log_to_driver=verbose, logging_level=level)
                return cls(started_here=False, connected_here=True)
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # inherited by Ray's processes
            _private_ray().ray_constants.ENABLE_RAY_CLUSTER = False  # read by ray.init for the node address
            ray.init(address="local", namespace=NAMESPACE, _node_ip_address="127.0.0.1",
                     num_cpus=num_cpus or os.cpu_count(), include_dashboard=False, log_to_driver=verbose,
                     logging_level=level)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"--ray-address {address or '(local)'}: cannot start or join Ray "
                              f"({type(exc).__name__}: {exc})") from None
        except OSError as exc:  # its session files: a full /tmp, or socket paths over AF_UNIX's 107 bytes
            hint = "; set RAY_TMPDIR to a shorter directory" if "AF_UNIX" in str(exc) else ""
            raise ConfigError(f"cannot start Ray's local runtime ({exc}){hint}") from None
        return cls(started_here=True, connected_here=True)

    def guard(self, on_raylet_death: Callable[[str], object]) -> None:
        """For a runtime started here: start the reaper over this process's helper processes (Ray's
        and the embedded NATS server) and a thread that reports the raylet's death."""
        if not self.started_here:
            return
        targets = describe(descendants(os.getpid()))
        self._reaper = start_reaper(targets)
        raylets = [t for t in targets if t["name"] == "raylet"]
        if raylets:
            raylet = raylets[0]
            self._watch = threading.Thread(target=self._watch_raylet, args=(raylet, on_raylet_death), daemon=True,
                                           name="ldpsynth-raylet-watch")
            self._watch.start()

    def _watch_raylet(self, raylet: dict[str, object], on_death: Callable[[str], None]) -> None:
        while not self._stopping.wait(_RAYLET_POLL):
            if start_time(int(raylet["pid"])) != raylet["start"]:  # type: ignore[call-overload]
                message = (f"the embedded Ray runtime's raylet (pid {raylet['pid']}) exited; "
                           "the aggregator cannot serve without it")
                log.error("ray.raylet_exited", message)
                on_death(message)
                return

    def shutdown(self) -> None:
        """Disconnect (and end the runtime if it was started here)."""
        self._stopping.set()
        if self.connected_here:
            ray.shutdown()
        stop_reaper(self._reaper)
        self._reaper = None


@ray.remote
class _WorkerActor:
    """The actor around one :class:`ShardWorker`: :meth:`call` forwards to the worker's method of that
    name (:meth:`ShardWorker.call`: only :data:`~ldpsynth.aggregator.storage.shard_worker.CALLS`; the
    worker's other attributes are not callable remotely)."""

    def __init__(self, spec: WorkerSpec, per_node: bool):
        if per_node:  # a node-local directory: a worker restarted on another node never shares files
            node = ray.get_runtime_context().get_node_id()[:16]
            spec = replace(spec,
                           directory=str(Path(spec.directory) / node / spec.layout.id / f"shard-{spec.shard:03d}"))
        self._worker = ShardWorker(spec)

    async def call(self, method: str, *args: Any) -> Any:
        return await self._worker.call(method, *args)

    async def commit_pack(self, collections: tuple[str, ...], credentials: tuple[str, ...], ends: np.ndarray,
                          report_ids: np.ndarray, public_keys: np.ndarray, private_codes: np.ndarray,
                          trace: dict[str, str]) -> CommitOutcome:
        """The pack's fields as separate arguments: Ray serialises tuples of strings and arrays on its fast
        paths, a dataclass with cloudpickle (a replica's main cost per Ray call)."""
        return await self._worker.commit_pack(
            SegmentPack(collections, credentials, ends, report_ids, public_keys, private_codes), trace)

    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()


class RayWorkers(Shards):
    """The shard workers of one layout as Ray actors: the :class:`Shards` protocol over :meth:`call`, and
    the workers' lifecycle."""

    def __init__(self, actors: Sequence[Any], layout_id: str):
        self._actors = list(actors)
        self.layout_id = layout_id

    @classmethod
    def attach(cls, specs: Sequence[WorkerSpec], per_node: bool, resource: str | None = None) -> RayWorkers:
        """Get (or create) the named, detached worker of every spec (blocking); ``resource``: run
        them only on nodes offering that custom resource (each worker takes 1 unit)."""
        # _WorkerActor is an ActorClass (made by @ray.remote), which has .options.
        actors = [_WorkerActor.options(name=worker_name(s.layout.id, s.shard), namespace=NAMESPACE,  # type: ignore[attr-defined]
                                       lifetime="detached", get_if_exists=True, max_restarts=-1,
                                       max_task_retries=0, num_cpus=0, scheduling_strategy="SPREAD",
                                       resources={resource: 1} if resource else None
                                       ).remote(s, per_node) for s in specs]
        return cls(actors, specs[0].layout.id)

    @property
    def num_shards(self) -> int:
        return len(self._actors)

    def actor(self, shard: int) -> Any:
        """The actor of ``shard`` (fault injection, tests)."""
        return self._actors[shard]

    async def call(self, shard: int, method: str, *args: Any, deadline: float) -> Any:
        return await self._remote(shard, lambda actor: actor.call.remote(method, *args), deadline)

    def share(self, value: np.ndarray) -> Any:
        return ray.put(value)

    async def commit(self, shard: int, segments: list[Segment], trace: dict[str, str]) -> CommitOutcome:
        """The pack goes as its fields (:meth:`_WorkerActor.commit_pack`)."""
        pack = SegmentPack.of(segments)
        return await self._remote(shard, lambda actor: actor.commit_pack.remote(
            pack.collections, pack.credentials, pack.ends, pack.report_ids, pack.public_keys, pack.private_codes,
            trace), COMMIT_DEADLINE)

    async def _remote(self, shard: int, call: Callable[[Any], Any], deadline: float) -> Any:
        """``call(actor)`` (an actor method's ``.remote(...)``) on ``shard``'s worker, within ``deadline``.

        An error the worker raised comes back as itself (its type and fields), if it says how a
        request ends; another ldpsynth error (the log or a file, not a bug) as :class:`ShardUnavailable`
        naming it; a dead, restarting or silent worker as :class:`ShardUnavailable` (or
        :class:`WorkerStartFailed` when its creation raised)."""
        try:
            return await asyncio.wait_for(call(self._actors[shard]), deadline)
        except asyncio.TimeoutError:
            raise ShardUnavailable(f"shard {shard}: no answer within {deadline:g} s") from None
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as exc:
            cause = _creation_failure(exc)
            if cause is not None:
                raise WorkerStartFailed(f"shard {shard}: {cause}") from None
            raise ShardUnavailable(f"shard {shard}: worker unavailable ({type(exc).__name__})") from None
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, LdpsynthError) and cause.refused_as is not None:
                raise cause from None
            if isinstance(cause, LdpsynthError):  # the log or a file, not a bug: say what, in one line
                raise ShardUnavailable(f"shard {shard}: {cause}") from None
            raise

    # ----- lifecycle and health ----------------------------------------------------------------
    async def status(self, deadline: float = STATUS_DEADLINE, shards: Sequence[int] | None = None
                     ) -> list[WorkerStatus]:
        """Every worker's status, or the ``shards``' (raises if one cannot answer)."""
        return list(await asyncio.gather(*(self.call(s, "status", deadline=deadline)
                                           for s in (range(self.num_shards) if shards is None else shards))))

    async def statuses(self, deadline: float = STATUS_DEADLINE) -> list[WorkerStatus | ShardUnavailable]:
        """Every worker's status as it is now, without waiting for a start (a worker restoring its state
        says so), or why it could not answer."""
        async def one(shard: int) -> WorkerStatus | ShardUnavailable:
            try:
                return await self.call(shard, "status", False, deadline=deadline)
            except ShardUnavailable as exc:
                return exc
        return list(await asyncio.gather(*(one(shard) for shard in range(self.num_shards))))

    def restarts(self) -> list[int | None]:
        """How often Ray has restarted each worker (``None``: the GCS did not say; blocking: call it in a
        thread)."""
        def count(actor: Any) -> int | None:
            try:
                return _restarts(actor)
            except (ray.exceptions.RayError, ConnectionError, RuntimeError, TimeoutError):  # the GCS is away
                return None
        return [count(actor) for actor in self._actors]

    async def wait_ready(self, deadline: float) -> list[WorkerStatus]:
        """Wait until every worker has restored its state (or ``deadline`` seconds pass).

        Gives up at once, with :class:`WorkerStartFailed`, when a worker's creation raised (an
        import error, a bad directory) or its process died :data:`START_DEATHS` times while starting:
        waiting would not help, and the cause is otherwise only in Ray's worker logs."""
        end = time.monotonic() + deadline
        restarts = await asyncio.to_thread(lambda: [_restarts(actor) for actor in self._actors])
        said = ""
        while True:
            wait = min(STATUS_DEADLINE, max(1.0, end - time.monotonic()))
            try:
                return list(await asyncio.gather(*(self._starting(s, wait) for s in range(self.num_shards))))
            except (ShardDamaged, WorkerStartFailed):
                raise  # waiting cannot repair a damaged log or a worker that cannot be created
            except ShardUnavailable as exc:
                if time.monotonic() >= end:
                    raise
                if str(exc) != said:  # what the replica waits for, in its own log (once per reason)
                    said = str(exc)
                    log.info("workers.waiting", f"waiting for the shard workers: {exc}", detail=str(exc))
            now = await asyncio.to_thread(lambda: [_restarts(actor) for actor in self._actors])
            for shard, (before, after) in enumerate(zip(restarts, now)):
                if after - before >= START_DEATHS:
                    raise WorkerStartFailed(f"shard {shard}: the worker process died {after - before} times while "
                                            "starting (Ray's worker logs say why)")
            await asyncio.sleep(0.5)

    async def _starting(self, shard: int, deadline: float) -> WorkerStatus:
        """The status of a starting worker; an exception its start raised (not a damaged or
        unreachable log, which have their own errors) means it cannot start: :class:`WorkerStartFailed`."""
        try:
            return await self.call(shard, "status", deadline=deadline)
        except ray.exceptions.RayTaskError as exc:
            raise WorkerStartFailed(f"shard {shard}: {type(exc.cause).__name__}: {exc.cause}") from None

    async def flush(self) -> None:
        await asyncio.gather(*(self.call(s, "flush", deadline=READ_DEADLINE) for s in range(self.num_shards)))

    async def stop_workers(self) -> None:
        """Close every worker (queued commits, a last snapshot) and end its actor (the owner of a
        one-machine deployment only: in a cluster the workers outlive any replica). Every close is
        waited for before any actor ends, also when one fails."""
        closed = await asyncio.gather(*(self.call(s, "close", deadline=READ_DEADLINE) for s in range(self.num_shards)),
                                      return_exceptions=True)
        for failed in closed:
            if isinstance(failed, (ShardUnavailable, ShardDamaged)):
                log.warning("workers.close_failed", f"a shard worker did not close cleanly ({failed}); its log stays "
                            "complete", detail=str(failed))
            elif isinstance(failed, BaseException):
                raise failed
        for actor in self._actors:
            ray.kill(actor, no_restart=True)

    async def nodes(self) -> list[str]:
        """The node each worker runs on (tests)."""
        return list(await asyncio.gather(*(actor.node.remote() for actor in self._actors)))
