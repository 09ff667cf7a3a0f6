"""The embedded log of a stopped one-machine aggregator, opened for an operator's offline job (``retire``, a
discovery's ``advance``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ldpsynth.aggregator.runtime.nats_process import EmbeddedNats
from ldpsynth.aggregator.storage.datadir import DataDir, DataDirError
from ldpsynth.aggregator.storage.log_layout import LogSettings

__all__ = ["embedded_log"]


@asynccontextmanager
async def embedded_log(datadir: DataDir) -> AsyncIterator[LogSettings]:
    """The settings of ``datadir``'s embedded log, started on loopback for the job: the directory is acquired
    first (:class:`~ldpsynth.aggregator.storage.datadir.DataDirInUse` while an aggregator serves it), and the log
    stopped and the directory released after, whatever the job did."""
    datadir.acquire()
    embedded = EmbeddedNats(datadir.log_dir)
    try:
        try:
            url = embedded.start()
        except OSError as exc:
            raise DataDirError(f"--data-dir {datadir.path}: cannot start the embedded log ({exc.strerror})") from None
        yield LogSettings((url,), replicas=1)
    finally:
        embedded.stop()
        datadir.release()
