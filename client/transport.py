"""The gRPC channel of a client: TLS / mutual TLS credentials, bearer token metadata, size limits.

A channel is insecure only when no TLS option is given. ``root_certificates`` is the PEM
bundle that must have signed the server's certificate (system roots when omitted but TLS is on);
``certificate_chain`` + ``private_key`` are the device's own certificate for mutual TLS
(docs/contract.md: the certificate's subject CN is then the credential when the server has
no token file). The token travels as ``authorization: Bearer <token>`` on every call.
"""

from __future__ import annotations

import os
from pathlib import Path

import grpc

from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.protocol import Limits
from ldpsynth.shared.validation import check_int

from .retry import RetryPolicy

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


def bearer_metadata(token: str | None) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying ``token`` (none without a token). The token is never put in an error."""
    if token is None:
        return ()
    if not isinstance(token, str) or not token or not token.isascii() or not token.isprintable() or " " in token:
        raise ValidationError("token", "a non-empty string of printable ASCII characters without spaces",
                              "malformed token")
    return (("authorization", f"Bearer {token}"),)


def open_channel(target: str, credentials: grpc.ChannelCredentials | None, *, max_message_bytes: int,
                 retry: RetryPolicy) -> grpc.aio.Channel:
    """A ``grpc.aio`` channel to ``target`` (``HOST:PORT``) sending and receiving messages up to
    ``max_message_bytes``; it reconnects at the pace of ``retry``. Call inside a running event loop."""
    if not isinstance(target, str) or not target.strip():
        raise ValidationError("target", "HOST:PORT of the aggregator", "empty")
    limit = check_int(max_message_bytes, "max_message_bytes", 1024, MAX_MESSAGE_BYTES)
    options = [
        ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit),
        ("grpc.initial_reconnect_backoff_ms", max(1, round(retry.initial_backoff * 1000))),
        ("grpc.max_reconnect_backoff_ms", max(1, round(retry.max_backoff * 1000))),
    ]
    if credentials is None:
        return grpc.aio.insecure_channel(target, options=options)
    return grpc.aio.secure_channel(target, credentials, options=options)
