"""Pools: the sealed reports of one collection and one public key, from many devices, waiting for their release.

Every device call (``SubmitSealed``) names the public key all its reports hold (``pool_key``, in
clear) and puts its reports into the open pool of its collection, sealing key and public key, and
waits. Pools are per public key because the aggregator's operator sees each forwarded pool opened,
public keys included: a report hides only among the reports of its own public key in its own pool
(docs/shuffle-accountant.md §6), so every pool must hold enough of them, not merely enough reports.

A pool counts **distinct** sealed reports: a ciphertext that is already in the pool (a copy sent twice,
by one device or by several) adds nothing to its count and is forwarded once. Honest seals never
repeat (each has a fresh ephemeral key), so copies can only be replays or floods.

A pool is released as soon as it holds at least its threshold distinct reports (drawn when the pool
opens, :func:`~ldpsynth.shuffler.threshold.draw_threshold`): it is closed (later calls open a new
pool), its distinct reports are permuted uniformly (:func:`~ldpsynth.shuffler.permutation.uniform_permutation`)
and forwarded in parts (:class:`~ldpsynth.shuffler.forward.Forwarder`), and every call waiting on it is
answered by the parts that hold its reports: acknowledged when the replicas acknowledged every one of
them, else with the error of a part that failed (so a device never takes a report the replicas did not
store for stored, and resends only what may be missing; what was stored comes back as duplicates). A
pool that has not reached its threshold ``max_wait`` seconds after it opened is dropped: nothing of it
is forwarded, its calls end UNAVAILABLE (the devices retry). A call that ends while it waits (the
device's deadline passed, it went away) takes its reports out of the open pool, so a retry is not
counted twice towards the threshold.

Acknowledgement (docs/contract.md §16): a device's call succeeds only after the replicas
acknowledged the forwarded batches that held its reports, so the shuffler stores nothing: a
killed shuffler's waiting devices get an error and retry with the same sealed bytes, and the report
ids inside make every report stored once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
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
    """The open pool of one collection, sealing key and public key: the calls waiting in it, the distinct
    sealed reports they hold (with how many calls hold each), and its threshold."""

    route: Route
    pool_key: int
    threshold: int
    waiting: list[Waiting] = field(default_factory=list)
    held: Counter[bytes] = field(default_factory=Counter)
    expiry: asyncio.TimerHandle | None = None

    @property
    def reports(self) -> int:
        """Distinct sealed reports in the pool (what its threshold counts)."""
        return len(self.held)

    def add(self, entry: Waiting) -> None:
        self.waiting.append(entry)
        self.held.update(row.tobytes() for row in entry.rows)

    def remove(self, entry: Waiting) -> None:
        self.waiting.remove(entry)
        for row in (row.tobytes() for row in entry.rows):
            self.held[row] -= 1
            if self.held[row] <= 0:
                del self.held[row]


def distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``rows`` (``(n, w)`` uint8) and, per row, the index of its distinct row.

    Parameters
    ----------
    rows : numpy.ndarray
        Sealed reports, one per row.

    Returns
    -------
    tuple of numpy.ndarray
        ``(distinct, inverse)``: ``distinct[inverse]`` equals ``rows``.
    """
    contiguous = np.ascontiguousarray(rows)
    as_bytes = contiguous.view(np.dtype((np.void, contiguous.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(as_bytes, return_index=True, return_inverse=True)
    return contiguous[first], inverse.reshape(-1)


class Pools:
    """The open pools of every collection and public key, their release and their expiry."""

    def __init__(self, forwarder: Forwarder, threshold: int, max_wait: float):
        self._forwarder = forwarder
        self._threshold = threshold
        self._max_wait = max_wait
        self._open: dict[tuple[str, bytes, int], Pool] = {}
        self._forwards: set[asyncio.Task[None]] = set()

    async def submit(self, route: Route, pool_key: int, rows: np.ndarray) -> None:
        """Pool ``rows`` (one sealed report per row, all of public key ``pool_key``) and wait until they
        are forwarded and acknowledged.

        Parameters
        ----------
        route : Route
            Their collection.
        pool_key : int
            The public key every report holds (checked against the route by the caller).
        rows : numpy.ndarray
            ``(k, sealed_report_bytes)`` uint8.

        Returns
        -------
        None
            Once the replicas acknowledged every batch that held these reports; raises the error
            (with its status) of a forwarded part that held one of them, or TryLater when the pool expired.
        """
        pool = self._pool_of(route, pool_key)
        entry = Waiting(rows, asyncio.get_running_loop().create_future())
        pool.add(entry)
        if pool.reports >= pool.threshold:
            self._release(pool)
        try:
            await entry.done
        except asyncio.CancelledError:
            if self._open.get(self._key(pool)) is pool and entry in pool.waiting:
                pool.remove(entry)
            raise

    @staticmethod
    def _key(pool: Pool) -> tuple[str, bytes, int]:
        return pool.route.name, pool.route.key_id, pool.pool_key

    def _pool_of(self, route: Route, pool_key: int) -> Pool:
        key = (route.name, route.key_id, pool_key)
        pool = self._open.get(key)
        if pool is None:
            pool = self._open[key] = Pool(route, pool_key, draw_threshold(self._threshold, route.min_batch))
            pool.expiry = asyncio.get_running_loop().call_later(self._max_wait, self._expire, pool, TryLater(
                f"too few reports reached the shuffler within {self._max_wait:g} s to be forwarded (its threshold); "
                "nothing was forwarded: retry the batch with the same reports"))
        return pool

    def _close(self, pool: Pool) -> None:
        key = self._key(pool)
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
        distinct, inverse = distinct_rows(rows)
        order = uniform_permutation(len(distinct))
        position = np.empty(len(distinct), np.int64)
        position[order] = np.arange(len(distinct))  # where each distinct report lands in the forwarded order
        outcomes: list[object]
        try:
            bounds, parts = await self._forwarder.forward(pool.route, pool.pool_key, distinct[order])
            outcomes = list(parts)
        except Exception as exc:  # noqa: BLE001 (every waiting call ends with the forward's error and its status)
            outcomes, bounds = [exc], np.array([0, len(distinct)])
        part = np.searchsorted(bounds, position[inverse], side="right") - 1  # the part of each call's row
        failed = [i for i, outcome in enumerate(outcomes) if isinstance(outcome, BaseException)]
        log.info("shuffler.pool_forwarded", f"forwarded a pool of collection {pool.route.name!r}: {len(distinct)} "
                 f"distinct reports ({len(rows) - len(distinct)} copies dropped) from {len(pool.waiting)} calls in "
                 f"{len(outcomes)} batches, {len(failed)} not acknowledged", collection=pool.route.name,
                 reports=len(distinct), copies=len(rows) - len(distinct), calls=len(pool.waiting),
                 batches=len(outcomes), failed=len(failed))
        start = 0
        for entry in pool.waiting:
            parts = part[start:start + len(entry.rows)]
            start += len(entry.rows)
            error = next((outcomes[i] for i in failed if np.any(parts == i)), None)
            if entry.done.done():
                continue
            if error is None:
                entry.done.set_result(None)
            else:
                assert isinstance(error, BaseException)
                entry.done.set_exception(error)

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
