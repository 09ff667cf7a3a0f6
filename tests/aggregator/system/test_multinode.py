"""The aggregator as a multi-node system, on one machine: a 4-node Ray cluster (a head and three
worker nodes, ``ray.cluster_utils.Cluster``), a 3-server NATS JetStream cluster (streams with 3
replicas) and two ingress replicas (``aggregator serve --nats ... --ray-address ...`` processes),
everything bound to 127.0.0.1 (asserted with ``ss -ltn``).

* Two replicas serve one collection: a report sent through both is stored once; both answer
  queries and exports alike.
* Node kills during ingest (seeded): a Ray worker node (raylet and every process on it, often
  the node of a shard worker, which Ray restarts elsewhere from its snapshot), a NATS server, or
  a replica, each SIGKILLed and then replaced, while SDK devices stream through both replicas
  (client-side round robin, retries). 0 acknowledged reports lost, 0 duplicated.
* A worker restarted on another node downloads its snapshot and replays only the records after it.

Ray's node failure detection is shortened here (health checks every second) so that a dead node's
workers move within seconds; production keeps Ray's defaults (docs/deployment.md).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Iterator

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ldpsynth.aggregator.runtime.reaper import descendants
from ldpsynth.aggregator.runtime.verify import Verification, verify_log
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_layout import LogSettings
from ldpsynth.aggregator.storage.sealing_key import write_key_file
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.protocol import CollectionInfo
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.sealing import OpeningKey, seal_reports
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from ldpsynth.simulation.local_cluster import LocalCluster

from ..conftest import RATINGS, VERSION, batch, make_reports, submit
from ..ingress.test_server import counts_of
from .test_crash import CLIENTS, Ingest, ids_of

pytestmark = [pytest.mark.slow, pytest.mark.ray]

SEED = 20261124
#: Node kills during ingest (the issue asks for at least 20): Ray worker nodes, NATS servers, replicas.
KILLS = 21
SNAPSHOT_EVERY = 2000
LOOPBACK = ("127.0.0.1:", "[::ffff:127.0.0.1]:", "[::1]:")


def verify(system: LocalCluster) -> Verification:
    """Every record of the cluster's log checked, every stored report kept."""
    async def check() -> Verification:
        assert system.nats is not None
        replicated = await ReplicatedLog.connect(LogSettings(system.nats.urls, replicas=3), "test-verify")
        try:
            return await verify_log(replicated, keep_rows=True)
        finally:
            await replicated.close()

    return asyncio.run(check())


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    directory = tmp_path_factory.mktemp("multinode")
    collection = directory / "ratings.json"
    collection.write_text(RATINGS.dumps())
    key = directory / "sealing.key"
    write_key_file(key, OpeningKey.generate())
    system = LocalCluster(directory, [collection], shards=4, worker_nodes=3, snapshot_every=SNAPSHOT_EVERY,
                          shuffle_key=key)
    try:
        yield system.start(replicas=2)
    finally:
        system.stop()


def stub(address: str) -> pb_grpc.CollectionServiceStub:
    return pb_grpc.CollectionServiceStub(grpc.insecure_channel(address))


def test_nothing_listens_beyond_loopback(deployment: LocalCluster) -> None:
    ours = {str(pid) for pid in descendants(os.getpid())}
    for replica in deployment.replicas:
        ours |= {str(replica.proc.pid)} | {str(pid) for pid in descendants(replica.proc.pid)}
    listening = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout.splitlines()
    mine = [line for line in listening if any(f"pid={pid}," in line for pid in ours)]
    assert len(mine) >= 3 * 2 + 2 + 4  # NATS client and route ports, the replicas, Ray's GCS and raylets
    wide = [line for line in mine if not line.split()[3].startswith(LOOPBACK)]
    assert wide == [], wide


def test_two_replicas_store_each_report_once_and_answer_alike(deployment: LocalCluster) -> None:
    rng = np.random.default_rng(SEED)
    first, second = (stub(f"127.0.0.1:{port}") for port in deployment.ports[:2])
    reports = make_reports(RATINGS, 1000, rng)
    acks, code, _ = submit(first, [batch(reports)])
    assert code == grpc.StatusCode.OK and acks[0].accepted == 1000
    acks, code, _ = submit(second, [batch(reports)])  # the same reports through the other replica
    assert code == grpc.StatusCode.OK and (acks[0].accepted, acks[0].duplicates) == (0, 1000)
    more = [make_reports(RATINGS, 500, rng) for _ in range(4)]
    for i, part in enumerate(more):  # half of them through both replicas
        assert submit(first if i % 2 else second, [batch(part)])[1] == grpc.StatusCode.OK
        if i < 2:
            assert submit(second if i % 2 else first, [batch(part)])[0][0].duplicates == 500
    queries = [{"kind": "marginal", "attributes": ["rating"], "normalization": "mean"},
               {"kind": "grouped", "attribute": "movie", "tables": [{"value": 3, "weights": [0, 0, 0, 1, 1]}]}]
    answers, exports = [], []
    for port in deployment.ports[:2]:
        with QueryClient(f"127.0.0.1:{port}") as analyst:
            answers.append(analyst.estimate(RATINGS.name, queries=queries).records())
            exports.append(analyst.export(RATINGS.name))
    assert answers[0] == answers[1]
    assert answers[0][0]["n"] >= 3000
    for name in ("movie", "rating"):
        assert np.array_equal(exports[0].codes[name], exports[1].codes[name])


def test_a_shuffled_batch_forwarded_through_both_replicas_is_stored_once(deployment: LocalCluster) -> None:
    """Both replicas open with the one key of the cluster (--shuffle-key) and publish it; a shuffler's
    batch retried through the other replica comes back as duplicates (the ids inside decide)."""
    rng = np.random.default_rng(SEED + 3)
    keys = []
    for port in deployment.ports[:2]:
        message = stub(f"127.0.0.1:{port}").GetCollection(pb.GetCollectionRequest(collection=RATINGS.name))
        keys.append(CollectionInfo.from_proto(message).sealing)
    assert keys[0] is not None and keys[0] == keys[1]
    reports = make_reports(RATINGS, 300, rng)
    reports = Reports(reports.report_ids, reports.private_codes, np.zeros_like(reports.public_codes))  # one pool: key 0
    sealed = seal_reports(keys[0], RATINGS.name, VERSION, reports)
    acks = []
    for port in deployment.ports[:2]:
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        call = channel.unary_unary("/ldpsynth.v1.CollectionService/SubmitShuffled",
                                   response_deserializer=pb.ShuffledAck.FromString)
        batch_ = pb.SealedBatch(collection=RATINGS.name, key_id=keys[0].key_id, reports=sealed.tobytes())
        acks.append(call(batch_.SerializeToString(), timeout=120))
    assert [(a.accepted, a.duplicates, a.undecryptable, a.invalid) for a in acks] == [(300, 0, 0, 0), (0, 300, 0, 0)]
    stored = [bytes(i) for (_, c), chunk in verify(deployment).stored.items() if c == RATINGS.name
              for i in chunk.report_ids]
    sent = {bytes(i) for i in reports.report_ids}
    assert sum(i in sent for i in stored) == 300  # each once


def test_node_kills_during_ingest_lose_and_duplicate_nothing(deployment: LocalCluster) -> None:
    """KILLS seeded kills of a Ray worker node, a NATS server or a replica while devices stream
    through both replicas; each killed part is replaced before the next kill."""
    rng = np.random.default_rng(SEED + 1)
    before = verify(deployment)
    assert before.ok, before.problems
    ingest = Ingest(deployment.targets)
    kinds: list[str] = []
    try:
        for kill in range(KILLS):
            ingest.wait_for_progress(ingest.completed + CLIENTS - 1, lambda: _logs(deployment))
            time.sleep(rng.uniform(0.0, 0.5))
            kind = ("ray node", "nats server", "replica")[kill % 3]
            kinds.append(kind)
            if kind == "ray node":
                holders = deployment.worker_nodes_of_shards()
                target = holders[int(rng.integers(deployment.shards))]  # None: restarting, kill any node
                node = next((n for n in deployment.nodes if n.node_id == target), deployment.nodes[0])
                deployment.kill_node(node)  # Ray restarts its shard workers on the other nodes
                deployment.add_node()
            elif kind == "nats server":
                index = int(rng.integers(3))
                deployment.nats.kill(index)
                ingest.wait_for_progress(ingest.completed + 1, lambda: _logs(deployment))  # 2 of 3 keep going
                deployment.nats.restart(index)
            else:
                index = int(rng.integers(2))
                deployment.replicas[index].kill()
                ingest.wait_for_progress(ingest.completed + 1, lambda: _logs(deployment))  # the other serves
                deployment.start_replica(index)
        ingest.wait_for_progress(ingest.completed + CLIENTS, lambda: _logs(deployment))
    except BaseException:
        ingest.abort()
        raise
    ingest.stop()
    assert not ingest.failures, ingest.failures
    assert kinds.count("ray node") >= 7 and kinds.count("nats server") >= 7 and kinds.count("replica") >= 7

    calls = ingest.started()
    sent = ids_of(calls)
    after = verify(deployment)
    assert after.ok, after.problems
    stored: list[bytes] = []
    for (_, collection), chunk in after.stored.items():
        if collection == RATINGS.name:
            raw = np.ascontiguousarray(chunk.report_ids).tobytes()
            stored += [raw[i:i + 16] for i in range(0, len(raw), 16)]
    held = set(stored)
    assert len(stored) == len(held), f"{len(stored) - len(held)} report ids are stored twice"
    earlier = {bytes(i) for (_, c), chunk in before.stored.items() if c == RATINGS.name for i in chunk.report_ids}
    assert not sent - held, f"{len(sent - held)} acknowledged reports are missing"
    assert not held - sent - earlier, "stored reports that were never sent"
    results = [c.result for c in calls if c.result is not None]
    assert all(r.acknowledged + r.duplicates == r.sent for r in results)
    # Queries through the (restarted) replicas see every report, on the workers' restored statistics.
    with QueryClient(deployment.targets) as analyst:
        answers = analyst.estimate(RATINGS.name, queries=[{"kind": "marginal", "attributes": ["rating"]}])
    assert int(answers.n) == len(held)
    expected = counts_of([c.reports for c in calls]).sum(axis=0)
    exported = _export_counts(deployment) - _counts_of_rows(before)
    assert np.array_equal(exported, expected)


def _export_counts(deployment: LocalCluster) -> np.ndarray:
    with QueryClient(deployment.targets) as analyst:
        release = analyst.export(RATINGS.name)
    return np.bincount(release.private_codes(), minlength=RATINGS.private_domain_size)


def _counts_of_rows(verification: Verification) -> np.ndarray:
    counts = np.zeros(RATINGS.private_domain_size, np.int64)
    for (_, collection), chunk in verification.stored.items():
        if collection == RATINGS.name:
            counts += np.bincount(chunk.private_codes, minlength=RATINGS.private_domain_size)
    return counts


def test_worker_restarted_on_another_node_starts_from_its_snapshot(deployment: LocalCluster) -> None:
    rng = np.random.default_rng(SEED + 2)
    entry = stub(f"127.0.0.1:{deployment.ports[0]}")
    for _ in range(10):
        assert submit(entry, [batch(make_reports(RATINGS, 4000, rng))])[1] == grpc.StatusCode.OK
    status = deployment.worker_status(0)
    assert status.snapshot_offset > 1  # snapshots were written (every SNAPSHOT_EVERY ids)
    holder = deployment.worker_nodes_of_shards()[0]
    deployment.kill_node(next(n for n in deployment.nodes if n.node_id == holder))
    deployment.add_node()
    health = health_pb2_grpc.HealthStub(grpc.insecure_channel(f"127.0.0.1:{deployment.ports[0]}"))
    deadline = time.monotonic() + 120
    while True:  # the replica's health follows the worker: NOT_SERVING until it is back
        moved = deployment.worker_nodes_of_shards().get(0)
        if moved not in (None, holder) and health.Check(health_pb2.HealthCheckRequest()).status == \
                health_pb2.HealthCheckResponse.SERVING:
            break
        assert time.monotonic() < deadline, "the worker did not come back on another node"
        time.sleep(0.5)
    restarted = deployment.worker_status(0)
    assert restarted.rows == status.rows
    assert holder[:16] not in restarted.directory
    # It downloaded its snapshot: it replayed only the records after it, not the shard's whole log.
    assert restarted.replayed <= restarted.offset - status.snapshot_offset
    assert restarted.replayed < status.offset - 1


def _logs(deployment: LocalCluster) -> str:  # shown when ingest stalls
    return "\n".join(f"--- replica {i}:\n{r.log()[-3000:]}" for i, r in enumerate(deployment.replicas))
