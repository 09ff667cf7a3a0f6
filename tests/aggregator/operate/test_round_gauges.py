"""The per-collection gauges follow a discovery's rounds: read from the catalog at each scrape, they list the open
round, show it not taking reports while it closes, and list the next round (not the closed one) once served."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ldpsynth.aggregator.ingress.replica_metrics import CollectionCollector, ShardCollector
from ldpsynth.aggregator.runtime.config import Catalog
from ldpsynth.aggregator.runtime.discovery import expand
from ldpsynth.shared.heavy_hitters.collection import DiscoveryState
from ldpsynth.shared.protocol import Limits

from ..conftest import RATINGS_CARD
from .test_close_intake import SCHEMA


def _open_gauges(registry: CollectorRegistry) -> dict[str, float]:
    families = text_string_to_metric_families(generate_latest(registry).decode())
    return {sample.labels["collection"]: sample.value for family in families
            if family.name == "ldpsynth_collection_open" for sample in family.samples}


def test_the_gauges_follow_the_rounds(tmp_path: Path) -> None:
    cards, discoveries = expand([RATINGS_CARD, SCHEMA], tmp_path / "data")
    catalog = Catalog(cards, Limits(), discoveries=discoveries)
    registry = CollectorRegistry()
    registry.register(CollectionCollector(catalog, lambda: 0.0, ShardCollector()))
    assert _open_gauges(registry) == {"ratings": 1.0, "words/round-0": 1.0}
    catalog.close_round("words")                                   # closing: listed, not taking reports
    assert _open_gauges(registry) == {"ratings": 1.0, "words/round-0": 0.0}
    state = DiscoveryState(SCHEMA)
    spec = state.spec()
    state.close_round(np.full(spec.mechanism.domain_size, 3, np.int64), 3 * spec.mechanism.domain_size)
    catalog.open_round(state.card())                               # round 1 served, round 0 gone
    assert _open_gauges(registry) == {"ratings": 1.0, "words/round-1": 1.0}
