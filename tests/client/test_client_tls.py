"""TLS and mutual TLS to a fake server whose certificates come from a CA made here (openssl CLI)."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import grpc
import pytest

from ldpsynth.client import AsyncClient, PrivacyLedger, RetryPolicy, SubmitError
from ldpsynth.shared.errors import ValidationError

from .client_fakes import FakeCollectionService, FakeServer, ratings_info, ratings_rows

ONCE = RetryPolicy(max_attempts=1)
_EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=30)


def _issue(name: str, subject: str, extensions: str, serial: int, cwd: Path) -> None:
    (cwd / f"{name}.ext").write_text(extensions, encoding="ascii")
    _openssl("req", "-new", *_EC, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=cwd)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-set_serial", str(serial),
             "-days", "2", "-out", f"{name}.pem", "-extfile", f"{name}.ext", cwd=cwd)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """A CA, a server certificate for 127.0.0.1 and a client certificate with CN device-7."""
    cwd = tmp_path_factory.mktemp("pki")
    _openssl("req", "-x509", *_EC, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=ldpsynth test CA",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             cwd=cwd)
    _issue("server", "/CN=localhost", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n",
           2, cwd)
    _issue("client", "/CN=device-7", "extendedKeyUsage=clientAuth\n", 3, cwd)
    return cwd


def server_credentials(pki: Path, *, require_client_auth: bool) -> grpc.ServerCredentials:
    pair = ((pki / "server.key").read_bytes(), (pki / "server.pem").read_bytes())
    return grpc.ssl_server_credentials([pair], root_certificates=(pki / "ca.pem").read_bytes(),
                                       require_client_auth=require_client_auth)


def run(service: FakeCollectionService, credentials: grpc.ServerCredentials, **client_options):
    async def main():
        async with FakeServer(service, credentials=credentials) as server:
            async with AsyncClient(server.target, retry=ONCE, deadline=5.0, **client_options) as client:
                with PrivacyLedger.for_simulation() as ledger:
                    return await client.submit("ratings", ratings_rows(6), ledger=ledger)
    return asyncio.run(main())


def test_tls_with_the_ca_delivers(pki: Path) -> None:
    service = FakeCollectionService(ratings_info())
    result = run(service, server_credentials(pki, require_client_auth=False), root_certificates=pki / "ca.pem")
    assert result.acknowledged == 6 and len(service.stored) == 6


def test_plaintext_client_cannot_talk_to_a_tls_server(pki: Path) -> None:
    service = FakeCollectionService(ratings_info())
    with pytest.raises(SubmitError) as info:
        run(service, server_credentials(pki, require_client_auth=False))
    assert info.value.method == "GetCollection" and info.value.status == "UNAVAILABLE"
    assert service.stored == {}


def test_mutual_tls_presents_the_device_certificate(pki: Path) -> None:
    service = FakeCollectionService(ratings_info())
    result = run(service, server_credentials(pki, require_client_auth=True), root_certificates=pki / "ca.pem",
                 certificate_chain=pki / "client.pem", private_key=pki / "client.key")
    assert result.acknowledged == 6
    assert set(service.peer_common_names) == {b"device-7"}


def test_mutual_tls_refuses_a_client_without_certificate(pki: Path) -> None:
    service = FakeCollectionService(ratings_info())
    with pytest.raises(SubmitError) as info:
        run(service, server_credentials(pki, require_client_auth=True), root_certificates=pki / "ca.pem")
    assert info.value.status == "UNAVAILABLE" and service.stored == {}


def test_tls_options_are_checked(pki: Path, tmp_path: Path) -> None:
    service = FakeCollectionService(ratings_info())
    with pytest.raises(ValidationError) as info:
        run(service, server_credentials(pki, require_client_auth=True), certificate_chain=pki / "client.pem")
    assert info.value.field == "private_key"
    with pytest.raises(ValidationError) as info:
        run(service, server_credentials(pki, require_client_auth=False), root_certificates=tmp_path / "absent.pem")
    assert info.value.field == "root_certificates"
