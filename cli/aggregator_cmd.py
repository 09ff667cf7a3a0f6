"""``ldpsynth aggregator serve``: run the aggregator (docs/contract.md, "Server process").

Prints one JSON line ``{"event": "listening", "address": "HOST:PORT"}`` on stdout once it
serves (the real port with ``--port 0``); logs go to stderr. SIGTERM/SIGINT stop it gracefully
(health NOT_SERVING, then ``stop(grace)``) and it exits 0.

Also runnable alone, without the other subcommands' dependencies:
``python -m ldpsynth.cli.aggregator_cmd serve ...``.

``ldpsynth aggregator health --target HOST:PORT [--tls-ca CA.pem [--tls-cert C.pem --tls-key K.pem]]``
asks the server's standard gRPC health service (exit 0 when SERVING): the container health check
of ``docker/``; ``--tls-ca`` checks a TLS server, ``--tls-cert``/``--tls-key`` a mutual-TLS one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ldpsynth.shared.errors import LdpsynthError

if TYPE_CHECKING:
    from ldpsynth.aggregator.config import ServerConfig


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser("aggregator", help="run the aggregator (gRPC server, durable Ray shards)")
    commands = parser.add_subparsers(dest="aggregator_command", metavar="COMMAND", required=True)
    serve = commands.add_parser("serve", help="serve collections over gRPC until SIGTERM/SIGINT")
    serve.add_argument("--data-dir", required=True, type=Path, help="directory of the shard files (created if missing)")
    serve.add_argument("--port", required=True, type=int, help="TCP port; 0 picks a free one (printed)")
    serve.add_argument("--collection", required=True, action="append", type=Path, metavar="COLLECTION.json",
                       help="a collection's schema or mechanism card (JSON); repeat for several")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default %(default)s)")
    serve.add_argument("--shards", type=int, help="shards of a new data directory (default: one per CPU)")
    serve.add_argument("--ray-address", help="join this Ray cluster (default: start a local Ray runtime)")
    serve.add_argument("--tls-cert", type=Path, help="server certificate chain (PEM); enables TLS")
    serve.add_argument("--tls-key", type=Path, help="server private key (PEM)")
    serve.add_argument("--tls-client-ca", type=Path, help="CA of client certificates (PEM); requires mutual TLS")
    serve.add_argument("--tokens", type=Path,
                       help='clients file: {"clients": [{"id", "token", "collections", "roles"}]}')
    serve.add_argument("--max-rows-per-client", type=int,
                       help="reports one credential may store per collection (default 0: unlimited)")
    serve.add_argument("--max-batch-reports", type=int, help="reports per batch (default: the protocol's Limits)")
    serve.add_argument("--max-message-bytes", type=int,
                       help="largest request message in bytes (default: the protocol's Limits)")
    serve.add_argument("--grace", type=float, default=5.0, help="seconds in-flight calls get on stop (default 5)")
    serve.add_argument("--reflection", action="store_true", help="enable gRPC server reflection")
    serve.set_defaults(handler=serve_command)
    check = commands.add_parser(
        "health", help="ask a running aggregator's gRPC health service; exit 0 when SERVING",
        description="Query the standard gRPC health service (grpc.health.v1) of an aggregator, e.g. as a "
                    "container health check. Prints the status; exit 0 when SERVING, 1 otherwise (NOT_SERVING, "
                    "unreachable or deadline exceeded).")
    check.add_argument("--target", required=True, metavar="HOST:PORT", help="the aggregator")
    check.add_argument("--service", default="",
                       help='health service name (default "": the whole server; or ldpsynth.v1.CollectionService)')
    check.add_argument("--deadline", type=float, default=5.0, help="seconds to wait for the answer (default 5)")
    check.add_argument("--tls-ca", metavar="FILE", help="PEM of the CA that signed the server certificate (TLS)")
    check.add_argument("--tls-cert", metavar="FILE", help="PEM of a client certificate (a mutual-TLS server)")
    check.add_argument("--tls-key", metavar="FILE", help="PEM of that certificate's private key (mutual TLS)")
    check.set_defaults(handler=health_command)


def serve_command(args: argparse.Namespace) -> int:
    """Handler of ``aggregator serve``."""
    from ldpsynth.aggregator.config import ConfigError, ServerConfig, TlsFiles, load_collection
    from ldpsynth.shared.protocol import Limits

    defaults = Limits()

    if (args.tls_cert is None) != (args.tls_key is None):
        raise ConfigError("--tls-cert and --tls-key: give both or neither")
    if args.tls_client_ca is not None and args.tls_cert is None:
        raise ConfigError("--tls-client-ca: needs --tls-cert and --tls-key (mutual TLS runs over TLS)")
    config = ServerConfig(
        data_dir=args.data_dir,
        collections=tuple(load_collection(path) for path in args.collection),
        host=args.host,
        port=args.port,
        shards=args.shards,
        ray_address=args.ray_address,
        tls=TlsFiles(args.tls_cert, args.tls_key, args.tls_client_ca) if args.tls_cert else None,
        tokens_file=args.tokens,
        limits=Limits(
            defaults.max_rows_per_client if args.max_rows_per_client is None else args.max_rows_per_client,
            defaults.max_batch_reports if args.max_batch_reports is None else args.max_batch_reports,
            defaults.max_message_bytes if args.max_message_bytes is None else args.max_message_bytes),
        reflection=args.reflection,
        grace_seconds=args.grace,
    )
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(_serve(config))
    return 0


async def _serve(config: ServerConfig) -> None:
    from ldpsynth.aggregator.server import AggregatorServer

    server = AggregatorServer(config)
    await server.start()
    print(json.dumps({"event": "listening", "address": server.address}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await server.stop()


def health_command(args: argparse.Namespace) -> int:
    """Handler of ``aggregator health``: one ``grpc.health.v1.Health/Check`` call, over TLS when a
    ``--tls-*`` file is given (the client's channel credentials), else plaintext."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from ldpsynth.client.transport import channel_credentials
    from ldpsynth.shared.errors import ValidationError

    if not args.deadline > 0:
        raise LdpsynthError(f"--deadline: seconds > 0, got {args.deadline}")
    if (args.tls_cert is None) != (args.tls_key is None):
        raise LdpsynthError("--tls-cert and --tls-key: give both or neither (mutual TLS)")
    try:
        credentials = channel_credentials(args.tls_ca, args.tls_cert, args.tls_key)
    except ValidationError as exc:  # its fields are the SDK's parameter names
        flag = {"root_certificates": "--tls-ca", "certificate_chain": "--tls-cert", "private_key": "--tls-key"}
        raise LdpsynthError(f"{flag.get(exc.field, exc.field)}: {exc.problem}; legal range: {exc.legal}") from None
    channel = grpc.insecure_channel(args.target) if credentials is None else \
        grpc.secure_channel(args.target, credentials)
    with channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=args.service), timeout=args.deadline)
        except grpc.RpcError as exc:
            print(json.dumps({"target": args.target, "service": args.service,
                              "status": exc.code().name, "detail": exc.details()}))
            return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
    print(json.dumps({"target": args.target, "service": args.service, "status": status}))
    return 0 if answer.status == health_pb2.HealthCheckResponse.SERVING else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ldpsynth.cli.aggregator_cmd serve ...`` (this subcommand alone)."""
    parser = argparse.ArgumentParser(prog="ldpsynth-aggregator", description="The ldpsynth aggregator.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    register(sub)
    args = parser.parse_args(["aggregator", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.handler(args))
    except LdpsynthError as exc:
        print(f"ldpsynth aggregator: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
