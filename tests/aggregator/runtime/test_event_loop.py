"""The servers' event loop (ldpsynth/serving/event_loop.py): uvloop where it is installed, asyncio's without it."""

from __future__ import annotations

import asyncio
import sys

import pytest

from ldpsynth.serving import event_loop


async def _loop_module() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_servers_run_on_uvloop_where_it_is_installed_and_on_asyncio_without_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert event_loop.run(_loop_module()).startswith("uvloop")  # the aggregator extra installs it (Linux)
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as on Windows: not installed
    assert event_loop.run(_loop_module()) == "asyncio.unix_events"
