"""Fixtures of the storage tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ._helpers import Log


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    embedded = Log(tmp_path)
    yield embedded
    embedded.nats.stop()
