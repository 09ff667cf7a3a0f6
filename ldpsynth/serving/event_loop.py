"""The event loop a server runs on: uvloop (libuv's loop, in C) where it is installed, else asyncio's own.

A replica's and a shuffler's CPU per call goes mostly to the event loop's own work (grpc.aio's
callbacks, tasks and futures); uvloop does that work in C (what it saves per report stream:
``benchmarks/results/scale.md``). It comes with the ``aggregator`` extra except on Windows, which
it does not support: there the default loop serves.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """:func:`asyncio.run` of a server's ``main`` coroutine, on uvloop when it is installed."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
