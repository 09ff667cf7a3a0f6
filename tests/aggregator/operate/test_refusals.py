"""What AdvanceRound refuses before touching anything (no server): a cluster serves no discovery, an unknown
collection is NOT_FOUND, a served one that is not a discovery FAILED_PRECONDITION; and serve refuses a
discovery with --nats, saying why."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import grpc
import pytest

from ldpsynth.aggregator.operate.rounds import RoundKeeper
from ldpsynth.aggregator.runtime.config import Catalog
from ldpsynth.aggregator.runtime.discovery import expand
from ldpsynth.serving.errors import ConfigError
from ldpsynth.serving.status import status_of
from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.protocol import Limits

from ..conftest import RATINGS_CARD
from .test_close_intake import SCHEMA


def refusal(keeper: RoundKeeper, name: str) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(LdpsynthError) as error:
        asyncio.run(keeper.advance(name))
    return status_of(error.value, "")


def keeper(data_dir: Path | None, catalog: Catalog, discoveries: Any = ()) -> RoundKeeper:
    unused = cast(Any, None)  # the refusals come before the intake, the shards or the log are used
    return RoundKeeper(data_dir, discoveries, catalog, unused, unused, unused)


def test_a_cluster_serves_no_discovery() -> None:
    code, details = refusal(keeper(None, Catalog([RATINGS_CARD], Limits())), "words")
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "--nats" in details and "--data-dir" in details
    with pytest.raises(ConfigError, match="a cluster, --nats, serves no discovery yet"):
        expand([SCHEMA], None)


def test_unknown_and_ordinary_collections_are_told_apart(tmp_path: Path) -> None:
    cards, discoveries = expand([RATINGS_CARD, SCHEMA], tmp_path)
    rounds = keeper(tmp_path, Catalog(cards, Limits(), discoveries=discoveries), discoveries)
    assert refusal(rounds, "nothing")[0] == grpc.StatusCode.NOT_FOUND
    code, details = refusal(rounds, "ratings")
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "not a discovery collection" in details
    code, details = refusal(rounds, "words/round-0")      # a round's sub-collection is not the discovery
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "not a discovery collection" in details
