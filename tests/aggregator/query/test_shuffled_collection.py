"""Guarantees per party and the minimum batch through a real server (issue 38; docs/shuffle-accountant.md §6).

A shuffled collection, its reports forwarded as a shuffler would (pools of one public key, at least the minimum
batch each): every answer and export states the guarantee against the shuffler, the aggregator's operator and
analysts (the central one at the pool floor, equal to the accountant's), with the public-key groups read; the
CLI prints them. A collection with a minimum batch and reports in clear (no shuffle block): the audit's
differencing attack through the query service recovers nothing of a small group; exports and table queries
leave such a group out, queries reading only it are refused naming it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import grpc
import numpy as np
import pytest

from ldpsynth.client.errors import QueryError
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.amplification import central_epsilon
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators.offline import estimate_release
from ldpsynth.shared.guarantees import ANALYSTS, OPERATOR, SHUFFLER
from ldpsynth.shared.protocol import CollectionInfo, reports_to_proto
from ldpsynth.shared.release import GUARANTEES_FILE, Release
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.sealing import seal_reports
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

from ..conftest import ServerThread, base_config, submit

pytestmark = pytest.mark.ray

MIN_BATCH = 1000
DELTA = 1e-9
ATTRIBUTES = [{"name": "movie", "type": "integer", "min": 0, "max": 3, "public": True},
              {"name": "rating", "type": "integer", "min": 1, "max": 5}]
SHUFFLED = Schema.from_json({"name": "shuffled", "epsilon": 2.0, "attributes": ATTRIBUTES,
                             "shuffle": {"delta": DELTA, "min_batch": MIN_BATCH, "shuffler": "independent"}})
PLAIN = Schema.from_json({"name": "plain", "epsilon": 2.0, "attributes": ATTRIBUTES, "min_batch": MIN_BATCH})
CARD, PLAIN_CARD = MechanismCard.for_schema(SHUFFLED), MechanismCard.for_schema(PLAIN)
EPS0 = CARD.mechanism.epsilon
#: The pool floor: the minimum batch less the one report a device's quota lets an adversary inject.
FLOOR = MIN_BATCH - 1
#: Pools forwarded per movie (movie 3 has none: 200 reports never make a pool of 1,000).
POOLS = {0: (1000, 1000, 1000), 1: (1250, 1250), 2: (1500,)}
#: Reports in clear per movie of the plain collection: movie 3 is below its minimum batch.
PER_MOVIE = (3000, 2500, 1500, 200)
LINEAR = [{"kind": "marginal", "attributes": ["rating"], "normalization": "mean"}]
GROUPED = [{"kind": "grouped", "attribute": "movie", "tables": [{"value": 0, "weights": [1, 2, 3, 4, 5]},
                                                                {"value": 1, "weights": [0, 0, 0, 1, 1]}],
            "normalization": "sum"}]
ONLY_3 = [{"kind": "grouped", "attribute": "movie", "tables": [{"value": 3, "weights": [1, 2, 3, 4, 5]}]}]


def of_movie(movie: int, n: int, rng: np.random.Generator) -> Reports:
    return Reports(new_report_ids(n), rng.integers(0, 5, n), np.full((n, 1), movie))


def forward_pools(server: ServerThread, rng: np.random.Generator) -> Reports:
    """Every pool of :data:`POOLS` sealed and forwarded to SubmitShuffled, as the shuffler forwards a pool."""
    stub = pb_grpc.CollectionServiceStub(server.channel())
    key = CollectionInfo.from_proto(stub.GetCollection(pb.GetCollectionRequest(collection="shuffled"))).sealing_key()
    sent = []
    for movie, sizes in POOLS.items():
        for size in sizes:
            pool = of_movie(movie, size, rng)
            ack = stub.SubmitShuffled(pb.SealedBatch(collection="shuffled", key_id=key.key_id, pool_key=movie,
                                                     reports=seal_reports(key, "shuffled", CARD.version,
                                                                          pool).tobytes()), timeout=120)
            assert ack.accepted == size
            sent.append(pool)
    return Reports.concat(sent, 1)


@pytest.fixture(scope="module")
def servers(ray_address: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    """One server for the module: the shuffled collection's pools forwarded, the plain one's reports in clear."""
    server = ServerThread(base_config(tmp_path_factory.mktemp("guarantees") / "data", collections=(CARD, PLAIN_CARD)))
    stored = forward_pools(server, np.random.default_rng(38))
    plain = Reports.concat([of_movie(m, c, np.random.default_rng(m)) for m, c in enumerate(PER_MOVIE)], 1)
    with server.channel() as channel:
        acks, code, details = submit(pb_grpc.CollectionServiceStub(channel),
                                     [reports_to_proto(plain, "plain", PLAIN_CARD.version, 0)])
    assert code == grpc.StatusCode.OK, details
    yield server, stored, plain
    server.stop(0)


def test_answers_state_the_guarantee_against_each_party_at_the_pool_floor(servers):
    server, stored, _ = servers
    with QueryClient(server.address) as client:
        answers = client.estimate("shuffled", queries=LINEAR)
    g = answers.guarantees
    assert g is not None and g.shuffled and g.scope == "answers" and answers.n == 7000
    assert g.local_epsilon == EPS0 and g.rows_per_device == 1 and g.evaluated_at == FLOOR
    assert g.labels == ("movie=0", "movie=1", "movie=2") and g.counts.tolist() == [3000, 2500, 1500]
    floor = central_epsilon(EPS0, 5, FLOOR, DELTA)
    assert 0 < floor < EPS0 and g.central == (floor, DELTA)
    assert (g.against(ANALYSTS).epsilon, g.against(OPERATOR).epsilon) == (floor, floor)
    assert g.against(SHUFFLER).epsilon == EPS0 and not g.against(SHUFFLER).central
    record = answers.records()[0]
    assert (record["local_epsilon"], record["analysts_epsilon"], record["operator_epsilon"]) == (EPS0, floor, floor)
    release = Release(CARD, {"movie": stored.public_codes[:, 0], "rating": stored.private_codes})
    assert estimate_release(release, LINEAR).guarantees.to_json() == g.to_json()   # offline: the same statement
    with QueryClient(server.address) as client:
        grouped = client.estimate("shuffled", queries=GROUPED).guarantees
    assert grouped.labels == ("movie=0", "movie=1") and grouped.central == g.central


def test_an_export_states_the_guarantees_per_party_and_its_groups(servers, tmp_path):
    server, stored, _ = servers
    with QueryClient(server.address) as client:
        release = client.export("shuffled")
    g = release.guarantees
    assert g.scope == "release" and g.labels == ("movie=0", "movie=1", "movie=2") and len(release) == 7000
    assert g.central == (central_epsilon(EPS0, 5, FLOOR, DELTA), DELTA) and g.withheld_groups == 0
    files = release.write(tmp_path / "release")
    assert tmp_path / "release" / GUARANTEES_FILE in files
    stated = json.loads((tmp_path / "release" / GUARANTEES_FILE).read_text())
    assert stated["central"]["against"]["operator"]["epsilon"] == g.central[0]
    assert stated["central"]["against"]["shuffler"]["epsilon"] == EPS0 and stated["local"]["epsilon"] == EPS0
    assert Release.read(tmp_path / "release").guarantees.to_json() == g.to_json()
    summary = release.summary()
    assert (summary["analysts_epsilon"], summary["operator_epsilon"], summary["groups"]) == (g.central[0],
                                                                                              g.central[0], 3)


def test_the_audits_differencing_attack_through_the_query_service_recovers_nothing(servers):
    """The plain collection holds movie 3's 200 reports (below its minimum batch of 1,000): the rating marginal
    over all rows and the same marginal over movies 0-2 are equal to the last bit; a query reading only movie 3
    is refused naming it; an export leaves its rows out."""
    server, _, plain = servers
    every = [{"kind": "marginal", "attributes": ["rating"]}]
    but_3 = [{"kind": "grouped", "attribute": "movie", "normalization": "sum",
              "tables": [{"value": m, "weights": np.eye(5)[v].tolist()} for m in (0, 1, 2)]} for v in range(5)]
    with QueryClient(server.address) as client:
        a = client.estimate("plain", queries=every)
        b = client.estimate("plain", queries=but_3)
        with pytest.raises(QueryError) as caught:
            client.estimate("plain", queries=ONLY_3)
        release = client.export("plain")
    np.testing.assert_allclose(a.estimate, b.estimate, rtol=1e-13, atol=0)  # summation order; movie 3: ~40 a cell
    assert a.n == b.n == 7000 and (a.guarantees.withheld_groups, a.guarantees.withheld_reports) == (1, 200)
    assert caught.value.status == "FAILED_PRECONDITION"
    assert "movie=3" in str(caught.value) and "200 reports" in str(caught.value) and "(min_batch)" in str(caught.value)
    assert len(release) == 7000 and 3 not in set(release.public_keys().tolist())
    assert (release.guarantees.withheld_groups, release.guarantees.withheld_reports) == (1, 200)
    assert len(plain) == 7200


def test_cli_query_and_estimate_print_the_guarantees_per_party(servers, tmp_path):
    server, stored, _ = servers
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps(GROUPED))
    run = [sys.executable, "-m", "ldpsynth.cli"]
    served = subprocess.run([*run, "query", "--target", server.address, "--collection", "shuffled", "--queries",
                             str(queries), "--guarantees"], capture_output=True, text=True, timeout=300)
    assert served.returncode == 0, served.stderr
    printed = json.loads(served.stdout)
    central = printed["guarantees"]["central"]
    assert central["epsilon"] == central_epsilon(EPS0, 5, FLOOR, DELTA) and central["evaluated_at"] == FLOOR
    assert central["against"]["analysts"]["epsilon"] == central["epsilon"]
    assert [g["reports"] for g in printed["guarantees"]["groups"]] == [3000, 2500]
    assert printed["answers"][0]["analysts_epsilon"] == central["epsilon"]
    Release(CARD, {"movie": stored.public_codes[:, 0], "rating": stored.private_codes}).write(tmp_path / "rel")
    offline = subprocess.run([*run, "estimate", "--synthetic", str(tmp_path / "rel" / "synthetic.csv"), "--card",
                              str(tmp_path / "rel" / "card.json"), "--queries", str(queries), "--guarantees"],
                             capture_output=True, text=True, timeout=300)
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["guarantees"] == printed["guarantees"]
    fewer = subprocess.run([*run, "estimate", "--synthetic", str(tmp_path / "rel" / "synthetic.csv"), "--card",
                            str(tmp_path / "rel" / "card.json"), "--queries", str(queries), "--rows-per-device", "0"],
                           capture_output=True, text=True, timeout=300)
    assert fewer.returncode == 2 and "rows_per_device" in fewer.stderr and "[1, " in fewer.stderr
