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
from ldpsynth.shared.heavy_hitters.collection import DiscoveryCard
from ldpsynth.shared.protocol import CollectionInfo
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.wide.collection import WideCard

__all__ = [
    "Client",
]

if TYPE_CHECKING:
    from typing_extensions import Unpack

_T = TypeVar("_T")


class Client:
    """Blocking client, with the methods of :class:`AsyncClient`. Use it as a context manager.

    Parameters
    ----------
    target : str
        ``HOST:PORT`` of the aggregator, or several (as :class:`AsyncClient`).
    **options : Unpack[ClientOptions]
        The keyword arguments of :class:`AsyncClient`: ``token``, ``root_certificates``,
        ``certificate_chain``, ``private_key``, ``deadline``, ``retry``, ``max_message_bytes``,
        ``rng``, with their legal ranges.

    Raises
    ------
    ValidationError
        As :class:`AsyncClient`.
    """

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
        """The collection's verified mechanism card (with its schema) and limits (:meth:`AsyncClient.get_collection`).

        Parameters
        ----------
        name : str
            The collection's name, non-empty.

        Returns
        -------
        CollectionInfo

        Raises
        ------
        ValidationError, SubmitError
            As :meth:`AsyncClient.get_collection`.
        """
        return self._run(self._client.get_collection(name))

    def get_wide_collection(self, name: str) -> WideCard:
        """A wide collection's verified card (:meth:`AsyncClient.get_wide_collection`).

        Parameters
        ----------
        name : str
            The wide collection's name, non-empty.

        Returns
        -------
        WideCard

        Raises
        ------
        ValidationError, SubmitError
            As :meth:`AsyncClient.get_collection`.
        """
        return self._run(self._client.get_wide_collection(name))

    def get_discovery_collection(self, name: str) -> DiscoveryCard:
        """A discovery collection's verified card (:meth:`AsyncClient.get_discovery_collection`).

        Parameters
        ----------
        name : str
            The discovery collection's name, non-empty.

        Returns
        -------
        DiscoveryCard

        Raises
        ------
        ValidationError, SubmitError
            As :meth:`AsyncClient.get_discovery_collection`.
        """
        return self._run(self._client.get_discovery_collection(name))

    def submit(self, collection: str | CollectionInfo | WideCard, rows: Rows, *, ledger: PrivacyLedger,
               batch_size: int | None = None) -> SubmitResult:
        """Validate, memoize-or-perturb, charge, and deliver a device's rows (:meth:`AsyncClient.submit`).

        Parameters
        ----------
        collection : str, CollectionInfo or WideCard
            The collection's name, its info (:meth:`get_collection`) or a wide collection's card
            (:meth:`get_wide_collection`: each device reports its view, charged under the wide collection).
        rows : mapping of str to sequence, str or os.PathLike
            Columns (attribute name → raw values), or the path of a CSV file.
        ledger : PrivacyLedger
            The device's ledger.
        batch_size : int or None, default None
            Most reports per batch, an integer >= 1; ``None``: as many as the limits allow.

        Returns
        -------
        SubmitResult

        Raises
        ------
        ValidationError, PrivacyBudgetExceeded, LedgerError, SubmitError
            As :meth:`AsyncClient.submit`.
        """
        return self._run(self._client.submit(collection, rows, ledger=ledger, batch_size=batch_size))

    def submit_reports(self, info: CollectionInfo, reports: Reports, *, batch_size: int | None = None) -> StreamResult:
        """Deliver reports that are already perturbed, with no ledger (:meth:`AsyncClient.submit_reports`).

        Parameters
        ----------
        info : CollectionInfo
            The collection (:meth:`get_collection`).
        reports : Reports
            The perturbed reports, checked against ``info``'s schema.
        batch_size : int or None, default None
            Most reports per batch, an integer >= 1; ``None``: as many as the limits allow.

        Returns
        -------
        StreamResult

        Raises
        ------
        ValidationError, SubmitError
            As :meth:`AsyncClient.submit_reports`.
        """
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
