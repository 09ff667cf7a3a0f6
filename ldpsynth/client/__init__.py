"""ldpsynth client SDK: validate a device's rows, perturb them with mechanism E on the device,
account for ε in an on-device ledger, and stream the reports to the aggregator over gRPC; and the
analyst's :class:`QueryClient` (answers from the live synthetic database, its public release).

Installable with the ``[client]`` extra alone (numpy, grpcio, protobuf): nothing here imports
scipy or Ray.

Typical use (blocking; :class:`AsyncClient` has the same methods as coroutines)::

    from ldpsynth.client import Client, PrivacyLedger

    with PrivacyLedger("ledger.sqlite") as ledger, Client("localhost:50051", token="...") as client:
        result = client.submit("ratings", {"movie": ["m1"], "rating": [4]}, ledger=ledger)
        print(result.acknowledged, result.epsilon_total)

Through a shuffler (docs/contract.md §15; the ``[shuffle]`` extra), each report sealed to the
aggregator's key and sent to the shuffler; the collection still comes from the aggregator::

    with PrivacyLedger("ledger.sqlite") as ledger, \\
            Client("localhost:50051", token="...", shuffler="shuffler:50061") as client:
        client.submit("ratings", {"movie": ["m1"], "rating": [4]}, ledger=ledger)

    from ldpsynth.client import QueryClient
    from ldpsynth.shared.queries.builders import marginal

    with QueryClient("localhost:50051", token="...") as analyst:
        print(analyst.estimate("ratings", queries=[marginal("rating")]).records())
"""

from ldpsynth.client.aio import DEFAULT_DEADLINE, AsyncClient
from ldpsynth.client.device import PreparedReports, collection_fingerprint, prepare_reports
from ldpsynth.client.errors import QueryError, SubmitError
from ldpsynth.client.ledger import DEFAULT_BUDGET_MULTIPLE, LEDGER_ENV, PrivacyLedger, default_ledger_path
from ldpsynth.client.query import DEFAULT_QUERY_DEADLINE, QUERY_RETRYABLE_STATUSES, QueryClient
from ldpsynth.client.result import SubmitResult
from ldpsynth.client.retry import RETRYABLE_STATUSES, RetryPolicy, is_retryable
from ldpsynth.client.rows import EncodedRows, encode_columns, load_rows, read_csv
from ldpsynth.client.submit import StreamResult, batch_capacity, report_bytes, sealed_batch_capacity
from ldpsynth.client.sync import Client
from ldpsynth.client.transport import DEFAULT_MAX_MESSAGE_BYTES, Shuffler
from ldpsynth.shared.errors import CardChanged, PrivacyBudgetExceeded, ValidationError
from ldpsynth.shared.queries.wire import AnswerTable
from ldpsynth.shared.release import Release
from ldpsynth.shared.sealing import SealingKey, SealingUnavailable, seal_reports, sealed_report_bytes

__all__ = [
    "AnswerTable",
    "AsyncClient",
    "CardChanged",
    "Client",
    "DEFAULT_BUDGET_MULTIPLE",
    "DEFAULT_DEADLINE",
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_QUERY_DEADLINE",
    "EncodedRows",
    "LEDGER_ENV",
    "PreparedReports",
    "PrivacyBudgetExceeded",
    "PrivacyLedger",
    "QUERY_RETRYABLE_STATUSES",
    "QueryClient",
    "QueryError",
    "RETRYABLE_STATUSES",
    "Release",
    "RetryPolicy",
    "SealingKey",
    "SealingUnavailable",
    "Shuffler",
    "StreamResult",
    "SubmitError",
    "SubmitResult",
    "ValidationError",
    "batch_capacity",
    "collection_fingerprint",
    "default_ledger_path",
    "encode_columns",
    "is_retryable",
    "load_rows",
    "prepare_reports",
    "read_csv",
    "report_bytes",
    "seal_reports",
    "sealed_batch_capacity",
    "sealed_report_bytes",
]
