"""Tokens file, authentication and authorization, without a server."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest

from ldpsynth.aggregator.runtime.config import ConfigError
from ldpsynth.serving import status
from ldpsynth.serving.auth import ANONYMOUS, Authenticator, TokenTable
from ldpsynth.shared.errors import LdpsynthError

SECRET = "s3cret-token-of-device-1"


def write_tokens(tmp_path: Path, clients: object, mode: int = 0o600) -> Path:
    path = tmp_path / "tokens.json"
    path.write_text(json.dumps({"clients": clients}))
    path.chmod(mode)
    return path


@pytest.fixture
def table(tmp_path: Path) -> TokenTable:
    return TokenTable.load(write_tokens(tmp_path, [
        {"id": "device-1", "token": SECRET, "collections": ["ratings"], "roles": ["submit"]},
        {"id": "analyst", "token": "analyst-token", "collections": "*", "roles": ["query"]},
    ]))


def status_of(call: object) -> grpc.StatusCode:
    with pytest.raises(LdpsynthError) as info:
        call()  # type: ignore[operator]
    return status.status_of(info.value, '')[0]


def test_token_lookup_and_authorization(table: TokenTable) -> None:
    auth = Authenticator(table, mutual_tls=False)
    device = auth.authenticate([("authorization", f"Bearer {SECRET}")], {})
    assert device.id == "device-1"
    device.require_role("submit")
    device.require_collection("ratings")
    assert status_of(lambda: device.require_collection("graph")) == grpc.StatusCode.PERMISSION_DENIED
    analyst = auth.authenticate([("authorization", "bearer analyst-token")], {})
    analyst.require_collection("anything")
    assert status_of(lambda: analyst.require_role("submit")) == grpc.StatusCode.PERMISSION_DENIED
    analyst.require_role("submit", "query")


@pytest.mark.parametrize("metadata", [
    [],
    [("authorization", "Bearer wrong")],
    [("authorization", f"Basic {SECRET}")],
    [("authorization", "Bearer ")],
    [("authorization", f"Bearer {SECRET}"), ("authorization", f"Bearer {SECRET}")],
    [("authorization", f"Bearer {SECRET}x")],
], ids=["missing", "wrong", "scheme", "empty", "twice", "longer"])
def test_unauthenticated(table: TokenTable, metadata: list[tuple[str, str]]) -> None:
    auth = Authenticator(table, mutual_tls=False)
    with pytest.raises(LdpsynthError) as info:
        auth.authenticate(metadata, {})
    assert status.status_of(info.value, '')[0] == grpc.StatusCode.UNAUTHENTICATED
    assert SECRET not in status.status_of(info.value, '')[1]


def test_without_tokens_mtls_and_anonymous() -> None:
    mtls = Authenticator(None, mutual_tls=True)
    assert mtls.authenticate([], {"x509_common_name": [b"device-cert"]}).id == "device-cert"
    assert status_of(lambda: mtls.authenticate([], {})) == grpc.StatusCode.UNAUTHENTICATED
    assert Authenticator(None, mutual_tls=False).authenticate([("authorization", "Bearer x")], {}) is ANONYMOUS


@pytest.mark.parametrize("clients, message", [
    ([], "at least one client"),
    ([{"id": "a", "token": SECRET, "collections": "*", "roles": ["admin"]}], "roles"),
    ([{"id": "a", "token": "", "collections": "*", "roles": []}], "token: a non-empty string"),
    ([{"id": "a", "token": SECRET, "collections": "ratings", "roles": []}], "collections"),
    ([{"id": "a", "token": SECRET, "collections": "*", "roles": [], "ip": "1.2.3.4"}], "only the fields"),
    ([{"id": "a", "token": SECRET, "collections": "*", "roles": []},
      {"id": "a", "token": "other", "collections": "*", "roles": []}], "distinct ids"),
    ([{"id": "a", "token": SECRET, "collections": "*", "roles": []},
      {"id": "b", "token": SECRET, "collections": "*", "roles": []}], "its own token"),
])
def test_bad_tokens_files(tmp_path: Path, clients: list[object], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        TokenTable.load(write_tokens(tmp_path, clients))
    assert SECRET not in str(info.value)


def test_unreadable_tokens_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        TokenTable.load(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    (tmp_path / "bad.json").chmod(0o600)
    with pytest.raises(ConfigError, match="invalid JSON"):
        TokenTable.load(tmp_path / "bad.json")


@pytest.mark.parametrize("content, problem", [
    (b'{"clients": [{"id": "caf\xe9", "token": "' + SECRET.encode() + b'"}]}', "not UTF-8"),  # today a traceback
    (b'{"clients": ' + b"[" * 1000 + b"]" * 1000 + b"}", "nested 1001 deep"),               # RecursionError
    (b'{"clients": [{"id": ' + b"1" * 5000 + b"}]}", "5000 digits"),                         # ValueError
])
def test_tokens_file_not_utf8_or_past_the_json_limits_is_one_config_error(tmp_path: Path, content: bytes,
                                                                          problem: str) -> None:
    path = tmp_path / "tokens.json"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(ConfigError) as info:
        TokenTable.load(path)
    message = str(info.value)
    assert message.startswith(f"--tokens: {path}: ") and problem in message and "\n" not in message
    assert SECRET not in message


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o660, 0o700 | 0o004])
def test_tokens_file_others_may_access_is_refused_saying_why(tmp_path: Path, mode: int) -> None:
    path = write_tokens(tmp_path, [{"id": "a", "token": SECRET, "collections": "*", "roles": ["submit"]}], mode)
    with pytest.raises(ConfigError) as info:
        TokenTable.load(path)
    message = str(info.value)
    assert f"mode {mode:04o}" in message and "bearer secrets" in message and f"chmod 600 {path}" in message
    assert SECRET not in message
    for private in (0o600, 0o400):
        path.chmod(private)
        assert TokenTable.load(path).lookup(SECRET.encode()).id == "a"
