"""The replicated log on NATS JetStream: :class:`ReplicatedLog` connects, opens (or creates) the
layout (:mod:`~ldpsynth.aggregator.storage.log_layout`), and appends to and reads the shards'
streams. Its registry (cards, sealing key, retirements) is
:mod:`~ldpsynth.aggregator.storage.log_registry`, its snapshot store
:mod:`~ldpsynth.aggregator.storage.snapshot_bucket`: these three modules are the only ones that import
``nats``.

The **log** is one stream per shard, ``LDPSYNTH_<layout>_<shard>`` on subject
``ldpsynth.<layout>.<shard>``, file storage, ``num_replicas`` copies (3 in a cluster: it survives
the loss of any one server), deletes and purges denied. Its first record is the shard's genesis
(:mod:`~ldpsynth.aggregator.storage.log_records`). A record is appended with
``Nats-Expected-Last-Sequence``: the append succeeds only if the writer has seen every record
before it, so a stale writer (a worker Ray has already restarted elsewhere) is fenced off and
the log never holds a report id twice.

Server settings the deployment must use (docs/deployment.md): JetStream with file storage and
``sync_interval: always`` (a record is fsynced before it is acknowledged).
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
import uuid
from collections.abc import AsyncIterator

import nats
import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    ObjectStoreConfig,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)

from ldpsynth.aggregator.storage.log_layout import (
    LAYOUT_KEY,
    META_BUCKET,
    TOKEN_ENV,
    Layout,
    LayoutError,
    LogFenced,
    LogFull,
    LogSettings,
    LogUnavailable,
    StreamState,
    layout_from,
)
from ldpsynth.aggregator.storage.log_records import LogCorruption, decode, encode_genesis
from ldpsynth.aggregator.storage.log_registry import LogRegistry
from ldpsynth.aggregator.storage.snapshot_bucket import SnapshotBucket

#: JetStream's error code for a failed ``Nats-Expected-Last-Sequence`` check.
_WRONG_LAST_SEQUENCE = 10071
_EXPECTED_LAST_SEQUENCE = "Nats-Expected-Last-Sequence"
#: JetStream's error codes for a store out of space (insufficient resources; storage limits exceeded).
_STORAGE_FULL = frozenset({10023, 10028, 10047})
#: Seconds between two checks of a read that waits for its next record.
_POLL = 1.0
#: How long a replica waits for another one that is creating the layout.
_CREATION_WAIT = 60.0


def _no_layout(expected_id: str | None) -> str:
    if expected_id is None:
        return "the log has no layout: it is not an ldpsynth log, or it is empty"
    return (f"the log has no layout, but this data directory belongs to layout {expected_id}: the log was deleted or "
            "replaced (restore it, or use a new data directory)")


class ReplicatedLog(LogRegistry):
    """One connection to the NATS servers of the log (use :meth:`connect`); its registry methods are
    :class:`~ldpsynth.aggregator.storage.log_registry.LogRegistry`'s."""

    def __init__(self, nc: nats.NATS, settings: LogSettings):
        super().__init__(nc.jetstream(timeout=settings.timeout), settings)
        self._nc = nc

    @classmethod
    async def connect(cls, settings: LogSettings, name: str) -> ReplicatedLog:
        """Connect (retrying each server for up to ``settings.timeout`` seconds)."""
        try:
            nc = await nats.connect(list(settings.servers), name=name, tls=settings.tls_context(),
                                    token=settings.token or os.environ.get(TOKEN_ENV) or None,
                                    connect_timeout=min(settings.timeout, 5.0),
                                    allow_reconnect=True, max_reconnect_attempts=-1, reconnect_time_wait=0.5,
                                    error_cb=_ignore, disconnected_cb=_ignore_event, reconnected_cb=_ignore_event,
                                    closed_cb=_ignore_event)
        except (OSError, nats.errors.Error, ssl.SSLError, asyncio.TimeoutError) as exc:
            raise LogUnavailable(f"cannot connect to the log at {', '.join(settings.servers)} "
                                 f"({type(exc).__name__}: {exc})") from None
        return cls(nc, settings)

    async def close(self) -> None:
        if not self._nc.is_closed:
            try:
                await self._nc.drain()
            except (nats.errors.Error, asyncio.TimeoutError):
                await self._nc.close()

    @property
    def max_payload(self) -> int:
        """Largest message the servers accept, in bytes."""
        return int(self._nc.max_payload)

    # ----- the layout and its streams ---------------------------------------------------------
    async def open_layout(self, shards: int | None, default_shards: int = 1, expected_id: str | None = None,
                          create: bool = True) -> Layout:
        """The log's layout, created with ``shards`` (else ``default_shards``) shards if there is none yet
        (and ``create``: ``verify`` never creates anything).

        Refused (:class:`LayoutError`) if ``shards`` is given and differs from the stored count, if
        ``expected_id`` is given and differs (another deployment's log), or if a stream of the
        layout is missing or belongs to another layout or shard.
        """
        try:
            return await self._open_layout(shards, default_shards, expected_id, create)
        except (nats.errors.Error, asyncio.TimeoutError) as exc:
            raise LogUnavailable(f"the log did not answer ({type(exc).__name__})") from None

    async def _open_layout(self, shards: int | None, default_shards: int, expected_id: str | None,
                           create: bool) -> Layout:
        if create:
            meta = await self._meta_bucket()
        else:
            try:
                meta = await self._js.key_value(META_BUCKET)
            except nats.js.errors.BucketNotFoundError:
                raise LayoutError(_no_layout(expected_id)) from None
        deadline = time.monotonic() + _CREATION_WAIT
        while True:
            try:
                entry = await meta.get(LAYOUT_KEY)
            except nats.js.errors.KeyNotFoundError:
                if expected_id is not None or not create:
                    raise LayoutError(_no_layout(expected_id)) from None
                fresh = Layout(uuid.uuid4().hex[:12], shards or default_shards, self.settings.replicas)
                try:
                    await meta.create(LAYOUT_KEY, fresh.to_json("creating"))
                except nats.js.errors.KeyWrongLastSequenceError:
                    continue  # another replica created it first: read theirs
                continue
            layout, state = layout_from(entry.value or b"")
            if expected_id is not None and layout.id != expected_id:
                raise LayoutError(f"the log holds layout {layout.id}, but this data directory belongs to layout "
                                  f"{expected_id}: they are from different deployments; put back this directory's own "
                                  "log")
            if shards is not None and shards != layout.shards:
                raise LayoutError(f"the log holds {layout.shards} shards; it cannot be served with --shards {shards} "
                                  "(reports are routed to shards by id)")
            if layout.replicas != self.settings.replicas:
                raise LayoutError(f"the log was created with {layout.replicas} replicas per stream, "
                                  f"not {self.settings.replicas}")
            if state == "ready" or not create:
                for shard in range(layout.shards):
                    await self._check_stream(layout, shard)
                self.layout = layout
                return layout
            # "creating": every step is idempotent, so finish the creation (ours or a stalled one).
            for shard in range(layout.shards):
                await self._create_stream(layout, shard)
            try:
                await meta.update(LAYOUT_KEY, layout.to_json("ready"), last=entry.revision)
            except nats.js.errors.KeyWrongLastSequenceError:
                pass  # marked ready by another replica
            if time.monotonic() > deadline:
                raise LayoutError("the log's layout stayed in creation for a minute")

    def _stream_config(self, layout: Layout, shard: int) -> StreamConfig:
        return StreamConfig(
            name=layout.stream(shard), subjects=[layout.subject(shard)], storage=StorageType.FILE,
            num_replicas=layout.replicas, retention=RetentionPolicy.LIMITS, discard=DiscardPolicy.OLD,
            max_msgs=-1, max_bytes=-1, max_age=0, deny_delete=True, deny_purge=True, allow_direct=True,
            metadata={"ldpsynth.layout": layout.id, "ldpsynth.shard": str(shard),
                      "ldpsynth.shards": str(layout.shards)})

    async def _create_stream(self, layout: Layout, shard: int) -> None:
        try:
            await self._js.add_stream(self._stream_config(layout, shard))
        except nats.js.errors.BadRequestError:
            pass  # exists (created by another replica): checked below
        try:
            await self._js.publish(layout.subject(shard), encode_genesis(layout.id, shard, layout.shards),
                                   headers={_EXPECTED_LAST_SEQUENCE: "0"})
        except nats.js.errors.APIError as exc:
            if exc.err_code != _WRONG_LAST_SEQUENCE:
                raise
        await self._check_stream(layout, shard)

    async def _check_stream(self, layout: Layout, shard: int) -> None:
        name = layout.stream(shard)
        try:
            info = await self._js.stream_info(name)
        except nats.js.errors.NotFoundError:
            raise LayoutError(f"log stream {name} (shard {shard} of {layout.shards}) is missing: the log was "
                              "deleted or damaged; restore it from a backup or a surviving replica") from None
        found = dict(info.config.metadata or {})
        wanted = self._stream_config(layout, shard).metadata or {}
        if any(found.get(k) != v for k, v in wanted.items()):
            raise LayoutError(f"log stream {name} carries layout {found.get('ldpsynth.layout')}, shard "
                              f"{found.get('ldpsynth.shard')} of {found.get('ldpsynth.shards')}: not shard {shard} "
                              f"of layout {layout.id}: restore this deployment's log from a backup")
        if info.state.first_seq != 1 or info.state.num_deleted:
            raise LayoutError(f"log stream {name} has lost records (first sequence {info.state.first_seq}, "
                              f"{info.state.num_deleted} deleted): restore it from a backup or a surviving replica")
        message = await self._js.get_msg(name, seq=1)
        record = decode(message.data or b"", layout=layout.id, shard=shard, sequence=1)
        if record.kind != "genesis" or record.meta.get("shards") != layout.shards:
            raise LogCorruption(f"log stream {name}: sequence 1 is not the genesis record of this layout")

    async def create_streams(self, layout: Layout) -> None:
        """Create every stream of ``layout`` with its genesis record (idempotent), for a layout that is
        not the log's yet (a retirement's copy)."""
        for shard in range(layout.shards):
            await self._create_stream(layout, shard)

    async def delete_streams(self, layout: Layout) -> None:
        """Delete every stream of ``layout`` and its snapshot store (a layout the log no longer uses)."""
        for shard in range(layout.shards):
            try:
                await self._js.delete_stream(layout.stream(shard))
            except nats.js.errors.NotFoundError:
                pass
        try:
            await self._js.delete_object_store(layout.snapshot_bucket)
        except nats.js.errors.NotFoundError:
            pass

    # ----- the log ---------------------------------------------------------------------------
    def _require_layout(self) -> Layout:
        if self.layout is None:
            raise RuntimeError("open_layout() first")
        return self.layout

    async def append(self, shard: int, data: bytes, expected_last: int) -> int:
        """Append ``data`` to shard ``shard``'s stream if its last sequence is ``expected_last``;
        return the new record's sequence once it is durable on a quorum of the stream's replicas.

        :class:`LogFenced`: the stream holds records past ``expected_last``.
        :class:`LogUnavailable`: no answer, or an error: the record may or may not be stored.
        """
        layout = self._require_layout()
        try:
            ack = await self._js.publish(layout.subject(shard), data,
                                         headers={_EXPECTED_LAST_SEQUENCE: str(expected_last)})
        except nats.js.errors.APIError as exc:
            if exc.err_code == _WRONG_LAST_SEQUENCE:
                raise LogFenced(f"shard {shard}: the log has records past sequence {expected_last}") from None
            if exc.err_code in _STORAGE_FULL or "space" in (exc.description or "").lower():
                raise LogFull(f"shard {shard}: {exc.description}") from None
            raise LogUnavailable(f"shard {shard}: append refused ({exc.description})") from None
        except (nats.errors.Error, asyncio.TimeoutError) as exc:
            raise LogUnavailable(f"shard {shard}: append not confirmed ({type(exc).__name__})") from None
        if ack.seq != expected_last + 1:
            raise LogCorruption(f"shard {shard}: record appended at sequence {ack.seq}, expected {expected_last + 1}")
        return int(ack.seq)

    async def state(self, shard: int) -> StreamState:
        layout = self._require_layout()
        try:
            info = await self._js.stream_info(layout.stream(shard))
        except nats.js.errors.NotFoundError:
            raise LayoutError(f"log stream {layout.stream(shard)} is missing") from None
        except (nats.errors.Error, asyncio.TimeoutError) as exc:
            raise LogUnavailable(f"shard {shard}: the log did not answer ({type(exc).__name__})") from None
        s = info.state
        return StreamState(int(s.first_seq), int(s.last_seq), int(s.messages), int(s.num_deleted or 0))

    async def record(self, shard: int, sequence: int) -> bytes | None:
        """The record at ``sequence`` of shard ``shard``'s stream (``None``: there is none)."""
        layout = self._require_layout()
        try:
            message = await self._js.get_msg(layout.stream(shard), seq=sequence)
        except nats.js.errors.NotFoundError:
            return None
        except (nats.errors.Error, asyncio.TimeoutError) as exc:
            raise LogUnavailable(f"shard {shard}: the log did not answer ({type(exc).__name__})") from None
        return bytes(message.data or b"")

    async def read(self, shard: int, first: int, last: int) -> AsyncIterator[tuple[int, bytes]]:
        """Records ``first .. last`` (inclusive) of shard ``shard``'s stream, in order.

        Raises :class:`LogCorruption` if a sequence number is skipped (a record is missing)."""
        if last < first:
            return
        layout = self._require_layout()
        try:
            sub = await self._js.subscribe(
                layout.subject(shard), ordered_consumer=True, stream=layout.stream(shard),
                config=ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=first,
                                      ack_policy=AckPolicy.NONE))
        except (nats.errors.Error, asyncio.TimeoutError) as exc:
            raise LogUnavailable(f"shard {shard}: cannot read the log ({type(exc).__name__})") from None
        try:
            expected = first
            while expected <= last:
                message = await self._next(sub, layout, shard, expected)
                sequence = int(message.metadata.sequence.stream)
                if sequence != expected:
                    raise LogCorruption(f"log of shard {shard}: sequence {expected} is missing (next is {sequence})")
                yield sequence, message.data
                expected += 1
        finally:
            try:
                await sub.unsubscribe()
            except (nats.errors.Error, asyncio.TimeoutError):
                pass

    async def _next(self, sub: Subscription, layout: Layout, shard: int, expected: int) -> Msg:
        """The consumer's next message. While none comes, ask the stream whether record ``expected``
        exists at all: a record the server lost (it drops a message that fails its own hash) is
        missing (:class:`LogCorruption`), not late; a record that exists but does not arrive within
        the timeout is :class:`LogUnavailable`."""
        waited = 0.0
        while True:
            try:
                return await sub.next_msg(timeout=_POLL)
            except (nats.errors.Error, asyncio.TimeoutError) as exc:
                waited += _POLL
                try:
                    await self._js.get_msg(layout.stream(shard), seq=expected, direct=True)
                except nats.js.errors.NotFoundError:
                    raise LogCorruption(f"log of shard {shard}: sequence {expected} is missing "
                                        "(the log server lost it)") from None
                except (nats.errors.Error, asyncio.TimeoutError):
                    pass
                if waited >= self.settings.timeout:
                    raise LogUnavailable(f"shard {shard}: reading the log stalled at sequence {expected} "
                                         f"({type(exc).__name__})") from None

    # ----- snapshots -------------------------------------------------------------------------
    async def snapshots(self) -> SnapshotBucket:
        """The layout's object store of shard snapshots (created on first use)."""
        layout = self._require_layout()
        try:
            try:
                store = await self._js.object_store(layout.snapshot_bucket)
            except nats.js.errors.BucketNotFoundError:
                try:
                    store = await self._js.create_object_store(layout.snapshot_bucket, ObjectStoreConfig(
                        storage=StorageType.FILE, replicas=layout.replicas))
                except nats.js.errors.BadRequestError:
                    store = await self._js.object_store(layout.snapshot_bucket)
        except (nats.errors.Error, asyncio.TimeoutError) as exc:
            raise LogUnavailable(f"snapshot store unavailable ({type(exc).__name__})") from None
        return SnapshotBucket(store)

    async def existing_snapshots(self) -> SnapshotBucket | None:
        """The layout's object store of shard snapshots if it exists (``verify`` creates nothing)."""
        layout = self._require_layout()
        try:
            return SnapshotBucket(await self._js.object_store(layout.snapshot_bucket))
        except nats.js.errors.BucketNotFoundError:
            return None
        except (nats.errors.Error, asyncio.TimeoutError) as exc:
            raise LogUnavailable(f"snapshot store unavailable ({type(exc).__name__})") from None


async def _ignore(exc: Exception) -> None:
    """Connection errors surface as failed calls; the client reconnects by itself."""


async def _ignore_event() -> None:
    """Reconnects are expected (a server of the cluster restarting)."""
