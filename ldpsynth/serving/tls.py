"""TLS of a tier that serves gRPC calls (the replicas' ``--tls-*`` flags, the shuffler's): the PEM files,
checked with OpenSSL before a port is bound, and the gRPC server credentials made of them; and the one
check of every pair of a certificate and its key a serving process is given (:func:`check_pair`)."""

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


def check_pair(cert: object, key: object, cert_flag: str, key_flag: str, why: str = "") -> None:
    """A certificate and its private key go together: ConfigError naming both flags when only one is given.

    Parameters
    ----------
    cert, key : object
        The certificate's and the key's values (``None``: not given).
    cert_flag, key_flag : str
        The options that name them (``--tls-cert``, ``--tls-key``; ``--nats-tls-cert``, ...).
    why : str, default ""
        What the pair is for, said in parentheses after the message (e.g. ``mutual TLS``).
    """
    if (cert is None) != (key is None):
        raise ConfigError(f"{cert_flag} and {key_flag}: give both or neither" + (f" ({why})" if why else ""))


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the server's certificate chain and key, and the CA that signs client
    certificates (given: mutual TLS is required)."""

    cert: Path
    key: Path
    client_ca: Path | None = None

    @classmethod
    def from_flags(cls, cert: Path | None, key: Path | None, client_ca: Path | None) -> TlsFiles | None:
        """The files a server's ``--tls-cert``, ``--tls-key`` and ``--tls-client-ca`` name (the replicas', the
        shuffler's); ``None``: no TLS. ConfigError naming the flags: a certificate without its key or a key
        without its certificate, a client CA without them (mutual TLS runs over TLS)."""
        check_pair(cert, key, "--tls-cert", "--tls-key")
        if client_ca is not None and cert is None:
            raise ConfigError("--tls-client-ca: needs --tls-cert and --tls-key (mutual TLS runs over TLS)")
        return None if cert is None or key is None else cls(cert, key, client_ca)

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
