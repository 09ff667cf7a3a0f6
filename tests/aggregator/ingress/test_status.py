"""The one mapping from errors to gRPC statuses (docs/contract.md §9), and every handler using it."""

from __future__ import annotations

import inspect
import json
import logging
from typing import ClassVar

import grpc
import pytest

from ldpsynth.aggregator.errors import NotServed, PinExpired, ShardFull, ShardUnavailable, WorkerStartFailed
from ldpsynth.aggregator.ingress import collection_service, query_service
from ldpsynth.serving.errors import BadRequest, LimitExceeded, PermissionDenied, TryLater, Unauthenticated, WrongState
from ldpsynth.serving.status import INTERNAL, refusal, status_of
from ldpsynth.shared.errors import LdpsynthError, Status, ValidationError
from ldpsynth.shared.queries.wire import BatchTooLarge

DOING = "the batch was not acknowledged (retry it with the same report ids)"


@pytest.mark.parametrize("error, code", [
    (ValidationError("rows", "an integer in [1, 5]", "got 7", position=3), grpc.StatusCode.INVALID_ARGUMENT),
    (BatchTooLarge("at most 2^22 queries"), grpc.StatusCode.RESOURCE_EXHAUSTED),
    (BadRequest("request: not a valid ReportBatch"), grpc.StatusCode.INVALID_ARGUMENT),
    (WrongState("collection: 'x' is not served here"), grpc.StatusCode.FAILED_PRECONDITION),
    (LimitExceeded("max_rows_per_client: ..."), grpc.StatusCode.RESOURCE_EXHAUSTED),
    (Unauthenticated("authorization: unknown token"), grpc.StatusCode.UNAUTHENTICATED),
    (PermissionDenied("credential 'd' lacks the role query"), grpc.StatusCode.PERMISSION_DENIED),
    (TryLater("the server is shutting down; retry the batch"), grpc.StatusCode.UNAVAILABLE),
    (PinExpired("shard 0: pin expired"), grpc.StatusCode.UNAVAILABLE),
])
def test_each_error_ends_a_call_with_its_status_and_its_words(error: LdpsynthError, code: grpc.StatusCode) -> None:
    assert status_of(error, DOING) == (code, str(error))
    assert error.refused_as is not None and grpc.StatusCode[error.refused_as.name] == code


def test_a_shard_failure_says_what_was_not_done() -> None:
    assert status_of(ShardUnavailable("shard 2: no answer within 60 s"), DOING) == (
        grpc.StatusCode.UNAVAILABLE, f"{DOING}: shard 2: no answer within 60 s; retry later")
    assert status_of(WorkerStartFailed("shard 1: OSError"), DOING)[0] == grpc.StatusCode.UNAVAILABLE
    code, details = status_of(ShardFull("the log's storage is full (/data/log: 0 bytes free)"), DOING)
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and "/data" not in details  # no server path to callers
    assert details == f"{DOING}: the aggregator's log storage is full; retry later (an operator must add space)"


def test_an_error_of_any_tier_says_how_it_is_told() -> None:
    """The mapping knows no tier's classes: what a caller is told is the error's ``told_as``."""

    class PoolClosed(LdpsynthError):
        refused_as: ClassVar[Status | None] = Status.UNAVAILABLE
        told_as: ClassVar[str] = "{doing}: pool closed ({message})"

    assert status_of(PoolClosed("pool 3"), DOING) == (grpc.StatusCode.UNAVAILABLE, f"{DOING}: pool closed (pool 3)")


@pytest.mark.parametrize("error, level", [
    (ShardUnavailable("shard 2: no answer within 60 s"), logging.WARNING),
    (ShardFull("the log's storage is full"), logging.WARNING),
    (WorkerStartFailed("shard 1: OSError"), logging.WARNING),
    (WrongState("collection: 'x' is not served here"), logging.INFO),
    (TryLater("the server is shutting down; retry the batch"), logging.INFO),
    (RuntimeError("a bug"), logging.ERROR),
])
def test_a_refusal_is_logged_as_its_error_says(error: Exception, level: int, caplog: pytest.LogCaptureFixture) -> None:
    """A shard's failure as a warning (an operator may have to act), another refusal as info, a bug as an error."""
    caplog.set_level(logging.INFO, logger="ldpsynth.serving.status")
    refusal(error, "SubmitReports", DOING)
    assert [record.levelno for record in caplog.records if record.name == "ldpsynth.serving.status"] == [level]


@pytest.mark.parametrize("error", [RuntimeError("a bug"), KeyError("k"), LdpsynthError("no status: internal")])
def test_anything_without_a_status_is_internal(error: Exception) -> None:
    assert status_of(error, DOING) == INTERNAL


def test_every_status_of_the_vocabulary_is_a_grpc_code() -> None:
    assert {grpc.StatusCode[s.name] for s in Status} <= set(grpc.StatusCode)


@pytest.mark.parametrize("handler", [collection_service.CollectionServicer._get_collection,
                                     collection_service.CollectionServicer._submit_reports,
                                     collection_service.CollectionServicer._submit_batch,
                                     query_service.QueryServicer.estimate, query_service.QueryServicer.export])
def test_every_handler_goes_through_the_mapping(handler: object) -> None:
    """Each grpc.aio handler is wrapped by ``rpc`` (its code is the wrapper's, which calls ``abort``)."""
    assert inspect.unwrap(handler) is not handler  # type: ignore[arg-type]
    assert "abort" in handler.__code__.co_names  # type: ignore[attr-defined]


@pytest.mark.parametrize("code", list(grpc.StatusCode)[1:])
def test_the_web_port_names_every_code_as_connect_and_grpc_web_do(code: grpc.StatusCode) -> None:
    """The Connect name is gRPC's in lower case (``canceled``), gRPC-Web sends the number; each has its HTTP status."""
    from ldpsynth.aggregator.ingress.web_protocol import CONNECT_HTTP_STATUS, connect_code, failure
    assert connect_code(code) == ("canceled" if code == grpc.StatusCode.CANCELLED else code.name.lower())
    status, headers, body = failure("connect", code, "why")
    assert status == CONNECT_HTTP_STATUS[code] and json.loads(body) == {"code": connect_code(code), "message": "why"}
    status, headers, body = failure("grpc-web", code, "100% sure: é\n")
    assert status == 200 and body == b""
    assert dict(headers)[b"grpc-status"] == str(code.value[0]).encode()
    assert dict(headers)[b"grpc-message"] == b"100%25 sure: %C3%A9%0A"


def test_unimplemented_is_a_status_of_the_vocabulary() -> None:
    assert status_of(NotServed("SubmitReports: not on this port"), DOING)[0] == grpc.StatusCode.UNIMPLEMENTED
