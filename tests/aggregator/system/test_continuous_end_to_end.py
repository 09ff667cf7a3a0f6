"""Continuous data through the whole system (issue 6 item 2, WYZ §V-A): devices discretise and
perturb their (x, y) row with the client SDK, the aggregator stores it, and Lipschitz queries are
answered over gRPC by the query service; the answers equal the offline estimator on the export and
cover the true answers within the discretisation bound plus 5 standard errors (α < 1e-6 per query
for the estimation part; the discretisation part is a deterministic bound)."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ldpsynth.client import AsyncClient, PrivacyLedger
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.continuous import continuous_schema, discretisation_bound, function_weights

from ..query.test_query_service import offline

pytestmark = pytest.mark.ray

DEVICES = 1500


async def submit_devices(target: str, collection: str, rows: np.ndarray) -> int:
    """One device per row, each with its own ledger, 50 at a time."""
    gate = asyncio.Semaphore(50)
    async with AsyncClient(target) as client:
        info = await client.get_collection(collection)

        async def device(row: np.ndarray) -> int:
            async with gate:
                with PrivacyLedger.for_simulation() as ledger:
                    result = await client.submit(info, {"x": [row[0]], "y": [row[1]]}, ledger=ledger)
            return result.acknowledged

        return sum(await asyncio.gather(*(device(r) for r in rows)))


def test_lipschitz_queries_on_continuous_rows_through_client_and_aggregator(start_server):
    schema = continuous_schema(["x", "y"], lo=[0.0, -1.0], hi=[1.0, 1.0], epsilon=3.0, bits=2, name="points")
    server = start_server(collections=(MechanismCard.for_schema(schema),))
    rng = np.random.default_rng(66)
    rows = np.column_stack([rng.beta(2, 5, DEVICES), np.clip(rng.normal(0.2, 0.3, DEVICES), -1, 1)])
    assert asyncio.run(submit_devices(server.address, "points", rows)) == DEVICES

    centres = np.array([[0.2, 0.0], [0.5, 0.5], [0.8, -0.5]])

    def functions(p):
        return np.stack([np.maximum(0.0, 1.0 - np.linalg.norm(p - c, axis=1)) for c in centres], axis=1)

    weights = function_weights(schema, functions)                    # 1-Lipschitz tents on the cell centres
    queries = [{"kind": "linear", "weights": w.tolist(), "normalization": "mean"} for w in weights]
    with QueryClient(server.address) as client:
        answers = client.estimate("points", queries=queries)
        release = client.export("points")
    reference = offline(release, queries)
    np.testing.assert_allclose(answers.estimate, reference.estimate, rtol=1e-12)
    truth = functions(rows).mean(axis=0)
    slack = discretisation_bound(schema, 1.0) + 5 * answers.std_error
    assert np.all(np.abs(answers.estimate - truth) <= slack), (answers.estimate, truth, slack)
    assert answers.n == DEVICES
