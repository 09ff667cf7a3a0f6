"""``ldpsynth shuffler serve`` SIGKILLed mid-batch, at seeded moments, in front of one real replica, until
20 kills struck while devices were sending: devices (the SDK, retrying) resend through the shuffler
restarted on the same port.
Afterwards every acknowledged report is stored (0 lost) and every stored report once (0 duplicated)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import numpy as np

from ldpsynth.client import AsyncClient, RetryPolicy, Shuffler, SubmitError
from ldpsynth.shared.protocol import CollectionInfo
from ldpsynth.shared.reports import Reports
from tests.aggregator.conftest import RATINGS, ServerThread, make_reports, stored_ids

from .conftest import DEVICE, collection_info, shuffler_process

#: Public keys the reports use: pools are per public key, and two keys fill their pools as fast as the test needs.
MOVIES = 2


def reports_of(n: int, rng: np.random.Generator) -> Reports:
    """``n`` valid reports of movie codes below :data:`MOVIES`."""
    reports = make_reports(RATINGS, n, rng)
    return Reports(reports.report_ids, reports.private_codes, reports.public_codes % MOVIES)

KILLS = 20
DEVICES = 4
#: The SDK keeps retrying across a restart (about a second) without giving up.
RETRY = RetryPolicy(max_attempts=200, initial_backoff=0.02, max_backoff=0.2)


#: Per kill: whether devices were still sending when it struck.
MID_BATCH: list[bool] = []
#: Devices' submissions that had to resend (a kill, or a pool that expired), over the whole test.
RETRIED: list[int] = []


async def device(replica: str, target: str, info: CollectionInfo, reports: Reports) -> bool:
    """Submit through the shuffler; whether the submission was acknowledged in full."""
    async with AsyncClient(replica, token=DEVICE, shuffler=Shuffler(target), retry=RETRY, deadline=10.0) as client:
        try:
            result = await client.submit_reports(info, reports, batch_size=5)
        except SubmitError:
            return False
        if result.retries and len(reports) > 1:  # a device's, not a filler's
            RETRIED.append(result.retries)
        return result.acknowledged == len(reports)


async def filler(replica: str, target: str, info: CollectionInfo, rng: np.random.Generator,
                 sent: list[Reports], done: list[Reports]) -> None:
    """A new one-report device every 20 ms until cancelled (then its devices still waiting are
    cancelled too, unacknowledged): traffic that lets the devices' last batches reach the threshold."""

    async def one(reports: Reports) -> None:
        if await device(replica, target, info, reports):
            done.append(reports)

    running: set[asyncio.Task[None]] = set()
    try:
        while True:
            sent.append(reports_of(1, rng))
            task = asyncio.ensure_future(one(sent[-1]))
            running.add(task)
            task.add_done_callback(running.discard)
            await asyncio.sleep(0.02)
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)


async def round_of_devices(replica: str, target: str, info: CollectionInfo, rng: np.random.Generator,
                           kill: float, restart) -> tuple[list[Reports], list[Reports]]:
    """Devices submit at once; after ``kill`` seconds the shuffler is SIGKILLed and restarted. Returns the
    submissions acknowledged in full, and all the submissions."""
    parts = [reports_of(int(rng.integers(60, 151)), rng) for _ in range(DEVICES)]
    filled: list[Reports] = []
    fillers: list[Reports] = []
    fill = asyncio.ensure_future(filler(replica, target, info, rng, fillers, filled))
    tasks = [asyncio.ensure_future(device(replica, target, info, part)) for part in parts]
    await asyncio.sleep(kill)
    sending = sum(not task.done() for task in tasks)
    await asyncio.get_running_loop().run_in_executor(None, restart)
    MID_BATCH.append(sending > 0)
    acknowledged = [part for part, ok in zip(parts, await asyncio.gather(*tasks)) if ok]
    fill.cancel()
    await asyncio.gather(fill, return_exceptions=True)
    return acknowledged + filled, parts + fillers


def test_a_killed_shuffler_loses_no_acknowledged_report_and_stores_none_twice(
        replica: ServerThread, mixer_token_file: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(20261126)
    info = collection_info(replica)
    current = [shuffler_process(replica, mixer_token_file, tmp_path / "shuffler0.log", threshold=8, max_wait=0.5)]
    target = current[0].address
    acknowledged: list[Reports] = []
    submitted: list[Reports] = []
    kills = 0

    def restart() -> None:
        nonlocal kills
        os.kill(current[-1].proc.pid, signal.SIGKILL)
        current[-1].wait(30)
        kills += 1
        current.append(shuffler_process(replica, mixer_token_file, tmp_path / f"shuffler{kills}.log", threshold=8,
                                        max_wait=0.5, listen=target))

    started = time.monotonic()
    try:
        while sum(MID_BATCH) < KILLS and len(MID_BATCH) < 2 * KILLS:  # kills that struck no device do not count
            kill = float(rng.uniform(0.02, 0.3))
            ok, sent = asyncio.run(round_of_devices(replica.address, target, info, rng, kill, restart))
            acknowledged += ok
            submitted += sent
    finally:
        for proc in current:
            proc.kill()
    assert sum(MID_BATCH) == KILLS and kills == len(MID_BATCH)
    acknowledged_ids = {bytes(r) for part in acknowledged for r in part.report_ids}
    submitted_ids = {bytes(r) for part in submitted for r in part.report_ids}
    held = stored_ids(replica, "ratings")
    rows = replica.run(replica.server.stored("ratings"))
    lost = acknowledged_ids - held
    assert len(lost) == 0, f"{len(lost)} acknowledged reports lost"
    assert rows == len(held), f"{rows - len(held)} reports stored twice"
    assert held <= submitted_ids
    assert len(acknowledged_ids) > KILLS * DEVICES * 10 // 2  # most submissions got through
    assert len(RETRIED) >= KILLS // 2  # the kills interrupted devices' calls: they resent
    print(f"{kills} kills ({sum(MID_BATCH)} while devices were sending) in {time.monotonic() - started:.1f} s: "
          f"{len(acknowledged_ids)} reports acknowledged, "
          f"{len(held)} stored, 0 lost, 0 duplicated; {len(RETRIED)} submissions retried")
