"""``--otlp-endpoint``: one trace from the device's call through the replica's commit, the Ray call, the
shard worker's group commit and its log append, received by an OTLP/HTTP collector on 127.0.0.1."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc
from ldpsynth.simulation.local_cluster import ServerProcess

from ..conftest import RATINGS, batch, make_reports, submit

StartProcess = Callable[..., ServerProcess]
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"


class Collector:
    """An OTLP/HTTP trace receiver: every span it is sent, with its service's name."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, Any]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                for resource in request.resource_spans:
                    service = next(a.value.string_value for a in resource.resource.attributes
                                   if a.key == "service.name")
                    collector.spans += [(service, span) for scope in resource.scope_spans for span in scope.spans]
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"

    def named(self, name: str) -> list[tuple[str, Any]]:
        return [(service, span) for service, span in self.spans if span.name == name]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector() -> Iterator[Collector]:
    running = Collector()
    yield running
    running.stop()


def test_a_call_is_linked_to_its_commit_and_its_log_append(start_process: StartProcess, collector: Collector,
                                                            collection_files: list[Path], tmp_path: Path) -> None:
    args = ["--data-dir", str(tmp_path / "data"), "--port", "0", "--shards", "2", "--otlp-endpoint",
            collector.endpoint]
    for path in collection_files:
        args += ["--collection", str(path)]
    proc = start_process(*args)
    stub = pb_grpc.CollectionServiceStub(grpc.insecure_channel(proc.address))
    reports = make_reports(RATINGS, 300, np.random.default_rng(5))
    acks, code, _ = submit(stub, [batch(reports)], metadata=[("traceparent", f"00-{TRACE_ID}-{PARENT_ID}-01")])
    assert code == grpc.StatusCode.OK and acks[0].accepted == 300
    deadline = time.monotonic() + 30
    while len(collector.named("ldpsynth.log.append")) < 2:  # the workers export every second
        assert time.monotonic() < deadline, sorted({s.name for _, s in collector.spans})
        time.sleep(0.2)
    assert proc.terminate() == 0  # the replica sends its spans as it stops

    ours = [(service, span) for service, span in collector.spans if span.trace_id.hex() == TRACE_ID]
    by_id = {span.span_id: (service, span) for service, span in ours}

    def parent(span: Any) -> tuple[str, Any]:
        return by_id[span.parent_span_id]

    [(service, call)] = [(s, span) for s, span in ours if span.name == "ldpsynth.v1.CollectionService/SubmitReports"]
    assert service == "ldpsynth-replica" and call.parent_span_id.hex() == PARENT_ID  # the device's trace goes on
    attributes = {a.key: a.value.string_value for a in call.attributes}
    assert attributes["rpc.method"] == "SubmitReports" and attributes["rpc.grpc.status_code"] == "OK"
    [(_, commit)] = [(s, span) for s, span in ours if span.name == "ldpsynth.ingest.commit"]
    assert parent(commit)[1] is call
    appends = [span for s, span in ours if span.name == "ldpsynth.log.append"]
    assert len(appends) == 2  # one record per shard (the batch's two parts)
    for append in appends:
        chain = [append]
        while chain[-1].parent_span_id and chain[-1].parent_span_id in by_id:
            chain.append(parent(chain[-1])[1])
        assert [span.name for span in chain] == ["ldpsynth.log.append", "ldpsynth.shard.group_commit",
                                                 "ldpsynth.shard.commit_call", "ldpsynth.ingest.commit",
                                                 "ldpsynth.v1.CollectionService/SubmitReports"]
        assert [by_id[span.span_id][0] for span in chain] == ["ldpsynth-shard-worker"] * 2 + ["ldpsynth-replica"] * 3
    reported = sum(a.value.int_value for span in appends for a in span.attributes if a.key == "ldpsynth.reports")
    assert reported == 300
    text = " ".join(str(span) for _, span in collector.spans)
    assert "127.0.0.1" not in text and "ipv4" not in text
    assert not any(bytes(i).hex() in text for i in reports.report_ids[:20])
