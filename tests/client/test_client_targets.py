"""Several targets (ingress replicas): ``a:1,b:2`` is balanced round-robin by gRPC on the client,
and calls go on through the others when one replica stops."""

from __future__ import annotations

import pytest

from ldpsynth.client import Client, PrivacyLedger, RetryPolicy
from ldpsynth.client.transport import grpc_target, split_targets
from ldpsynth.shared.errors import ValidationError

from .client_fakes import FakeCollectionService, ServerThread, ratings_info, ratings_rows

FAST = RetryPolicy(max_attempts=50, initial_backoff=0.01, max_backoff=0.05)


def test_targets_are_parsed_and_resolved() -> None:
    assert split_targets("localhost:50051") == [("localhost", 50051)]
    assert split_targets(" 127.0.0.1:1 , [::1]:2") == [("127.0.0.1", 1), ("::1", 2)]
    assert grpc_target("localhost:50051") == ("localhost:50051", [])
    target, options = grpc_target("127.0.0.1:1,localhost:2")
    assert target == "ipv4:127.0.0.1:1,127.0.0.1:2"
    assert ("grpc.lb_policy_name", "round_robin") in options
    for bad in ("", "host", "host:0", "host:99999", "a:1,,b:2", "a:b"):
        with pytest.raises(ValidationError, match="target"):
            split_targets(bad)
    with pytest.raises(ValidationError, match="a mix of both"):
        grpc_target("127.0.0.1:1,[::1]:2")


def test_calls_are_spread_over_replicas_and_survive_the_loss_of_one(tmp_path) -> None:
    first, second = FakeCollectionService(ratings_info()), FakeCollectionService(ratings_info())
    b = ServerThread(second).__enter__()  # stopped half way through, below
    with ServerThread(first) as a:
        targets = f"{a.target},{b.target}"
        with Client(targets, retry=FAST) as client:
            for k in range(10):  # one device (ledger) per submission: each sends its own reports
                with PrivacyLedger(tmp_path / f"l{k}.sqlite") as ledger:
                    assert client.submit("ratings", ratings_rows(3), ledger=ledger).acknowledged == 3
            # Round robin: both replicas got calls (each submission is a GetCollection and a
            # SubmitReports, so with two replicas each kind of call may stay on one of them).
            assert len(first.metadata) >= 5 and len(second.metadata) >= 5
            assert len(first.stored) + len(second.stored) == 30
            b.__exit__(None, None, None)  # one replica stops
            before = len(first.stored)
            for k in range(10, 15):
                with PrivacyLedger(tmp_path / f"l{k}.sqlite") as ledger:
                    assert client.submit("ratings", ratings_rows(3), ledger=ledger).acknowledged == 3
            assert len(first.stored) == before + 15
