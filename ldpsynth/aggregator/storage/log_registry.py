"""The log's registry, its KV bucket ``LDPSYNTH`` beside the streams: the layout key, the
collections' cards, the sealing key's id and the retired collections.

* **Collections** (KV keys ``collection.<hex name>``): each collection's mechanism card, registered
  by the first replica that serves it; a replica with another card for the name is refused.
* **Sealing key** (KV key ``sealing-key``): the id of the HPKE key the replicas open sealed reports
  with (:mod:`~ldpsynth.shared.sealing`), registered by the first replica that holds one; a replica
  with another key, or with none, is refused (the private key itself never enters the log).
* **Retired collections** (KV keys ``retired.<hex name>``; :mod:`ldpsynth.aggregator.runtime.retire`).
* **Collections closed to reports** (KV keys ``closed.<hex name>``): a discovery's closed rounds; the shard
  workers refuse their batches (:mod:`ldpsynth.aggregator.operate.rounds`).
* **Discovery states** (KV keys ``discovery.<hex name>``): a cluster's discovery state, the commit point of
  its rounds, changed by compare-and-set on the key's revision (:mod:`ldpsynth.aggregator.operate.log_states`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import TypeVar

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from ldpsynth.aggregator.storage.log_layout import (
    LAYOUT_KEY,
    META_BUCKET,
    Layout,
    LayoutError,
    LogSettings,
    LogUnavailable,
    layout_from,
)

_T = TypeVar("_T")

#: KV key of the id of the aggregator's sealing key (docs/contract.md §16): one key for every replica.
SEALING_KEY = "sealing-key"


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


def _closed_key(name: str) -> str:
    return "closed." + name.encode("utf-8").hex()


def _discovery_key(name: str) -> str:
    return "discovery." + name.encode("utf-8").hex()


class StateConflict(Exception):
    """A discovery state's compare-and-set found another revision than the one it was given."""


class LogRegistry:
    """The log's KV bucket (the base of :class:`~ldpsynth.aggregator.storage.jetstream.ReplicatedLog`)."""

    def __init__(self, js: JetStreamContext, settings: LogSettings):
        self._js = js
        self.settings = settings
        self.layout: Layout | None = None
        self._meta: KeyValue | None = None

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

    # ----- discoveries on a cluster (ldpsynth.aggregator.operate) ----------------------------------------
    async def close_collection(self, collection: str) -> None:
        """Record ``collection`` as closed to reports (a shard worker that starts later reads it)."""
        await self._unavailable_as_log(self._put(_closed_key(collection), b"closed"))

    async def reopen_collection(self, collection: str) -> None:
        """Undo :meth:`close_collection` (a close that did not reach its commit point)."""
        async def delete() -> None:
            await (await self._meta_bucket()).delete(_closed_key(collection))
        await self._unavailable_as_log(delete())

    async def is_closed(self, collection: str) -> bool:
        """Whether ``collection`` is recorded as closed to reports."""
        return await self._unavailable_as_log(self._value(_closed_key(collection))) is not None

    async def discovery_state(self, name: str) -> tuple[str | None, int]:
        """The stored state JSON of the discovery ``name`` and its key's revision (``None, 0``: none stored)."""
        async def read() -> tuple[str | None, int]:
            try:
                entry = await (await self._meta_bucket()).get(_discovery_key(name))
            except (nats.js.errors.KeyNotFoundError, nats.js.errors.KeyDeletedError):
                return None, 0
            return (entry.value or b"").decode("utf-8"), int(entry.revision or 0)
        return await self._unavailable_as_log(read())

    async def swap_discovery_state(self, name: str, state_json: str, revision: int) -> int:
        """Store ``state_json`` as the discovery ``name``'s state if its key is still at ``revision`` (0: no state
        yet); the new revision. :class:`StateConflict`: another state was stored meanwhile."""
        async def swap() -> int:
            meta = await self._meta_bucket()
            data = state_json.encode("utf-8")
            try:
                if revision == 0:
                    return int(await meta.create(_discovery_key(name), data))
                return int(await meta.update(_discovery_key(name), data, last=revision))
            except nats.js.errors.KeyWrongLastSequenceError:
                raise StateConflict(f"the discovery {name!r}'s state changed after revision {revision}") from None
        return await self._unavailable_as_log(swap())

    async def _put(self, key: str, value: bytes) -> None:
        await (await self._meta_bucket()).put(key, value)

    async def _value(self, key: str) -> bytes | None:
        return await self._get(await self._meta_bucket(), key)

    @staticmethod
    async def _unavailable_as_log(call: Awaitable[_T]) -> _T:
        """``call``'s value; the log not answering is :class:`LogUnavailable`."""
        try:
            return await call
        except (nats.errors.Error, asyncio.TimeoutError) as exc:
            raise LogUnavailable(f"the log did not answer ({type(exc).__name__})") from None

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
        return layout_from((await meta.get(LAYOUT_KEY)).value or b"")[0].id

    async def switch_layout(self, old: Layout, new: Layout) -> None:
        """Make ``new`` the log's layout in place of ``old``: one update of the layout key, refused
        (:class:`LayoutError`) unless the log's layout is ``old``. From here on ``new`` is served."""
        meta = await self._meta_bucket()
        entry = await meta.get(LAYOUT_KEY)
        found, _ = layout_from(entry.value or b"")
        if found.id != old.id:
            raise LayoutError(f"the log's layout is {found.id}, not {old.id}: it changed meanwhile")
        await meta.update(LAYOUT_KEY, new.to_json("ready"), last=entry.revision)
        self.layout = new

    async def retire_card(self, collection: str, record: dict[str, object]) -> None:
        """Record ``collection`` as retired and unregister its card."""
        meta = await self._meta_bucket()
        await meta.put(_retired_key(collection), json.dumps(record, sort_keys=True).encode("utf-8"))
        await meta.purge(_collection_key(collection))
