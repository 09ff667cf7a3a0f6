"""The web port's HTTP server: Hypercorn, inside the replica's event loop (docs/deployment.md).

HTTP/1.1 and HTTP/2 (cleartext by prior knowledge or upgrade; over TLS by ALPN when the replica
has ``--tls-cert``/``--tls-key``, the same files as its gRPC port). The socket is bound here, on the
replica's host, before the server starts, so a port taken is a :class:`ConfigError` naming
``--web-port`` and ``--web-port 0`` learns its port. :meth:`WebServer.stop` is graceful: the port
closes at once, calls in flight get ``grace`` seconds, idle connections are closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from typing import cast

from hypercorn.asyncio import serve
from hypercorn.config import Config
from hypercorn.typing import ASGIFramework

from ldpsynth.aggregator.ingress.web import WebApp
from ldpsynth.aggregator.runtime.config import ConfigError, TlsFiles

log = logging.getLogger(__name__)

#: Seconds a connection may stay open without a request.
KEEP_ALIVE_SECONDS = 30
#: Seconds a read from a connection may wait (a client that stops sending mid-request is dropped).
READ_TIMEOUT_SECONDS = 60


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (IPv6 when ``host`` has a colon)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1024)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"--web-port: cannot listen on {host}:{port} ({exc.strerror})") from None
    return sock


class WebServer:
    """Serves a :class:`WebApp` on one port until :meth:`stop`."""

    def __init__(self, app: WebApp, host: str, port: int, tls: TlsFiles | None):
        self._app = app
        self._host = host
        self._port = port
        self._tls = tls
        self._shutdown = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._config = Config()
        self.port = 0

    async def start(self) -> int:
        """Bind and serve; return the port."""
        sock = _listen(self._host, self._port)
        self.port = sock.getsockname()[1]
        config = self._config
        config.bind = [f"fd://{sock.detach()}"]  # Hypercorn takes the socket over (and closes it)
        config.accesslog = None
        config.errorlog = log
        config.keep_alive_timeout = KEEP_ALIVE_SECONDS
        config.read_timeout = READ_TIMEOUT_SECONDS
        config.include_server_header = False
        if self._tls is not None:
            config.certfile, config.keyfile = str(self._tls.cert), str(self._tls.key)
        app = cast(ASGIFramework, self._app)  # a plain ASGI 3 callable; Hypercorn types its events precisely
        self._task = asyncio.create_task(serve(app, config, shutdown_trigger=self._shutdown.wait, mode="asgi"))
        self._task.add_done_callback(self._ended)
        await asyncio.sleep(0)
        return self.port

    def _ended(self, task: asyncio.Task[None]) -> None:
        """Log a server that ended by itself (not by :meth:`stop`): the web port no longer answers."""
        if not task.cancelled() and task.exception() is not None:
            log.error("the web port stopped serving", exc_info=task.exception())

    async def stop(self, grace: float) -> None:
        """Close the port; let calls in flight finish within ``grace`` seconds."""
        if self._task is None:
            return
        self._config.graceful_timeout = grace
        self._shutdown.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), grace + 5.0)
        except asyncio.TimeoutError:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
