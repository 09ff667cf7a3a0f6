"""A shuffled collection through a real server (issue 27 items 3 and 5): both guarantees on every answer and
export, equal to the accountant's on the same counts; the minimum batch refuses a grouped query with one small
group and an export below it (FAILED_PRECONDITION naming the group, its count and the minimum).
"""

from __future__ import annotations

import json
import subprocess
import sys

import grpc
import numpy as np
import pytest

from ldpsynth.client.errors import QueryError
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.amplification import central_epsilon, group_guarantees
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.estimators.offline import estimate_release
from ldpsynth.shared.protocol import reports_to_proto
from ldpsynth.shared.release import GUARANTEES_FILE, Release
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from ldpsynth.shared.wire import query_pb2 as qpb
from ldpsynth.shared.wire import query_pb2_grpc as qpb_grpc

from .conftest import submit

pytestmark = pytest.mark.ray

MIN_BATCH = 1000
DELTA = 1e-9
SHUFFLED = Schema.from_json({
    "name": "shuffled", "epsilon": 2.0,
    "attributes": [{"name": "movie", "type": "integer", "min": 0, "max": 3, "public": True},
                   {"name": "rating", "type": "integer", "min": 1, "max": 5}],
    "shuffle": {"delta": DELTA, "min_batch": MIN_BATCH, "shuffler": "independent"}})
CARD = MechanismCard.for_schema(SHUFFLED)
EPS0 = CARD.mechanism.epsilon
#: Reports per movie: movie 3 is below the minimum batch until more arrive.
PER_MOVIE = (3000, 2500, 1500, 200)
GROUPED_SMALL = [{"kind": "grouped", "attribute": "movie", "tables": [{"value": 0, "weights": [1, 2, 3, 4, 5]},
                                                                      {"value": 3, "weights": [1, 2, 3, 4, 5]}]}]
GROUPED_LARGE = [{"kind": "grouped", "attribute": "movie", "tables": [{"value": 0, "weights": [1, 2, 3, 4, 5]},
                                                                      {"value": 1, "weights": [0, 0, 0, 1, 1]}],
                  "normalization": "sum"}]
LINEAR = [{"kind": "marginal", "attributes": ["rating"], "normalization": "mean"}]


def reports(per_movie, rng) -> Reports:
    movies = np.repeat(np.arange(len(per_movie)), per_movie)
    return Reports(new_report_ids(len(movies)), rng.integers(0, 5, len(movies)), movies[:, None])


def store(server, batch: Reports, sequence: int = 0) -> None:
    with server.channel() as channel:
        acks, code, details = submit(pb_grpc.CollectionServiceStub(channel),
                                     [reports_to_proto(batch, "shuffled", CARD.version, sequence)])
    assert code == grpc.StatusCode.OK, details


@pytest.fixture
def shuffled_server(start_server):
    server = start_server(collections=(CARD,))
    stored = reports(PER_MOVIE, np.random.default_rng(27))
    store(server, stored)
    return server, stored


def test_an_ungrouped_query_states_both_guarantees_from_the_whole_count(shuffled_server, tmp_path):
    server, stored = shuffled_server
    with QueryClient(server.address) as client:
        answers = client.estimate("shuffled", queries=LINEAR)
    g = answers.guarantees
    n = sum(PER_MOVIE)
    assert g is not None and g.shuffled and g.scope == "answers"
    assert g.local_epsilon == EPS0 and g.rows_per_device == 1
    assert g.labels == ("all rows",) and g.counts.tolist() == [n]
    assert g.central_epsilon == central_epsilon(EPS0, 5, n, DELTA) and g.central_delta == DELTA
    assert 0 < g.central_epsilon < EPS0
    assert g.shuffle.independent and "aggregator's operator" in g.shuffle.against
    record = answers.records()[0]
    assert (record["local_epsilon"], record["central_epsilon"], record["central_delta"]) == \
        (EPS0, g.central_epsilon, DELTA)
    # the offline estimator on the same rows states the same guarantee
    release = Release(CARD, {"movie": stored.public_codes[:, 0], "rating": stored.private_codes})
    offline = estimate_release(release, LINEAR)
    assert offline.guarantees.to_json() == g.to_json()


def test_grouped_query_with_a_small_group_is_refused_naming_it(shuffled_server):
    server, _ = shuffled_server
    with QueryClient(server.address) as client, pytest.raises(QueryError) as caught:
        client.estimate("shuffled", queries=GROUPED_SMALL)
    assert caught.value.status == "FAILED_PRECONDITION"
    message = str(caught.value)
    assert "movie=3" in message and "200 reports" in message and f"minimum batch of {MIN_BATCH}" in message


def test_grouped_query_per_group_guarantees_equal_the_accountant(shuffled_server):
    server, _ = shuffled_server
    with QueryClient(server.address) as client:
        answers = client.estimate("shuffled", queries=GROUPED_LARGE)
    g = answers.guarantees
    assert g.labels == ("movie=0", "movie=1") and g.counts.tolist() == [3000, 2500]
    # the weakest group (2,500 reports) exactly; each group at the count it was evaluated at, never above its own
    assert g.central_epsilon == central_epsilon(EPS0, 5, 2500, DELTA) == g.epsilon[1]
    assert (g.evaluated <= g.counts).all() and g.evaluated[1] == 2500
    reference = group_guarantees(EPS0, 5, g.evaluated, DELTA)
    np.testing.assert_array_equal(g.epsilon, reference.epsilon)
    np.testing.assert_array_equal(g.delta, reference.delta)
    assert (g.epsilon >= [central_epsilon(EPS0, 5, int(c), DELTA) for c in g.counts]).all()


def test_export_below_the_minimum_is_refused_then_states_per_key_guarantees(shuffled_server, tmp_path):
    server, stored = shuffled_server
    with server.channel() as channel:
        stub = qpb_grpc.QueryServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            list(stub.Export(qpb.ExportRequest(collection="shuffled"), timeout=120))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "movie=3" in caught.value.details() and "200 reports" in caught.value.details()
    assert f"minimum batch of {MIN_BATCH}" in caught.value.details()
    store(server, reports((0, 0, 0, 900), np.random.default_rng(28)), sequence=1)   # movie 3: 1,100 reports
    with QueryClient(server.address) as client:
        release = client.export("shuffled")
    g = release.guarantees
    assert g.scope == "release" and g.labels == ("movie=0", "movie=1", "movie=2", "movie=3")
    assert g.counts.tolist() == [3000, 2500, 1500, 1100]
    assert g.central_epsilon == central_epsilon(EPS0, 5, 1100, DELTA) and g.weakest_group == "movie=3"
    np.testing.assert_array_equal(g.epsilon, group_guarantees(EPS0, 5, g.evaluated, DELTA).epsilon)
    files = release.write(tmp_path / "release")
    assert tmp_path / "release" / GUARANTEES_FILE in files
    stated = json.loads((tmp_path / "release" / GUARANTEES_FILE).read_text())
    assert stated["central"]["epsilon"] == g.central_epsilon and stated["local"]["epsilon"] == EPS0
    again = Release.read(tmp_path / "release")
    assert again.guarantees.to_json() == g.to_json()
    summary = release.summary()
    assert summary["central_epsilon"] == g.central_epsilon and summary["weakest_group"] == "movie=3"


def test_cli_query_and_estimate_print_both_guarantees(shuffled_server, tmp_path):
    server, stored = shuffled_server
    queries = tmp_path / "queries.json"
    queries.write_text(json.dumps(GROUPED_LARGE))
    run = [sys.executable, "-m", "ldpsynth.cli"]
    served = subprocess.run([*run, "query", "--target", server.address, "--collection", "shuffled", "--queries",
                             str(queries), "--guarantees"], capture_output=True, text=True, timeout=300)
    assert served.returncode == 0, served.stderr
    printed = json.loads(served.stdout)
    central = printed["guarantees"]["central"]
    assert central["epsilon"] == central_epsilon(EPS0, 5, 2500, DELTA) and central["weakest_group"] == "movie=1"
    assert [g["reports"] for g in central["groups"]] == [3000, 2500]
    assert printed["answers"][0]["central_epsilon"] == central["epsilon"]
    assert printed["guarantees"]["local"]["epsilon"] == EPS0
    Release(CARD, {"movie": stored.public_codes[:, 0], "rating": stored.private_codes}).write(tmp_path / "rel")
    offline = subprocess.run([*run, "estimate", "--synthetic", str(tmp_path / "rel" / "synthetic.csv"), "--card",
                              str(tmp_path / "rel" / "card.json"), "--queries", str(queries), "--guarantees"],
                             capture_output=True, text=True, timeout=300)
    assert offline.returncode == 0, offline.stderr
    assert json.loads(offline.stdout)["guarantees"] == printed["guarantees"]
    small = tmp_path / "small.json"
    small.write_text(json.dumps(GROUPED_SMALL))
    refused = subprocess.run([*run, "query", "--target", server.address, "--collection", "shuffled", "--queries",
                              str(small)], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 1 and "FAILED_PRECONDITION" in refused.stderr and "movie=3" in refused.stderr
