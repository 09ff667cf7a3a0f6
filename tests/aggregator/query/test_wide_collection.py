"""A wide collection end to end through a real server (port 0, the session's Ray cluster, two shards).

300 devices, each with its own ledger, submit their 3-attribute row to the wide collection ``survey`` (3 pair
views) through the SDK: each view sub-collection holds exactly the reports of the devices routed to it, each
ledger charged ε once under the parent, resubmitting is free; the parent refuses reports; an SDK that knows no
wide card refuses the parent clearly; an analyst's marginal query on a sub-collection answers.
"""

from __future__ import annotations

import json
from collections import Counter

import grpc
import numpy as np
import pytest

from ldpsynth.aggregator.runtime.backend import BackendError
from ldpsynth.cli.main import main as cli_main
from ldpsynth.client import Client, PrivacyLedger
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.protocol import reports_to_proto
from ldpsynth.shared.wide.collection import WideCard, WideSchema
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

from ..conftest import make_reports, stored_ids, stored_rows, submit

pytestmark = pytest.mark.ray

DEVICES = 300
WIDE = WideCard.for_schema(WideSchema.from_json({
    "name": "survey", "epsilon": 1.0,
    "attributes": [{"name": "a", "type": "categorical", "values": ["x", "y", "z"]},
                   {"name": "b", "type": "binary"},
                   {"name": "c", "type": "integer", "min": 1, "max": 2}],
    "views": {"kind": "pairs", "salt": "5a" * 16}}))


def test_devices_report_their_views_and_pay_once_under_the_parent(start_server, tmp_path, capsys) -> None:
    tokens = tmp_path / "tokens.json"                         # the device's token names the parent only
    tokens.write_text(json.dumps({"clients": [
        {"id": "devices", "token": "device-token", "collections": ["survey"], "roles": ["submit"]},
        {"id": "analyst", "token": "analyst-token", "collections": "*", "roles": ["query"]}]}))
    tokens.chmod(0o600)
    server = start_server(collections=WIDE.cards, wide=(WIDE,), tokens_file=tokens)
    rng = np.random.default_rng(5)
    rows = {"a": rng.choice(["x", "y", "z"], DEVICES), "b": rng.integers(0, 2, DEVICES),
            "c": rng.integers(1, 3, DEVICES)}
    ledgers = [PrivacyLedger.for_simulation(budget=10.0) for _ in range(DEVICES)]
    routed: Counter[str] = Counter()
    with Client(server.address, token="device-token") as client:
        for i, ledger in enumerate(ledgers):
            row = {name: column[i:i + 1] for name, column in rows.items()}
            result = client.submit("survey", row, ledger=ledger)
            expected = WIDE.route(ledger.view_key("survey"))[1]
            assert (result.collection, result.part, result.acknowledged, result.epsilon_spent) == \
                ("survey", expected, 1, 1.0)
            routed[expected] += 1
        again = client.submit("survey", {name: column[:1] for name, column in rows.items()}, ledger=ledgers[0])
        assert (again.duplicates, again.memoized, again.epsilon_spent) == (1, 1, 0.0)
        with pytest.raises(ValidationError) as info:            # what an SDK without wide cards sees: a clear refusal
            client.get_collection("survey")
        assert info.value.field == "card.format"
        assert client.get_wide_collection("survey") == WIDE
        with pytest.raises(ValidationError, match="one of its views") as info:   # a view by its name: refused
            client.submit("survey/a+b", {"a": ["x"], "b": [0]}, ledger=ledgers[0])
        assert info.value.field == "collection" and ledgers[0].spent("survey/a+b") == 0.0
    for ledger in ledgers:
        assert ledger.spent("survey") == 1.0 and all(ledger.spent(name) == 0.0 for name in WIDE.names)
        ledger.close()
    assert sorted(routed) == sorted(WIDE.names) and sum(routed.values()) == DEVICES
    ids = [stored_ids(server, name) for name in WIDE.names]
    assert [stored_rows(server, name) for name in WIDE.names] == [routed[name] for name in WIDE.names]
    assert [len(i) for i in ids] == [routed[name] for name in WIDE.names] and len(set().union(*ids)) == DEVICES

    csv = tmp_path / "row.csv"                                 # ldpsynth client submit: the same path from a CSV
    csv.write_text("a,b,c\nz,1,2\n")
    argv = ["client", "submit", "--target", server.address, "--collection", "survey", "--rows", str(csv),
            "--ledger", str(tmp_path / "ledger.sqlite"), "--token", "device-token"]
    assert cli_main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    with PrivacyLedger(tmp_path / "ledger.sqlite") as ledger:
        assert (summary["collection"], summary["part"]) == ("survey", WIDE.route(ledger.view_key("survey"))[1])
        assert ledger.spent("survey") == summary["epsilon_spent"] == 1.0
    routed[summary["part"]] += 1
    assert stored_rows(server, summary["part"]) == routed[summary["part"]]

    card = WIDE.cards[0]                                       # survey/a+b
    batch = reports_to_proto(make_reports(card.schema, 3, rng), "survey", card.version, 0)
    _, code, details = submit(pb_grpc.CollectionServiceStub(server.channel()), [batch],
                              metadata=[("authorization", "Bearer device-token")])
    assert code == grpc.StatusCode.FAILED_PRECONDITION and "survey/a+b" in details and "survey/b+c" in details

    with QueryClient(server.address, token="analyst-token") as analyst:
        answer = analyst.estimate("survey/a+b", queries=[{"kind": "marginal", "attributes": ["a", "b"]}])
    records = answer.records()
    assert len(records) == 6 and all(np.isfinite(r["estimate"]) and r["std_error"] > 0 for r in records)
    assert sum(r["estimate"] for r in records) == pytest.approx(routed["survey/a+b"])   # E's estimates sum to n


def test_a_replica_with_another_salt_is_refused(start_server, tmp_path) -> None:
    server = start_server(collections=WIDE.cards, wide=(WIDE,), data_dir=tmp_path / "data")
    server.stop(0)
    resalted = WideCard.for_schema(WideSchema.from_json({**WIDE.schema.to_json(),
                                                         "views": {"kind": "pairs", "salt": "a5" * 16}}))
    assert resalted.cards == WIDE.cards                         # the same sub-collections: only the parent differs
    with pytest.raises(BackendError, match="'survey' is registered in the log with a different"):
        start_server(collections=resalted.cards, wide=(resalted,), data_dir=tmp_path / "data")
