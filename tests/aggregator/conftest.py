"""Fixtures for the aggregator tests: one local Ray cluster per session, servers on port 0.

``ray.init`` takes seconds, so the session starts one local, loopback-only cluster (through the
aggregator's own Ray seam); in-process servers use it directly and subprocess servers join it
with ``--ray-address``. It is shut down at the end of the session by this process, which started
it. Every server runs its embedded NATS log (127.0.0.1) in its data directory.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import grpc
import numpy as np
import pytest
import ray

from ldpsynth.aggregator.ingress.server import AggregatorServer
from ldpsynth.aggregator.runtime.config import ServerConfig
from ldpsynth.aggregator.runtime.ray_cluster import RayRuntime
from ldpsynth.aggregator.runtime.verify import Verification, verify_data_dir, verify_log
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.protocol import reports_to_proto
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from ldpsynth.simulation.local_cluster import ServerProcess

T = TypeVar("T")
START_TIMEOUT = 120.0

RATINGS = Schema.from_json({
    "name": "ratings", "epsilon": 1.0,
    "attributes": [{"name": "movie", "type": "integer", "min": 0, "max": 99, "public": True},
                   {"name": "rating", "type": "integer", "min": 1, "max": 5}]})
GRAPH = Schema.from_json({
    "name": "graph", "epsilon": 1.0,
    "attributes": [{"name": "i", "type": "integer", "min": 0, "max": 2047, "public": True},
                   {"name": "j", "type": "integer", "min": 0, "max": 2047, "public": True},
                   {"name": "edge", "type": "binary"}]})
RATINGS_CARD = MechanismCard.for_schema(RATINGS)
GRAPH_CARD = MechanismCard.for_schema(GRAPH)
VERSION = RATINGS_CARD.version


def make_reports(schema: Schema, n: int, rng: np.random.Generator) -> Reports:
    """``n`` valid reports with fresh ids and uniform codes."""
    public = np.column_stack([rng.integers(0, a.size, n) for a in schema.public_attributes]) \
        if schema.public_attributes else np.zeros((n, 0), np.int64)
    return Reports(new_report_ids(n), rng.integers(0, schema.private_domain_size, n), public)


def batch(reports: Reports, schema: Schema = RATINGS, sequence: int = 0) -> pb.ReportBatch:
    return reports_to_proto(reports, schema.name, VERSION, sequence)


def submit(stub: pb_grpc.CollectionServiceStub, batches: Iterable[pb.ReportBatch],
           metadata: Sequence[tuple[str, str]] | None = None, timeout: float = 60.0
           ) -> tuple[list[pb.BatchAck], grpc.StatusCode, str]:
    """Stream ``batches``; return the acks received and the final status."""
    acks: list[pb.BatchAck] = []
    try:
        for ack in stub.SubmitReports(iter(list(batches)), metadata=metadata, timeout=timeout):
            acks.append(ack)
    except grpc.RpcError as exc:
        return acks, exc.code(), exc.details() or ""
    return acks, grpc.StatusCode.OK, ""


def stored_rows(server: ServerThread, collection: str) -> int:
    """Reports of ``collection`` the running server's shard workers hold."""
    return server.run(server.server.stored(collection))


def verify(data_dir: Path, keep_rows: bool = False) -> Verification:
    """Every record of a stopped server's log checked (rows per collection, problems)."""
    return asyncio.run(verify_data_dir(str(data_dir), keep_rows))


def verify_running(server: ServerThread, keep_rows: bool = False) -> Verification:
    """Every record of a running server's log checked, through a connection of its own."""
    backend = server.server.backend

    async def check() -> Verification:
        replicated = await ReplicatedLog.connect(backend.log.settings, name="test-verify")
        try:
            return await verify_log(replicated, backend.layout.id, keep_rows)
        finally:
            await replicated.close()

    return server.run(check())


def stored_ids(server: ServerThread, collection: str) -> set[bytes]:
    """The report ids of ``collection`` a running server holds (its export, one snapshot)."""
    rows = server.run(server.server._queries.engine.export_rows(collection))
    return set(map(bytes, rows.report_ids))


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """The session's local Ray cluster: started here (loopback only) and shut down here, unless
    another part of the session already runs one (then it is used, and left to its owner)."""
    runtime = RayRuntime.connect(None, num_cpus=2)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        if runtime.started_here:
            runtime.shutdown()


def base_config(data_dir: Path, **changes: Any) -> ServerConfig:
    config = ServerConfig(data_dir=data_dir, collections=(RATINGS_CARD, GRAPH_CARD), shards=2, grace_seconds=2.0)
    return replace(config, **changes)


class ServerThread:
    """An :class:`AggregatorServer` on its own event loop in a background thread (``clock``: the
    server's clock, seconds since the epoch; default the real one)."""

    def __init__(self, config: ServerConfig, clock: Callable[[], float] | None = None):
        self.config = config
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.server = self.run(self._create(clock))
        self.address = self.run(self.server.start(), timeout=START_TIMEOUT)

    async def _create(self, clock: Callable[[], float] | None) -> AggregatorServer:
        return AggregatorServer(self.config) if clock is None else AggregatorServer(self.config, clock)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self, grace: float | None = None) -> None:
        if self.loop.is_running():
            try:
                self.run(self.server.stop(grace), timeout=120)
            finally:
                self.loop.call_soon_threadsafe(self.loop.stop)
                self._thread.join(10)
                if not self._thread.is_alive():
                    self.loop.close()

    def channel(self) -> grpc.Channel:
        return grpc.insecure_channel(self.address)


@pytest.fixture
def start_server(ray_address: str, tmp_path: Path) -> Iterator[Callable[..., ServerThread]]:
    """Factory of in-process servers (stopped at the end of the test)."""
    servers: list[ServerThread] = []

    def start(clock: Callable[[], float] | None = None, **changes: Any) -> ServerThread:
        changes.setdefault("data_dir", tmp_path / f"data{len(servers)}")
        server = ServerThread(base_config(**changes), clock)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop(0)


@pytest.fixture
def start_process(ray_address: str, tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Factory of subprocess servers joined to the session's Ray cluster (killed if left running)."""
    procs: list[ServerProcess] = []

    def start(*args: str) -> ServerProcess:
        proc = ServerProcess.aggregator([*args, "--ray-address", ray_address], tmp_path / f"server{len(procs)}.log")
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.kill()  # if still running; closes its log either way


@pytest.fixture
def collection_files(tmp_path: Path) -> list[Path]:
    """The test collections as files (ratings as a schema, graph as a full card)."""
    ratings = tmp_path / "ratings.json"
    ratings.write_text(RATINGS.dumps())
    graph = tmp_path / "graph.json"
    GRAPH_CARD.save(graph)
    return [ratings, graph]


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261122)


def run_openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a server certificate for localhost/127.0.0.1 and a client certificate (CN=device-cert)."""
    d = tmp_path_factory.mktemp("certs")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run_openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test-ca",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign", cwd=d)
    (d / "server.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, cn in (("server", "localhost"), ("client", "device-cert")):
        run_openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}", cwd=d)
        run_openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                    "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
    return d
