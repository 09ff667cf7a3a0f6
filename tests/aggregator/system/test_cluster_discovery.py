"""A discovery collection on a cluster (``serve --nats``): a Ray cluster (a head and one worker node), a 3-server
NATS JetStream cluster and two replica processes on 127.0.0.1 (:class:`~ldpsynth.simulation.local_cluster.
LocalCluster`). SDK devices report through both replicas; AdvanceRound on one closes the round for both (a batch
for the closed round sent to the other is refused and not stored), the round is decoded from exactly the
acknowledged reports, the other replica serves the next round's card soon after, and a replica restarted
mid-discovery serves the agreed round."""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import islice

import grpc
import numpy as np
import pytest

from ldpsynth.client import Client, PrivacyLedger
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.heavy_hitters.collection import DiscoveryCard
from ldpsynth.shared.protocol import reports_to_proto
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from ldpsynth.simulation.local_cluster import LocalCluster

from ..conftest import make_reports, submit
from ..operate.test_cluster_rounds import SCHEMA

pytestmark = pytest.mark.ray

WORDS = ["abc", "abd", "bca", "dda"]


@pytest.fixture(scope="module")
def system(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    directory = tmp_path_factory.mktemp("cluster-discovery")
    collection = directory / "words.json"
    collection.write_text(SCHEMA.dumps())
    cluster = LocalCluster(directory, [collection], shards=2, worker_nodes=1)
    try:
        yield cluster.start(replicas=2)
    finally:
        cluster.stop()


def address(system: LocalCluster, replica: int) -> str:
    return f"127.0.0.1:{system.ports[replica]}"


def card_of(system: LocalCluster, replica: int) -> DiscoveryCard:
    with grpc.insecure_channel(address(system, replica)) as channel:
        message = pb_grpc.CollectionServiceStub(channel).GetCollection(pb.GetCollectionRequest(collection="words"))
    return DiscoveryCard.from_json(message.card_json)


def devices_of(round_: int, count: int) -> list[PrivacyLedger]:
    return list(islice((ledger for ledger in iter(PrivacyLedger.for_simulation, None)
                        if SCHEMA.device_round(ledger.round_key("words")) == round_), count))


def report(system: LocalCluster, replica: int, ledgers: list[PrivacyLedger]) -> list[str]:
    with Client(address(system, replica)) as client:
        return [client.submit("words", {"word": [WORDS[i % len(WORDS)]]}, ledger=ledger).status
                for i, ledger in enumerate(ledgers)]


def stored(system: LocalCluster, collection: str) -> int:
    return sum(system.worker_status(shard).rows.get(collection, 0) for shard in range(system.shards))


def served_round(system: LocalCluster, replica: int, round_: int, within: float = 10.0) -> bool:
    end = time.monotonic() + within
    while card_of(system, replica).round != round_:
        if time.monotonic() > end:
            return False
        time.sleep(0.2)
    return True


def test_a_round_closed_on_one_replica_is_closed_on_the_cluster(system: LocalCluster) -> None:
    rng = np.random.default_rng(11)
    first, late_devices = devices_of(0, 24), devices_of(0, 2)
    assert report(system, 0, first[:12]) + report(system, 1, first[12:]) == ["sent"] * 24
    round0 = card_of(system, 1).card                               # a late device's card, fetched before the close
    assert round0 is not None
    with QueryClient(address(system, 0)) as operator:
        done = operator.advance_round("words")
    assert done["closed_round"] == 0 and done["reports"] == 24    # exactly the acknowledged reports
    # devices of round 0 through the other replica at once: told their round has passed (refused by the workers
    # if that replica still served round 0, which then reads the state before it answers)
    assert report(system, 1, late_devices) == ["your round has passed"] * 2

    late = reports_to_proto(make_reports(round0.schema, 5, rng), round0.schema.name, round0.version, 0)
    with grpc.insecure_channel(address(system, 1)) as channel:
        acks, code, details = submit(pb_grpc.CollectionServiceStub(channel), [late])
    assert not acks and code == grpc.StatusCode.FAILED_PRECONDITION, details
    assert stored(system, "words/round-0") == 24                   # refused and not stored
    assert served_round(system, 1, 1)                              # the other replica serves round 1
    assert card_of(system, 1).dumps() == card_of(system, 0).dumps()

    second = devices_of(1, 16)
    assert report(system, 1, second[:8]) + report(system, 0, second[8:]) == ["sent"] * 16
    assert report(system, 1, first[:2]) == ["your round has passed"] * 2
    system.replicas[0].kill()                                      # a replica restarted mid-discovery
    system.start_replica(0)
    assert card_of(system, 0).round == 1
    with QueryClient(address(system, 1)) as operator:
        done = operator.advance_round("words")
    assert done["closed_round"] == 1 and done["reports"] == 16
    assert served_round(system, 0, 2)
    assert stored(system, "words/round-1") == 16
