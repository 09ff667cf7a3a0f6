"""The wire of the web port's unary calls: the Connect protocol and gRPC-Web (docs/contract.md §15).

Pure framing, no I/O: which protocol and codec a request's ``content-type`` names, the request
message out of its body, the response (or the error) into status, headers and body, the call's
deadline. Codes are gRPC's (:func:`~ldpsynth.serving.status.status_of` chose them): the
Connect protocol names them in lower case (``invalid_argument``) with an HTTP status the protocol
assigns to each; gRPC-Web sends their numbers in ``grpc-status``.

* **Connect unary**: ``POST`` with ``content-type: application/proto`` (or ``application/json``,
  protobuf's JSON mapping), the message as the body; ``connect-protocol-version: 1`` when sent;
  ``connect-timeout-ms``. Answer 200 with the message, or the code's HTTP status with the JSON
  ``{"code", "message"}``.
* **gRPC-Web**: ``POST`` with ``content-type: application/grpc-web[+proto|+json]``, the body one
  envelope (a flags byte, a big-endian 32-bit length, the message); ``grpc-timeout``. Answer 200
  with the message's envelope and a trailer envelope (flags 0x80) holding ``grpc-status: 0``; an
  error is *trailers-only*: ``grpc-status`` and ``grpc-message`` (percent-encoded) as headers, no body.

Request bodies are identity-encoded only: a compressed one (``content-encoding``, ``grpc-encoding``
or an envelope's compressed flag) is UNIMPLEMENTED.
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import quote

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from ldpsynth.aggregator.errors import NotServed
from ldpsynth.serving.errors import BadRequest, LimitExceeded
from ldpsynth.serving.status import parse

M = TypeVar("M", bound=Message)
Headers = list[tuple[bytes, bytes]]

CONNECT = "connect"
GRPC_WEB = "grpc-web"
#: ``content-type`` (without parameters) -> (protocol, codec).
CONTENT_TYPES = {
    "application/proto": (CONNECT, "proto"),
    "application/json": (CONNECT, "json"),
    "application/grpc-web": (GRPC_WEB, "proto"),
    "application/grpc-web+proto": (GRPC_WEB, "proto"),
    "application/grpc-web+json": (GRPC_WEB, "json"),
}
#: The HTTP status the Connect protocol gives each code (its specification's table).
CONNECT_HTTP_STATUS = {
    grpc.StatusCode.CANCELLED: 499, grpc.StatusCode.UNKNOWN: 500, grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504, grpc.StatusCode.NOT_FOUND: 404, grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403, grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.FAILED_PRECONDITION: 400, grpc.StatusCode.ABORTED: 409, grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNIMPLEMENTED: 501, grpc.StatusCode.INTERNAL: 500, grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DATA_LOSS: 500, grpc.StatusCode.UNAUTHENTICATED: 401,
}
_ENVELOPE = struct.Struct(">BI")
_TRAILER_FLAG = 0x80
_COMPRESSED_FLAG = 0x01
#: A deadline: Connect's milliseconds (at most 10 digits), gRPC's value (at most 8 digits) and unit.
_CONNECT_TIMEOUT = re.compile(r"[0-9]{1,10}")
_GRPC_TIMEOUT = re.compile(r"([0-9]{1,8})([HMSmun])")
_GRPC_UNITS = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}


class Unsupported(Exception):
    """A request that is not a call of this port at all: answered with a plain HTTP status."""

    def __init__(self, status: int, text: str, headers: Headers | None = None):
        super().__init__(text)
        self.status = status
        self.headers = headers or []


def connect_code(code: grpc.StatusCode) -> str:
    """The Connect protocol's name of a code: gRPC's in lower case, CANCELLED spelt ``canceled``."""
    return "canceled" if code == grpc.StatusCode.CANCELLED else code.name.lower()


def header(headers: Headers, name: bytes) -> str | None:
    """The value of header ``name`` (lower case), ``None`` if absent; several values joined by commas."""
    values = [value.decode("latin-1") for key, value in headers if key.lower() == name]
    return ", ".join(values) if values else None


@dataclass(frozen=True)
class WebCall:
    """How a request is framed: its protocol (``connect`` or ``grpc-web``) and codec (``proto`` or ``json``)."""

    protocol: str
    codec: str

    @classmethod
    def of(cls, headers: Headers) -> WebCall:
        """The framing a request's headers name; :class:`Unsupported` (415) for any other content type,
        :class:`BadRequest` for a Connect version, :class:`NotServed` for an encoding not served."""
        media = (header(headers, b"content-type") or "").split(";")[0].strip().lower()
        if media not in CONTENT_TYPES:
            raise Unsupported(415, f"content-type: one of {', '.join(CONTENT_TYPES)}",
                              [(b"accept-post", ", ".join(CONTENT_TYPES).encode())])
        call = cls(*CONTENT_TYPES[media])
        if call.protocol == CONNECT:
            version = header(headers, b"connect-protocol-version")
            if version not in (None, "1"):
                raise BadRequest("connect-protocol-version: 1 (or no such header)")
            encoding = header(headers, b"content-encoding")
        else:
            encoding = header(headers, b"grpc-encoding")
        if encoding not in (None, "identity"):
            raise NotServed(f"{'content-encoding' if call.protocol == CONNECT else 'grpc-encoding'}: identity "
                             "only (request bodies are not compressed)")
        return call

    @property
    def content_type(self) -> str:
        if self.protocol == CONNECT:
            return f"application/{self.codec}"
        return f"application/grpc-web+{self.codec}"

    def body_limit(self, max_message_bytes: int) -> int:
        """The most body bytes a request whose message is within ``max_message_bytes`` has."""
        return max_message_bytes + (_ENVELOPE.size if self.protocol == GRPC_WEB else 0)

    def deadline(self, headers: Headers) -> float | None:
        """Seconds the caller gives the call (``None``: no deadline); BadRequest if malformed."""
        if self.protocol == CONNECT:
            text = header(headers, b"connect-timeout-ms")
            if text is None:
                return None
            if not _CONNECT_TIMEOUT.fullmatch(text):
                raise BadRequest("connect-timeout-ms: a positive integer of at most 10 digits")
            return int(text) / 1000.0
        text = header(headers, b"grpc-timeout")
        if text is None:
            return None
        match = _GRPC_TIMEOUT.fullmatch(text)
        if match is None:
            raise BadRequest("grpc-timeout: at most 8 digits and a unit among H, M, S, m, u, n")
        return int(match[1]) * _GRPC_UNITS[match[2]]

    def request(self, message_type: type[M], body: bytes, max_message_bytes: int) -> M:
        """The request message in ``body``; BadRequest (INVALID_ARGUMENT) unless it is one."""
        payload = body
        if self.protocol == GRPC_WEB:
            if len(body) < _ENVELOPE.size:
                raise BadRequest("request: one gRPC-Web envelope (5-byte header, then the message)")
            flags, length = _ENVELOPE.unpack_from(body)
            if flags & _COMPRESSED_FLAG:
                raise NotServed("request: an uncompressed envelope (grpc-encoding identity)")
            if flags != 0 or length != len(body) - _ENVELOPE.size:
                raise BadRequest("request: exactly one gRPC-Web message envelope, of the length it declares")
            payload = body[_ENVELOPE.size:]
        if len(payload) > max_message_bytes:
            raise LimitExceeded(f"request: at most max_message_bytes = {max_message_bytes} bytes per message, "
                                f"got {len(payload)}")
        if self.codec == "proto":
            return parse(message_type, payload)
        try:
            return json_format.Parse(payload.decode("utf-8"), message_type())
        except (json_format.ParseError, UnicodeDecodeError, RecursionError):
            raise BadRequest(f"request: not a valid {message_type.DESCRIPTOR.full_name} in protobuf's JSON "
                             "mapping") from None

    def _encode(self, message: Message) -> bytes:
        if self.codec == "proto":
            return message.SerializeToString()
        return json_format.MessageToJson(message, indent=None).encode("utf-8")

    def success(self, message: Message) -> tuple[int, Headers, bytes]:
        """The answer carrying ``message``."""
        headers: Headers = [(b"content-type", self.content_type.encode())]
        payload = self._encode(message)
        if self.protocol == CONNECT:
            return 200, headers, payload
        trailer = b"grpc-status: 0\r\n"
        body = (_ENVELOPE.pack(0, len(payload)) + payload + _ENVELOPE.pack(_TRAILER_FLAG, len(trailer)) + trailer)
        return 200, headers, body

    def failure(self, code: grpc.StatusCode, details: str) -> tuple[int, Headers, bytes]:
        """The answer of a call that ended with ``code`` and ``details``."""
        return failure(self.protocol, code, details)


def failure(protocol: str, code: grpc.StatusCode, details: str) -> tuple[int, Headers, bytes]:
    """The error answer of ``protocol`` (``connect`` or ``grpc-web``)."""
    if protocol == CONNECT:
        body = json.dumps({"code": connect_code(code), "message": details}).encode("utf-8")
        return CONNECT_HTTP_STATUS[code], [(b"content-type", b"application/json")], body
    return 200, [(b"content-type", b"application/grpc-web+proto"), (b"grpc-status", str(code.value[0]).encode()),
                 (b"grpc-message", grpc_message(details).encode())], b""


def grpc_message(details: str) -> str:
    """``grpc-message`` as gRPC encodes it: UTF-8, percent-encoding every byte outside printable ASCII and ``%``."""
    return quote(details, safe="".join(chr(c) for c in range(0x20, 0x7F) if chr(c) != "%"))
