"""Cross-origin requests to the web port: which web pages may call it (``--web-origins``).

A browser asks first (a *preflight*: ``OPTIONS`` with ``Origin`` and
``Access-Control-Request-Method``) for every call of this port, since its content types and
headers are not the few a page may send unasked. An allowed origin gets the methods and headers
the Connect protocol and gRPC-Web use, and its calls' answers name it in
``Access-Control-Allow-Origin`` (with ``grpc-status``/``grpc-message`` exposed, which gRPC-Web reads
from the headers). Any other origin gets 403 without those headers, to its preflight and to a call
alike (a call never runs for it). Requests without ``Origin`` (Node, curl, other servers) are not
cross-origin requests of a browser and pass. ``*`` allows every origin (a public collection).
"""

from __future__ import annotations

from collections.abc import Sequence

Headers = list[tuple[bytes, bytes]]

#: Request headers a page may send: the Connect protocol's, gRPC-Web's, and the bearer token.
ALLOWED_HEADERS = ("authorization", "content-type", "connect-protocol-version", "connect-timeout-ms",
                   "grpc-timeout", "x-grpc-web", "x-user-agent")
#: Response headers a page may read (gRPC-Web's status when it comes as headers).
EXPOSED_HEADERS = ("grpc-status", "grpc-message", "grpc-status-details-bin")
ALLOWED_METHODS = ("POST", "GET")
#: Seconds a browser may keep a preflight's answer.
MAX_AGE = 7200


class Cors:
    """The origins allowed to call the port (already checked: ``scheme://host[:port]`` or ``*``)."""

    def __init__(self, origins: Sequence[str]):
        self._any = "*" in origins
        self._origins = frozenset(origins)

    def allows(self, origin: str) -> bool:
        return self._any or origin in self._origins

    def answer_headers(self, origin: str) -> Headers:
        """Headers of an allowed origin's call answer."""
        return [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin"),
                (b"access-control-expose-headers", ", ".join(EXPOSED_HEADERS).encode())]

    def preflight(self, origin: str, method: str | None) -> tuple[int, Headers]:
        """The answer to a preflight from ``origin`` for ``method``: 204 with the grants, or 403."""
        if not self.allows(origin) or method not in ALLOWED_METHODS:
            return 403, [(b"vary", b"Origin")]
        return 204, [(b"access-control-allow-origin", origin.encode("latin-1")), (b"vary", b"Origin"),
                     (b"access-control-allow-methods", ", ".join(ALLOWED_METHODS).encode()),
                     (b"access-control-allow-headers", ", ".join(ALLOWED_HEADERS).encode()),
                     (b"access-control-max-age", str(MAX_AGE).encode())]
