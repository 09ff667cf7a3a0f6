"""ldpsynth: local differential privacy by randomized response (mechanism E, WYZ eq. 16), its
synthetic database and the companion estimators (WYZ eqs. 17-22).

The names people reach for, in one import (the modules they live in are named in ``__all__``'s
comments below):

* a collection and its release: :class:`Schema`, :class:`MechanismE`, :class:`MechanismCard`,
  :class:`Release`;
* queries: the builders :func:`linear`, :func:`predicate` with :func:`condition`,
  :func:`marginal`, :func:`grouped`, :func:`cut`, :func:`dense` (or their JSON form);
* answers: :func:`estimate_release` (offline, one call, from a release) and :func:`plan` (the
  error bars before any data);
* the client SDK (the ``[client]`` extra: grpc): :class:`Client`, :class:`AsyncClient`,
  :class:`PrivacyLedger`, :class:`QueryClient`, :class:`RetryPolicy`, and the errors
  :class:`SubmitError`, :class:`QueryError` (with :class:`ValidationError` and
  :class:`PrivacyBudgetExceeded`, all :class:`LdpsynthError`).

``import ldpsynth`` needs numpy only: the client names are imported on first use (PEP 562), so
grpc is loaded only by a program that uses them, and Ray, scipy and numba never.

>>> import ldpsynth
>>> schema = ldpsynth.Schema.from_json({"name": "survey", "epsilon": 1.0, "attributes": [
...     {"name": "region", "type": "categorical", "values": ["north", "south"], "public": True},
...     {"name": "smoker", "type": "binary"}]})
>>> card = ldpsynth.MechanismCard.for_schema(schema)
>>> rows = {"region": ["north", "south"] * 500, "smoker": [0, 1, 0, 0, 1] * 200}   # perturbed rows
>>> answers = ldpsynth.estimate_release(rows, [ldpsynth.predicate(ldpsynth.condition("smoker", "==", 1),
...                                                               normalization="mean")], card=card)
>>> answers.label(0), answers.n, [round(float(x[0]), 3) for x in (answers.estimate, answers.ci_low, answers.ci_high)]
('predicate#0', 1000, [0.284, 0.224, 0.343])
"""

from __future__ import annotations

import importlib
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import LdpsynthError, PrivacyBudgetExceeded, ValidationError
from ldpsynth.shared.estimators.offline import estimate_release
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.planning.planner import plan
from ldpsynth.shared.queries.builders import condition, cut, dense, grouped, linear, marginal, predicate
from ldpsynth.shared.release import Release
from ldpsynth.shared.schema import Schema

if TYPE_CHECKING:
    from ldpsynth.client import AsyncClient, Client, PrivacyLedger, QueryClient, QueryError, RetryPolicy, SubmitError

#: The installed distribution's version (``version`` in pyproject.toml).
__version__ = version("ldpsynth")

#: Names imported on first use from :mod:`ldpsynth.client` (they need grpc: the ``[client]`` extra).
_CLIENT_NAMES = frozenset({"AsyncClient", "Client", "PrivacyLedger", "QueryClient", "QueryError", "RetryPolicy",
                           "SubmitError"})

__all__ = [
    "__version__",
    # ldpsynth.shared.schema, .mechanism, .card, .release: a collection, mechanism E, its card, a release
    "Schema", "MechanismE", "MechanismCard", "Release",
    # ldpsynth.shared.queries.builders: the queries
    "linear", "condition", "predicate", "marginal", "grouped", "cut", "dense",
    # ldpsynth.shared.estimators.offline, .planning: answers from a release; error bars before collecting
    "estimate_release", "plan",
    # ldpsynth.shared.errors
    "LdpsynthError", "ValidationError", "PrivacyBudgetExceeded",
    # ldpsynth.client (imported on first use)
    "Client", "AsyncClient", "PrivacyLedger", "QueryClient", "RetryPolicy", "SubmitError", "QueryError",
]


def __getattr__(name: str) -> Any:
    """The client names of ``__all__``, imported from :mod:`ldpsynth.client` on first use."""
    if name not in _CLIENT_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        client = importlib.import_module("ldpsynth.client")
    except ModuleNotFoundError as exc:
        raise ImportError(f"ldpsynth.{name} needs the client SDK's dependencies: pip install 'ldpsynth[client]' "
                          f"({exc})") from exc
    value = getattr(client, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
