"""The web port (``--web-port``) of a real replica on 127.0.0.1: the Connect protocol and gRPC-Web over
raw HTTP/1.1 requests (and one HTTP/2 connection), against the same ingest path as SubmitReports."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import struct
from collections.abc import Callable
from pathlib import Path

import grpc
import h2.config
import h2.connection
import h2.events
import numpy as np
import pytest

from ldpsynth.aggregator.runtime.config import ConfigError, TlsFiles
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

from ..conftest import GRAPH, RATINGS, RATINGS_CARD, ServerThread, base_config, batch, make_reports, stored_rows, submit
from .test_auth import write_tokens
from .test_ingest import BAD_BATCHES

StartServer = Callable[..., ServerThread]
SERVICE = "/ldpsynth.v1.CollectionService/"
PAGE = "http://127.0.0.1:8123"
HTTP_OF = {"INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "RESOURCE_EXHAUSTED": 429, "UNAUTHENTICATED": 401,
           "PERMISSION_DENIED": 403, "UNAVAILABLE": 503, "UNIMPLEMENTED": 501}
TOKENS = [{"id": "device", "token": "s3cret-device", "collections": ["ratings"], "roles": ["submit"]},
          {"id": "analyst", "token": "s3cret-analyst", "collections": "*", "roles": ["query"]},
          {"id": "graph-only", "token": "s3cret-graph", "collections": ["graph"], "roles": ["submit"]}]


def request(server: ServerThread, method: str, path: str, body: bytes = b"",
            headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 request to the server's web port: status, headers (lower-case names), body."""
    host, port = server.server.web_address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        conn.close()


def connect(server: ServerThread, name: str, message: bytes, codec: str = "proto",
            **headers: str) -> tuple[int, dict[str, str], bytes]:
    """A Connect unary call (``connect-protocol-version: 1``)."""
    sent = {"content-type": f"application/{codec}", "connect-protocol-version": "1",
            **{k.replace("_", "-"): v for k, v in headers.items()}}
    return request(server, "POST", SERVICE + name, message, sent)


def connect_error(answer: tuple[int, dict[str, str], bytes]) -> tuple[int, str, str]:
    """HTTP status, Connect code and message of an error answer."""
    status, headers, body = answer
    assert headers["content-type"] == "application/json", (status, body)
    error = json.loads(body)
    return status, error["code"], error["message"]


def envelope(message: bytes, flags: int = 0) -> bytes:
    return struct.pack(">BI", flags, len(message)) + message


def grpc_web(server: ServerThread, name: str, message: bytes, **headers: str) -> tuple[int, dict[str, str], bytes]:
    sent = {"content-type": "application/grpc-web+proto", "x-grpc-web": "1",
            **{k.replace("_", "-"): v for k, v in headers.items()}}
    return request(server, "POST", SERVICE + name, envelope(message), sent)


def frames(body: bytes) -> list[tuple[int, bytes]]:
    """The envelopes of a gRPC-Web answer body."""
    out = []
    while body:
        flags, length = struct.unpack(">BI", body[:5])
        out.append((flags, body[5:5 + length]))
        body = body[5 + length:]
    return out


@pytest.fixture
def web(start_server: StartServer) -> ServerThread:
    return start_server(shards=2, web_port=0, web_origins=(PAGE,))


def test_connect_unary_submit_is_acknowledged_stored_once_and_dedups_a_retry(web: ServerThread,
                                                                             rng: np.random.Generator) -> None:
    reports = make_reports(RATINGS, 300, rng)
    body = batch(reports, sequence=7).SerializeToString()
    status, headers, answer = connect(web, "SubmitBatch", body)
    assert status == 200 and headers["content-type"] == "application/proto"
    assert pb.BatchAck.FromString(answer) == pb.BatchAck(sequence=7, accepted=300, duplicates=0)
    assert stored_rows(web, "ratings") == 300
    # The same batch again (a retry after a lost answer): every report is a duplicate, nothing is stored twice.
    status, _, answer = connect(web, "SubmitBatch", body)
    assert status == 200 and pb.BatchAck.FromString(answer) == pb.BatchAck(sequence=7, accepted=0, duplicates=300)
    # Through the gRPC stream too: the same store.
    acks, code, _ = submit(pb_grpc.CollectionServiceStub(web.channel()), [batch(reports)])
    assert code == grpc.StatusCode.OK and acks[0].duplicates == 300
    stats = web.run(web.server.statistics("ratings"))
    dense = np.zeros((RATINGS.public_domain_size, RATINGS.private_domain_size), np.int64)
    np.add.at(dense, (reports.public_keys(RATINGS), reports.private_codes), 1)
    assert np.array_equal(stats.dense(), dense) and stored_rows(web, "ratings") == 300


def test_grpc_web_submit_and_get_collection(web: ServerThread, rng: np.random.Generator) -> None:
    status, headers, answer = grpc_web(web, "SubmitBatch", batch(make_reports(RATINGS, 40, rng), sequence=3)
                                       .SerializeToString())
    assert status == 200 and headers["content-type"] == "application/grpc-web+proto"
    (flags, message), (trailer_flags, trailer) = frames(answer)
    assert flags == 0 and pb.BatchAck.FromString(message) == pb.BatchAck(sequence=3, accepted=40)
    assert trailer_flags == 0x80 and trailer == b"grpc-status: 0\r\n"
    status, _, answer = grpc_web(web, "GetCollection", pb.GetCollectionRequest(collection="ratings")
                                 .SerializeToString())
    assert pb.Collection.FromString(frames(answer)[0][1]).card_json == RATINGS_CARD.dumps()
    # An error is trailers-only: the status in the headers, no body.
    status, headers, answer = grpc_web(web, "SubmitBatch", b"\xff\xff")
    assert (status, headers["grpc-status"], answer) == (200, str(grpc.StatusCode.INVALID_ARGUMENT.value[0]), b"")
    assert "not a valid ldpsynth.v1.ReportBatch" in headers["grpc-message"]
    assert stored_rows(web, "ratings") == 40


def test_json_codec(web: ServerThread, rng: np.random.Generator) -> None:
    status, headers, answer = connect(web, "GetCollection", b'{"collection": "graph"}', codec="json")
    assert status == 200 and headers["content-type"] == "application/json"
    assert json.loads(answer)["name"] == "graph"
    from google.protobuf import json_format
    text = json_format.MessageToJson(batch(make_reports(RATINGS, 5, rng), sequence=2))
    status, _, answer = connect(web, "SubmitBatch", text.encode(), codec="json")
    assert status == 200 and json.loads(answer) == {"sequence": "2", "accepted": 5}
    assert connect_error(connect(web, "SubmitBatch", b'{"collection": 5', codec="json"))[:2] == (
        400, "invalid_argument")


@pytest.mark.parametrize("case", sorted(BAD_BATCHES))
def test_every_bad_batch_has_the_streams_status_and_stores_nothing(web: ServerThread, rng: np.random.Generator,
                                                                   case: str) -> None:
    make, code, fragment = BAD_BATCHES[case]
    reports = Reports(make_reports(RATINGS, 3, rng).report_ids, np.array([0, 4, 1]), np.array([[0], [1], [2]]))
    status, name, message = connect_error(connect(web, "SubmitBatch", make(reports).SerializeToString()))
    assert (status, name) == (HTTP_OF[code.name], code.name.lower()) and fragment in message
    headers = grpc_web(web, "SubmitBatch", make(reports).SerializeToString())[1]
    assert headers["grpc-status"] == str(code.value[0])
    # The same batch in a stream: the same status and words.
    _, stream_code, details = submit(pb_grpc.CollectionServiceStub(web.channel()), [make(reports)])
    assert stream_code == code and details == message
    assert stored_rows(web, "ratings") == 0


@pytest.mark.parametrize("headers, body, status, code, fragment", [
    ({}, b"\xff\xff\xff", 400, "invalid_argument", "not a valid ldpsynth.v1.ReportBatch"),
    ({"connect_protocol_version": "2"}, b"", 400, "invalid_argument", "connect-protocol-version"),
    ({"content_encoding": "gzip"}, b"", 501, "unimplemented", "content-encoding: identity only"),
    ({"connect_timeout_ms": "soon"}, b"", 400, "invalid_argument", "connect-timeout-ms"),
    ({"connect_timeout_ms": "0"}, b"", 504, "deadline_exceeded", "deadline passed; the batch was not acknowledged"),
    ({}, bytes(5000), 429, "resource_exhausted", "max_message_bytes = 4096"),
])
def test_bad_requests(start_server: StartServer, headers: dict[str, str], body: bytes, status: int, code: str,
                      fragment: str) -> None:
    from ldpsynth.shared.protocol import Limits
    server = start_server(shards=1, web_port=0, limits=Limits(max_message_bytes=4096))
    answer = connect_error(connect(server, "SubmitBatch", body, **headers))
    assert answer[:2] == (status, code) and fragment in answer[2], answer
    assert stored_rows(server, "ratings") == 0


def test_what_is_not_a_call_of_this_port(web: ServerThread, rng: np.random.Generator) -> None:
    body = batch(make_reports(RATINGS, 2, rng)).SerializeToString()
    assert request(web, "POST", SERVICE + "SubmitBatch", body, {"content-type": "text/plain"})[0] == 415
    assert request(web, "GET", SERVICE + "SubmitBatch")[0] == 405
    assert request(web, "POST", SERVICE + "Nope", body, {"content-type": "application/proto"})[0] == 404
    assert request(web, "POST", "/ldpsynth.v1.QueryService/Estimate", body, {"content-type": "application/proto"}
                   )[0] == 404
    assert connect_error(connect(web, "SubmitReports", body))[:2] == (501, "unimplemented")
    headers = grpc_web(web, "SubmitBatch", body, grpc_encoding="gzip")[1]
    assert headers["grpc-status"] == str(grpc.StatusCode.UNIMPLEMENTED.value[0])
    broken = request(web, "POST", SERVICE + "SubmitBatch", envelope(body)[:-1],
                     {"content-type": "application/grpc-web+proto"})[1]
    assert broken["grpc-status"] == str(grpc.StatusCode.INVALID_ARGUMENT.value[0])
    assert stored_rows(web, "ratings") == 0


def test_cors_preflight_and_calls_per_origin(web: ServerThread, rng: np.random.Generator) -> None:
    asked = {"origin": PAGE, "access-control-request-method": "POST",
             "access-control-request-headers": "content-type,connect-protocol-version,authorization"}
    status, headers, _ = request(web, "OPTIONS", SERVICE + "SubmitBatch", headers=asked)
    assert status == 204 and headers["access-control-allow-origin"] == PAGE
    assert {"content-type", "connect-protocol-version", "authorization"} <= {
        h.strip() for h in headers["access-control-allow-headers"].split(",")}
    assert "POST" in headers["access-control-allow-methods"] and headers["vary"] == "Origin"
    refused = {**asked, "origin": "http://evil.example"}
    status, headers, _ = request(web, "OPTIONS", SERVICE + "SubmitBatch", headers=refused)
    assert status == 403 and "access-control-allow-origin" not in headers
    body = batch(make_reports(RATINGS, 4, rng)).SerializeToString()
    status, headers, _ = connect(web, "SubmitBatch", body, origin="http://evil.example")
    assert status == 403 and "access-control-allow-origin" not in headers
    assert stored_rows(web, "ratings") == 0  # the refused origin's call never ran
    status, headers, _ = connect(web, "SubmitBatch", body, origin=PAGE)
    assert status == 200 and headers["access-control-allow-origin"] == PAGE
    assert "grpc-status" in headers["access-control-expose-headers"]
    assert stored_rows(web, "ratings") == 4


def test_no_origin_is_allowed_by_default(start_server: StartServer) -> None:
    server = start_server(shards=1, web_port=0)
    asked = {"origin": PAGE, "access-control-request-method": "POST"}
    assert request(server, "OPTIONS", SERVICE + "SubmitBatch", headers=asked)[0] == 403


def test_tokens_roles_collections_and_quota(start_server: StartServer, tmp_path: Path,
                                            rng: np.random.Generator) -> None:
    from ldpsynth.shared.protocol import Limits
    server = start_server(shards=1, web_port=0, tokens_file=write_tokens(tmp_path, TOKENS),
                          limits=Limits(max_rows_per_client=10))
    body = batch(make_reports(RATINGS, 4, rng)).SerializeToString()
    cases = [({}, 401, "unauthenticated"), ({"authorization": "Bearer wrong"}, 401, "unauthenticated"),
             ({"authorization": "Basic s3cret-device"}, 401, "unauthenticated"),
             ({"authorization": "Bearer s3cret-analyst"}, 403, "permission_denied"),
             ({"authorization": "Bearer s3cret-graph"}, 403, "permission_denied")]
    for headers, status, code in cases:
        assert connect_error(connect(server, "SubmitBatch", body, **headers))[:2] == (status, code), headers
    device = {"authorization": "Bearer s3cret-device"}
    assert connect(server, "SubmitBatch", body, **device)[0] == 200
    get = pb.GetCollectionRequest(collection="ratings").SerializeToString()
    assert connect(server, "GetCollection", get, authorization="Bearer s3cret-analyst")[0] == 200
    more = batch(make_reports(RATINGS, 7, rng)).SerializeToString()
    status, code, message = connect_error(connect(server, "SubmitBatch", more, **device))
    assert (status, code) == (429, "resource_exhausted") and "max_rows_per_client" in message
    assert stored_rows(server, "ratings") == 4
    graph = batch(make_reports(GRAPH, 3, rng), GRAPH).SerializeToString()
    assert connect(server, "SubmitBatch", graph, authorization="Bearer s3cret-graph")[0] == 200


def test_http2_prior_knowledge(web: ServerThread, rng: np.random.Generator) -> None:
    host, port = web.server.web_address.rsplit(":", 1)
    body = batch(make_reports(RATINGS, 9, rng), sequence=1).SerializeToString()
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        conn.initiate_connection()
        conn.send_headers(1, [(":method", "POST"), (":path", SERVICE + "SubmitBatch"), (":scheme", "http"),
                              (":authority", web.server.web_address), ("content-type", "application/proto"),
                              ("connect-protocol-version", "1"), ("content-length", str(len(body)))])
        conn.send_data(1, body, end_stream=True)
        sock.sendall(conn.data_to_send())
        status, data, ended = None, b"", False
        while not ended:
            for event in conn.receive_data(sock.recv(65536)):
                if isinstance(event, h2.events.ResponseReceived):
                    status = dict(event.headers)[b":status"]
                elif isinstance(event, h2.events.DataReceived):
                    data += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    ended = True
            sock.sendall(conn.data_to_send())
    assert status == b"200" and pb.BatchAck.FromString(data) == pb.BatchAck(sequence=1, accepted=9)


def test_grpc_submit_batch_is_the_same_call(web: ServerThread, rng: np.random.Generator) -> None:
    stub = pb_grpc.CollectionServiceStub(web.channel())
    reports = make_reports(RATINGS, 12, rng)
    assert stub.SubmitBatch(batch(reports, sequence=5)) == pb.BatchAck(sequence=5, accepted=12)
    assert stub.SubmitBatch(batch(reports, sequence=5)) == pb.BatchAck(sequence=5, duplicates=12)
    with pytest.raises(grpc.RpcError) as info:
        stub.SubmitBatch(pb.ReportBatch(collection="nope"))
    assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_health_and_graceful_stop_close_the_port(start_server: StartServer) -> None:
    server = start_server(shards=1, web_port=0)
    assert request(server, "GET", "/healthz")[:3] == (200, request(server, "GET", "/healthz")[1], b"SERVING\n")
    host, port = server.server.web_address.rsplit(":", 1)
    server.stop(1.0)
    with pytest.raises(OSError):
        socket.create_connection((host, int(port)), timeout=5).close()


def test_web_port_is_off_by_default(start_server: StartServer) -> None:
    assert start_server(shards=1).server.web_address == ""


@pytest.mark.parametrize("changes, fragment", [
    ({"web_origins": ("https://a.example",)}, "--web-origins: only with --web-port"),
    ({"web_port": 0, "web_origins": ("https://a.example/path",)}, "is not an origin"),
    ({"web_port": 0, "web_origins": ("null",)}, "is not an origin"),
    ({"web_port": 70000}, "--web-port"),
    ({"web_port": 0, "tls": TlsFiles(Path("c.pem"), Path("k.pem"), Path("ca.pem"))}, "give --tokens"),
])
def test_web_flags_are_checked(tmp_path: Path, changes: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment.replace("*", r"\*")):
        base_config(tmp_path, **changes)


def test_a_taken_web_port_is_a_config_error(start_server: StartServer) -> None:
    first = start_server(shards=1, web_port=0)
    taken = int(first.server.web_address.rsplit(":", 1)[1])
    with pytest.raises(ConfigError, match="--web-port: cannot listen"):
        start_server(shards=1, web_port=taken)


def test_the_web_port_serves_tls_with_the_replicas_certificate_http1_and_h2(start_server: StartServer, certs: Path,
                                                                            rng: np.random.Generator) -> None:
    server = start_server(shards=1, web_port=0, tls=TlsFiles(certs / "server.pem", certs / "server.key"))
    host, port = server.server.web_address.rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    body = batch(make_reports(RATINGS, 6, rng)).SerializeToString()
    conn = http.client.HTTPSConnection(host, int(port), context=context, timeout=60)
    try:
        conn.request("POST", SERVICE + "SubmitBatch", body=body,
                     headers={"content-type": "application/proto", "connect-protocol-version": "1"})
        answer = conn.getresponse()
        assert answer.status == 200 and pb.BatchAck.FromString(answer.read()).accepted == 6
    finally:
        conn.close()
    context.set_alpn_protocols(["h2", "http/1.1"])
    with socket.create_connection((host, int(port)), timeout=30) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        assert tls.selected_alpn_protocol() == "h2"
    # Plain HTTP to the TLS port gets no answer of the service.
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        request(server, "GET", "/healthz")
    assert stored_rows(server, "ratings") == 6
