"""A shuffled wide collection end to end: each device seals its view's report to the aggregator's key and sends it
through a real shuffler, which pools per view sub-collection and public key; the replicas store what the pools
forward, and the parent answers from the views (docs/wide.md, "The collection mode")."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from ldpsynth.client import AsyncClient, PrivacyLedger, RetryPolicy, Shuffler, SubmitError
from ldpsynth.client.query import QueryClient
from ldpsynth.shared.mechanisms.registry import name_of
from ldpsynth.shared.queries.builders import marginal
from ldpsynth.shared.wide.collection import WideCard, WideSchema
from tests.shuffler.conftest import ShufflerThread

from ..conftest import stored_rows

POLL = WideSchema.from_json({
    "name": "poll", "epsilon": 2.0,
    "attributes": [{"name": "a", "type": "binary"}, {"name": "b", "type": "binary"},
                   {"name": "c", "type": "categorical", "values": ["x", "y", "z"]}],
    "shuffle": {"delta": 1e-9, "min_batch": 20, "shuffler": "independent"},
    "views": {"kind": "pairs", "salt": "73687566666c65642077696465210000"}})


def test_a_shuffled_wide_collection_goes_through_the_shuffler_view_by_view(start_server) -> None:
    card = WideCard.for_schema(POLL)
    assert {name_of(c.mechanism) for c in card.cards} == {"E"}      # the least variance for 4 and 6 cells at eps 2
    server = start_server(collections=card.cards, wide=(card,))
    shuffler = ShufflerThread(server, threshold=20, max_wait=5.0, anonymous_devices=True, max_reports_per_device=None)
    ledgers = [PrivacyLedger.for_simulation() for _ in range(240)]

    async def fleet() -> list[str | None]:
        async with AsyncClient(server.address, shuffler=Shuffler(shuffler.address),
                               retry=RetryPolicy(max_attempts=1)) as client:
            async def device(d: int) -> str | None:
                row = {"a": [d % 2], "b": [(d // 2) % 2], "c": ["xyz"[d % 3]]}
                try:
                    result = await client.submit("poll", row, ledger=ledgers[d])
                except SubmitError:     # its pool missed the threshold within max_wait: nothing stored
                    return None
                assert result.shuffled and result.collection == "poll" and result.acknowledged == 1
                return result.part

            return list(await asyncio.gather(*(device(d) for d in range(len(ledgers)))))

    try:
        parts = asyncio.run(fleet())
    finally:
        shuffler.stop()
    delivered = Counter(p for p in parts if p is not None)
    # one pool per view (no public attribute), released at a threshold in [20, 25]: what is left in a pool when
    # the fleet ends (fewer than 25 reports) waits past max_wait and is refused, so at most 3 x 24 are not stored
    assert sum(delivered.values()) >= len(ledgers) - 3 * 24 and set(delivered) <= set(card.names)
    for name in card.names:                       # every acknowledged report stored in its own view, once
        assert stored_rows(server, name) == delivered[name]
    assert all(ledger.spent("poll") == 2.0 for ledger, p in zip(ledgers, parts) if p is not None)
    with QueryClient(server.address) as analyst:
        answers = analyst.estimate("poll", queries=[marginal("a", "b", normalization="mean")])
        whole = analyst.estimate("poll", queries=[marginal("a", "b", "c")])            # the model: every view
        views = {name: analyst.estimate(name, queries=[marginal("a")] if "a" in name else [marginal("b")]).guarantees
                 for name in card.names}
    assert answers.n == sum(delivered.values()) and len(answers.records()) == 4
    # the parent's answers state the guarantees: per party the worst over the views read (each device in one view)
    inside, everything = answers.guarantees, whole.guarantees
    assert inside is not None and everything is not None and all(g is not None for g in views.values())
    assert inside.labels == ("poll/a+b: all rows",) and inside.counts.tolist() == [delivered["poll/a+b"]]
    assert everything.labels == tuple(f"{name}: all rows" for name in card.names)
    for party in ("operator", "analysts", "shuffler"):
        assert inside.against(party) == views["poll/a+b"].against(party)
        worst = max((g.against(party).epsilon, g.against(party).delta) for g in views.values())
        # equal up to the views' delivered ε0 (E's differ in the last bits): a local statement takes the largest
        got = everything.against(party)
        assert (got.epsilon, got.delta) >= worst and (got.epsilon, got.delta) == pytest.approx(worst, rel=1e-12)
    # central only if every view read is amplified (at min_batch 20 the 4-cell view a+b is not: local for all)
    assert everything.analysts.central == all(g.analysts.central for g in views.values())
    assert answers.records()[0]["analysts_epsilon"] == inside.analysts.epsilon
