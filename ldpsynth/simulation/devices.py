"""Simulated devices: each one submits its own rows through the real client SDK.

One worker process runs a group of devices as asyncio tasks (:func:`run_device_group`). Every
device has its own in-memory :class:`~ldpsynth.client.PrivacyLedger` with a budget of exactly
its rows × ε, so it perturbs on the "device" with :meth:`MechanismE.perturb_secure`, is charged
ε per row (basic composition over its rows) and memoizes its reports, just like an app would.
The devices of a group share a small pool of gRPC channels (``connections``).

Faults (seeded per device, so a run is reproducible in which devices misbehave):

* *drops*: with probability ``drop_rate`` a device starts its submission and abandons it after
  ``U[0, drop_after]`` seconds (the stream is cancelled mid-flight, as when an app is killed),
  then submits the same rows again: the ledger hands back the memoized reports with the same
  report ids, so whatever the first attempt delivered is counted by the server as duplicates
  and nothing is stored twice or charged twice;
* *delays*: every device waits an exponential time of mean ``delay`` seconds before each
  submission (a slow network or a device coming online late).

Behind a shuffler (``shuffler``: its address) every report is sealed to the aggregator's key and
sent to the shuffler, whose pools are released only at their threshold: a device's call waits for
its pool, so the devices of a group submit at once over the shared channels (not one per channel),
and a device whose pool is still short of its threshold after the shuffler's ``--max-wait`` (the
population's last reports) is counted as *waiting* for more traffic, not as failed.
"""

from __future__ import annotations

import asyncio
import math
import queue
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ldpsynth.client import AsyncClient, PrivacyLedger, Shuffler, SubmitError
from ldpsynth.shared.protocol import CollectionInfo
from ldpsynth.shared.validation import check_real, check_seconds
from ldpsynth.shared.wide.collection import WideCard


@dataclass(frozen=True)
class Faults:
    """Injected faults: abandoned submissions and delays (seconds)."""

    drop_rate: float = 0.0
    drop_after: float = 0.05
    delay: float = 0.0

    def __post_init__(self) -> None:
        check_real(self.drop_rate, "drop_rate", low=0.0, high=1.0)
        for name in ("drop_after", "delay"):
            check_seconds(getattr(self, name), name, allow_zero=True)


@dataclass(frozen=True)
class DeviceGroup:
    """What one worker process needs: where to send, and the devices with their rows."""

    target: str
    collection: str
    token: str | None
    devices: tuple[int, ...]
    rows: tuple[dict[str, np.ndarray], ...]
    connections: int
    batch_size: int | None
    faults: Faults
    seed: int
    shuffler: str | None = None
    wide: bool = False


@dataclass
class GroupOutcome:
    """Totals of one group of devices (summed over groups by the caller)."""

    devices: int = 0
    rows: int = 0
    sent: int = 0
    acknowledged: int = 0
    duplicates: int = 0
    retries: int = 0
    memoized: int = 0
    drops: int = 0
    waiting: int = 0
    waiting_reports: int = 0
    failures: list[str] = field(default_factory=list)
    epsilon_per_device: list[float] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    #: ``(device, sub-collection)`` of every device of a wide collection (its view, :attr:`SubmitResult.part`).
    parts: list[tuple[int, str]] = field(default_factory=list)

    def add(self, other: GroupOutcome) -> None:
        for name in ("devices", "rows", "sent", "acknowledged", "duplicates", "retries", "memoized", "drops", "waiting",
                     "waiting_reports"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.failures += other.failures
        self.epsilon_per_device += other.epsilon_per_device
        self.latencies += other.latencies
        self.parts += other.parts


def device_budget(rows: int, epsilon: float) -> float:
    """A budget that admits exactly ``rows`` reports at ``epsilon`` each (float rounding upwards)."""
    return math.nextafter(rows * epsilon * (1.0 + 1e-12), math.inf)


async def _abandoned_attempt(client: AsyncClient, info: CollectionInfo | WideCard, rows: dict[str, np.ndarray],
                             ledger: PrivacyLedger, batch_size: int | None, after: float) -> None:
    """Start a submission and cancel it after ``after`` seconds (or let it end if it is quicker)."""
    attempt = asyncio.create_task(client.submit(info, rows, ledger=ledger, batch_size=batch_size))
    done, _ = await asyncio.wait({attempt}, timeout=after)
    if not done:
        attempt.cancel()
    try:
        await attempt
    except (asyncio.CancelledError, SubmitError):
        pass


def _below_threshold(exc: SubmitError) -> bool:
    """Whether a submission through a shuffler ended because its pool missed the threshold (its
    reports wait for more traffic: nothing of them was forwarded)."""
    return exc.method == "SubmitSealed" and exc.status == "UNAVAILABLE" and "threshold" in exc.details


def _epsilon(info: CollectionInfo | WideCard) -> float:
    """ε a report costs: the card's delivered ε; a wide collection's, the ε asked for and at least each view's."""
    if isinstance(info, WideCard):
        return max([info.schema.epsilon] + [card.mechanism.epsilon for card in info.cards])
    return info.card.mechanism.epsilon


async def _run_device(device: int, rows: dict[str, np.ndarray], info: CollectionInfo | WideCard, group: DeviceGroup,
                      pool: asyncio.Queue[AsyncClient], outcome: GroupOutcome) -> None:
    rng = np.random.default_rng([group.seed, device])
    count = len(next(iter(rows.values())))
    ledger = PrivacyLedger.for_simulation(budget=device_budget(count, _epsilon(info)))
    client = await pool.get()
    if group.shuffler is not None:  # the channel is shared: a device's call waits for its pool to fill
        pool.put_nowait(client)
    loop = asyncio.get_running_loop()
    try:
        if group.faults.delay:
            await asyncio.sleep(rng.exponential(group.faults.delay))
        if rng.random() < group.faults.drop_rate:
            outcome.drops += 1
            await _abandoned_attempt(client, info, rows, ledger, group.batch_size,
                                     rng.uniform(0.0, group.faults.drop_after))
            if group.faults.delay:
                await asyncio.sleep(rng.exponential(group.faults.delay))
        started = loop.time()
        result = await client.submit(info, rows, ledger=ledger, batch_size=group.batch_size)
        outcome.latencies.append(loop.time() - started)
    except SubmitError as exc:
        if group.shuffler is not None and _below_threshold(exc):
            outcome.waiting += 1
            outcome.sent += exc.sent
            outcome.acknowledged += exc.acknowledged
            outcome.waiting_reports += exc.sent - exc.acknowledged
        else:
            outcome.failures.append(f"device {device}: {exc}")
        return
    finally:
        if group.shuffler is None:
            pool.put_nowait(client)
        ledger.close()
    outcome.devices += 1
    outcome.rows += result.rows
    outcome.sent += result.sent
    outcome.acknowledged += result.acknowledged
    outcome.duplicates += result.duplicates
    outcome.retries += result.retries
    outcome.memoized += result.memoized
    outcome.epsilon_per_device.append(result.epsilon_total)
    if result.part is not None:
        outcome.parts.append((device, result.part))


async def _run_group(group: DeviceGroup, progress: Any) -> GroupOutcome:
    outcome = GroupOutcome()
    shuffler = Shuffler(group.shuffler) if group.shuffler is not None else None
    clients = [AsyncClient(group.target, token=group.token, shuffler=shuffler) for _ in range(group.connections)]
    pool: asyncio.Queue[AsyncClient] = asyncio.Queue()
    for client in clients:
        pool.put_nowait(client)
    try:
        info: CollectionInfo | WideCard = await (clients[0].get_wide_collection(group.collection) if group.wide
                                                 else clients[0].get_collection(group.collection))

        async def one(device: int, rows: dict[str, np.ndarray]) -> None:
            await _run_device(device, rows, info, group, pool, outcome)
            if progress is not None:
                progress.put(len(next(iter(rows.values()))))

        await asyncio.gather(*(one(d, r) for d, r in zip(group.devices, group.rows)))
    finally:
        await asyncio.gather(*(client.close() for client in clients))
    return outcome


def run_device_group(group: DeviceGroup, progress: queue.Queue[int] | None = None) -> GroupOutcome:
    """Run every device of ``group`` (in this process, one event loop); report rows done to ``progress``."""
    return asyncio.run(_run_group(group, progress))
