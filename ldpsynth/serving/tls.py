"""TLS of a tier that serves gRPC calls (the replicas' ``--tls-*`` flags, the shuffler's): the PEM files,
checked with OpenSSL before a port is bound, and the gRPC server credentials made of them."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import grpc

from ldpsynth.serving.errors import ConfigError


def read_file(path: Path, flag: str) -> bytes:
    """The bytes of the file a flag names; ConfigError naming the flag when it cannot be read.

    Parameters
    ----------
    path : Path
        The file.
    flag : str
        The option that named it.

    Returns
    -------
    bytes
        Its contents.
    """
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot read ({exc.strerror})") from None


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the server's certificate chain and key, and the CA that signs client
    certificates (given: mutual TLS is required)."""

    cert: Path
    key: Path
    client_ca: Path | None = None

    def check(self) -> None:
        """Refuse, naming the flag, what OpenSSL cannot load: a ``--tls-cert`` without a PEM certificate,
        a ``--tls-key`` that is not an unencrypted PEM private key or does not match the certificate,
        a ``--tls-client-ca`` without a PEM certificate. gRPC would only fail to bind the port."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        for flag, path in (("--tls-cert", self.cert), ("--tls-client-ca", self.client_ca)):
            if path is not None:
                try:
                    context.load_verify_locations(cafile=path)
                except ssl.SSLError as exc:
                    raise ConfigError(f"{flag} {path}: TLS: no PEM certificate in it ({exc.reason or exc})") from None
        try:
            context.load_cert_chain(self.cert, self.key, password=lambda: b"")  # no prompt for a passphrase
        except ssl.SSLError as exc:
            if exc.reason == "KEY_VALUES_MISMATCH":
                raise ConfigError(f"--tls-key {self.key}: TLS: not the private key of the certificate in "
                                  f"--tls-cert {self.cert}") from None
            raise ConfigError(f"--tls-key {self.key}: TLS: not an unencrypted PEM private key "
                              f"({exc.reason or exc})") from None


def server_credentials(tls: TlsFiles | None) -> grpc.ServerCredentials | None:
    """gRPC server credentials of ``tls`` (checked first, :meth:`TlsFiles.check`); ``None``: no TLS.

    Parameters
    ----------
    tls : TlsFiles or None
        The server's PEM files (a client CA: mutual TLS required).

    Returns
    -------
    grpc.ServerCredentials or None
        For ``add_secure_port``; ``None`` for an insecure port.
    """
    if tls is None:
        return None
    pair = (read_file(tls.key, "--tls-key"), read_file(tls.cert, "--tls-cert"))
    client_ca = read_file(tls.client_ca, "--tls-client-ca") if tls.client_ca else None
    tls.check()
    return grpc.ssl_server_credentials([pair], root_certificates=client_ca, require_client_auth=client_ca is not None)
