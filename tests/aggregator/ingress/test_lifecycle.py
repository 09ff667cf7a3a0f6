"""A collection's lifecycle through a real server with an injected clock: reports before ``opens`` and
from ``closes`` on are refused (FAILED_PRECONDITION naming the time, nothing stored, counted), queries and
exports go on after closing, and ``min_batch`` refuses small releases and small groups."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import numpy as np
import pytest

from ldpsynth.client import RetryPolicy
from ldpsynth.client.errors import QueryError
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.protocol import reports_to_proto
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

from ..conftest import ServerThread, stored_rows, submit
from ..scrape import scrape, value

StartServer = Callable[..., ServerThread]
OPENS, CLOSES = 1_796_083_200, 1_798_761_600  # 2026-12-01T00:00:00Z, 2027-01-01T00:00:00Z
WINDOWED = Schema.from_json({
    "name": "windowed", "epsilon": 1.0, "opens": "2026-12-01T00:00:00Z", "closes": "2027-01-01T00:00:00Z",
    "min_batch": 100,
    "attributes": [{"name": "movie", "type": "integer", "min": 0, "max": 3, "public": True},
                   {"name": "rating", "type": "integer", "min": 1, "max": 5}]})
CARD = MechanismCard.for_schema(WINDOWED)
GROUPED = [{"kind": "grouped", "attribute": "movie", "tables": [{"value": 0, "weights": [1, 2, 3, 4, 5]},
                                                                 {"value": 2, "weights": [1, 2, 3, 4, 5]}]}]


class Clock:
    """A settable clock (seconds since the epoch)."""

    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def reports(movie: int, n: int, rng: np.random.Generator) -> Reports:
    return Reports(new_report_ids(n), rng.integers(0, 5, n), np.full((n, 1), movie, np.int64))


def send(stub: pb_grpc.CollectionServiceStub, *parts: Reports) -> tuple[list, grpc.StatusCode, str]:
    return submit(stub, [reports_to_proto(r, "windowed", CARD.version, i) for i, r in enumerate(parts)])


def test_reports_only_while_open_releases_only_from_min_batch(start_server: StartServer,
                                                             rng: np.random.Generator) -> None:
    clock = Clock(OPENS - 1)
    server = start_server(clock=clock, collections=(CARD,), metrics_port=0)
    stub = pb_grpc.CollectionServiceStub(server.channel())
    url = server.server.metrics_url

    acks, code, details = send(stub, reports(0, 10, rng))
    assert (acks, code) == ([], grpc.StatusCode.FAILED_PRECONDITION)
    assert "collection 'windowed' opens at 2026-12-01T00:00:00Z (opens)" in details
    assert value(scrape(url), "ldpsynth_collection_open", collection="windowed") == 0

    clock.now = OPENS
    assert send(stub, reports(0, 60, rng))[1] == grpc.StatusCode.OK
    with QueryClient(server.address, retry=RetryPolicy(max_attempts=1)) as analyst:  # a release of 60 reports
        with pytest.raises(QueryError) as small:
            analyst.estimate("windowed", queries=[{"kind": "marginal", "attributes": ["rating"]}])
    assert small.value.status == "FAILED_PRECONDITION"
    assert ("the queries were refused: group 'movie=0' holds 60 reports, below the collection's minimum batch of 100 "
            "reports (min_batch); a group below it is never released nor counted") in str(small.value)
    acks, code, _ = send(stub, reports(0, 240, rng), reports(1, 300, rng), reports(2, 50, rng))
    assert code == grpc.StatusCode.OK and sum(a.accepted for a in acks) == 590
    assert value(scrape(url), "ldpsynth_collection_open", collection="windowed") == 1

    with QueryClient(server.address, retry=RetryPolicy(max_attempts=1)) as analyst:
        whole = analyst.estimate("windowed", queries=[{"kind": "marginal", "attributes": ["rating"]}])
        assert whole.n == 600                     # movie=2's 50 reports are below the minimum batch: left out
        assert (whole.guarantees.withheld_groups, whole.guarantees.withheld_reports) == (1, 50)
        grouped = analyst.estimate("windowed", queries=GROUPED)   # movie=0 answered, movie=2 left out
        assert grouped.n == 600 and grouped.guarantees.labels == ("movie=0",)
        with pytest.raises(QueryError) as small_group:
            analyst.estimate("windowed", queries=[GROUPED[0] | {"tables": GROUPED[0]["tables"][1:]}])
        assert small_group.value.status == "FAILED_PRECONDITION"
        assert ("the queries were refused: group 'movie=2' holds 50 reports, below the collection's minimum batch "
                "of 100 reports (min_batch)") in str(small_group.value)
        partial = analyst.export("windowed")      # the export leaves movie=2's rows out
        assert len(partial) == 600 and 2 not in set(partial.public_keys().tolist())

        clock.now = CLOSES - 1
        assert send(stub, reports(2, 100, rng))[1] == grpc.StatusCode.OK
        clock.now = CLOSES
        acks, code, details = send(stub, reports(3, 500, rng))
        assert (acks, code) == ([], grpc.StatusCode.FAILED_PRECONDITION)
        assert "collection 'windowed' closed at 2027-01-01T00:00:00Z (closes): it takes no more reports" in details
        assert stored_rows(server, "windowed") == 750

        # Closed: still answered and exported (then it can be retired).
        assert analyst.estimate("windowed", queries=GROUPED).n == 750
        exported = analyst.export("windowed")
        assert len(exported) == 750
    samples = scrape(url)
    assert value(samples, "ldpsynth_ingest_rejected_reports_total", collection="windowed", reason="lifecycle") == 510
    assert value(samples, "ldpsynth_ingest_rejected_batches_total", collection="windowed", reason="lifecycle") == 2
    assert value(samples, "ldpsynth_collection_open", collection="windowed") == 0
    assert value(samples, "ldpsynth_collection_min_batch", collection="windowed") == 100
    assert value(samples, "ldpsynth_collection_closes_timestamp_seconds", collection="windowed") == CLOSES
