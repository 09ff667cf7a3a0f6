"""The NATS seam: the only module that imports ``nats``. The replicated log, its layout, the
collection registry and the snapshot store, all on NATS JetStream.

* **Layout** (KV bucket ``LDPSYNTH``, key ``layout``): a random id, the shard count and the
  replication factor, fixed when the first replica starts. Reports are routed to shards by id, so
  the shard count can never change; every stream, record and snapshot names the layout it belongs
  to and is refused under another.
* **Log**: one stream per shard, ``LDPSYNTH_<layout>_<shard>`` on subject
  ``ldpsynth.<layout>.<shard>``, file storage, ``num_replicas`` copies (3 in a cluster: it survives
  the loss of any one server), deletes and purges denied. Its first record is the shard's genesis
  (:mod:`~ldpsynth.aggregator.storage.log_records`). A record is appended with
  ``Nats-Expected-Last-Sequence``: the append succeeds only if the writer has seen every record
  before it, so a stale writer (a worker Ray has already restarted elsewhere) is fenced off and
  the log never holds a report id twice.
* **Collections** (KV keys ``collection.<hex name>``): each collection's mechanism card, registered
  by the first replica that serves it; a replica with another card for the name is refused.
* **Sealing key** (KV key ``sealing-key``): the id of the HPKE key the replicas open sealed reports
  with (:mod:`~ldpsynth.shared.sealing`), registered by the first replica that holds one; a replica
  with another key, or with none, is refused (the private key itself never enters the log).
* **Snapshots** (object store ``LDPSYNTH_<layout>_SNAP``): shard workers' snapshot files, so a
  worker restarted on another node starts from its last snapshot, not from the first record.

Server settings the deployment must use (docs/deployment.md): JetStream with file storage and
``sync_interval: always`` (a record is fsynced before it is acknowledged).
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

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
    KeyValueConfig,
    ObjectStoreConfig,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.kv import KeyValue
from nats.js.object_store import ObjectStore

from ldpsynth.aggregator.storage.log_records import LogCorruption, decode, encode_genesis
from ldpsynth.shared.errors import LdpsynthError

META_BUCKET = "LDPSYNTH"
LAYOUT_KEY = "layout"
#: KV key of the id of the aggregator's sealing key (docs/contract.md §16): one key for every replica.
SEALING_KEY = "sealing-key"
LAYOUT_FORMAT = "ldpsynth.layout/1"
#: JetStream's error code for a failed ``Nats-Expected-Last-Sequence`` check.
_WRONG_LAST_SEQUENCE = 10071
_EXPECTED_LAST_SEQUENCE = "Nats-Expected-Last-Sequence"
#: JetStream's error codes for a store out of space (insufficient resources; storage limits exceeded).
_STORAGE_FULL = frozenset({10023, 10028, 10047})
#: Environment variable holding the NATS servers' authorization token, on replicas and on every Ray
#: node that runs shard workers (never a flag: it would show in ``ps``; never an actor argument: it
#: would be kept in Ray's GCS).
TOKEN_ENV = "LDPSYNTH_NATS_TOKEN"
#: Seconds between two checks of a read that waits for its next record.
_POLL = 1.0
#: How long a replica waits for another one that is creating the layout.
_CREATION_WAIT = 60.0


class LogUnavailable(LdpsynthError):
    """The log could not be reached, or an append's outcome is unknown (retry)."""


class LogFull(LdpsynthError):
    """The log's servers are out of storage (JetStream: insufficient resources, or a full disk):
    the append was refused and nothing was stored."""


class LogFenced(LdpsynthError):
    """An append was refused because the stream holds records this writer has not seen."""


class LayoutError(LdpsynthError):
    """The log's layout, streams or collection registry do not match what was asked for."""


@dataclass(frozen=True)
class LogSettings:
    """How to reach the NATS servers of the log.

    ``servers``: ``nats://HOST:PORT`` URLs (several: the client fails over between them);
    ``replicas``: copies of every stream (1 on one machine, 3 in a cluster); ``tls_ca`` /
    ``tls_cert`` / ``tls_key``: PEM files for TLS to the servers (``tls_cert`` + ``tls_key``:
    mutual TLS); ``token``: the servers' authorization token, if any (``None``: :data:`TOKEN_ENV`
    of this process's environment, if set).
    """

    servers: tuple[str, ...]
    replicas: int = 1
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    token: str | None = None
    timeout: float = 10.0

    def tls_context(self) -> ssl.SSLContext | None:
        if not (self.tls_ca or self.tls_cert):
            return None
        context = ssl.create_default_context(cafile=self.tls_ca)
        if self.tls_cert:
            context.load_cert_chain(self.tls_cert, self.tls_key)
        return context


@dataclass(frozen=True)
class Layout:
    """The fixed shape of a deployment's log."""

    id: str
    shards: int
    replicas: int

    def stream(self, shard: int) -> str:
        return f"LDPSYNTH_{self.id}_{shard:03d}"

    def subject(self, shard: int) -> str:
        return f"ldpsynth.{self.id}.{shard}"

    @property
    def snapshot_bucket(self) -> str:
        return f"LDPSYNTH_{self.id}_SNAP"

    def to_json(self, state: str) -> bytes:
        return json.dumps({"format": LAYOUT_FORMAT, "id": self.id, "shards": self.shards, "replicas": self.replicas,
                           "state": state}, sort_keys=True).encode("utf-8")


@dataclass(frozen=True)
class StreamState:
    first: int
    last: int
    messages: int
    deleted: int


def _layout_from(raw: bytes) -> tuple[Layout, str]:
    try:
        obj = json.loads(raw)
        if obj["format"] != LAYOUT_FORMAT:
            raise ValueError
        return Layout(str(obj["id"]), int(obj["shards"]), int(obj["replicas"])), str(obj["state"])
    except (ValueError, KeyError, TypeError):
        raise LayoutError(f"KV {META_BUCKET}/{LAYOUT_KEY}: not an ldpsynth layout") from None


def _no_layout(expected_id: str | None) -> str:
    if expected_id is None:
        return "the log has no layout: it is not an ldpsynth log, or it is empty"
    return (f"the log has no layout, but this data directory belongs to layout {expected_id}: the log was deleted or "
            "replaced (restore it, or use a new data directory)")


def sealing_key_mismatch(stored: str | None, given: str | None) -> str:
    """Why a replica's sealing key does not fit the log (one sentence, with what to do)."""
    if given is None:
        return (f"the log is served with sealing key {stored}: every replica opens sealed reports with it; give "
                "this replica the same key file (--shuffle-key FILE)")
    return (f"the log is served with sealing key {stored}, not {given}: every replica must hold the same key "
            "(give --shuffle-key the key file of the others; a device's sealed reports open only with it)")


def _collection_key(name: str) -> str:
    return "collection." + name.encode("utf-8").hex()


#: KV keys of retired collections: ``retired.<hex name>`` -> what the retirement removed (JSON).
_RETIRED = "retired."


def _retired_key(name: str) -> str:
    return _RETIRED + name.encode("utf-8").hex()


class ReplicatedLog:
    """One connection to the NATS servers of the log (use :meth:`connect`)."""

    def __init__(self, nc: nats.NATS, settings: LogSettings):
        self._nc = nc
        self._js = nc.jetstream(timeout=settings.timeout)
        self.settings = settings
        self.layout: Layout | None = None
        self._meta: KeyValue | None = None

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

    # ----- metadata --------------------------------------------------------------------------
    async def _meta_bucket(self) -> KeyValue:
        if self._meta is None:
            try:
                self._meta = await self._js.key_value(META_BUCKET)
            except nats.js.errors.BucketNotFoundError:
                try:
                    self._meta = await self._js.create_key_value(KeyValueConfig(
                        bucket=META_BUCKET, history=1, storage=StorageType.FILE, replicas=self.settings.replicas))
                except nats.js.errors.BadRequestError:  # created meanwhile by another replica
                    self._meta = await self._js.key_value(META_BUCKET)
        return self._meta

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
            layout, state = _layout_from(entry.value or b"")
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

    async def register_card(self, collection: str, card_json: str) -> None:
        """Register ``collection``'s card, or check it against the registered one (:class:`LayoutError`);
        a retired collection is refused (its reports are gone: it is not served again under its name)."""
        try:
            meta = await self._meta_bucket()
            retired = await self._get(meta, _retired_key(collection))
            if retired is not None:
                raise LayoutError(f"collection {collection!r} was retired at {json.loads(retired).get('retired_at')} "
                                  "(its reports removed from the log): it is not served again; remove it from "
                                  "--collection, or serve a new collection under another name")
            try:
                await meta.create(_collection_key(collection), card_json.encode("utf-8"))
                return
            except nats.js.errors.KeyWrongLastSequenceError:
                pass
            stored = await self.card(collection)
        except (nats.errors.Error, asyncio.TimeoutError) as exc:
            raise LogUnavailable(f"the log did not answer ({type(exc).__name__})") from None
        if stored != card_json:
            raise LayoutError(f"collection {collection!r} is registered in the log with a different mechanism card "
                              "(schema or epsilon); serve it with its original card")

    async def register_sealing_key(self, key_id: str | None) -> str | None:
        """Register the id (hex) of the key the replicas open sealed reports with, or check it against
        the one registered (:class:`LayoutError`: every replica must hold the same key); ``None``: this
        replica holds no key, refused if the log has one. Returns the id registered (``None``: none)."""
        try:
            meta = await self._meta_bucket()
            if key_id is not None:
                try:
                    await meta.create(SEALING_KEY, key_id.encode("ascii"))
                    return key_id
                except nats.js.errors.KeyWrongLastSequenceError:
                    pass
            stored = await self.sealing_key_id()
        except (nats.errors.Error, asyncio.TimeoutError) as exc:
            raise LogUnavailable(f"the log did not answer ({type(exc).__name__})") from None
        if stored != key_id:
            raise LayoutError(sealing_key_mismatch(stored, key_id))
        return stored

    async def sealing_key_id(self) -> str | None:
        """The registered sealing key id (hex; ``None``: none registered)."""
        meta = await self._meta_bucket()
        try:
            entry = await meta.get(SEALING_KEY)
        except nats.js.errors.KeyNotFoundError:
            return None
        return (entry.value or b"").decode("ascii", "replace")

    async def card(self, collection: str) -> str | None:
        """The registered card JSON of ``collection`` (``None``: not registered)."""
        found = await self._get(await self._meta_bucket(), _collection_key(collection))
        return None if found is None else found.decode("utf-8")

    @staticmethod
    async def _get(meta: KeyValue, key: str) -> bytes | None:
        """The value of ``key`` (``None``: never set, deleted or purged)."""
        try:
            entry = await meta.get(key)
        except (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
            return None
        return entry.value or b""

    # ----- retiring a collection (ldpsynth.aggregator.runtime.retire) ------------------------------------
    async def retired(self) -> dict[str, dict[str, object]]:
        """The retired collections: name -> what their retirement recorded.

        The keys are the bucket stream's subjects under ``retired.``, as the server lists them: nats-py's
        ``KeyValue.keys()`` may end before the client has read every key (its watcher takes "nothing
        pending on the server" for "nothing more to read": nats-io/nats.py#842)."""
        meta = await self._meta_bucket()
        prefix = f"$KV.{META_BUCKET}."
        info = await self._js.stream_info(f"KV_{META_BUCKET}", subjects_filter=f"{prefix}{_RETIRED}>")
        found = {}
        for subject in sorted(info.state.subjects or {}):
            key = subject[len(prefix):]
            value = await self._get(meta, key)
            if value is not None:  # None: deleted
                found[bytes.fromhex(key[len(_RETIRED):]).decode("utf-8")] = json.loads(value or b"{}")
        return found

    async def layout_id(self) -> str:
        """The id of the log's layout now (it changes when a collection is retired)."""
        meta = await self._meta_bucket()
        return _layout_from((await meta.get(LAYOUT_KEY)).value or b"")[0].id

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

    async def switch_layout(self, old: Layout, new: Layout) -> None:
        """Make ``new`` the log's layout in place of ``old``: one update of the layout key, refused
        (:class:`LayoutError`) unless the log's layout is ``old``. From here on ``new`` is served."""
        meta = await self._meta_bucket()
        entry = await meta.get(LAYOUT_KEY)
        found, _ = _layout_from(entry.value or b"")
        if found.id != old.id:
            raise LayoutError(f"the log's layout is {found.id}, not {old.id}: it changed meanwhile")
        await meta.update(LAYOUT_KEY, new.to_json("ready"), last=entry.revision)
        self.layout = new

    async def retire_card(self, collection: str, record: dict[str, object]) -> None:
        """Record ``collection`` as retired and unregister its card."""
        meta = await self._meta_bucket()
        await meta.put(_retired_key(collection), json.dumps(record, sort_keys=True).encode("utf-8"))
        await meta.purge(_collection_key(collection))

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


class SnapshotBucket:
    """Files in the layout's object store (names are ``<shard>/<file>``)."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store

    async def probe(self) -> None:
        """Return once the store answers (:class:`LogUnavailable` if it does not yet)."""
        try:
            await self._store.get_info("probe/none")
        except nats.js.errors.ObjectNotFoundError:
            return
        except (nats.errors.Error, asyncio.TimeoutError) as exc:
            raise LogUnavailable(f"the snapshot store does not answer yet ({type(exc).__name__})") from None

    async def put(self, name: str, path: Path) -> None:
        try:
            with open(path, "rb") as fh:
                await self._store.put(name, fh)
        except (nats.errors.Error, asyncio.TimeoutError) as exc:
            raise LogUnavailable(f"snapshot upload of {name} failed ({type(exc).__name__})") from None

    async def get(self, name: str, path: Path) -> bool:
        """Download ``name`` to ``path``; ``False`` if there is no such object."""
        tmp = path.with_name(path.name + ".download")
        try:
            with open(tmp, "wb") as fh:
                await self._store.get(name, writeinto=fh)
                fh.flush()
                os.fsync(fh.fileno())
        except nats.js.errors.ObjectNotFoundError:
            tmp.unlink(missing_ok=True)
            return False
        except (nats.errors.Error, asyncio.TimeoutError) as exc:
            tmp.unlink(missing_ok=True)
            raise LogUnavailable(f"snapshot download of {name} failed ({type(exc).__name__})") from None
        os.replace(tmp, path)
        return True

    async def delete(self, names: Sequence[str]) -> None:
        for name in names:
            try:
                await self._store.delete(name)
            except (nats.errors.Error, asyncio.TimeoutError):
                pass  # an orphan snapshot file costs space, never correctness


async def _ignore(exc: Exception) -> None:
    """Connection errors surface as failed calls; the client reconnects by itself."""


async def _ignore_event() -> None:
    """Reconnects are expected (a server of the cluster restarting)."""
