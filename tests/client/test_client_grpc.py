"""The client against a fake aggregator over real sockets: delivery, faults, retries, auth, deadlines."""

from __future__ import annotations

import asyncio
import inspect
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import grpc
import numpy as np
import pytest

from ldpsynth.client import AsyncClient, Client, PrivacyLedger, RetryPolicy, SubmitError
from ldpsynth.client.aio import ClientOptions
from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.errors import PrivacyBudgetExceeded, ValidationError
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.protocol import CollectionInfo, Limits
from ldpsynth.shared.reports import Reports, new_report_ids

from .client_fakes import FakeCollectionService, FakeServer, Faults, ServerThread, ratings_info, ratings_rows

FAST = RetryPolicy(max_attempts=4, initial_backoff=0.01, max_backoff=0.05)
_T = TypeVar("_T")


def serve(service: FakeCollectionService, body: Callable[[FakeServer], Awaitable[_T]], **server_options) -> _T:
    """Run ``body`` against ``service`` served on 127.0.0.1:0."""
    async def main() -> _T:
        async with FakeServer(service, **server_options) as server:
            return await body(server)
    return asyncio.run(main())


def submit(service: FakeCollectionService, rows: dict, ledger: PrivacyLedger, *, retry: RetryPolicy = FAST,
           deadline: float = 5.0, token: str | None = None, batch_size: int | None = None, **server_options):
    async def body(server: FakeServer):
        async with AsyncClient(server.target, token=token, retry=retry, deadline=deadline) as client:
            return await client.submit("ratings", rows, ledger=ledger, batch_size=batch_size)
    return serve(service, body, **server_options)


@pytest.fixture
def ledger(tmp_path):
    with PrivacyLedger(tmp_path / "ledger.sqlite", budget=1000.0) as handle:
        yield handle


def batched(max_batch_reports: int = 10, faults: Faults | None = None, epsilon: float = 1.0) -> FakeCollectionService:
    return FakeCollectionService(ratings_info(epsilon, Limits(max_batch_reports=max_batch_reports)), faults)


def ids_of(batch) -> list[bytes]:
    return [batch.report_ids[i:i + 16] for i in range(0, len(batch.report_ids), 16)]


def test_rows_are_delivered_once_and_resubmission_is_deduplicated(ledger) -> None:
    service = batched()
    first = submit(service, ratings_rows(45), ledger)
    assert (first.rows, first.sent, first.acknowledged, first.duplicates) == (45, 45, 45, 0)
    assert (first.batches, first.retries, first.memoized) == (5, 0, 0)
    assert first.epsilon_spent == pytest.approx(45.0) and first.epsilon_total == first.epsilon_spent
    again = submit(service, ratings_rows(45), ledger)
    assert (again.sent, again.acknowledged, again.duplicates, again.memoized) == (45, 0, 45, 45)
    assert again.epsilon_spent == 0.0 and again.epsilon_total == first.epsilon_total
    assert len(service.stored) == 45


def test_only_perturb_secure_outputs_and_public_codes_are_on_the_wire(ledger, monkeypatch) -> None:
    calls: list[tuple[np.ndarray, np.ndarray]] = []
    secure = MechanismE.perturb_secure

    def spy(self: MechanismE, codes):
        out = secure(self, codes)
        calls.append((np.array(codes), out.copy()))
        return out

    def seeded(*args, **kwargs):
        raise AssertionError("the seeded simulation sampler ran on a device")

    monkeypatch.setattr(MechanismE, "perturb_secure", spy)
    monkeypatch.setattr(MechanismE, "perturb", seeded)
    service = batched(epsilon=0.05)
    rows = ratings_rows(60, seed=3)
    result = submit(service, rows, ledger)
    assert result.acknowledged == 60
    encoded = encode_columns(service.info.schema, rows)
    [(raw_in, perturbed)] = calls
    np.testing.assert_array_equal(raw_in, encoded.private_codes)
    assert (perturbed != raw_in).any()  # keep probability ≈ 0.1 at ε = 0.05, |D| = 10
    batches = [batch for _, batch in service.received]
    for batch in batches:
        assert {f.name for f, _ in batch.ListFields()} <= {"collection", "mechanism_version", "sequence",
                                                          "report_ids", "private_codes", "public_codes"}
        assert len(batch.public_codes) == len(service.info.schema.public_attributes)
    wire_private = np.concatenate([np.frombuffer(b.private_codes, "<u8") for b in batches])
    np.testing.assert_array_equal(wire_private, perturbed)
    wire_public = np.concatenate([np.column_stack([np.frombuffer(c, "<u8") for c in b.public_codes])
                                  for b in batches])
    np.testing.assert_array_equal(wire_public, encoded.public_codes)
    assert len({rid for b in batches for rid in ids_of(b)}) == 60


def test_spend_and_memo_are_durable_before_the_first_batch_leaves(tmp_path) -> None:
    path = tmp_path / "ledger.sqlite"
    seen: list[tuple[int, int]] = []

    def read_ledger(_batch) -> None:
        with sqlite3.connect(path) as conn:
            reports = conn.execute("SELECT reports FROM spend WHERE collection = 'ratings'").fetchone()[0]
            memo = conn.execute("SELECT COUNT(*) FROM memo").fetchone()[0]
        seen.append((reports, memo))

    service = batched()
    service.on_batch = read_ledger
    with PrivacyLedger(path, budget=1000.0) as ledger:
        submit(service, ratings_rows(30), ledger)
    assert seen and seen[0] == (30, 30)


def test_budget_refusal_sends_and_records_nothing(tmp_path) -> None:
    service = batched()
    with PrivacyLedger(tmp_path / "l.sqlite", budget=3.5) as ledger:
        with pytest.raises(PrivacyBudgetExceeded):
            submit(service, ratings_rows(4), ledger)
        assert ledger.reports("ratings") == 0 and ledger.spent("ratings") == 0.0
    assert service.attempts == 0 and service.received == [] and service.stored == {}


def test_unavailable_first_attempt_is_retried_and_stored_once(ledger) -> None:
    service = batched(faults=Faults(unavailable_attempts=1))
    result = submit(service, ratings_rows(25), ledger)
    assert result.retries == 1 and result.acknowledged == 25
    assert len(service.stored) == 25 and set(service.offered.values()) == {1}


def test_dropped_stream_resends_unacknowledged_batches_with_the_same_ids(ledger) -> None:
    service = batched(faults=Faults(drop_after={0: 2}))  # batch 1 committed, then the stream drops
    result = submit(service, ratings_rows(45), ledger)
    assert (result.retries, result.acknowledged, result.duplicates) == (1, 35, 10)
    first = {b.sequence: ids_of(b) for a, b in service.received if a == 0}
    second = {b.sequence: ids_of(b) for a, b in service.received if a == 1}
    assert sorted(first) == [0, 1] and sorted(second) == [1, 2, 3, 4]
    assert second[1] == first[1]  # the unacknowledged batch went again, with the same report ids
    assert len(service.stored) == 45
    assert sorted(service.offered.values()) == [1] * 35 + [2] * 10


def test_server_restart_mid_stream_loses_and_duplicates_nothing(ledger) -> None:
    service = batched(faults=Faults(ack_delay=0.01))

    patient = RetryPolicy(max_attempts=20, initial_backoff=0.02, max_backoff=0.2)

    async def body(server: FakeServer):
        restarts: list[asyncio.Task] = []

        def restart_on_third(_batch) -> None:
            if len(service.received) == 3:
                restarts.append(asyncio.get_running_loop().create_task(restart()))

        async def restart() -> None:
            await server.stop()
            await asyncio.sleep(0.05)
            await server.start()  # same port

        service.on_batch = restart_on_third
        async with AsyncClient(server.target, retry=patient, deadline=5.0) as client:
            result = await client.submit("ratings", ratings_rows(80), ledger=ledger)
        await asyncio.gather(*restarts)
        return result

    result = serve(service, body)
    assert result.retries >= 1 and result.acknowledged + result.duplicates == 80
    assert len(service.stored) == 80


@pytest.mark.parametrize("status", [grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
                                    grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAUTHENTICATED,
                                    grpc.StatusCode.PERMISSION_DENIED])
def test_final_statuses_surface_with_status_details_and_progress(ledger, status: grpc.StatusCode) -> None:
    faults = Faults(reject_at=1, reject_status=status, reject_details="quota of device-1 reached")
    service = batched(faults=faults)
    with pytest.raises(SubmitError) as info:
        submit(service, ratings_rows(45), ledger)
    err = info.value
    assert (err.method, err.status) == ("SubmitReports", status.name)
    assert err.attempts == service.attempts in (1, 2)  # 2: the write race below, resolved in lockstep
    assert (err.sent, err.acknowledged, err.duplicates) == (45, 10, 0)
    assert "quota of device-1 reached" in str(err) and "10 of 45 reports acknowledged" in str(err)


def test_the_server_status_survives_the_grpc_write_race(tmp_path) -> None:
    # Many one-report batches are in flight when the server rejects the first one: grpcio then often
    # reports INTERNAL "Internal error from Core"; the client must still surface the server's status.
    faults = Faults(reject_at=0, reject_status=grpc.StatusCode.PERMISSION_DENIED, reject_details="not yours")
    for trial in range(25):
        service = batched(max_batch_reports=1, faults=faults)
        with PrivacyLedger(tmp_path / f"l{trial}.sqlite", budget=1000.0) as ledger:
            with pytest.raises(SubmitError) as info:
                submit(service, ratings_rows(150), ledger)
        assert (info.value.status, info.value.details) == ("PERMISSION_DENIED", "not yours")


def test_a_stream_refused_on_open_surfaces_its_status_without_retry() -> None:
    # Like an auth interceptor: the server ends the stream before reading, while a large batch is
    # being written.
    info = ratings_info()
    service = FakeCollectionService(info, Faults(refuse_on_open=grpc.StatusCode.UNAUTHENTICATED))
    reports = Reports(new_report_ids(50_000), np.zeros(50_000, np.int64), np.zeros((50_000, 2), np.int64))

    async def body(server: FakeServer):
        async with AsyncClient(server.target, retry=FAST) as client:
            return await client.submit_reports(info, reports)

    with pytest.raises(SubmitError) as err:
        serve(service, body)
    assert (err.value.status, err.value.details, err.value.acknowledged) == ("UNAUTHENTICATED", "refused", 0)
    assert err.value.attempts == service.attempts <= 2


def test_unknown_collection_fails_get_collection_without_retry(ledger) -> None:
    service = batched()

    async def body(server: FakeServer):
        async with AsyncClient(server.target, retry=FAST) as client:
            return await client.submit("no-such", ratings_rows(1), ledger=ledger)

    with pytest.raises(SubmitError) as info:
        serve(service, body)
    assert (info.value.method, info.value.status, info.value.attempts) == ("GetCollection", "FAILED_PRECONDITION", 1)
    assert ledger.reports("no-such") == 0


def test_bearer_token_is_sent_on_every_call_and_a_wrong_one_is_final(ledger) -> None:
    service = batched(faults=Faults(token="s3cret-token"))
    submit(service, ratings_rows(12), ledger, token="s3cret-token")
    assert len(service.metadata) == 2  # GetCollection + one SubmitReports
    assert all(md["authorization"] == "Bearer s3cret-token" for md in service.metadata)
    with pytest.raises(SubmitError) as info:
        submit(service, ratings_rows(12), ledger, token="wrong-token")
    assert info.value.status == "UNAUTHENTICATED" and info.value.attempts == 1
    assert "token" not in str(info.value).replace("missing or unknown token", "")


def test_every_call_carries_the_deadline(ledger) -> None:
    service = batched(faults=Faults(unavailable_attempts=1))
    submit(service, ratings_rows(12), ledger, deadline=4.0)
    assert len(service.time_remaining) == 3
    assert all(t is not None and 0 < t <= 4.5 for t in service.time_remaining)


def test_a_hanging_server_hits_the_deadline_is_retried_then_fails_cleanly(ledger) -> None:
    service = batched(faults=Faults(hang=True))
    retry = RetryPolicy(max_attempts=3, initial_backoff=0.01, max_backoff=0.02)
    started = time.monotonic()
    with pytest.raises(SubmitError) as info:
        submit(service, ratings_rows(5), ledger, retry=retry, deadline=0.3)
    elapsed = time.monotonic() - started
    assert (info.value.status, info.value.attempts, info.value.acknowledged) == ("DEADLINE_EXCEEDED", 3, 0)
    assert service.attempts == 3 and 0.85 < elapsed < 10


def test_retryable_failures_give_up_after_max_attempts_without_progress(ledger) -> None:
    service = batched(faults=Faults(unavailable_attempts=100))
    with pytest.raises(SubmitError) as info:
        submit(service, ratings_rows(20), ledger, retry=RetryPolicy(max_attempts=2, initial_backoff=0.01))
    assert info.value.status == "UNAVAILABLE" and "server restarting" in info.value.details
    assert info.value.attempts == service.attempts in (2, 3)  # 3: one extra lockstep attempt after a write race


def test_failed_delivery_keeps_the_charge_and_a_resubmission_is_free(ledger) -> None:
    service = batched(faults=Faults(reject_at=0, reject_status=grpc.StatusCode.RESOURCE_EXHAUSTED))
    with pytest.raises(SubmitError):
        submit(service, ratings_rows(20), ledger)
    assert ledger.reports("ratings") == 20  # charged before sending: never under-counted
    offered_ids = {rid for _, b in service.received for rid in ids_of(b)}
    assert offered_ids and not service.stored
    service.faults = Faults()
    result = submit(service, ratings_rows(20), ledger)
    assert (result.memoized, result.epsilon_spent, result.acknowledged) == (20, 0.0, 20)
    assert ledger.reports("ratings") == 20 and len(service.stored) == 20
    assert offered_ids <= set(service.stored)  # the same memoized ids went again


def test_batches_fit_the_collection_message_limit(ledger) -> None:
    limits = Limits(max_batch_reports=1000, max_message_bytes=1500)
    service = FakeCollectionService(ratings_info(limits=limits))
    result = submit(service, ratings_rows(200), ledger, max_receive_message_bytes=1500)
    assert result.acknowledged == 200 and result.batches == len(service.received) > 5
    assert all(b.ByteSize() <= 1500 for _, b in service.received)
    smaller = submit(batched(max_batch_reports=1000), ratings_rows(200, start=0), ledger, batch_size=64)
    assert smaller.batches == 4


def test_many_devices_share_one_async_client(ledger) -> None:
    service = batched(faults=Faults(ack_delay=0.002, unavailable_attempts=3))

    async def body(server: FakeServer):
        async with AsyncClient(server.target, retry=FAST) as client:
            info = await client.get_collection("ratings")

            async def device(i: int):
                with PrivacyLedger.for_simulation() as own:
                    return await client.submit(info, ratings_rows(7, seed=i, start=7 * i), ledger=own)

            return await asyncio.gather(*(device(i) for i in range(40)))

    results = serve(service, body)
    assert sum(r.acknowledged + r.duplicates for r in results) == 280
    assert len(service.stored) == 280


def test_submit_reports_delivers_pre_perturbed_reports() -> None:
    info: CollectionInfo = ratings_info(limits=Limits(max_batch_reports=16))
    service = FakeCollectionService(info)
    codes = info.card.mechanism.perturb(np.arange(50) % 10, np.random.default_rng(1))  # seeded: a simulation
    reports = Reports(new_report_ids(50), codes, np.zeros((50, 2), np.int64))

    async def body(server: FakeServer):
        async with AsyncClient(server.target, retry=FAST) as client:
            return await client.submit_reports(info, reports)

    result = serve(service, body)
    assert (result.sent, result.acknowledged, result.batches) == (50, 50, 4)
    assert sorted(code for code, _ in service.stored.values()) == sorted(codes.tolist())


def test_sync_client_wraps_the_async_one(tmp_path) -> None:
    service = batched()
    with ServerThread(service) as server, PrivacyLedger(tmp_path / "l.sqlite") as ledger, \
            Client(server.target, retry=FAST) as client:
        assert client.get_collection("ratings").schema.name == "ratings"
        assert client.submit("ratings", ratings_rows(3), ledger=ledger).acknowledged == 3
    assert len(service.stored) == 3


def test_sync_client_takes_exactly_the_async_clients_options() -> None:
    keyword_only = [p.name for p in inspect.signature(AsyncClient).parameters.values() if p.kind is p.KEYWORD_ONLY]
    assert list(ClientOptions.__annotations__) == keyword_only
    with pytest.raises(TypeError, match="tokn"):
        Client("127.0.0.1:1", tokn="secret")  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="deadline"):
        Client("127.0.0.1:1", deadline=-1.0)
