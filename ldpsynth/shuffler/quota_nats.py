"""The per-device quota of a shuffler tier of several processes, in NATS JetStream (``--quota-nats``;
docs/contract.md §16 "Quotas", docs/deployment.md "Shuffler tier").

The shuffler's NATS seam (the only module of :mod:`ldpsynth.shuffler` that imports ``nats``). The
store is the shuffler operator's own NATS (JetStream on), never the aggregator's log: the shuffler is
run by another party, and what it counts (device credentials) is what the aggregator must not see.

**Layout.** One key-value bucket, :data:`BUCKET` (file storage, history 1, ``--quota-nats-replicas``
copies; created by the first shuffler that finds none, an existing one used as it is), one key per
(device credential, collection)::

    q.<collection name, UTF-8 in hex>.<SHA-256 of "ldpsynth.shuffler.quota\\0" + credential id, 32 hex>

(the credential id is hashed: keys stay short and in NATS's safe characters; the token never reaches
the store), holding the JSON::

    {"format": "ldpsynth.shuffler-quota/1", "acknowledged": A,
     "leases": {"<lease id>": [reports, expires at, Unix seconds], ...}}

**Rule.** A credential's use of a collection is ``A`` plus the reports of its leases that have not
expired (by the reading process's clock). A call's reservation (:meth:`NatsQuotas.reserve`) is
refused if that use plus its reports would exceed the limit; else it adds a lease of a fresh random
id expiring ``lease`` seconds later (the shuffler gives ``--max-wait + --patience +`` :data:`LEASE_MARGIN`:
longer than a call normally lasts). When the replicas acknowledged the call's reports the lease is
confirmed (removed and its reports added to ``A``: acknowledged reports count for good, also if the
lease had expired meanwhile); when the call ends unacknowledged it is released (removed). A shuffler
that dies mid-call neither confirms nor releases: its leases stop counting once expired, and the
devices, whose calls were never acknowledged, resend. Every write also drops the expired leases, so
a value holds at most the reservations in flight.

**Atomicity.** Every change reads the key and writes it back with a compare-and-set on the revision
it read (``update(last=revision)``, ``create`` for a new key: JetStream's expected last subject
sequence); a writer that lost the race to another process reads again and retries (with a small
random pause), for at most the store's timeout (then UNAVAILABLE). So concurrent reservations from any
number of processes never take a credential over its limit. Within one process the changes of one key
wait for each other (a lock per key), so only other processes' writes conflict. A call costs two
writes (reserve, then confirm or release) of about 1 ms each on one local server (fsync on every
write), and a key is written by one change at a time: one device's concurrent calls queue.

**Limits of the rule.** Leases are compared with each process's wall clock: the hosts' clocks must
agree to well within :data:`LEASE_MARGIN` (NTP). A call that outlives its lease (a pool forwarded in
many parts, each retried for the full ``--patience``) is still counted when acknowledged, but
between its lease's expiry and that moment its device could reserve those reports again: the limit
can then be passed by that call's reports. A store that does not answer ends calls UNAVAILABLE
(nothing pooled; after the replicas' acknowledgement: "resend", and the replicas keep each report
once); a release that does not reach the store leaves the lease to expire.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import ssl
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from ldpsynth.serving.errors import ConfigError, TryLater
from ldpsynth.serving.observe import events
from ldpsynth.shuffler.forward import ATTEMPT_DEADLINE
from ldpsynth.shuffler.quota import Reservation, exceeded

__all__ = ["NatsQuotas", "QuotaNats", "parse_servers", "quota_key", "BUCKET", "LEASE_MARGIN", "TOKEN_ENV"]

log = events.get(__name__)

#: The key-value bucket of a shuffler tier's quotas.
BUCKET = "LDPSYNTH_SHUFFLER_QUOTA"
FORMAT = "ldpsynth.shuffler-quota/1"
#: Seconds a lease lasts beyond ``--max-wait + --patience``: one more forward attempt (its deadline)
#: and 30 s for the hosts' clocks and the store's own round trips.
LEASE_MARGIN = ATTEMPT_DEADLINE + 30.0
#: Environment variable holding the quota store's authorization token (never a flag: it would show in ``ps``).
TOKEN_ENV = "LDPSYNTH_QUOTA_NATS_TOKEN"
FLAG = "--quota-nats"
_KEY_DOMAIN = b"ldpsynth.shuffler.quota\0"
#: What a store that does not answer raises in nats-py (its timeouts are also asyncio's; TLS errors are OSErrors).
_STORE_ERRORS = (nats.errors.Error, asyncio.TimeoutError, OSError)


@dataclass(frozen=True)
class QuotaNats:
    """How to reach the quota store's NATS servers (the flags ``--quota-nats*``).

    Parameters
    ----------
    servers : tuple of str
        ``nats://HOST:PORT`` (or ``tls://``) URLs of the servers (several: the client fails over).
    replicas : int, default 1
        Copies of the bucket, when a shuffler creates it (3 in a cluster of 3).
    tls_ca, tls_cert, tls_key : Path or None, default None
        PEM files for TLS to the servers (``tls_cert`` + ``tls_key``: mutual TLS).
    token : str or None, default None
        The servers' authorization token (the CLI reads :data:`TOKEN_ENV`).
    timeout : float, default 5.0
        Seconds the store may take to connect at start, and to answer one change while serving
        (compare-and-set retries included) before the call ends UNAVAILABLE.
    """

    servers: tuple[str, ...]
    replicas: int = 1
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    token: str | None = field(default=None, repr=False)
    timeout: float = 5.0

    def tls_context(self) -> ssl.SSLContext | None:
        if not (self.tls_ca or self.tls_cert):
            return None
        context = ssl.create_default_context(cafile=None if self.tls_ca is None else str(self.tls_ca))
        if self.tls_cert:
            context.load_cert_chain(str(self.tls_cert), None if self.tls_key is None else str(self.tls_key))
        return context


def parse_servers(text: str, flag: str = FLAG) -> tuple[str, ...]:
    """The comma-separated ``nats://HOST:PORT`` URLs of ``text`` (:class:`ConfigError` naming ``flag``).

    Parameters
    ----------
    text : str
        ``nats://HOST:PORT[,nats://HOST:PORT...]`` (``tls://`` also).
    flag : str, default "--quota-nats"
        The flag the URLs came from.

    Returns
    -------
    tuple of str
        The URLs, stripped.
    """
    urls = tuple(url.strip() for url in text.split(",") if url.strip())
    if not urls:
        raise ConfigError(f"{flag}: at least one nats://HOST:PORT")
    for url in urls:
        if "@" in url:  # never echoed: it holds a credential
            raise ConfigError(f"{flag}: no user or password in the URL (it would show in the process list): put "
                              f"the servers' token in ${TOKEN_ENV}, or use TLS client certificates")
        parts = urlsplit(url)
        try:
            port = parts.port
        except ValueError:
            port = None
        if (parts.scheme not in ("nats", "tls") or not parts.hostname or not port or parts.path not in ("", "/")
                or parts.query or parts.fragment):
            raise ConfigError(f"{flag}: URLs of the form nats://HOST:PORT (or tls://HOST:PORT), comma-separated, "
                              f"got {url[:200]!r}")
    return urls


def quota_key(device: str, collection: str) -> str:
    """The bucket's key of ``device``'s count in ``collection`` (module docstring)."""
    digest = hashlib.sha256(_KEY_DOMAIN + device.encode("utf-8")).hexdigest()[:32]
    return f"q.{collection.encode('utf-8').hex()}.{digest}"


@dataclass
class _Count:
    """One key's value: reports acknowledged, and the leases (id -> (reports, expires at))."""

    acknowledged: int = 0
    leases: dict[str, tuple[int, float]] = field(default_factory=dict)

    @classmethod
    def decode(cls, key: str, raw: bytes) -> _Count:
        try:
            obj = json.loads(raw)
            if obj["format"] != FORMAT:
                raise ValueError(obj["format"])
            return cls(int(obj["acknowledged"]), {str(lease): (int(n), float(expires))
                                                  for lease, (n, expires) in obj["leases"].items()})
        except (ValueError, KeyError, TypeError, AttributeError):
            log.error("shuffler.quota_store_corrupt", f"quota store: key {key} of bucket {BUCKET} holds no ldpsynth "
                      "quota count; its calls end UNAVAILABLE until it is repaired (delete the key: its count restarts "
                      "at 0)", key=key)
            raise TryLater("the shuffler's quota store holds a damaged count for this device; nothing was pooled: "
                           "retry later") from None

    def encode(self) -> bytes:
        return json.dumps({"format": FORMAT, "acknowledged": self.acknowledged,
                           "leases": {lease: [n, round(expires, 3)] for lease, (n, expires) in self.leases.items()}},
                          separators=(",", ":")).encode("utf-8")

    def drop_expired(self, now: float) -> bool:
        """Drop the leases expired at ``now``; whether any was."""
        expired = [lease for lease, (_, expires) in self.leases.items() if expires <= now]
        for lease in expired:
            del self.leases[lease]
        return bool(expired)

    @property
    def leased(self) -> int:
        return sum(n for n, _ in self.leases.values())


#: A change of one key's count at a time: whether there is anything to write.
_Change = Callable[[_Count, float], bool]


class NatsQuotas:
    """A :class:`~ldpsynth.shuffler.quota.QuotaStore` in a JetStream key-value bucket that every shuffler
    process of a tier shares (module docstring). Use :meth:`connect`.

    Parameters
    ----------
    client : nats.aio.client.Client
        A connected client.
    bucket : nats.js.kv.KeyValue
        The bucket :data:`BUCKET`.
    lease : float
        Seconds a reservation counts unless confirmed or released.
    timeout : float
        Seconds one change may take (compare-and-set retries included).
    """

    def __init__(self, client: Client, bucket: KeyValue, lease: float, timeout: float):
        self._client = client
        self._bucket = bucket
        self.lease = lease
        self._timeout = timeout
        self._failing = False
        #: One change of a key at a time in this process: its own calls queue instead of conflicting.
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    @classmethod
    async def connect(cls, settings: QuotaNats, lease: float, name: str = "ldpsynth-shuffler") -> NatsQuotas:
        """Connect to the servers and open the bucket (creating it if there is none).

        Parameters
        ----------
        settings : QuotaNats
            The servers.
        lease : float
            Seconds a reservation counts unless confirmed or released (> 0).
        name : str, default "ldpsynth-shuffler"
            The connection's name, as the servers list it.

        Returns
        -------
        NatsQuotas
            The store; :class:`ConfigError` naming ``--quota-nats`` when the servers cannot be reached
            within ``settings.timeout`` seconds, refuse the credentials or have no JetStream.
        """
        where = ", ".join(settings.servers)
        seen: list[BaseException] = []

        async def remember(exc: Exception) -> None:
            seen.append(exc)

        try:
            tls = settings.tls_context()
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{FLAG}-tls-*: cannot load the TLS files ({exc})") from None
        # Reconnecting for ever while serving, but a bounded first connection: nats-py's connect() with
        # max_reconnect_attempts=-1 never gives up, and cancelling it (wait_for) may be swallowed by its own
        # attempt; so it connects with a bounded count of attempts (one a second) and is then set to retry
        # for ever (its options are read at each reconnection).
        attempts = max(1, int(settings.timeout))
        client = Client()
        try:
            await client.connect(list(settings.servers), name=name, tls=tls, token=settings.token or None,
                                 connect_timeout=2, allow_reconnect=True, max_reconnect_attempts=attempts - 1,
                                 reconnect_time_wait=1, error_cb=remember, disconnected_cb=_quiet,
                                 reconnected_cb=_quiet, closed_cb=_quiet)
        except (*_STORE_ERRORS, ValueError) as exc:
            await _close(client)
            refused = [e for e in seen if isinstance(e, nats.errors.AuthorizationError)
                       or "authorization violation" in str(e).lower()]
            why = refused[0] if refused else seen[-1] if seen else exc
            # The server writes its "-ERR 'Authorization Violation'" and closes at once; the reset can reach the
            # client first and discard that line. Its INFO (nats-py keeps the last one; no public accessor) still
            # says whether it asked for credentials.
            asked = not refused and getattr(client, "_server_info", {}).get("auth_required", False)
            hint = ("; the server requires authorization and closed the connection after the credentials were "
                    f"sent: check the token in ${TOKEN_ENV} or the client certificate") if asked else ""
            raise ConfigError(f"{FLAG}: cannot connect to the quota store at {where} ({attempts} attempts in about "
                              f"{settings.timeout:g} s; {type(why).__name__}: {why or 'no answer'}{hint})") from None
        client.options["max_reconnect_attempts"] = -1
        js = client.jetstream(timeout=settings.timeout)
        try:
            try:
                bucket = await js.key_value(BUCKET)
            except nats.js.errors.BucketNotFoundError:
                try:
                    bucket = await js.create_key_value(KeyValueConfig(
                        bucket=BUCKET, history=1, storage=StorageType.FILE, replicas=settings.replicas,
                        description="ldpsynth shuffler tier: reports per device credential and collection"))
                except nats.js.errors.BadRequestError as refused:
                    try:  # created meanwhile by another shuffler?
                        bucket = await js.key_value(BUCKET)
                    except nats.js.errors.BucketNotFoundError:
                        raise refused from None
        except _STORE_ERRORS as exc:
            await _close(client)
            reason = ("no JetStream: run its nats-server with JetStream on (-js, or a jetstream block)"
                      if isinstance(exc, (nats.errors.NoRespondersError, nats.js.errors.ServiceUnavailableError))
                      else f"{type(exc).__name__}: {exc}")
            raise ConfigError(f"{FLAG}: the quota store at {where} cannot hold the bucket {BUCKET} "
                              f"({reason})") from None
        log.info("shuffler.quota_store", f"per-device quotas are counted in the bucket {BUCKET} at {where}, shared by "
                 f"every shuffler process using it (a reservation lapses after {lease:g} s)", lease=lease)
        return cls(client, bucket, lease, settings.timeout)

    async def reserve(self, device: str, collection: str, reports: int, limit: int) -> Reservation:
        reservation = Reservation(device, collection, reports, uuid.uuid4().hex[:16])

        def take(count: _Count, now: float) -> bool:
            used = count.acknowledged + count.leased
            if used + reports > limit:
                raise exceeded(device, collection, limit, used, reports)
            count.leases[reservation.lease] = (reports, now + self.lease)
            return True

        await self._change(quota_key(device, collection), take, "the shuffler's quota store did not answer; nothing "
                           "was pooled: retry the batch")
        return reservation

    async def confirm(self, reservation: Reservation) -> None:
        def count_for_good(count: _Count, now: float) -> bool:
            if count.leases.pop(reservation.lease, None) is None:
                log.warning("shuffler.quota_lease_outlived", f"a call of collection {reservation.collection!r} was "
                            f"acknowledged after its reservation lapsed ({self.lease:g} s): its {reservation.reports} "
                            "reports are counted now", collection=reservation.collection, reports=reservation.reports)
            count.acknowledged += reservation.reports
            return True

        await self._change(quota_key(reservation.device, reservation.collection), count_for_good,
                           "the replicas acknowledged the reports but the shuffler's quota store did not answer to "
                           "count them: resend the batch with the same reports (the replicas store each report once)")

    async def release(self, reservation: Reservation) -> None:
        def give_back(count: _Count, now: float) -> bool:
            return count.leases.pop(reservation.lease, None) is not None

        try:
            await self._change(quota_key(reservation.device, reservation.collection), give_back, "")
        except TryLater:
            pass  # logged; the lease lapses by itself

    async def usage(self, device: str, collection: str) -> tuple[int, int]:
        """``(acknowledged, leased)``: ``device``'s reports of ``collection`` counted for good, and those
        of its leases that have not expired.

        Parameters
        ----------
        device : str
            The credential id.
        collection : str
            The collection's name.

        Returns
        -------
        tuple of int
            The two counts (0, 0 for a key never written).
        """
        key = quota_key(device, collection)
        try:
            entry = await self._bucket.get(key)
        except nats.js.errors.KeyNotFoundError:
            return 0, 0
        count = _Count.decode(key, entry.value or b"")
        count.drop_expired(time.time())
        return count.acknowledged, count.leased

    async def close(self) -> None:
        await _close(self._client)

    async def _change(self, key: str, change: _Change, unavailable: str) -> None:
        """Apply ``change`` to ``key``'s count by compare-and-set, retried on conflict (module docstring);
        ``change`` returns whether there is anything to write (expired leases are dropped in any case).
        Within this process the changes of one key queue (a lock per key), so only other processes'
        writes conflict. A store that does not answer within the timeout, queue included:
        :class:`TryLater` with ``unavailable``."""
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()

        async def locked() -> None:
            async with lock:
                await self._compare_and_set(key, change)

        try:
            await asyncio.wait_for(locked(), self._timeout)
        except _STORE_ERRORS as exc:
            if not self._failing:
                self._failing = True
                log.warning("shuffler.quota_store_unavailable", f"the quota store did not answer within "
                            f"{self._timeout:g} s ({type(exc).__name__}); calls of devices with a quota end "
                            "UNAVAILABLE until it answers again", error=type(exc).__name__)
            raise TryLater(unavailable) from None
        if self._failing:
            self._failing = False
            log.info("shuffler.quota_store_answers", "the quota store answers again")

    async def _compare_and_set(self, key: str, change: _Change) -> None:
        give_up, conflicts = time.monotonic() + self._timeout, 0
        while True:
            if time.monotonic() > give_up:  # also when a cancellation by the caller's wait_for was lost
                raise asyncio.TimeoutError(f"{conflicts} conflicting writes")
            try:
                entry: KeyValue.Entry | None = await self._bucket.get(key)
            except nats.js.errors.KeyNotFoundError:
                entry = None
            count = _Count() if entry is None else _Count.decode(key, entry.value or b"")
            now = time.time()
            dropped = count.drop_expired(now)
            if not change(count, now) and not dropped:
                return
            try:
                if entry is None:
                    await self._bucket.create(key, count.encode())
                else:
                    await self._bucket.update(key, count.encode(), last=entry.revision)
                return
            except nats.js.errors.KeyWrongLastSequenceError:  # another process wrote it since we read it
                conflicts += 1
                await asyncio.sleep(random.uniform(0, min(0.05, 0.001 * 2 ** min(conflicts, 6))))


async def _close(client: Client) -> None:
    """Close ``client`` and end every task it runs, also when its servers are gone.

    Two nats-py quirks (2.16) are worked around here, reaching into its private attributes: ``close()``
    ends early when its last flush fails (the server gone, requests buffered meanwhile), leaving its
    subscriptions' readers and its reconnection running; and the reconnection it cancels may swallow the
    cancellation (``asyncio.wait_for`` returning the attempt's own error) and go on for ever. Either
    outlives the event loop of a shuffler stopped while its store is down."""
    try:
        await client.close()
    except Exception:  # noqa: BLE001 (a client that never connected, or lost its server: what is left is ended below)
        pass
    subscriptions = getattr(client, "_subs", {})
    leftovers = [getattr(sub, "_wait_for_msgs_task", None) for sub in subscriptions.values()]
    leftovers.append(getattr(client, "_reconnection_task", None))
    tasks = {task for task in leftovers if isinstance(task, asyncio.Task)}
    for _ in range(100):
        tasks = {task for task in tasks if not task.done()}
        if not tasks:
            break
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks, timeout=0.05)
    subscriptions.clear()
    transport = getattr(client, "_transport", None)
    if transport is not None:
        transport.close()
    for _ in range(2):  # and let the tasks close() cancelled end before the event loop does
        await asyncio.sleep(0)


async def _quiet() -> None:
    """Disconnections and reconnections surface as calls that end UNAVAILABLE; the client reconnects by itself."""
