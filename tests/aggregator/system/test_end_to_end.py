"""End to end over real sockets: MovieLens-100k devices → SDK (ledger, ``perturb_secure``) → gRPC →
durable shards, and what is stored is exactly what mechanism E predicts.

Every MovieLens user is one device with its own privacy ledger; it submits its ratings (public
``movie``, private ``rating``) through :meth:`AsyncClient.submit`, so the perturbation is the
device's OS CSPRNG sampler. The device's ledger memoizes each report with its id; preparing the
same rows again returns those memoized reports, which is how the test (and only the test) links
every stored report to the true row it came from.

Asserted:

* every acknowledged report is stored exactly once, nothing else is stored, the public movie
  of every stored report is the true one, and the server's in-memory statistics equal a
  recount of the files;
* for every true rating v, the stored codes of the rows rated v follow E's output law given v
  (WYZ eq. 16: keep with probability A/N, each other code with L/N): Pearson chi-square
  with 4 degrees of freedom at α = 1e-6 per true value (5 tests; family-wise α ≤ 5e-6).
  Expected counts are ≥ 900 per cell (rating 1 has 6,110 rows, lie probability ≈ 0.149).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from ldpsynth.client import AsyncClient, PrivacyLedger
from ldpsynth.client.device import prepare_reports
from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.protocol import CollectionInfo
from ldpsynth.shared.reports import Reports
from ldpsynth.simulation.datasets import DatasetNotFound, Population, movielens_100k

from ..conftest import ServerThread, verify_running

pytestmark = [pytest.mark.slow, pytest.mark.ray]

ALPHA = 1e-6
CONCURRENT_DEVICES = 32


@pytest.fixture(scope="module")
def movielens() -> Population:
    try:
        return movielens_100k(epsilon=1.0)
    except DatasetNotFound as exc:
        pytest.skip(f"MovieLens-100k is not on this machine: {exc}")


def device_columns(population: Population, rows: np.ndarray) -> dict[str, np.ndarray]:
    return {name: column[rows] for name, column in population.columns.items()}


async def submit_every_device(target: str, population: Population) -> tuple[list[Reports], int, int]:
    """Each device submits its rows with its own ledger; returns, per device, its memoized reports
    (in row order) and the totals of sent and acknowledged+duplicate reports."""
    gate = asyncio.Semaphore(CONCURRENT_DEVICES)
    epsilon = population.schema.epsilon
    async with AsyncClient(target) as client:
        info: CollectionInfo = await client.get_collection(population.schema.name)

        async def device(rows: np.ndarray) -> tuple[Reports, int, int]:
            columns = device_columns(population, rows)
            with PrivacyLedger.for_simulation(budget=len(rows) * epsilon) as ledger:
                async with gate:
                    result = await client.submit(info, columns, ledger=ledger)
                assert result.rows == result.sent == len(rows)
                assert result.epsilon_total == pytest.approx(len(rows) * epsilon)
                # The memo returns the very reports that were sent, in row order (rows are distinct).
                again = prepare_reports(info, encode_columns(info.schema, columns), ledger)
                assert again.memoized == len(rows) and again.epsilon_spent == 0.0
                return again.reports, result.sent, result.acknowledged + result.duplicates

        outcomes = await asyncio.gather(*(device(rows) for rows in population.rows_by_device()))
    return [o[0] for o in outcomes], sum(o[1] for o in outcomes), sum(o[2] for o in outcomes)


def stored_reports(server: ServerThread, collection: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(report ids as 16-byte keys, private codes, public keys)`` of every stored row, read from the log."""
    verification = verify_running(server, keep_rows=True)
    assert verification.ok, verification.problems
    chunks = [chunk for (_, c), chunk in verification.stored.items() if c == collection]
    return (np.concatenate([np.ascontiguousarray(c.report_ids).view("V16").ravel() for c in chunks]),
            np.concatenate([c.private_codes for c in chunks]), np.concatenate([c.public_keys for c in chunks]))


def test_movielens_rows_are_stored_once_and_distributed_as_e_predicts(
        movielens: Population, start_server: Callable[..., ServerThread]) -> None:
    schema = movielens.schema
    card = MechanismCard.for_schema(schema)
    server = start_server(collections=(card,), shards=2)
    reports_by_device, sent, acknowledged = asyncio.run(submit_every_device(server.address, movielens))
    n = len(movielens)
    assert sent == acknowledged == n

    sent_ids = np.concatenate([r.report_ids for r in reports_by_device]).view("V16").ravel()
    perturbed = np.concatenate([r.private_codes for r in reports_by_device])
    true_keys, true_codes = movielens.true_codes()
    order = np.concatenate(movielens.rows_by_device())  # row index of each sent report
    assert np.array_equal(np.concatenate([r.public_codes for r in reports_by_device]).ravel(), true_keys[order])

    stored_ids, stored_codes, stored_keys = stored_reports(server, schema.name)
    assert stored_ids.size == n, "every acknowledged report is stored, exactly once"
    assert np.unique(stored_ids).size == n, "no report is stored twice"
    by_id = np.argsort(stored_ids)
    where = by_id[np.searchsorted(stored_ids[by_id], sent_ids)]
    assert np.array_equal(stored_ids[where], sent_ids), "every sent report is stored"
    assert np.array_equal(stored_codes[where], perturbed), "the stored code is the device's perturbed code"
    assert np.array_equal(stored_keys[where].ravel(), true_keys[order]), "the stored movie is the true one"

    merged = server.run(server.server.statistics(schema.name))
    recount = np.zeros((schema.public_domain_size, schema.private_domain_size), np.int64)
    np.add.at(recount, (stored_keys.ravel(), stored_codes), 1)
    assert np.array_equal(merged.dense(), recount)

    # E's law given the true value (WYZ eq. 16), with the exact rational weights of the card.
    mechanism = card.mechanism
    k = schema.private_domain_size
    truth = true_codes[order]
    for v in range(k):
        observed = np.bincount(perturbed[truth == v], minlength=k)
        probabilities = np.full(k, float(mechanism.lie_probability))
        probabilities[v] = float(mechanism.keep_probability)
        expected = observed.sum() * probabilities
        assert expected.min() >= 5
        chi2, p_value = stats.chisquare(observed, expected)
        assert p_value > ALPHA, f"true value {v}: chi2 = {chi2:.1f}, p = {p_value:.2e}, counts {observed.tolist()}"
