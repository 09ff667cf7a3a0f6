"""``ldpsynth shuffler serve``: run a shuffler (docs/contract.md §16, docs/deployment.md "Shuffler tier").

Prints one JSON line ``{"event": "listening", "address": "HOST:PORT"}`` on stdout once it serves (the
real port with ``--listen HOST:0``; with ``--metrics-port`` also ``"metrics": URL``); logs go to stderr,
as text or (``--log-format json``) JSON lines. SIGTERM/SIGINT stop it gracefully (waiting
devices answered UNAVAILABLE, forwards under way finished) and it exits 0.

The per-device quota (``--max-reports-per-device``, on by default for shuffled collections) is counted
in this process unless ``--quota-nats nats://HOST:PORT[,...]`` names the shuffler operator's own NATS
servers (JetStream on; never the aggregator's log), whose key-value bucket every shuffler process of
the tier then shares: one credential, one quota, wherever its calls land
(:mod:`ldpsynth.shuffler.quota_nats`). TLS to them: ``--quota-nats-tls-ca`` (with
``--quota-nats-tls-cert``/``--quota-nats-tls-key``: mutual TLS); their authorization token, if any, in
``$LDPSYNTH_QUOTA_NATS_TOKEN`` (never a flag: it would show in ``ps``).

Also runnable alone: ``python -m ldpsynth.cli.shuffler_cmd serve ...``.
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
from typing import TYPE_CHECKING

from ldpsynth.cli.main import main_alone
from ldpsynth.cli.options import add_command, add_observability_arguments
from ldpsynth.serving import event_loop

if TYPE_CHECKING:
    from ldpsynth.shuffler.config import ShufflerConfig


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("shuffler", help="run a shuffler (sealed reports: pool, threshold, permute, "
                                                    "forward)")
    commands = parser.add_subparsers(dest="shuffler_command", metavar="COMMAND", required=True)
    serve = add_command(commands, "serve", serve_command, help="serve ShufflerService over gRPC until SIGTERM/SIGINT",
                        description="Pool devices' sealed reports per collection and public key, release a pool only "
                                    "at a randomized "
                                    "threshold, permute it uniformly, strip the devices' metadata and forward it to "
                                    "the replicas (SubmitShuffled); a device is acknowledged once the replicas "
                                    "acknowledged its reports.")
    serve.add_argument("--listen", required=True, metavar="HOST:PORT",
                       help="address to serve devices on (port 0: a free one, printed)")
    serve.add_argument("--aggregator", required=True, metavar="HOST:PORT[,HOST:PORT...]",
                       help="the replicas: one address (a load balancer, one replica) or several (round robin)")
    serve.add_argument("--token-file", type=Path, metavar="FILE",
                       help="the shuffler's own bearer token toward the replicas (a credential with the role "
                            "'shuffler'); the file only its owner may read (mode 600)")
    serve.add_argument("--tokens", type=Path, metavar="TOKENS.json",
                       help="the devices' tokens (the replicas' format; role 'submit'); default: devices are not "
                            "authenticated")
    serve.add_argument("--tls-cert", type=Path, help="the shuffler's certificate chain toward devices (PEM); "
                                                     "enables TLS")
    serve.add_argument("--tls-key", type=Path, help="its private key (PEM)")
    serve.add_argument("--tls-client-ca", type=Path, help="CA of devices' certificates (PEM); requires mutual TLS")
    serve.add_argument("--aggregator-tls-ca", type=Path, metavar="FILE",
                       help="CA of the replicas' certificate (PEM): TLS toward the replicas")
    serve.add_argument("--aggregator-tls-cert", type=Path, metavar="FILE",
                       help="the shuffler's client certificate toward mutual-TLS replicas (PEM)")
    serve.add_argument("--aggregator-tls-key", type=Path, metavar="FILE", help="its private key (PEM)")
    serve.add_argument("--threshold", type=int, required=True, metavar="T",
                       help="fewest distinct reports a pool of one collection and public key is released with, "
                            "before its noise (at least the collection's minimum batch)")
    serve.add_argument("--max-wait", type=float, required=True, metavar="SECONDS",
                       help="seconds a pool may wait for its threshold; then its devices get UNAVAILABLE (they retry)")
    serve.add_argument("--patience", type=float, default=30.0, metavar="SECONDS",
                       help="seconds a forwarded batch is retried while the replicas answer UNAVAILABLE "
                            "(default %(default)s)")
    serve.add_argument("--max-reports-per-device", type=int, default=None, metavar="N",
                       help="the most reports one device credential may send of one collection (default: a "
                            "shuffled collection's shuffle.rows_per_device, no limit for the others; 0: no limit; "
                            "a limit needs --tokens or --tls-client-ca); counted in this process unless "
                            "--quota-nats")
    serve.add_argument("--quota-nats", metavar="URL[,URL...]",
                       help="count the per-device quota in this NATS JetStream store (nats://HOST:PORT, several "
                            "comma-separated), shared by every shuffler process of the tier: one credential, one "
                            "quota, wherever its calls land. The shuffler operator's own NATS, never the "
                            "aggregator's; its token, if any, in $LDPSYNTH_QUOTA_NATS_TOKEN. Default: counted in "
                            "this process (a device gets one quota per shuffler process)")
    serve.add_argument("--quota-nats-replicas", type=int, default=1, metavar="R",
                       help="copies of the quota bucket when a shuffler creates it (3 in a cluster of 3; default "
                            "%(default)s)")
    serve.add_argument("--quota-nats-tls-ca", type=Path, metavar="FILE",
                       help="CA of the quota store's certificates (PEM): TLS to it")
    serve.add_argument("--quota-nats-tls-cert", type=Path, metavar="FILE",
                       help="the shuffler's client certificate for the quota store (PEM; mutual TLS)")
    serve.add_argument("--quota-nats-tls-key", type=Path, metavar="FILE", help="its private key (PEM)")
    serve.add_argument("--anonymous-devices", action="store_true",
                       help="forward shuffled collections' reports from devices without credentials (no --tokens, "
                            "no --tls-client-ca): their central guarantee then assumes a per-device bound nobody "
                            "enforces (default: such calls are refused FAILED_PRECONDITION)")
    serve.add_argument("--grace", type=float, default=5.0, metavar="SECONDS",
                       help="seconds in-flight calls may finish at a stop (default %(default)s)")
    add_observability_arguments(serve)


def _config(args: argparse.Namespace) -> ShufflerConfig:
    """The flags as a :class:`ShufflerConfig`, which checks them (ConfigError naming the flag)."""
    from ldpsynth.serving.auth import read_secret
    from ldpsynth.serving.errors import ConfigError, flag_checks
    from ldpsynth.serving.tls import TlsFiles, check_pair
    from ldpsynth.shared.validation import check_int
    from ldpsynth.shuffler.config import ShufflerConfig

    tls = TlsFiles.from_flags(args.tls_cert, args.tls_key, args.tls_client_ca)
    quota_nats = None
    if args.quota_nats is not None:
        from ldpsynth.shuffler.quota_nats import TOKEN_ENV, QuotaNats, parse_servers

        check_pair(args.quota_nats_tls_cert, args.quota_nats_tls_key, "--quota-nats-tls-cert", "--quota-nats-tls-key")
        with flag_checks():
            replicas = check_int(args.quota_nats_replicas, "--quota-nats-replicas", 1, 5)
        quota_nats = QuotaNats(parse_servers(args.quota_nats, "--quota-nats"), replicas=replicas,
                               tls_ca=args.quota_nats_tls_ca, tls_cert=args.quota_nats_tls_cert,
                               tls_key=args.quota_nats_tls_key, token=os.environ.get(TOKEN_ENV) or None)
    elif args.quota_nats_tls_ca or args.quota_nats_tls_cert or args.quota_nats_tls_key:
        raise ConfigError("--quota-nats-tls-*: TLS to the quota store, which --quota-nats names")
    token = None
    if args.token_file is not None:
        token = read_secret(args.token_file, "--token-file").decode("utf-8", "replace").strip()
        if not token or not token.isprintable() or " " in token:
            raise ConfigError(f"--token-file: {args.token_file}: one bearer token (printable, no spaces)")
    return ShufflerConfig(listen=args.listen, aggregator=args.aggregator, token=token, threshold=args.threshold,
                          max_wait=args.max_wait, tokens_file=args.tokens, tls=tls,
                          aggregator_ca=args.aggregator_tls_ca, aggregator_cert=args.aggregator_tls_cert,
                          aggregator_key=args.aggregator_tls_key, patience=args.patience, grace=args.grace,
                          metrics_host=args.metrics_host, metrics_port=args.metrics_port,
                          otlp_endpoint=args.otlp_endpoint, max_reports_per_device=args.max_reports_per_device,
                          anonymous_devices=args.anonymous_devices, quota_nats=quota_nats)


def serve_command(args: argparse.Namespace) -> int:
    """Handler of ``shuffler serve``."""
    from ldpsynth.serving.observe import events

    config = _config(args)
    events.configure(args.log_format)
    return event_loop.run(_serve(config))


async def _serve(config: ShufflerConfig) -> int:
    from ldpsynth.shuffler.server import ShufflerServer

    server = ShufflerServer(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        address = await server.start()
        listening = {"event": "listening", "address": address}
        if server.metrics_url is not None:
            listening["metrics"] = server.metrics_url
        print(json.dumps(listening), flush=True)
        await stop.wait()
    finally:
        await server.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ldpsynth.cli.shuffler_cmd serve ...`` (this subcommand alone)."""
    return main_alone("shuffler", register, "The ldpsynth shuffler.", argv)


if __name__ == "__main__":
    sys.exit(main())
