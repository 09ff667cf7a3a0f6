"""The gRPC channel of a client: TLS / mutual TLS credentials, bearer token metadata, size limits.

A channel is insecure only when no TLS option is given. ``root_certificates`` is the PEM
bundle that must have signed the server's certificate (system roots when omitted but TLS is on);
``certificate_chain`` + ``private_key`` are the device's own certificate for mutual TLS
(docs/contract.md: the certificate's subject CN is then the credential when the server has
no token file). The token travels as ``authorization: Bearer <token>`` on every call.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

import grpc

from ldpsynth.client.retry import RetryPolicy
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.protocol import Limits
from ldpsynth.shared.validation import check_int

__all__ = [
    "Shuffler",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "MAX_MESSAGE_BYTES",
    "channel_credentials",
    "bearer_metadata",
    "split_targets",
    "grpc_target",
    "open_channel",
]

#: Channel message limit when none is given: the protocol's default ``Limits.max_message_bytes``.
DEFAULT_MAX_MESSAGE_BYTES = Limits().max_message_bytes
#: Largest message limit gRPC accepts (a signed 32-bit length).
MAX_MESSAGE_BYTES = 2**31 - 1


def _read_pem(path: str | os.PathLike, field: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ValidationError(field, "a readable PEM file", f"cannot read it ({exc.strerror})") from None


def channel_credentials(root_certificates: str | os.PathLike | None = None,
                        certificate_chain: str | os.PathLike | None = None,
                        private_key: str | os.PathLike | None = None) -> grpc.ChannelCredentials | None:
    """TLS credentials from PEM files, or ``None`` (insecure) when no file is given.

    ``certificate_chain`` and ``private_key`` (mutual TLS) go together.
    """
    if (certificate_chain is None) != (private_key is None):
        missing = "private_key" if private_key is None else "certificate_chain"
        raise ValidationError(missing, "given together with the other (mutual TLS needs a certificate and its key)",
                              "missing")
    if root_certificates is None and certificate_chain is None:
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=None if root_certificates is None else _read_pem(root_certificates, "root_certificates"),
        private_key=None if private_key is None else _read_pem(private_key, "private_key"),
        certificate_chain=None if certificate_chain is None else _read_pem(certificate_chain, "certificate_chain"),
    )


@dataclass(frozen=True)
class Shuffler:
    """Where a device sends its sealed reports (docs/contract.md §16), with the shuffler's own credentials.

    The shuffler is another party than the aggregator, with its own address, tokens and TLS
    certificate. Without a TLS file the channel is insecure (loopback demos only).

    Attributes
    ----------
    target : str
        ``HOST:PORT`` of the shuffler, or several, comma-separated (round robin, as for the aggregator).
    token : str or None, default None
        Bearer token the shuffler asks for (printable ASCII, no spaces); ``None``: none sent.
    root_certificates : str or os.PathLike or None, default None
        PEM file of the CA that signed the shuffler's certificate; turns TLS on.
    certificate_chain : str or os.PathLike or None, default None
        PEM file of the device's certificate, for mutual TLS (with ``private_key``).
    private_key : str or os.PathLike or None, default None
        PEM file of that certificate's key (with ``certificate_chain``).

    Raises
    ------
    ValidationError
        Naming ``target`` or ``token`` when malformed.
    """

    target: str
    token: str | None = None
    root_certificates: str | os.PathLike | None = None
    certificate_chain: str | os.PathLike | None = None
    private_key: str | os.PathLike | None = None

    def __post_init__(self) -> None:
        split_targets(self.target)
        bearer_metadata(self.token)

    def credentials(self) -> grpc.ChannelCredentials | None:
        """The channel credentials of the shuffler's TLS files.

        Returns
        -------
        grpc.ChannelCredentials or None
            TLS credentials, or ``None`` (an insecure channel) when no TLS file is given.

        Raises
        ------
        ValidationError
            A file that cannot be read, or one of the mutual-TLS pair without the other.
        """
        return channel_credentials(self.root_certificates, self.certificate_chain, self.private_key)


def bearer_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying ``token`` (none without a token). The token is never put in an error."""
    if token is None:
        return ()
    if not isinstance(token, str) or not token or not token.isascii() or not token.isprintable() or " " in token:
        raise ValidationError("token", "a non-empty string of printable ASCII characters without spaces",
                              "malformed token")
    return (("authorization", f"Bearer {token}"),)


def split_targets(target: str) -> list[tuple[str, int]]:
    """``HOST:PORT`` or several, comma-separated (``a:50051,b:50051``; IPv6 as ``[::1]:50051``)."""
    if not isinstance(target, str) or not target.strip():
        raise ValidationError("target", "HOST:PORT of the aggregator (or several, comma-separated)", "empty")
    found = []
    for item in (t.strip() for t in target.split(",")):
        host, _, port = item.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValidationError("target", "HOST:PORT of the aggregator (or several, comma-separated)",
                                  f"{item[:100]!r} is not HOST:PORT")
        found.append((host, int(port)))
    return found


def grpc_target(target: str) -> tuple[str, list[tuple[str, str]]]:
    """The gRPC target string and channel options for ``target``.

    One ``HOST:PORT`` is used as given. Several (ingress replicas of one deployment) are resolved
    to their addresses and balanced by gRPC's client-side ``round_robin`` policy: each call goes to
    the next replica that is connected, and a replica that fails drops out of the rotation until it
    reconnects (calls that were on it fail UNAVAILABLE and are retried on the others). With TLS,
    every replica's certificate must be valid for the first host named (``grpc.default_authority``).
    """
    targets = split_targets(target)
    if len(targets) == 1:
        return target.strip(), []
    addresses: list[str] = []
    for host, port in targets:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise ValidationError("target", "HOST:PORT of reachable aggregators", f"cannot resolve {host!r} "
                                  f"({exc.strerror})") from None
        addresses += [f"[{info[4][0]}]:{port}" if info[0] == socket.AF_INET6 else f"{info[4][0]}:{port}"
                      for info in infos[:1]]
    families = {a.startswith("[") for a in addresses}
    if len(families) > 1:
        raise ValidationError("target", "replicas all reached over IPv4 or all over IPv6", "a mix of both")
    scheme = "ipv6:" if families == {True} else "ipv4:"
    return scheme + ",".join(addresses), [("grpc.lb_policy_name", "round_robin"),
                                          ("grpc.default_authority", target.split(",")[0].strip())]


def open_channel(target: str, credentials: grpc.ChannelCredentials | None, *, max_message_bytes: int,
                 retry: RetryPolicy, blocking: bool = False) -> grpc.aio.Channel | grpc.Channel:
    """A channel to ``target`` (``HOST:PORT``, or several: :func:`grpc_target`) sending and receiving
    messages up to ``max_message_bytes``; it reconnects at the pace of ``retry``. A ``grpc.aio``
    channel (call inside a running event loop), or a blocking one with ``blocking``."""
    resolved, balancing = grpc_target(target)
    limit = check_int(max_message_bytes, "max_message_bytes", 1024, MAX_MESSAGE_BYTES)
    options = [
        ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit),
        ("grpc.initial_reconnect_backoff_ms", max(1, round(retry.initial_backoff * 1000))),
        ("grpc.max_reconnect_backoff_ms", max(1, round(retry.max_backoff * 1000))),
        *balancing,
    ]
    module = grpc if blocking else grpc.aio
    if credentials is None:
        return module.insecure_channel(resolved, options=options)
    return module.secure_channel(resolved, credentials, options=options)
