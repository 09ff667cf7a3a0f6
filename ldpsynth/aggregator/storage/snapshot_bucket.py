"""The snapshot store: shard workers' snapshot files in the layout's JetStream object store
(``LDPSYNTH_<layout>_SNAP``, replicated like the log), so a worker restarted on another node starts
from its last snapshot, not from the first record."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path

import nats.errors
import nats.js.errors
from nats.js.object_store import ObjectStore

from ldpsynth.aggregator.storage.log_layout import LogUnavailable


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
