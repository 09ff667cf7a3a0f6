"""Fixtures for the aggregator tests: one local Ray cluster per session, servers on port 0.

``ray.init`` takes seconds (design.md §7), so the session starts one local cluster; in-process
servers use it directly and subprocess servers join it with ``--ray-address``. It is shut down
at the end of the session by this process, which started it.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

import grpc
import numpy as np
import pytest
import ray

from ldpsynth.aggregator.config import ServerConfig
from ldpsynth.aggregator.datadir import read_layout
from ldpsynth.aggregator.server import AggregatorServer
from ldpsynth.aggregator.store import ShardReader
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.protocol import reports_to_proto
from ldpsynth.shared.reports import Reports, new_report_ids
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

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


def stored_rows(data_dir: Path, collection: str) -> int:
    """Rows of ``collection`` in the data directory, counted in SQLite."""
    total = 0
    for path in read_layout(data_dir):
        if path.exists():
            with ShardReader(path) as reader:
                if collection in reader.collections():
                    total += reader.row_count(collection)
    return total


def verify_data_dir(data_dir: Path) -> list[str]:
    problems = []
    for path in read_layout(data_dir):
        with ShardReader(path) as reader:
            problems += reader.verify()
    return problems


@pytest.fixture(scope="session")
def ray_address() -> Iterator[str]:
    """The session's local Ray cluster: started here and shut down here, unless another part of
    the session already runs one (then it is used, and left to its owner)."""
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        if started:
            ray.shutdown()


def base_config(data_dir: Path, **changes: Any) -> ServerConfig:
    config = ServerConfig(data_dir=data_dir, collections=(RATINGS_CARD, GRAPH_CARD), shards=2, grace_seconds=2.0)
    return replace(config, **changes)


class ServerThread:
    """An :class:`AggregatorServer` on its own event loop in a background thread."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.server = self.run(self._create())
        self.address = self.run(self.server.start(), timeout=START_TIMEOUT)

    async def _create(self) -> AggregatorServer:
        return AggregatorServer(self.config)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def stop(self, grace: float | None = None) -> None:
        if self.loop.is_running():
            try:
                self.run(self.server.stop(grace), timeout=120)
            finally:
                self.loop.call_soon_threadsafe(self.loop.stop)
                self._thread.join(10)

    def channel(self) -> grpc.Channel:
        return grpc.insecure_channel(self.address)


@pytest.fixture
def start_server(ray_address: str, tmp_path: Path) -> Iterator[Callable[..., ServerThread]]:
    """Factory of in-process servers (stopped at the end of the test)."""
    servers: list[ServerThread] = []

    def start(**changes: Any) -> ServerThread:
        changes.setdefault("data_dir", tmp_path / f"data{len(servers)}")
        server = ServerThread(base_config(**changes))
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop(0)


class ServerProcess:
    """``python -m ldpsynth.cli.aggregator_cmd serve ...`` with stdout and stderr captured."""

    def __init__(self, args: Sequence[str], log_path: Path):
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "ldpsynth.cli.aggregator_cmd", "serve", *args],
                                     stdout=subprocess.PIPE, stderr=self._log)
        self._lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.stdout: list[str] = []
        self.address = self._wait_listening()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(b"")

    def _wait_listening(self) -> str:
        while True:
            try:
                line = self._lines.get(timeout=START_TIMEOUT).decode()
            except queue.Empty:
                self.kill()
                raise AssertionError(f"no listening line; log:\n{self.log()}") from None
            if not line:
                raise AssertionError(f"server exited ({self.proc.wait()}); log:\n{self.log()}")
            self.stdout.append(line)
            event = json.loads(line)
            if event.get("event") == "listening":
                return event["address"]

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def terminate(self, timeout: float = 60.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.wait(timeout)

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.wait(30)

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self._log.close()
        return code


@pytest.fixture
def start_process(ray_address: str, tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    """Factory of subprocess servers joined to the session's Ray cluster (killed if left running)."""
    procs: list[ServerProcess] = []

    def start(*args: str) -> ServerProcess:
        proc = ServerProcess([*args, "--ray-address", ray_address], tmp_path / f"server{len(procs)}.log")
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.proc.poll() is None:
            proc.kill()


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
