"""A numeric collection through a real local server (port 0, the session's Ray cluster, two shards): devices
submit through the SDK, the server stores their reports (a bad batch refused whole), the export's mean and sum
cover the truth, and queries of the categorical engine are refused naming the mechanism.

The device path's randomness is the OS CSPRNG; here ``coins.secure_words`` is replaced by a seeded Generator's
words so the run is reproducible (fixed seed, no retry).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from ldpsynth.client import Client, PrivacyLedger
from ldpsynth.client.errors import QueryError
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.mechanisms import coins
from ldpsynth.shared.numeric.collection import release_means
from ldpsynth.shared.protocol import reports_to_proto
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

from ...aggregator.conftest import ray_address, start_server, stored_rows, submit  # noqa: F401  (fixtures)

pytestmark = pytest.mark.ray

CARD = MechanismCard.for_schema(Schema.from_json({"name": "hours", "epsilon": 1.0, "attributes": [
    {"name": "hours", "type": "numeric", "range": [0, 99], "mechanism": "HM"},
    {"name": "region", "type": "categorical", "values": ["north", "south"], "public": True}]}))
N = 2000


def _values() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20261206)
    region = rng.integers(0, 2, N)
    hours = 99.0 * rng.beta(np.where(region == 0, 3.0, 6.0), np.where(region == 0, 6.0, 4.0))  # distinct rows
    return {"hours": hours, "region": np.array(["north", "south"])[region]}


def test_devices_submit_the_server_stores_and_the_export_answers(start_server: Any, tmp_path: Path,  # noqa: F811
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    words = np.random.default_rng(42).bit_generator.random_raw
    monkeypatch.setattr(coins, "secure_words", lambda count: np.asarray(words(count), dtype=np.uint64))
    server = start_server(collections=(CARD,))
    rows = _values()
    with PrivacyLedger(tmp_path / "ledger.sqlite", budget=10_000.0) as ledger, Client(server.address) as client:
        sent = client.submit("hours", rows, ledger=ledger)
        with pytest.raises(ValidationError) as info:
            client.submit("hours", {"hours": [12.5, 120.0], "region": ["north", "south"]}, ledger=ledger)
        spent = ledger.spent("hours")
    assert sent.acknowledged == N
    assert info.value.field == "hours" and info.value.position == 1 and "[0.0, 99.0]" in str(info.value)
    assert "120" not in str(info.value)
    assert spent == pytest.approx(N * CARD.mechanism.epsilon)   # the refused submission charged nothing
    assert stored_rows(server, "hours") == N

    with QueryClient(server.address) as query:
        release = query.export("hours")
        with pytest.raises(QueryError) as refused:     # the categorical engine's queries: not for HM reports
            query.estimate("hours", linear=np.ones((1, CARD.mechanism.domain_size)))
    assert len(release) == N and release.card.is_numeric
    assert "INVALID_ARGUMENT" in str(refused.value) and "mechanism" in str(refused.value)

    (overall,) = release_means(release)
    truth = float(rows["hours"].mean())
    assert overall.estimate.n == N and overall.estimate.low <= truth <= overall.estimate.high
    assert overall.estimate.sum_interval[0] <= truth * N <= overall.estimate.sum_interval[1]
    by_region = release_means(release, by="region")
    assert [g.value for g in by_region] == ["north", "south"]
    for group in by_region:
        mask = rows["region"] == group.value
        assert group.estimate.n == int(mask.sum())
        assert group.estimate.low <= float(rows["hours"][mask].mean()) <= group.estimate.high


def test_a_batch_with_a_report_beyond_the_output_set_is_refused_whole(start_server: Any) -> None:  # noqa: F811
    server = start_server(collections=(CARD,))
    k = CARD.mechanism.domain_size
    good = Reports(new_report_ids(10), np.arange(10, dtype=np.int64), np.zeros((10, 1), np.int64))
    bad = Reports(new_report_ids(10), np.full(10, k, np.int64), np.zeros((10, 1), np.int64))
    with server.channel() as channel:
        stub = pb_grpc.CollectionServiceStub(channel)
        acks, code, details = submit(stub, [reports_to_proto(good, "hours", CARD.version, 0, CARD.mechanism),
                                            reports_to_proto(bad, "hours", CARD.version, 1, CARD.mechanism)])
    assert code == grpc.StatusCode.INVALID_ARGUMENT, details
    assert details.startswith("private_codes") and f"[0, {k - 1}]" in details
    assert [a.sequence for a in acks] == [0] and stored_rows(server, "hours") == 10
