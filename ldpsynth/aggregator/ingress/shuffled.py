"""Shuffled batches of sealed reports (``SubmitShuffled``): open, validate, then the device path's admission.

Independent of gRPC (tested without a server). A shuffler forwards a :class:`~pb.SealedBatch` of one
collection, its reports sealed on their own to the aggregator's key (:mod:`ldpsynth.shared.sealing`,
docs/contract.md §16). Per batch:

1. **The batch as a whole**, each failure refusing it with nothing opened and nothing stored: the
   credential may use the collection (PERMISSION_DENIED; its role ``shuffler`` is checked by the
   server), the collection is served and takes reports now (its lifecycle, as for a device's batch)
   and this aggregator holds a sealing key (FAILED_PRECONDITION),
   ``key_id`` names that key (FAILED_PRECONDITION: the shuffler, or the device, has a stale key),
   ``⌊len(reports) / sealed_report_bytes⌋ ≤ max_batch_reports`` (RESOURCE_EXHAUSTED), ``reports`` is
   a non-zero multiple of the collection's ``sealed_report_bytes`` and ``pool_key`` lies below the
   public domain size (INVALID_ARGUMENT).
2. **Each report**: opened (HPKE, on one thread of its own, or spread over ``--open-processes``
   worker processes: the event loop stays free), then decoded
   and checked as a device batch is (the mechanism version, every code in its range), all at once with
   numpy. A report that does not open (tampered, sealed to another key or for another collection,
   garbage) is counted ``undecryptable``; one that opens to something invalid, or whose public codes
   fold to another public key than the batch's ``pool_key``, is counted ``invalid``; both are
   dropped, and the rest of the batch goes on: a sealed report cannot be traced to a device, so
   refusing the batch would only make the shuffler drop every other device's report with it. A report
   id that comes twice in the batch is kept once (the copies count as duplicates).
3. **The pool's size, checked** (docs/shuffle-accountant.md §6): the operator sees each forwarded
   batch on its own, so each must hold at least the collection's minimum batch of distinct valid
   reports of its one public key (:attr:`~ldpsynth.shared.schema.Schema.minimum_batch`). A batch with
   fewer is refused whole, ABORTED (:class:`PoolBelowMinimum`), before anything is stored: the shuffler
   answers its devices UNAVAILABLE and they send their reports again, into another pool.
4. **The rest** is admitted exactly as a device's batch (:meth:`Ingestor.admit_reports`: routed by
   report id, the quota of the credential, which is the shuffler's) and committed by the same
   :meth:`Ingestor.commit`: stored once per report id, acknowledged once durable.

Nothing of a report (ciphertext, plaintext) is logged; the counts of dropped reports are, with the
credential that sent them.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from ldpsynth.aggregator.ingress.ingest import Admitted, Ingestor
from ldpsynth.aggregator.runtime.config import Catalog
from ldpsynth.serving.auth import Credential
from ldpsynth.serving.errors import LimitExceeded, WrongState
from ldpsynth.shared.errors import LdpsynthError, Status, ValidationError
from ldpsynth.shared.reports import Reports
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.sealing import (
    OpeningKey,
    decode_plaintexts,
    plaintext_bytes,
    sealed_report_bytes,
    split_sealed,
)
from ldpsynth.shared.wire import collection_pb2 as pb

log = logging.getLogger(__name__)


class PoolBelowMinimum(LdpsynthError):
    """A forwarded batch holds fewer distinct valid reports of its public key than the collection's
    minimum batch once opened (ABORTED): nothing of it is stored; the shuffler's devices send again."""

    refused_as = Status.ABORTED


@dataclass(frozen=True)
class ShuffledAdmission:
    """A shuffled batch opened and admitted: what is left to commit (``None``: nothing valid), and the
    reports dropped (``repeated``: report ids that came more than once in the batch, kept once and
    acknowledged as duplicates)."""

    sequence: int
    reports: int
    undecryptable: int
    invalid: int
    admitted: Admitted | None
    repeated: int = 0

    def ack(self, accepted: int = 0, duplicates: int = 0) -> pb.ShuffledAck:
        return pb.ShuffledAck(sequence=self.sequence, accepted=accepted, duplicates=duplicates + self.repeated,
                              undecryptable=self.undecryptable, invalid=self.invalid)


def pool_reports(reports: Reports, schema: Schema, pool_key: int) -> tuple[Reports, int, int]:
    """The reports of one pool that count: those whose public codes fold to ``pool_key``, each report id once.

    Parameters
    ----------
    reports : Reports
        The valid reports of a forwarded batch, in its order.
    schema : Schema
        Their collection's schema.
    pool_key : int
        The batch's ``pool_key``.

    Returns
    -------
    tuple of (Reports, int, int)
        The reports kept (first occurrence of each id, in order), the reports of another public key, and
        the repeated ids dropped.
    """
    keys = schema.fold_public_codes(reports.public_codes)
    ours = np.flatnonzero(keys == pool_key)
    ids = np.ascontiguousarray(reports.report_ids[ours]).view(np.dtype((np.void, reports.report_ids.shape[1])))
    _, first = np.unique(ids.reshape(-1), return_index=True)
    keep = ours[np.sort(first)]
    kept = Reports(reports.report_ids[keep], reports.private_codes[keep], reports.public_codes[keep])
    return kept, len(reports) - len(ours), len(ours) - len(keep)


#: Fewest reports a batch gives each opening process (below that, fewer processes share it).
MIN_REPORTS_PER_PROCESS = 256
#: The key of an opening process (set once by :func:`_start_opener`, in that process only).
_PROCESS_KEY: OpeningKey | None = None


def _start_opener(private_key: bytes) -> None:
    global _PROCESS_KEY
    _PROCESS_KEY = OpeningKey(private_key)


def _open_in_process(sealed: bytes, width: int, collection: str, plaintext_length: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    assert _PROCESS_KEY is not None
    return _PROCESS_KEY.open_all(np.frombuffer(sealed, np.uint8).reshape(-1, width), collection, plaintext_length)


class ShuffledIngest:
    """Opens and admits shuffled batches for the collections of a :class:`Catalog` with ``key``.

    Opening runs on one thread of the replica (``processes`` 0), or is spread over ``processes``
    worker processes (spawned at the first batch, each holding the key; a batch is cut into contiguous
    parts, opened at once and put back in order): the HPKE library holds the GIL, so more threads
    would not open faster, more processes do on more cores."""

    def __init__(self, catalog: Catalog, ingestor: Ingestor, key: OpeningKey | None, processes: int = 0):
        self._catalog = catalog
        self._ingestor = ingestor
        self._key = key
        self._processes = processes
        self._opener: Executor
        if processes and key is not None:
            self._opener = ProcessPoolExecutor(max_workers=processes, mp_context=multiprocessing.get_context("spawn"),
                                               initializer=_start_opener, initargs=(key.private_bytes(),))
        else:
            self._opener = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ldpsynth-open")

    async def _open(self, key: OpeningKey, sealed: np.ndarray, collection: str,
                    plaintext_length: int) -> tuple[np.ndarray, np.ndarray]:
        loop = asyncio.get_running_loop()
        if not isinstance(self._opener, ProcessPoolExecutor):
            return await loop.run_in_executor(self._opener, key.open_all, sealed, collection, plaintext_length)
        parts = max(1, min(self._processes, len(sealed) // MIN_REPORTS_PER_PROCESS))
        bounds = np.linspace(0, len(sealed), parts + 1).astype(int)
        width = sealed.shape[1]
        done = await asyncio.gather(*(loop.run_in_executor(self._opener, _open_in_process, sealed[a:b].tobytes(),
                                                           width, collection, plaintext_length)
                                      for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())))
        return (np.concatenate([plain for plain, _ in done]), np.concatenate([opened for _, opened in done]))

    async def admit(self, credential: Credential, batch: pb.SealedBatch) -> ShuffledAdmission:
        """Check the batch, open and validate its reports, admit the valid ones; raise (an error with
        its status) to refuse the whole batch."""
        credential.require_collection(batch.collection)
        info = self._ingestor.check_open(batch.collection)
        key = self._key
        if key is None:
            raise WrongState("this aggregator takes no sealed reports: it holds no sealing key (a cluster's replicas "
                             "need --shuffle-key)")
        if bytes(batch.key_id) != key.key_id:
            raise WrongState(f"key_id: the reports are sealed to key {bytes(batch.key_id)[:32].hex()!r}, this "
                             f"aggregator's key is {key.key_id.hex()!r}; fetch the collection again (GetCollection: "
                             "Collection.sealing) and seal to its key")
        schema, version = info.schema, info.card.version
        width = sealed_report_bytes(schema, version)
        claimed = len(batch.reports) // width
        if claimed > info.limits.max_batch_reports:
            raise LimitExceeded(f"reports: at most max_batch_reports = {info.limits.max_batch_reports} reports per "
                                f"batch, got {claimed}")
        sealed = split_sealed(batch.reports, width)
        if batch.pool_key >= schema.public_domain_size:
            raise ValidationError("pool_key", "the reports' public key, an integer in "
                                  f"[0, {schema.public_domain_size})", f"got {batch.pool_key}")
        plaintexts, opened = await self._open(key, sealed, batch.collection, plaintext_bytes(schema, version))
        decoded = decode_plaintexts(plaintexts, schema, version)
        reports, other_key, repeated = pool_reports(decoded.reports, schema, int(batch.pool_key))
        undecryptable, invalid = len(sealed) - int(opened.sum()), decoded.invalid + other_key
        if undecryptable or invalid or repeated:
            log.warning("SubmitShuffled (credential %r, collection %r): of %d reports %d did not open, %d opened "
                        "invalid or of another public key (dropped), %d repeated a report id", credential.id,
                        batch.collection, len(sealed), undecryptable, invalid, repeated)
        minimum, field = schema.minimum_batch
        if minimum > 1 and len(reports) < minimum:
            raise PoolBelowMinimum(f"the shuffled batch holds {len(reports)} distinct valid reports of its public key "
                                   f"once opened ({undecryptable} did not open, {invalid} were invalid or of another "
                                   f"key, {repeated} repeated an id), below the collection's minimum batch of "
                                   f"{minimum} ({field}): nothing was stored")
        admitted = None
        if len(reports):
            admitted = await self._ingestor.admit_reports(credential, batch.collection, reports, int(batch.sequence))
        return ShuffledAdmission(int(batch.sequence), len(sealed), undecryptable, invalid, admitted, repeated)

    def close(self) -> None:
        self._opener.shutdown(wait=False, cancel_futures=True)
