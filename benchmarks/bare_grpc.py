"""The benchmarks' baseline servers: one gRPC method on a bare ``grpc.aio`` server, in its own process.

A benchmark runs itself with a flag (``--serve-discard``, ``--serve-bare``) whose handler calls
:func:`serve_until_stopped`; the parent starts it as a
:class:`~ldpsynth.simulation.local_cluster.ServerProcess` and reads its listening line.
"""

from __future__ import annotations

import asyncio
import json
import signal

import grpc

from ldpsynth.client.transport import DEFAULT_MAX_MESSAGE_BYTES


async def serve_one_method(method: str, handler: grpc.RpcMethodHandler, max_message_bytes: int) -> None:
    """Serve ``handler`` at ``method`` (``/service/Method``) on 127.0.0.1 (a free port), print
    ``{"event": "listening", "address": ...}``, and run until SIGTERM/SIGINT."""
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", max_message_bytes),
                                      ("grpc.max_send_message_length", max_message_bytes),
                                      ("grpc.so_reuseport", 0)])
    service, name = method.strip("/").split("/")
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {name: handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(json.dumps({"event": "listening", "address": f"127.0.0.1:{port}"}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop(1.0)


def serve_until_stopped(method: str, handler: grpc.RpcMethodHandler) -> int:
    """A benchmark's ``--serve-...`` mode: :func:`serve_one_method` with the client's default message
    limit, until SIGTERM/SIGINT; the exit status (0)."""
    asyncio.run(serve_one_method(method, handler, DEFAULT_MAX_MESSAGE_BYTES))
    return 0
