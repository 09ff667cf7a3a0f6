"""What AdvanceRound refuses before touching anything (no server): an unknown collection is NOT_FOUND, a served
one that is not a discovery FAILED_PRECONDITION."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import grpc
import pytest

from ldpsynth.aggregator.operate.rounds import RoundKeeper
from ldpsynth.aggregator.operate.states import FileStates
from ldpsynth.aggregator.runtime.config import Catalog
from ldpsynth.aggregator.runtime.discovery import expand, open_state
from ldpsynth.serving.status import status_of
from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.heavy_hitters.collection import DiscoveryCard
from ldpsynth.shared.protocol import Limits

from ..conftest import RATINGS_CARD
from .test_close_intake import SCHEMA


def refusal(keeper: RoundKeeper, name: str) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(LdpsynthError) as error:
        asyncio.run(keeper.advance(name))
    return status_of(error.value, "")


def keeper(data_dir: Path, catalog: Catalog, discoveries: tuple[DiscoveryCard, ...]) -> RoundKeeper:
    unused = cast(Any, None)  # the refusals come before the intake, the shards or the log are used
    return RoundKeeper(FileStates(data_dir), [open_state(data_dir, card.schema) for card in discoveries], catalog,
                       unused, unused, unused)


def test_unknown_and_ordinary_collections_are_told_apart(tmp_path: Path) -> None:
    cards, discoveries = expand([RATINGS_CARD, SCHEMA], tmp_path)
    rounds = keeper(tmp_path, Catalog(cards, Limits(), discoveries=discoveries), discoveries)
    assert refusal(rounds, "nothing")[0] == grpc.StatusCode.NOT_FOUND
    code, details = refusal(rounds, "ratings")
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "not a discovery collection" in details
    code, details = refusal(rounds, "words/round-0")      # a round's sub-collection is not the discovery
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "not a discovery collection" in details
