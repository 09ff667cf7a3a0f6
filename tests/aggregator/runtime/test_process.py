"""The ``aggregator serve`` process: listening line, SIGKILL/SIGTERM, TLS, mutual TLS, tokens."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ldpsynth.cli.aggregator_cmd import main as aggregator_main
from ldpsynth.shared.wire import collection_pb2 as pb
from ldpsynth.shared.wire import collection_pb2_grpc as pb_grpc

from ..conftest import GRAPH, RATINGS, ServerProcess, ServerThread, batch, make_reports, submit, verify
from ..ingress.test_server import counts_of

StartProcess = Callable[..., ServerProcess]
StartServer = Callable[..., ServerThread]
DEVICE_TOKEN = "tok-device-1-0123456789abcdef"
ANALYST_TOKEN = "tok-analyst-fedcba9876543210"


def serve_args(data_dir: Path, files: list[Path], *extra: str) -> list[str]:
    args = ["--data-dir", str(data_dir), "--port", "0", "--shards", "2"]
    for f in files:
        args += ["--collection", str(f)]
    return [*args, *extra]


def test_listening_line_sigkill_restart_recovers(start_process: StartProcess, start_server: StartServer,
                                                 collection_files: list[Path], tmp_path: Path,
                                                 rng: np.random.Generator) -> None:
    data = tmp_path / "data"
    args = serve_args(data, collection_files, "--max-rows-per-client", "10000")
    first = start_process(*args)
    host, port = first.address.rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0
    assert json.loads(first.stdout[-1]) == {"event": "listening", "address": first.address}
    stub = pb_grpc.CollectionServiceStub(grpc.insecure_channel(first.address))
    sent = [make_reports(RATINGS, 1500, rng) for _ in range(6)]
    acks, code, _ = submit(stub, [batch(r, sequence=i) for i, r in enumerate(sent)])
    assert code == grpc.StatusCode.OK and sum(a.accepted for a in acks) == 9000
    first.kill()  # SIGKILL: no chance to flush or close anything

    second = start_process(*args)
    stub = pb_grpc.CollectionServiceStub(grpc.insecure_channel(second.address))
    acks, code, _ = submit(stub, [batch(r) for r in sent])
    assert code == grpc.StatusCode.OK
    assert [a.duplicates for a in acks] == [1500] * 6  # everything acknowledged survived
    # The quota counters survived too: 1000 more fit, 1001 do not.
    assert submit(stub, [batch(make_reports(RATINGS, 1001, rng))])[1] == grpc.StatusCode.RESOURCE_EXHAUSTED
    more = make_reports(RATINGS, 1000, rng)
    assert submit(stub, [batch(more)])[0][0].accepted == 1000
    assert second.terminate() == 0
    assert "stopped" in second.log()
    verification = verify(data)
    assert verification.ok and verification.rows == {"ratings": 10000}

    # Yet another server on the directory rebuilds the counts of exactly what was acknowledged.
    third = start_server(data_dir=data)
    stats = third.run(third.server.statistics("ratings"))
    assert np.array_equal(stats.dense(), counts_of([*sent, more]))


def test_sigterm_is_graceful(start_process: StartProcess, collection_files: list[Path], tmp_path: Path) -> None:
    proc = start_process(*serve_args(tmp_path / "data", collection_files, "--reflection", "--grace", "1"))
    health = health_pb2_grpc.HealthStub(grpc.insecure_channel(proc.address))
    assert health.Check(health_pb2.HealthCheckRequest()).status == health_pb2.HealthCheckResponse.SERVING
    watch = health.Watch(health_pb2.HealthCheckRequest())
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
    proc.proc.send_signal(15)
    assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
    assert proc.wait(60) == 0


def test_config_errors_exit_2(start_process: StartProcess, collection_files: list[Path], tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    running = start_process(*serve_args(data, collection_files))
    # The data directory is locked by the running server.
    assert aggregator_main(["serve", *serve_args(data, collection_files)]) == 2
    assert "in use by another aggregator" in capsys.readouterr().err
    assert running.terminate() == 0
    # It holds 2 shards: serving it with 3 would misroute retried reports.
    assert aggregator_main(["serve", *serve_args(data, collection_files), "--shards", "3"]) == 2
    assert "holds 2 shards" in capsys.readouterr().err
    assert aggregator_main(["serve", "--data-dir", str(data), "--port", "0",
                            "--collection", str(tmp_path / "nope.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert aggregator_main(["serve", *serve_args(data, collection_files, "--tls-cert", "x.pem")]) == 2
    assert "--tls-key" in capsys.readouterr().err


def tls_channel(address: str, certs: Path, client_cert: bool = False) -> grpc.Channel:
    key = (certs / "client.key").read_bytes() if client_cert else None
    chain = (certs / "client.pem").read_bytes() if client_cert else None
    credentials = grpc.ssl_channel_credentials((certs / "ca.pem").read_bytes(), key, chain)
    return grpc.secure_channel(address, credentials)


def status_of(call: Callable[[], object]) -> grpc.StatusCode:
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


def test_auth_matrix_over_tls(start_process: StartProcess, collection_files: list[Path], tmp_path: Path,
                              certs: Path, rng: np.random.Generator) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"clients": [
        {"id": "device-1", "token": DEVICE_TOKEN, "collections": ["ratings"], "roles": ["submit"]},
        {"id": "analyst", "token": ANALYST_TOKEN, "collections": "*", "roles": ["query"]},
    ]}))
    tokens.chmod(0o600)  # bearer secrets: a file others may read is refused
    data = tmp_path / "data"
    proc = start_process(*serve_args(data, collection_files, "--tls-cert", str(certs / "server.pem"),
                                     "--tls-key", str(certs / "server.key"), "--tokens", str(tokens)))
    stub = pb_grpc.CollectionServiceStub(tls_channel(proc.address, certs))
    device = [("authorization", f"Bearer {DEVICE_TOKEN}")]
    analyst = [("authorization", f"Bearer {ANALYST_TOKEN}")]
    ratings = batch(make_reports(RATINGS, 50, rng))
    get = pb.GetCollectionRequest(collection="ratings")

    assert submit(stub, [ratings])[1] == grpc.StatusCode.UNAUTHENTICATED
    assert submit(stub, [ratings], [("authorization", "Bearer not-a-token")])[1] == grpc.StatusCode.UNAUTHENTICATED
    assert status_of(lambda: stub.GetCollection(get)) == grpc.StatusCode.UNAUTHENTICATED
    assert submit(stub, [ratings], analyst)[1] == grpc.StatusCode.PERMISSION_DENIED  # no submit role
    assert status_of(lambda: stub.GetCollection(get, metadata=analyst)) == grpc.StatusCode.OK
    graph = batch(make_reports(GRAPH, 5, rng), GRAPH)
    assert submit(stub, [graph], device)[1] == grpc.StatusCode.PERMISSION_DENIED  # not its collection
    acks, code, _ = submit(stub, [ratings], device)
    assert code == grpc.StatusCode.OK and acks[0].accepted == 50
    # Plaintext to a TLS port never gets an answer.
    plain = pb_grpc.CollectionServiceStub(grpc.insecure_channel(proc.address))
    assert status_of(lambda: plain.GetCollection(get, metadata=device, timeout=5)) == grpc.StatusCode.UNAVAILABLE
    assert proc.terminate() == 0

    # Quotas count the credential id; nothing stores or logs a token (the log, snapshots, anything).
    assert verify(data).quota == {("ratings", "device-1"): 50}
    for path in data.rglob("*"):
        if path.is_file():
            content = path.read_bytes()
            assert DEVICE_TOKEN.encode() not in content and ANALYST_TOKEN.encode() not in content, path
    log = proc.log() + "".join(proc.stdout)
    assert DEVICE_TOKEN not in log and ANALYST_TOKEN not in log
    assert "serving" in log


@pytest.mark.parametrize("cert, key, client_ca, flag, problem", [
    ("garbage.pem", "server.key", None, "--tls-cert", "no PEM certificate"),
    ("server.pem", "garbage.pem", None, "--tls-key", "not an unencrypted PEM private key"),
    ("server.pem", "client.key", None, "--tls-key", "not the private key of the certificate"),
    ("server.pem", "server.key", "garbage.pem", "--tls-client-ca", "no PEM certificate"),
], ids=["garbage-cert", "garbage-key", "key-of-another-cert", "garbage-client-ca"])
def test_bad_tls_files_are_named_as_tls_errors(ray_address: str, collection_files: list[Path], tmp_path: Path,
                                               certs: Path, capsys: pytest.CaptureFixture[str], cert: str, key: str,
                                               client_ca: str | None, flag: str, problem: str) -> None:
    """Today gRPC only fails to bind, reported as a ``--host/--port`` error after the shards started."""
    (tmp_path / "garbage.pem").write_text("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")
    where = {name: str(tmp_path / name if name == "garbage.pem" else certs / name) for name in (cert, key, client_ca)
             if name is not None}
    tls = ["--tls-cert", where[cert], "--tls-key", where[key]] + (["--tls-client-ca", where[client_ca]] if client_ca
                                                                  else [])
    assert aggregator_main(["serve", *serve_args(tmp_path / "data", collection_files, *tls)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{flag} " in err and "TLS" in err and problem in err, err
    assert "--host/--port" not in err


def health_server(credentials: grpc.ServerCredentials) -> tuple[grpc.Server, str]:
    """The standard health service (SERVING) alone over TLS on 127.0.0.1: what ``aggregator health`` asks."""
    from concurrent import futures

    from grpc_health.v1 import health

    server = grpc.server(futures.ThreadPoolExecutor(2))
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_secure_port("127.0.0.1:0", credentials)
    server.start()
    return server, f"127.0.0.1:{port}"


def test_health_checks_a_tls_and_a_mutual_tls_server(certs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = ((certs / "server.key").read_bytes(), (certs / "server.pem").read_bytes())
    client = ["--tls-cert", str(certs / "client.pem"), "--tls-key", str(certs / "client.key")]
    for mutual in (False, True):
        server, address = health_server(grpc.ssl_server_credentials(
            [pair], root_certificates=(certs / "ca.pem").read_bytes() if mutual else None, require_client_auth=mutual))
        try:
            base = ["health", "--target", address, "--deadline", "3"]
            assert aggregator_main(base) == 1  # plaintext to a TLS port
            assert json.loads(capsys.readouterr().out)["status"] == "UNAVAILABLE"
            with_ca = [*base, "--tls-ca", str(certs / "ca.pem")]
            if mutual:
                assert aggregator_main(with_ca) == 1  # no client certificate
                capsys.readouterr()
                with_ca += client
            assert aggregator_main(with_ca) == 0
            assert json.loads(capsys.readouterr().out)["status"] == "SERVING"
        finally:
            server.stop(0)
    assert aggregator_main(["health", "--target", address, "--tls-ca", str(certs / "nope.pem")]) == 2
    assert capsys.readouterr().err.startswith("ldpsynth aggregator: error: --tls-ca: ")
    assert aggregator_main(["health", "--target", address, "--tls-cert", str(certs / "client.pem")]) == 2
    assert "--tls-key" in capsys.readouterr().err


def test_mutual_tls(start_process: StartProcess, collection_files: list[Path], tmp_path: Path, certs: Path,
                    rng: np.random.Generator) -> None:
    data = tmp_path / "data"
    proc = start_process(*serve_args(data, collection_files, "--tls-cert", str(certs / "server.pem"),
                                     "--tls-key", str(certs / "server.key"),
                                     "--tls-client-ca", str(certs / "ca.pem")))
    get = pb.GetCollectionRequest(collection="ratings")
    without = pb_grpc.CollectionServiceStub(tls_channel(proc.address, certs))
    assert status_of(lambda: without.GetCollection(get, timeout=5)) == grpc.StatusCode.UNAVAILABLE
    with_cert = pb_grpc.CollectionServiceStub(tls_channel(proc.address, certs, client_cert=True))
    assert with_cert.GetCollection(get).name == "ratings"
    acks, code, _ = submit(with_cert, [batch(make_reports(RATINGS, 7, rng))])
    assert code == grpc.StatusCode.OK and acks[0].accepted == 7
    assert proc.terminate() == 0
    assert set(verify(data).quota) == {("ratings", "device-cert")}  # the certificate's CN is the credential


def test_module_entry_point_help() -> None:
    out = subprocess.run([sys.executable, "-m", "ldpsynth.cli.aggregator_cmd", "serve", "--help"],
                         capture_output=True, text=True, check=True).stdout
    for flag in ("--data-dir", "--port", "--collection", "--shards", "--ray-address", "--tls-client-ca",
                 "--tokens", "--max-rows-per-client", "--max-batch-reports", "--reflection", "--host", "--nats",
                 "--log-replicas", "--nats-tls-ca", "--worker-dir", "--verbose"):
        assert flag in out
