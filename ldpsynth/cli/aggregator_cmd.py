"""``ldpsynth aggregator serve``: run the aggregator (docs/contract.md, "Server process").

Prints one JSON line ``{"event": "listening", "address": "HOST:PORT"}`` on stdout once it
serves (the real port with ``--port 0``; with ``--web-port``, also ``"web_address"``; with
``--metrics-port`` also ``"metrics": URL``); logs go to stderr, as text or (``--log-format json``) JSON
lines. SIGTERM/SIGINT stop it gracefully (health NOT_SERVING, report streams drained within
``--grace``, then ``stop``) and it exits 0.

Also runnable alone, without the other subcommands' dependencies:
``python -m ldpsynth.cli.aggregator_cmd serve ...``.

``ldpsynth aggregator retire --data-dir DIR --collection NAME`` removes a closed collection from a
stopped aggregator's data directory (:mod:`ldpsynth.aggregator.runtime.retire`);
``ldpsynth aggregator advance --data-dir DIR --collection NAME`` closes a discovery collection's open round
there (:mod:`ldpsynth.aggregator.runtime.discovery`); ``advance --server HOST:PORT --collection NAME [--token T]``
on a running aggregator (``QueryService.AdvanceRound``, :mod:`ldpsynth.aggregator.operate.rounds`).

``ldpsynth aggregator health --target HOST:PORT [--tls-ca CA.pem [--tls-cert C.pem --tls-key K.pem]]``
asks the server's standard gRPC health service (exit 0 when SERVING): the container health check
of ``docker/``; ``--tls-ca`` checks a TLS server, ``--tls-cert``/``--tls-key`` a mutual-TLS one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ldpsynth.cli.main import main_alone
from ldpsynth.cli.options import (
    add_command,
    add_observability_arguments,
    add_target_argument,
    add_tls_arguments,
    add_wide_fit_arguments,
    wide_fit,
)
from ldpsynth.cli.token_env import add_token_argument
from ldpsynth.serving import event_loop
from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.validation import check_seconds

if TYPE_CHECKING:
    from ldpsynth.aggregator.runtime.config import ServerConfig


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("aggregator", help="run the aggregator (gRPC server, durable Ray shards)")
    commands = parser.add_subparsers(dest="aggregator_command", metavar="COMMAND", required=True)
    serve = add_command(commands, "serve", serve_command, help="serve collections over gRPC until SIGTERM/SIGINT")
    serve.add_argument("--data-dir", type=Path,
                       help="directory of the embedded log and the shard snapshots (created if missing); "
                            "required unless --nats")
    serve.add_argument("--port", required=True, type=int, help="TCP port; 0 picks a free one (printed)")
    serve.add_argument("--collection", required=True, action="append", type=Path, metavar="COLLECTION.json",
                       help="a collection's schema or mechanism card (JSON); repeat for several")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default %(default)s)")
    serve.add_argument("--shards", type=int, help="shards of a new data directory (default: one per CPU)")
    serve.add_argument("--ray-address", help="join this Ray cluster (default: start a local Ray runtime on 127.0.0.1)")
    serve.add_argument("--nats", metavar="URL[,URL...]",
                       help="the replicated log is this NATS JetStream cluster (nats://HOST:PORT,...): the replica is "
                            "stateless and shares the collections with every replica of the same cluster "
                            "(default: an embedded single-node log in --data-dir)")
    serve.add_argument("--log-replicas", type=int, default=3,
                       help="copies of every log stream in the NATS cluster (default %(default)s)")
    serve.add_argument("--nats-tls-ca", type=Path, help="CA of the NATS servers' certificates (PEM): TLS to the log")
    serve.add_argument("--nats-tls-cert", type=Path, help="this replica's certificate for the NATS servers (PEM)")
    serve.add_argument("--nats-tls-key", type=Path, help="its private key (PEM)")
    serve.add_argument("--worker-dir", type=Path,
                       help="directory on every Ray node for the shard workers' snapshots (cluster mode; "
                            "default: the system temporary directory/ldpsynth-workers)")
    serve.add_argument("--worker-resource", metavar="NAME",
                       help="run shard workers only on Ray nodes offering this custom resource (cluster mode)")
    serve.add_argument("--verbose", action="store_true", help="also print Ray's own log lines")
    serve.add_argument("--tls-cert", type=Path, help="server certificate chain (PEM); enables TLS")
    serve.add_argument("--tls-key", type=Path, help="server private key (PEM)")
    serve.add_argument("--tls-client-ca", type=Path, help="CA of client certificates (PEM); requires mutual TLS")
    serve.add_argument("--tokens", type=Path,
                       help='clients file: {"clients": [{"id", "token", "collections", "roles"}]}')
    serve.add_argument("--shuffle-key", type=Path, metavar="FILE",
                       help="cluster (--nats): the key file sealed reports from a shuffler are opened with, the same "
                            "on every replica (made by 'ldpsynth aggregator sealing-key --out FILE'; mode 600). One "
                            "machine keeps its own as DIR/sealing-key, created at its first start")
    serve.add_argument("--open-processes", type=int, default=0, metavar="N",
                       help="worker processes that open sealed reports from shufflers, one core each (default 0: "
                            "one thread of the replica)")
    serve.add_argument("--max-rows-per-client", type=int,
                       help="reports one credential may store per collection (default 0: unlimited)")
    serve.add_argument("--max-batch-reports", type=int, help="reports per batch (default: the protocol's Limits)")
    serve.add_argument("--max-message-bytes", type=int,
                       help="largest request message in bytes (default: the protocol's Limits)")
    serve.add_argument("--snapshot-every", type=int, default=1 << 20, metavar="N",
                       help="new reports a shard worker keeps in memory before it writes a snapshot: the most a "
                            "restarted worker replays from the log (default %(default)s)")
    serve.add_argument("--accept-lost-records", action="store_true",
                       help="serve a log that lost acknowledged records (e.g. restored from an older backup), giving "
                            "them up; the loss is recorded in --data-dir, and later starts and verify report it")
    serve.add_argument("--grace", type=float, default=5.0,
                       help="seconds open report streams and queries get to finish on SIGTERM (default 5)")
    serve.add_argument("--max-commit-interval", type=float, default=0.3, metavar="SECONDS",
                       help="most seconds between two group commits of a shard under load (the interval grows with "
                            "the batches in flight, 4 ms each: larger groups cost less CPU per report, acks come "
                            "later; 0 commits every group at once; default %(default)s)")
    serve.add_argument("--reflection", action="store_true", help="enable gRPC server reflection")
    add_wide_fit_arguments(serve, "wide-")
    serve.add_argument("--web-port", type=int,
                       help="also serve the collection service to browsers on this TCP port, on --host: the Connect "
                            "protocol and gRPC-Web, HTTP/1.1 and HTTP/2, unary SubmitBatch and GetCollection "
                            "(default: off; 0 picks a free port, printed as web_address)")
    serve.add_argument("--web-origins", metavar="ORIGIN[,ORIGIN...]", default="",
                       help="web pages allowed to call the web port from a browser (CORS), e.g. "
                            "https://survey.example.org; * allows any (default: none)")
    add_observability_arguments(serve)
    verify = add_command(
        commands, "verify", verify_command,
        help="check every record of a log: checksums, positions, no id stored twice, cards, quotas",
        description="Read every record of the log of a stopped one-machine aggregator (--data-dir) or of a cluster "
                    "(--nats) and check it; with --data-dir also make every check 'serve' makes at start, in the "
                    "same words. Prints JSON: the rows per collection, the problems (what makes serve refuse, and "
                    "damaged records), notes (what serve repairs by itself) and the losses accepted with "
                    "--accept-lost-records. Exit 0 when there is no problem, 1 otherwise (also when the log cannot "
                    "be opened), 2 for a wrong command line: bad flags, a --data-dir that does not exist or is in "
                    "use by a running aggregator.")
    where = verify.add_mutually_exclusive_group(required=True)
    where.add_argument("--data-dir", type=Path, help="the data directory of a stopped one-machine aggregator")
    where.add_argument("--nats", metavar="URL[,URL...]", help="the NATS servers of a cluster's log")
    verify.add_argument("--log-replicas", type=int, default=3, help="copies of every stream (cluster; default 3)")
    verify.add_argument("--nats-tls-ca", type=Path, help="CA of the NATS servers' certificates (PEM)")
    verify.add_argument("--nats-tls-cert", type=Path, help="a client certificate for the NATS servers (PEM)")
    verify.add_argument("--nats-tls-key", type=Path, help="its private key (PEM)")
    keygen = add_command(
        commands, "sealing-key", sealing_key_command,
        help="make a new sealing key file for a cluster's replicas (--shuffle-key)",
        description="Write a new HPKE key pair (DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM) to a new "
                    "file readable by its owner only, and print its public key and key id as JSON. Give the file "
                    "to every replica of the cluster (--shuffle-key); devices seal their reports to the public key, "
                    "which the replicas publish with each collection. Refuses to overwrite a file.")
    keygen.add_argument("--out", required=True, type=Path, metavar="FILE", help="the new key file (must not exist)")
    retire = add_command(
        commands, "retire", retire_command,
        help="remove a closed collection's reports and snapshots from a stopped aggregator's data directory",
        description="Retire a closed collection (its schema's closes has passed; export it first) from the data "
                    "directory of a stopped one-machine aggregator: its reports are removed from the log (the other "
                    "collections' reports are copied to a new log layout, exactly once), its snapshots removed, and "
                    "its name recorded as retired (serve refuses its card from then on; verify lists it). Prints "
                    "JSON: what was removed and kept. Exit 0 when done; 2 when refused (not closed, unknown, already "
                    "retired, a store verify finds unsound, a --data-dir in use): one line says why. Interrupted, it "
                    "leaves DIR/retiring.json (serve and verify refuse the directory): run it again to finish.")
    retire.add_argument("--data-dir", type=Path, required=True, help="the data directory of a stopped aggregator")
    retire.add_argument("--collection", required=True, help="the name of the closed collection to retire")
    advance = add_command(
        commands, "advance", advance_command,
        help="close a discovery collection's open round: on a running aggregator (--server) or in a stopped one's "
             "data directory (--data-dir)",
        description="Close the open round of a discovery collection (a --collection with a discovery block, "
                    "docs/heavy-hitters.md): decode its reports, choose the next round's candidates and store the "
                    "state. With --server, on the running aggregator (QueryService.AdvanceRound, a token with the "
                    "role operate): the next round is served at once. With --data-dir, from the reports a stopped "
                    "one-machine aggregator's log holds: the next serve opens the next round. After the last round, "
                    "the heavy hitters (value, count, standard error, 95% CI) are printed and written next to the "
                    "state (DIR/discovery/*.results.json). Prints JSON. Exit 0 when done; 2 when refused (fewer "
                    "reports than min_reports_per_round, finished, unknown, a --data-dir in use, no role operate): "
                    "one line says why.")
    where = advance.add_mutually_exclusive_group(required=True)
    where.add_argument("--server", metavar="HOST:PORT", help="a running aggregator (one replica)")
    where.add_argument("--data-dir", type=Path, help="the data directory of a stopped aggregator")
    advance.add_argument("--collection", required=True, help="the discovery collection's name")
    add_token_argument(advance, "with the operate role (--server)")
    add_tls_arguments(advance, "PEM of this client's certificate (mutual TLS; --server)",
                      "PEM of this client's private key (mutual TLS; --server)")
    advance.add_argument("--deadline", type=float, default=600.0, metavar="SECONDS",
                         help="deadline of the call (--server; default: %(default)s); it is made once, never retried")
    advance.add_argument("--finite-out", type=Path, metavar="FILE.json",
                         help="when the discovery finishes: write the collection that asks the discovered values as a "
                              "categorical attribute with an 'other' bucket (docs/heavy-hitters.md, 'The discovered "
                              "values as a finite attribute')")
    advance.add_argument("--finite-name", metavar="NAME",
                         help="that collection's name (default: the discovery's, then '-values')")
    check = add_command(
        commands, "health", health_command,
        help="ask a running aggregator's gRPC health service; exit 0 when SERVING",
        description="Query the standard gRPC health service (grpc.health.v1) of an aggregator, e.g. as a "
                    "container health check. Prints the status; exit 0 when SERVING, 1 otherwise (NOT_SERVING, "
                    "unreachable or deadline exceeded).")
    add_target_argument(check, "the aggregator, or several replicas (each is asked; exit 0 only if all are SERVING)")
    check.add_argument("--service", default="",
                       help='health service name (default "": the whole server; or ldpsynth.v1.CollectionService)')
    check.add_argument("--deadline", type=float, default=5.0, help="seconds to wait for the answer (default 5)")
    add_tls_arguments(check, "PEM of a client certificate (a mutual-TLS server)",
                      "PEM of that certificate's private key (mutual TLS)")


def serve_command(args: argparse.Namespace) -> int:
    """Handler of ``aggregator serve``."""
    from ldpsynth.aggregator.operate.states import cluster_states
    from ldpsynth.aggregator.runtime.config import (
        ClusterConfig,
        ServerConfig,
        TlsFiles,
        expand_collections,
        load_collection,
    )
    from ldpsynth.aggregator.runtime.discovery import expand
    from ldpsynth.serving.observe import events
    from ldpsynth.shared.heavy_hitters.collection import DiscoverySchema
    from ldpsynth.shared.protocol import Limits

    defaults = Limits()

    tls = TlsFiles.from_flags(args.tls_cert, args.tls_key, args.tls_client_ca)
    cluster = None
    if args.nats:
        cluster = ClusterConfig(tuple(u.strip() for u in args.nats.split(",") if u.strip()), args.log_replicas,
                                args.nats_tls_ca, args.nats_tls_cert, args.nats_tls_key,
                                worker_resource=args.worker_resource,
                                **({"worker_dir": args.worker_dir} if args.worker_dir else {}))
    loaded = [load_collection(path) for path in args.collection]
    ordinary, wide = expand_collections(item for item in loaded if not isinstance(item, DiscoverySchema))
    schemas = [item for item in loaded if isinstance(item, DiscoverySchema)]
    states = None  # a cluster's discoveries: their states are read from the log (one machine: from --data-dir)
    if cluster is not None and schemas:
        states = event_loop.run(cluster_states(cluster.log_settings(), schemas))
    collections, discoveries = expand([*ordinary, *schemas], None if args.nats else args.data_dir, states)
    config = ServerConfig(
        data_dir=args.data_dir,
        discoveries=discoveries,
        cluster=cluster,
        verbose=args.verbose,
        collections=collections,
        wide=wide,
        wide_fit=wide_fit(args, "wide-"),
        host=args.host,
        port=args.port,
        shards=args.shards,
        ray_address=args.ray_address,
        tls=tls,
        tokens_file=args.tokens,
        limits=Limits(
            defaults.max_rows_per_client if args.max_rows_per_client is None else args.max_rows_per_client,
            defaults.max_batch_reports if args.max_batch_reports is None else args.max_batch_reports,
            defaults.max_message_bytes if args.max_message_bytes is None else args.max_message_bytes),
        reflection=args.reflection,
        grace_seconds=args.grace,
        max_commit_interval=args.max_commit_interval,
        snapshot_ids=args.snapshot_every,
        accept_lost_records=args.accept_lost_records,
        web_port=args.web_port,
        web_origins=tuple(o.strip().lower() for o in args.web_origins.split(",") if o.strip()),
        shuffle_key=args.shuffle_key,
        open_processes=args.open_processes,
        metrics_host=args.metrics_host,
        metrics_port=args.metrics_port,
        otlp_endpoint=args.otlp_endpoint,
    )
    events.configure(args.log_format)
    return event_loop.run(_serve(config))


async def _serve(config: ServerConfig) -> int:
    from ldpsynth.aggregator.ingress.server import AggregatorServer
    from ldpsynth.aggregator.runtime.backend import WorkersDidNotStart
    from ldpsynth.serving.observe import events

    server = AggregatorServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):  # from the first moment: a stop while starting is a stop
        loop.add_signal_handler(sig, stop.set)
    starting, stopped = asyncio.ensure_future(server.start()), asyncio.ensure_future(stop.wait())
    await asyncio.wait((starting, stopped), return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():  # the start releases what it had started when it is cancelled
        starting.cancel()
        await asyncio.gather(starting, return_exceptions=True)
        events.get(__name__).info("replica.stopped", "stopped while starting")
        return 0
    try:
        starting.result()  # bad flags or a damaged log raise here: one line, exit 2 (cli.main)
    except WorkersDidNotStart as exc:  # the replica could not run: one line, exit 1
        print(f"ldpsynth aggregator: error: {exc}", file=sys.stderr, flush=True)
        return 1
    listening = {"event": "listening", "address": server.address}
    if server.web_address:
        listening["web_address"] = server.web_address
    if server.metrics_url is not None:
        listening["metrics"] = server.metrics_url
    print(json.dumps(listening), flush=True)
    failed = asyncio.ensure_future(server.failed.wait())
    await asyncio.wait((stopped, failed), return_when=asyncio.FIRST_COMPLETED)
    if server.failed.is_set():
        await server.abandon()
        print(f"ldpsynth aggregator: error: {server.failure}", file=sys.stderr, flush=True)
        os._exit(1)  # Ray's exit handlers would wait for a runtime that is gone
    await server.stop()
    return 0


def sealing_key_command(args: argparse.Namespace) -> int:
    """Handler of ``aggregator sealing-key``: a new key file at ``--out`` (never over an existing file)."""
    from ldpsynth.aggregator.storage.sealing_key import write_key_file
    from ldpsynth.shared.sealing import SUITE_NAME, OpeningKey

    if args.out.exists() or args.out.is_symlink():
        raise LdpsynthError(f"--out {args.out}: exists; a key file is never overwritten (reports sealed to its key "
                            "would no longer open): choose another path")
    key = OpeningKey.generate()
    try:
        write_key_file(args.out, key)
    except OSError as exc:
        raise LdpsynthError(f"--out {args.out}: cannot write ({exc.strerror})") from None
    print(json.dumps({"file": str(args.out), "suite": SUITE_NAME, "public_key": key.public.public_key.hex(),
                      "key_id": key.key_id.hex()}))
    return 0


def verify_command(args: argparse.Namespace) -> int:
    """Handler of ``aggregator verify``."""
    from ldpsynth.aggregator.runtime.verify import Verification, verify_data_dir, verify_log
    from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
    from ldpsynth.aggregator.storage.log_layout import LogSettings, LogUnavailable

    async def run() -> Verification:
        if args.data_dir is not None:
            return await verify_data_dir(str(args.data_dir))
        servers = tuple(u.strip() for u in args.nats.split(",") if u.strip())
        ca, cert, key = (None if path is None else str(path)
                         for path in (args.nats_tls_ca, args.nats_tls_cert, args.nats_tls_key))
        settings = LogSettings(servers, args.log_replicas, ca, cert, key)
        try:
            replicated = await ReplicatedLog.connect(settings, name="ldpsynth-verify")
        except LogUnavailable as exc:  # the log cannot be opened: a finding, reported like the others
            return Verification(problems=[str(exc)])
        try:
            return await verify_log(replicated, published_snapshots=True)
        finally:
            await replicated.close()

    result = asyncio.run(run())
    print(json.dumps(result.to_json(), indent=2))
    return 0 if result.ok else 1


def retire_command(args: argparse.Namespace) -> int:
    """Handler of ``aggregator retire``."""
    from ldpsynth.aggregator.runtime.retire import retire

    done = asyncio.run(retire(str(args.data_dir), args.collection))
    print(json.dumps(done.to_json(), indent=2))
    return 0


def advance_command(args: argparse.Namespace) -> int:
    """Handler of ``aggregator advance``."""
    if args.server is not None:
        from ldpsynth.client import Client
        from ldpsynth.client.query import QueryClient

        tls = {"root_certificates": args.tls_ca, "certificate_chain": args.tls_cert, "private_key": args.tls_key}
        with QueryClient(args.server, token=args.token, deadline=args.deadline, **tls) as client:
            done = client.advance_round(args.collection)
        if args.finite_out is not None and "results" in done:
            with Client(args.server, token=args.token, deadline=args.deadline, **tls) as device_client:
                schema = device_client.get_discovery_collection(args.collection).schema
            _write_finite(args, schema, done)
        print(json.dumps(done, indent=2))
        return 0
    from ldpsynth.aggregator.runtime.discovery import advance, stored_schema

    done = asyncio.run(advance(str(args.data_dir), args.collection))
    if args.finite_out is not None and "results" in done:
        _write_finite(args, stored_schema(str(args.data_dir), args.collection), done)
    print(json.dumps(done, indent=2))
    return 0


def _write_finite(args: argparse.Namespace, schema: Any, done: dict[str, Any]) -> None:
    """``--finite-out``: the follow-up collection whose attribute takes the discovered values (and "other")."""
    from ldpsynth.shared.heavy_hitters.finite import finite_collection

    values = [row["value"] for row in done["results"]["heavy_hitters"]]
    follow = finite_collection(schema, values, name=args.finite_name or f"{args.collection}-values")
    args.finite_out.write_text(json.dumps(follow, indent=2) + "\n", encoding="utf-8")
    done["finite_collection"] = str(args.finite_out)


def health_command(args: argparse.Namespace) -> int:
    """Handler of ``aggregator health``: one ``grpc.health.v1.Health/Check`` call per target (several
    replicas: ``--target a:1,b:2``; exit 0 only if every one is SERVING), over TLS when a ``--tls-*``
    file is given (the client's channel credentials), else plaintext."""
    from ldpsynth.client.transport import channel_credentials, split_targets
    from ldpsynth.serving.tls import check_pair
    from ldpsynth.shared.errors import ValidationError

    check_seconds(args.deadline, "--deadline")
    check_pair(args.tls_cert, args.tls_key, "--tls-cert", "--tls-key", "mutual TLS")
    try:
        credentials = channel_credentials(args.tls_ca, args.tls_cert, args.tls_key)
    except ValidationError as exc:  # its fields are the SDK's parameter names
        flag = {"root_certificates": "--tls-ca", "certificate_chain": "--tls-cert", "private_key": "--tls-key"}
        raise LdpsynthError(f"{flag.get(exc.field, exc.field)}: {exc.problem}; legal range: {exc.legal}") from None
    try:
        targets = [f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
                   for host, port in split_targets(args.target)]
    except ValidationError as exc:
        raise LdpsynthError(f"--target: {exc.problem}; legal range: {exc.legal}") from None
    serving = [_check_health(target, credentials, args.service, args.deadline) for target in targets]
    return 0 if all(serving) else 1


def _check_health(target: str, credentials: object, service: str, deadline: float) -> bool:
    """Ask one replica; print its answer as one JSON line; ``True`` when SERVING."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    channel = grpc.insecure_channel(target) if credentials is None else grpc.secure_channel(target, credentials)
    with channel:
        try:
            answer = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=service),
                                                               timeout=deadline)
        except grpc.RpcError as exc:
            print(json.dumps({"target": target, "service": service, "status": exc.code().name,
                              "detail": exc.details()}))
            return False
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(answer.status)
    print(json.dumps({"target": target, "service": service, "status": status}))
    return answer.status == health_pb2.HealthCheckResponse.SERVING


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ldpsynth.cli.aggregator_cmd serve ...`` (this subcommand alone)."""
    return main_alone("aggregator", register, "The ldpsynth aggregator.", argv)


if __name__ == "__main__":
    sys.exit(main())
