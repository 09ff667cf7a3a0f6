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

    from ldpsynth.client import QueryClient
    from ldpsynth.shared.queries.builders import marginal

    with QueryClient("localhost:50051", token="...") as analyst:
        print(analyst.estimate("ratings", queries=[marginal("rating")]).records())

Through a shuffler (docs/contract.md §16; the ``[shuffle]`` extra), each report sealed to the
aggregator's key and sent to the shuffler (:class:`Shuffler`); the collection still comes from the
aggregator::

    with PrivacyLedger("ledger.sqlite") as ledger, \\
            Client("localhost:50051", token="...", shuffler="shuffler:50061") as client:
        client.submit("ratings", {"movie": ["m1"], "rating": [4]}, ledger=ledger)
"""

from ldpsynth.client.aio import AsyncClient
from ldpsynth.client.errors import QueryError, SubmitError
from ldpsynth.client.ledger import DEFAULT_BUDGET_MULTIPLE, LEDGER_ENV, PrivacyLedger, default_ledger_path
from ldpsynth.client.query import QueryClient
from ldpsynth.client.result import SubmitResult
from ldpsynth.client.retry import RetryPolicy
from ldpsynth.client.sync import Client
from ldpsynth.client.transport import Shuffler
from ldpsynth.shared.errors import CardChanged, PrivacyBudgetExceeded, ValidationError
from ldpsynth.shared.queries.wire import AnswerTable
from ldpsynth.shared.release import Release

#: What a device or an analyst calls. The parts (encoding rows, preparing and batching reports, the
#: retry rules) live in their modules (``ldpsynth.client.rows``, ``.device``, ``.submit``, ``.retry``).
__all__ = [
    "AnswerTable",
    "AsyncClient",
    "CardChanged",
    "Client",
    "DEFAULT_BUDGET_MULTIPLE",
    "LEDGER_ENV",
    "PrivacyBudgetExceeded",
    "PrivacyLedger",
    "QueryClient",
    "QueryError",
    "Release",
    "RetryPolicy",
    "Shuffler",
    "SubmitError",
    "SubmitResult",
    "ValidationError",
    "default_ledger_path",
]
