"""Pools: the sealed reports of one collection, from many devices, waiting for their release.

Every device call (``SubmitSealed``) puts its reports into the open pool of its collection and key
and waits. A pool is released as soon as it holds at least its threshold (drawn when the pool opens,
:func:`~ldpsynth.shuffler.threshold.draw_threshold`): it is closed (later calls open a new pool),
its reports are permuted uniformly (:func:`~ldpsynth.shuffler.permutation.uniform_permutation`) and
forwarded (:class:`~ldpsynth.shuffler.forward.Forwarder`), and every call waiting on it is answered
once the replicas acknowledged all of it, with the error of the forward otherwise. A pool that has
not reached its threshold ``max_wait`` seconds after it opened is dropped: nothing of it is
forwarded, its calls end UNAVAILABLE (the devices retry). A call that ends while it waits (the
device's deadline passed, it went away) takes its reports out of the open pool, so a retry is not
counted twice towards the threshold.

Acknowledgement (docs/contract.md §16): a device's call succeeds only after the replicas
acknowledged the forwarded batches that held its reports, so the shuffler stores nothing: a
killed shuffler's waiting devices get an error and retry with the same sealed bytes, and the report
ids inside make every report stored once.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np

from ldpsynth.serving.errors import TryLater
from ldpsynth.serving.observe import events
from ldpsynth.shuffler.directory import Route
from ldpsynth.shuffler.forward import Forwarder
from ldpsynth.shuffler.permutation import uniform_permutation
from ldpsynth.shuffler.threshold import draw_threshold

log = events.get(__name__)


@dataclass(eq=False)
class Waiting:
    """One call's reports in a pool, and what its call waits on (compared by identity)."""

    rows: np.ndarray
    done: asyncio.Future[None]


@dataclass(eq=False)
class Pool:
    """The open pool of one collection and key: the calls waiting in it, and its threshold."""

    route: Route
    threshold: int
    waiting: list[Waiting] = field(default_factory=list)
    reports: int = 0
    expiry: asyncio.TimerHandle | None = None


class Pools:
    """The open pools of every collection, their release and their expiry."""

    def __init__(self, forwarder: Forwarder, threshold: int, max_wait: float):
        self._forwarder = forwarder
        self._threshold = threshold
        self._max_wait = max_wait
        self._open: dict[tuple[str, bytes], Pool] = {}
        self._forwards: set[asyncio.Task[None]] = set()

    async def submit(self, route: Route, rows: np.ndarray) -> None:
        """Pool ``rows`` (one sealed report per row) and wait until they are forwarded and acknowledged.

        Parameters
        ----------
        route : Route
            Their collection.
        rows : numpy.ndarray
            ``(k, sealed_report_bytes)`` uint8.

        Returns
        -------
        None
            Once the replicas acknowledged every batch that held these reports; raises the error
            (with its status) of the forward, or TryLater when the pool expired.
        """
        pool = self._pool_of(route)
        entry = Waiting(rows, asyncio.get_running_loop().create_future())
        pool.waiting.append(entry)
        pool.reports += len(rows)
        if pool.reports >= pool.threshold:
            self._release(pool)
        try:
            await entry.done
        except asyncio.CancelledError:
            if self._open.get((route.name, route.key_id)) is pool and entry in pool.waiting:
                pool.waiting.remove(entry)
                pool.reports -= len(rows)
            raise

    def _pool_of(self, route: Route) -> Pool:
        key = (route.name, route.key_id)
        pool = self._open.get(key)
        if pool is None:
            pool = self._open[key] = Pool(route, draw_threshold(self._threshold, route.min_batch))
            pool.expiry = asyncio.get_running_loop().call_later(self._max_wait, self._expire, pool, TryLater(
                f"too few reports reached the shuffler within {self._max_wait:g} s to be forwarded (its threshold); "
                "nothing was forwarded: retry the batch with the same reports"))
        return pool

    def _close(self, pool: Pool) -> None:
        key = (pool.route.name, pool.route.key_id)
        if self._open.get(key) is pool:
            del self._open[key]
        if pool.expiry is not None:
            pool.expiry.cancel()

    def _expire(self, pool: Pool, failure: TryLater) -> None:
        self._close(pool)
        if pool.waiting:
            log.info("shuffler.pool_expired", f"a pool of collection {pool.route.name!r} ended below its threshold: "
                     f"{len(pool.waiting)} calls answered UNAVAILABLE", collection=pool.route.name,
                     calls=len(pool.waiting))
        for entry in pool.waiting:
            if not entry.done.done():
                entry.done.set_exception(failure)

    def _release(self, pool: Pool) -> None:
        self._close(pool)
        task = asyncio.ensure_future(self._forward(pool))
        self._forwards.add(task)
        task.add_done_callback(self._forwards.discard)

    async def _forward(self, pool: Pool) -> None:
        rows = np.concatenate([entry.rows for entry in pool.waiting])
        shuffled = rows[uniform_permutation(len(rows))]
        try:
            acks = await self._forwarder.forward(pool.route, shuffled)
        except Exception as exc:  # noqa: BLE001 (every waiting call ends with the forward's error and its status)
            for entry in pool.waiting:
                if not entry.done.done():
                    entry.done.set_exception(exc)
            return
        log.info("shuffler.pool_forwarded", f"forwarded a pool of collection {pool.route.name!r}: {len(rows)} "
                 f"reports from {len(pool.waiting)} calls in {len(acks)} batches", collection=pool.route.name,
                 reports=len(rows), calls=len(pool.waiting), batches=len(acks))
        for entry in pool.waiting:
            if not entry.done.done():
                entry.done.set_result(None)

    async def close(self) -> None:
        """Answer every waiting call UNAVAILABLE (nothing of the open pools is forwarded) and wait for the
        forwards under way.

        Returns
        -------
        None
        """
        stopping = TryLater("the shuffler is stopping; nothing of the batch was forwarded: retry it with the same "
                            "reports")
        for pool in list(self._open.values()):
            self._expire(pool, stopping)
        await asyncio.gather(*self._forwards, return_exceptions=True)
