"""``ldpsynth client``: perturb a device's rows on the device and deliver them; start its ledger over.

``submit`` reads a CSV of raw rows (header: the collection's attribute names), validates it
locally, memoizes-or-perturbs every row with the collection's mechanism (E, or the frequency oracle
its card names) under the device's privacy ledger, streams the reports and prints a JSON summary
(``sent``, ``acknowledged``, ``duplicates``, ``epsilon_spent``, ...). gRPC is imported only when the
command runs, so this works with the ``[client]`` extra.

With ``--shuffler HOST:PORT`` the reports go through a shuffler instead, each sealed to the key the
collection publishes (docs/contract.md §16; the ``[shuffle]`` extra); the summary then says
``"shuffled": true`` and ``acknowledged`` counts what the shuffler acknowledged, and for a shuffled
collection ``central_epsilon``/``central_delta`` are the central guarantee it promised the reports, as
the ledger recorded it (:meth:`ldpsynth.client.PrivacyLedger.guarantees`; ``null`` in clear).

``reset-ledger`` starts the device's privacy ledger over, knowingly
(:meth:`ldpsynth.client.PrivacyLedger.reset`), and prints the record of the reset.
"""

from __future__ import annotations

import argparse
import json
import os

from ldpsynth.cli.options import TARGET_METAVAR, add_command, add_target_argument, add_tls_arguments
from ldpsynth.cli.token_env import add_token_argument

#: Environment variable of the shuffler's token (``--shuffler-token``).
SHUFFLER_TOKEN_ENV = "LDPSYNTH_SHUFFLER_TOKEN"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``client`` (with its ``submit`` action) to the ``ldpsynth`` parser."""
    parser = subparsers.add_parser("client", help="on-device SDK: submit rows perturbed by the collection's mechanism",
                                   description="The on-device client of a collection.")
    actions = parser.add_subparsers(dest="client_command", metavar="ACTION", required=True)
    submit = add_command(
        actions, "submit", _submit, help="validate, perturb and submit the rows of a CSV file",
        description="Validate the rows locally, perturb them with the collection's mechanism (E or a frequency "
                    "oracle; OS CSPRNG), charge the ε to the "
                    "device's ledger before sending (memoized rows are free), stream them to the aggregator "
                    "and print a JSON summary.")
    add_target_argument(submit)
    submit.add_argument("--collection", required=True, metavar="NAME", help="the collection to submit to")
    submit.add_argument("--rows", required=True, metavar="ROWS.csv",
                        help="CSV of raw rows with a header of attribute names")
    add_token_argument(submit)
    add_tls_arguments(submit, "PEM of this device's certificate (mutual TLS)",
                      "PEM of this device's private key (mutual TLS)")
    _add_ledger_argument(submit)
    submit.add_argument("--budget", type=float, metavar="EPS",
                        help="ε this device may spend per collection: stored in a new ledger (default: 10 × each "
                             "collection's ε); with an existing one only a lower cap for this run (a higher "
                             "budget needs reset-ledger --budget)")
    submit.add_argument("--batch-size", type=int, metavar="N",
                        help="reports per batch (default and maximum: the collection's limits)")
    submit.add_argument("--deadline", type=float, default=30.0, metavar="SECONDS",
                        help="deadline of each call (default: %(default)s)")
    submit.add_argument("--max-attempts", type=int, default=8, metavar="N",
                        help="attempts in a row without progress before giving up (default: %(default)s)")
    shuffle = submit.add_argument_group(
        "through a shuffler", "Send the reports sealed, each to the aggregator's public key (HPKE), to a shuffler "
        "run by another party, which mixes them with other devices' before the aggregator sees them "
        "(docs/contract.md §16; needs the [shuffle] extra). The collection and its key still come from --target.")
    shuffle.add_argument("--shuffler", metavar=TARGET_METAVAR, help="the shuffler's address (or several)")
    shuffle.add_argument("--shuffler-token", default=os.environ.get(SHUFFLER_TOKEN_ENV) or None, metavar="T",
                         help=f"bearer token for the shuffler (default: ${SHUFFLER_TOKEN_ENV}; unset or empty: none)")
    shuffle.add_argument("--shuffler-tls-ca", metavar="FILE",
                         help="PEM of the CA that signed the shuffler's certificate (TLS to the shuffler)")
    reset = add_command(
        actions, "reset-ledger", _reset_ledger, help="start this device's privacy ledger over, knowingly",
        description="Move the ledger, its -wal/-shm files and its marker aside (renamed <ledger>.reset-<UTC time>..., "
                    "never deleted), create a new ledger that records the reset, and print the record as JSON. The "
                    "epsilon spent restarts at 0 and rows already reported get fresh reports that can be averaged "
                    "with the old ones: afterwards only the server's per-credential quota bounds this device. Run it "
                    "with no other process using the ledger.")
    _add_ledger_argument(reset)
    reset.add_argument("--budget", type=float, metavar="EPS",
                       help="ε the new ledger may spend per collection (default: 10 × each collection's ε)")


def _add_ledger_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ledger", metavar="FILE",
                        help="privacy ledger file (default: $LDPSYNTH_LEDGER, else "
                             "~/.local/share/ldpsynth/ledger.sqlite; ':memory:' is refused: it would forget every "
                             "report when the command ends)")


def _submit(args: argparse.Namespace) -> int:
    from ldpsynth.client import Client, PrivacyLedger, RetryPolicy, Shuffler
    from ldpsynth.shared.errors import LdpsynthError

    retry = RetryPolicy(max_attempts=args.max_attempts)
    shuffler = None
    if args.shuffler is not None:
        shuffler = Shuffler(args.shuffler, token=args.shuffler_token, root_certificates=args.shuffler_tls_ca)
    elif args.shuffler_tls_ca is not None:
        raise LdpsynthError("--shuffler-tls-ca: only with --shuffler")
    with PrivacyLedger(args.ledger, budget=args.budget) as ledger, \
            Client(args.target, token=args.token, root_certificates=args.tls_ca, certificate_chain=args.tls_cert,
                   private_key=args.tls_key, deadline=args.deadline, retry=retry, shuffler=shuffler) as client:
        result = client.submit(args.collection, args.rows, ledger=ledger, batch_size=args.batch_size)
    print(json.dumps(result.to_json(), sort_keys=True))
    return 0


def _reset_ledger(args: argparse.Namespace) -> int:
    from ldpsynth.client import PrivacyLedger

    print(json.dumps(PrivacyLedger.reset(args.ledger, budget=args.budget), sort_keys=True))
    return 0
