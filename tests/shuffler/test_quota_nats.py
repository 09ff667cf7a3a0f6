"""The shuffler tier's shared quota store (ldpsynth.shuffler.quota_nats) against a real nats-server of its own
on 127.0.0.1: one count per credential and collection across stores, leases given back, lapsed, confirmed;
compare-and-set under concurrency from two processes' worth of connections; errors at start and while serving.
No Ray, no replica (the shuffler's quota end to end: test_shuffler_quota.py)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from ldpsynth.serving.errors import ConfigError, QuotaExceeded, TryLater
from ldpsynth.shuffler.quota import Reservation
from ldpsynth.shuffler.quota_nats import BUCKET, NatsQuotas, QuotaNats, parse_servers, quota_key

from .conftest import QUOTA_TOKEN, QuotaServer, needs_nats

T = TypeVar("T")
pytestmark = needs_nats
DEVICE = "device-7"


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coroutine)


async def two_stores(settings: QuotaNats, lease: float = 60.0) -> tuple[NatsQuotas, NatsQuotas]:
    return (await NatsQuotas.connect(settings, lease, name="shuffler-a"),
            await NatsQuotas.connect(settings, lease, name="shuffler-b"))


def test_one_credential_is_counted_once_across_stores_and_an_unacknowledged_reservation_is_given_back(
        quota_server: QuotaServer) -> None:
    async def scenario() -> None:
        a, b = await two_stores(quota_server.settings)
        try:
            await a.confirm(await a.reserve(DEVICE, "survey", 6, 10))
            with pytest.raises(QuotaExceeded) as refused:
                await b.reserve(DEVICE, "survey", 5, 10)
            assert "--max-reports-per-device" in str(refused.value) and "at most 10" in str(refused.value)
            assert "6 were taken" in str(refused.value) and "adds 5" in str(refused.value)
            held = await b.reserve(DEVICE, "survey", 4, 10)
            assert await a.usage(DEVICE, "survey") == (6, 4)
            with pytest.raises(QuotaExceeded):
                await a.reserve(DEVICE, "survey", 1, 10)
            await b.release(held)  # its call ended unacknowledged
            assert await a.usage(DEVICE, "survey") == (6, 0)
            await b.release(held)  # twice: nothing more given back
            await a.confirm(await a.reserve(DEVICE, "survey", 4, 10))
            assert await b.usage(DEVICE, "survey") == (10, 0)
            # another credential, another collection: counts of their own
            await b.reserve("device-8", "survey", 10, 10)
            await b.reserve(DEVICE, "ratings", 10, 10)
        finally:
            await a.close()
            await b.close()

    run(scenario())


def test_a_key_names_the_collection_and_a_hash_of_the_credential_in_safe_characters() -> None:
    key = quota_key("device 7/é.*>", "survey")
    assert key.startswith("q." + b"survey".hex() + ".") and len(key.split(".")[2]) == 32
    assert all(c.isalnum() or c in "._-" for c in key) and "device" not in key
    assert quota_key("device-7", "survey") != quota_key("device-8", "survey")


def test_concurrent_reservations_from_two_processes_never_exceed_the_limit(quota_server: QuotaServer) -> None:
    """25 concurrent calls of 1 report through each of two stores (each on its own event loop and thread, as two
    shuffler processes), limit 10: exactly 10 reserved; once confirmed they are 10 counted for good."""
    start = threading.Barrier(2)
    results: dict[str, tuple[list[Reservation], int, int, float]] = {}

    def process(name: str) -> None:
        async def calls() -> tuple[list[Reservation], int, int, float]:
            store = await NatsQuotas.connect(quota_server.settings, 60.0, name=name)
            try:
                start.wait(30)
                began = time.perf_counter()
                outcomes = await asyncio.gather(*(store.reserve(DEVICE, "survey", 1, 10) for _ in range(25)),
                                                return_exceptions=True)
                seconds = time.perf_counter() - began
                taken = [r for r in outcomes if isinstance(r, Reservation)]
                refused = sum(isinstance(r, QuotaExceeded) for r in outcomes)
                other = [r for r in outcomes if not isinstance(r, (Reservation, QuotaExceeded))]
                assert not other, other
                for reservation in taken:
                    await store.confirm(reservation)
                return taken, refused, len(outcomes), seconds
            finally:
                await store.close()

        results[name] = asyncio.run(calls())

    threads = [threading.Thread(target=process, args=(name,)) for name in ("shuffler-a", "shuffler-b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert set(results) == {"shuffler-a", "shuffler-b"}
    assert sum(len(taken) for taken, _, _, _ in results.values()) == 10
    assert sum(refused for _, refused, _, _ in results.values()) == 40

    async def check() -> tuple[int, int]:
        store = await NatsQuotas.connect(quota_server.settings, 60.0)
        try:
            return await store.usage(DEVICE, "survey")
        finally:
            await store.close()

    assert run(check()) == (10, 0)


CRASHING = """
import asyncio, sys, time
from ldpsynth.shuffler.quota_nats import NatsQuotas, QuotaNats

async def main():
    store = await NatsQuotas.connect(QuotaNats((sys.argv[1],), token=sys.argv[2]), lease=float(sys.argv[3]))
    await store.reserve("device-7", "survey", 10, 10)
    print("reserved", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def test_the_lease_of_a_shuffler_that_died_mid_call_lapses_and_frees_the_quota(quota_server: QuotaServer) -> None:
    """A shuffler process reserves a device's whole quota (lease 3 s) and is SIGKILLed before its call ends: the
    other process refuses the device until the lease lapses, then takes it."""
    crashing = subprocess.Popen([sys.executable, "-c", CRASHING, quota_server.url, QUOTA_TOKEN, "3"],
                                stdout=subprocess.PIPE, text=True)
    try:
        assert crashing.stdout is not None and crashing.stdout.readline().strip() == "reserved"
        reserved_at = time.monotonic()
    finally:
        crashing.kill()  # our child, by its PID
        crashing.wait(10)
        if crashing.stdout is not None:
            crashing.stdout.close()

    async def after() -> float:
        store = await NatsQuotas.connect(quota_server.settings, 60.0)
        try:
            assert await store.usage(DEVICE, "survey") == (0, 10)
            with pytest.raises(QuotaExceeded, match="10 were taken"):
                await store.reserve(DEVICE, "survey", 1, 10)
            while await store.usage(DEVICE, "survey") != (0, 0):
                await asyncio.sleep(0.1)
            lapsed = time.monotonic() - reserved_at
            await store.confirm(await store.reserve(DEVICE, "survey", 10, 10))
            assert await store.usage(DEVICE, "survey") == (10, 0)
            return lapsed
        finally:
            await store.close()

    lapsed = run(after())
    assert 1.5 < lapsed < 6.0


def test_an_acknowledged_call_counts_for_good_even_after_its_lease_lapsed(quota_server: QuotaServer) -> None:
    async def scenario() -> None:
        store = await NatsQuotas.connect(quota_server.settings, 0.5)
        try:
            slow = await store.reserve(DEVICE, "survey", 4, 10)
            await asyncio.sleep(0.7)
            other = await store.reserve(DEVICE, "survey", 8, 10)  # the lapsed lease no longer counts
            await store.confirm(slow)
            assert await store.usage(DEVICE, "survey") == (4, 8)  # over the limit by the late call
            await store.release(other)
            assert await store.usage(DEVICE, "survey") == (4, 0)
        finally:
            await store.close()

    run(scenario())


def test_the_bucket_holds_json_counts_under_hashed_keys(quota_server: QuotaServer) -> None:
    async def scenario() -> dict[str, Any]:
        store = await NatsQuotas.connect(quota_server.settings, 60.0)
        try:
            await store.confirm(await store.reserve(DEVICE, "survey", 2, 10))
            held = await store.reserve(DEVICE, "survey", 3, 10)
            entry = await store._bucket.get(quota_key(DEVICE, "survey"))
            value = json.loads(entry.value or b"")
            assert list(value["leases"]) == [held.lease]
            return dict(value)
        finally:
            await store.close()

    value = run(scenario())
    assert value["format"] == "ldpsynth.shuffler-quota/1" and value["acknowledged"] == 2
    [(reports, expires)] = value["leases"].values()
    assert reports == 3 and 55 < expires - time.time() <= 60
    assert BUCKET == "LDPSYNTH_SHUFFLER_QUOTA"


def test_a_store_that_stops_answering_ends_calls_unavailable_until_it_is_back(quota_server: QuotaServer) -> None:
    async def scenario() -> float:
        store = await NatsQuotas.connect(QuotaNats(quota_server.settings.servers, token=QUOTA_TOKEN, timeout=1.0),
                                         60.0)
        try:
            held = await store.reserve(DEVICE, "survey", 1, 10)
            quota_server.stop()
            began = time.monotonic()
            with pytest.raises(TryLater, match="quota store did not answer; nothing was pooled"):
                await store.reserve(DEVICE, "survey", 1, 10)
            waited = time.monotonic() - began
            with pytest.raises(TryLater, match="resend the batch"):
                await store.confirm(held)
            await store.release(held)  # never raises: the lease lapses by itself
            quota_server.start()  # back, with its store: the client reconnects by itself
            while True:
                try:
                    await store.reserve(DEVICE, "survey", 1, 10)
                    break
                except TryLater:
                    await asyncio.sleep(0.2)
            assert await store.usage(DEVICE, "survey") == (0, 2)
            return waited
        finally:
            await store.close()

    assert run(scenario()) < 5.0


def test_a_store_that_cannot_be_used_at_start_is_a_config_error_naming_the_flag(
        quota_server: QuotaServer, tmp_path: Path) -> None:
    async def connect(settings: QuotaNats) -> None:
        store = await NatsQuotas.connect(settings, 60.0)
        await store.close()

    nothing = QuotaServer(tmp_path / "gone", token=None)
    nothing.stop()  # a port nobody listens on any more
    began = time.monotonic()
    with pytest.raises(ConfigError, match="--quota-nats: cannot connect to the quota store at nats://127.0.0.1"):
        run(connect(QuotaNats((nothing.url,), timeout=2.0)))
    assert time.monotonic() - began < 4.0
    with pytest.raises(ConfigError, match="(?i)--quota-nats: cannot connect.*authorization"):
        run(connect(QuotaNats(quota_server.settings.servers, token="wrong", timeout=2.0)))
    plain = QuotaServer(tmp_path / "no-jetstream", token=None, jetstream=False)
    try:
        with pytest.raises(ConfigError, match=r"--quota-nats: .*\(no JetStream: run its nats-server"):
            run(connect(QuotaNats((plain.url,), timeout=2.0)))
    finally:
        plain.stop()


def test_credentials_refused_by_a_reset_before_the_error_line_still_name_authorization() -> None:
    """A server that asks for credentials and resets the connection once they are sent (the reset can
    overtake nats-server's "-ERR 'Authorization Violation'" line) is reported as a refusal, not a bare reset."""
    import socket
    import struct

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.sendall(b'INFO {"server_id":"x","version":"2.10.0","auth_required":true,"max_payload":1048576}\r\n')
            conn.recv(4096)  # CONNECT (with the token) and PING
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()  # a reset, no -ERR line

    threading.Thread(target=serve, daemon=True).start()
    try:
        with pytest.raises(ConfigError, match=r"(?i)--quota-nats: cannot connect.*requires authorization"):
            run(NatsQuotas.connect(QuotaNats((f"nats://127.0.0.1:{port}",), token="wrong", timeout=2.0), 60.0))
    finally:
        listener.close()


def test_a_store_over_mutual_tls(tmp_path: Path, certs: Path) -> None:
    server = QuotaServer(tmp_path / "tls", token=None, tls_files=certs)

    async def connect(settings: QuotaNats) -> tuple[int, int]:
        store = await NatsQuotas.connect(settings, 60.0)
        try:
            await store.confirm(await store.reserve(DEVICE, "survey", 2, 10))
            return await store.usage(DEVICE, "survey")
        finally:
            await store.close()

    try:
        url = f"tls://127.0.0.1:{server.port}"
        assert run(connect(QuotaNats((url,), tls_ca=certs / "ca.pem", tls_cert=certs / "client.pem",
                                     tls_key=certs / "client.key"))) == (2, 0)
        with pytest.raises(ConfigError, match="--quota-nats: cannot connect"):  # no client certificate
            run(connect(QuotaNats((url,), tls_ca=certs / "ca.pem", timeout=2.0)))
    finally:
        server.stop()


@pytest.mark.parametrize("text", ["", "127.0.0.1:4222", "http://127.0.0.1:4222", "nats://127.0.0.1",
                                  "nats://127.0.0.1:99999", "nats://:4222", "nats://127.0.0.1:4222/x",
                                  "nats://h:1,ftp://h:2"])
def test_bad_urls_are_refused_naming_the_flag(text: str) -> None:
    with pytest.raises(ConfigError, match="^--quota-nats: "):
        parse_servers(text)


def test_a_url_with_a_password_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError) as refused:
        parse_servers("nats://user:s3cret@127.0.0.1:4222")
    assert "s3cret" not in str(refused.value) and "LDPSYNTH_QUOTA_NATS_TOKEN" in str(refused.value)
    assert parse_servers(" nats://a:4222, tls://[::1]:4223 ") == ("nats://a:4222", "tls://[::1]:4223")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ldpsynth.cli.shuffler_cmd", "serve", "--listen", "127.0.0.1:0",
                           "--aggregator", "127.0.0.1:1", "--threshold", "10", "--max-wait", "5", *args],
                          capture_output=True, text=True, timeout=60)


def test_the_cli_refuses_a_bad_or_unreachable_quota_store_naming_the_flag(tmp_path: Path) -> None:
    done = run_cli("--quota-nats", "http://127.0.0.1:4222")
    assert done.returncode == 2 and "--quota-nats: URLs of the form nats://HOST:PORT" in done.stderr
    done = run_cli("--quota-nats-tls-ca", str(tmp_path / "ca.pem"))
    assert done.returncode == 2 and "--quota-nats-tls-*" in done.stderr
    done = run_cli("--quota-nats", "nats://127.0.0.1:4222", "--quota-nats-replicas", "0")
    assert done.returncode == 2 and "--quota-nats-replicas" in done.stderr
    gone = QuotaServer(tmp_path / "gone", token=None)
    gone.stop()
    done = run_cli("--quota-nats", gone.url)
    assert done.returncode == 2 and f"--quota-nats: cannot connect to the quota store at {gone.url}" in done.stderr
    assert "Traceback" not in done.stderr
