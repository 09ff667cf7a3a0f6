"""A blocking wrapper of :class:`~ldpsynth.client.aio.AsyncClient` for scripts and the CLI.

It runs the asyncio client on a private event loop, so do not use it from inside a running
event loop (use :class:`AsyncClient` there).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from ldpsynth.client.aio import AsyncClient, ClientOptions
from ldpsynth.client.ledger import PrivacyLedger
from ldpsynth.client.result import SubmitResult
from ldpsynth.client.rows import Rows
from ldpsynth.client.submit import StreamResult
from ldpsynth.shared.protocol import CollectionInfo
from ldpsynth.shared.reports import Reports

__all__ = [
    "Client",
]

if TYPE_CHECKING:
    from typing_extensions import Unpack

_T = TypeVar("_T")


class Client:
    """Blocking client; the parameters are those of :class:`AsyncClient`. Use it as a context manager."""

    def __init__(self, target: str, **options: Unpack[ClientOptions]):
        self._loop = asyncio.new_event_loop()

        async def connect() -> AsyncClient:
            return AsyncClient(target, **options)

        try:
            self._client = self._loop.run_until_complete(connect())
        except BaseException:
            self._loop.close()
            raise

    def _run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return self._loop.run_until_complete(coroutine)

    def get_collection(self, name: str) -> CollectionInfo:
        """See :meth:`AsyncClient.get_collection`."""
        return self._run(self._client.get_collection(name))

    def submit(self, collection: str | CollectionInfo, rows: Rows, *, ledger: PrivacyLedger,
               batch_size: int | None = None) -> SubmitResult:
        """See :meth:`AsyncClient.submit`."""
        return self._run(self._client.submit(collection, rows, ledger=ledger, batch_size=batch_size))

    def submit_reports(self, info: CollectionInfo, reports: Reports, *, batch_size: int | None = None) -> StreamResult:
        """See :meth:`AsyncClient.submit_reports`."""
        return self._run(self._client.submit_reports(info, reports, batch_size=batch_size))

    def close(self) -> None:
        """Close the channel and the private event loop."""
        if self._loop.is_closed():
            return
        try:
            self._run(self._client.close())
            self._run(self._loop.shutdown_default_executor())
        finally:
            self._loop.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
