"""The Ray seam: the only module that imports Ray.

Each shard is one Ray actor wrapping a plain :class:`~ldpsynth.aggregator.store.ShardStore`
(one writer per shard file). Actors are pinned to the server's node (their SQLite files live
in the server's data directory) and take no CPU reservation (they mostly wait on fsync), so
query tasks keep the cluster's CPUs.

Faults: an actor that dies (``ray.kill``, a crash, OOM) is restarted by Ray
(``max_restarts=-1``) and reopens its file, rebuilding its id index and counts from what is
durably stored; calls that were in flight fail (``max_task_retries=0``) and surface as
:class:`~ldpsynth.aggregator.status.ShardUnavailable`, so the server answers UNAVAILABLE and
the client retries. Calls made while it restarts wait for it.

Ray runtime: if this process is already connected (e.g. a test session's cluster) it is used
as is; else ``ray_address`` is joined, or a local runtime is started (one CPU per core,
dashboard off, worker logs not forwarded). :meth:`RayShards.close` shuts Ray down only if it
started or joined it here: a runtime this process did not start is never stopped (shutting
down a joined runtime only disconnects this driver).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from .config import ConfigError
from .quota import QuotaKey
from .stats import SufficientStats
from .status import ShardUnavailable
from .store import CommitOutcome, RowChunk, Segment, ShardStore

log = logging.getLogger(__name__)

ShardActor = ray.remote(ShardStore)
T = TypeVar("T")


@ray.remote(num_cpus=1)
def _run_task(function: Callable[..., T], *args: Any) -> T:
    """A query task over one partition of the rows (see :meth:`RayShards.map_tasks`)."""
    return function(*args)

#: Errors inside a shard that a retry may cure (disk full, I/O error, file busy).
_TRANSIENT_CAUSES = (sqlite3.OperationalError, OSError)


class RayShards:
    """One actor per shard file; implements the ingest :class:`ShardBackend`."""

    def __init__(self, actors: Sequence[ray.actor.ActorHandle], paths: Sequence[Path], connected_here: bool):
        self._actors = list(actors)
        self.paths = list(paths)
        self._connected_here = connected_here

    @classmethod
    def start(cls, paths: Sequence[Path], cards: Mapping[str, str], ray_address: str | None = None) -> "RayShards":
        """Connect to Ray (see the module docstring) and create the shard actors (blocking)."""
        connected_here = False
        if not ray.is_initialized():
            try:
                if ray_address:
                    ray.init(address=ray_address, log_to_driver=False)
                else:
                    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ConfigError(f"--ray-address {ray_address or '(local)'}: cannot start or join Ray "
                                  f"({type(exc).__name__}: {exc})") from None
            connected_here = True
        node = ray.get_runtime_context().get_node_id()
        options = dict(max_restarts=-1, max_task_retries=0, num_cpus=0,
                       scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
        actors = [ShardActor.options(**options).remote(str(path), dict(cards)) for path in paths]
        return cls(actors, paths, connected_here)

    @property
    def num_shards(self) -> int:
        return len(self._actors)

    def actor(self, shard: int) -> ray.actor.ActorHandle:
        """The actor owning ``shard`` (for fault injection and direct calls)."""
        return self._actors[shard]

    async def _call(self, shard: int, method: str, *args: object) -> Any:
        try:
            return await getattr(self._actors[shard], method).remote(*args)
        except ray.exceptions.RayActorError as exc:
            raise ShardUnavailable(f"shard {shard}: actor unavailable ({type(exc).__name__})") from exc
        except ray.exceptions.RayTaskError as exc:
            if isinstance(exc.cause, _TRANSIENT_CAUSES):
                raise ShardUnavailable(f"shard {shard}: {type(exc.cause).__name__}") from exc
            raise

    async def wait_ready(self) -> dict[int, dict[str, int]]:
        """Wait until every shard has opened its file; return its row counts per collection."""
        counts = await asyncio.gather(*(self._call(s, "row_counts") for s in range(self.num_shards)))
        return dict(enumerate(counts))

    async def commit(self, shard: int, segments: list[Segment]) -> CommitOutcome:
        return await self._call(shard, "commit", segments)

    async def count_existing(self, shard: int, collection: str, report_ids: np.ndarray) -> int:
        return await self._call(shard, "count_existing", collection, report_ids)

    async def quota_usage(self, shard: int) -> dict[QuotaKey, int]:
        return await self._call(shard, "quota_usage")

    async def stats(self, collection: str) -> list[SufficientStats]:
        """Every shard's sufficient statistics of ``collection`` (fan out, then gather once)."""
        return list(await asyncio.gather(*(self._call(s, "stats", collection)
                                           for s in range(self.num_shards))))

    async def sorted_rows(self, collection: str) -> list[RowChunk]:
        """Every shard's reports of ``collection``, each ordered by report id."""
        return list(await asyncio.gather(*(self._call(s, "sorted_rows", collection)
                                           for s in range(self.num_shards))))

    async def cut_totals(self, collection: str, source: str, target: str, edge: str, sources: np.ndarray,
                         targets: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, int]]:
        """Every shard's cut-query pair totals (computed in the shard actors, in parallel)."""
        masks = (ray.put(sources), ray.put(targets))  # shipped once, shared by the actors
        return list(await asyncio.gather(*(self._call(s, "cut_totals", collection, source, target, edge, *masks)
                                           for s in range(self.num_shards))))

    async def map_tasks(self, function: Callable[..., T], arguments: Sequence[tuple[Any, ...]]) -> list[T]:
        """``function(*args)`` for every ``args`` of ``arguments``, as parallel Ray tasks (one CPU each)."""
        return list(await asyncio.gather(*(_run_task.remote(function, *args) for args in arguments)))

    def close(self) -> None:
        """Close every shard file and end the actors; disconnect from Ray if connected here."""
        closing = [actor.close.remote() for actor in self._actors]
        try:
            ray.get(closing, timeout=30)
        except (ray.exceptions.RayError, TimeoutError) as exc:
            log.warning("a shard did not close cleanly (%s); its file stays consistent", type(exc).__name__)
        for actor in self._actors:
            ray.kill(actor, no_restart=True)
        if self._connected_here:
            ray.shutdown()
