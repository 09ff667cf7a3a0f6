"""The words of every refusal and repair that ``aggregator serve`` and ``aggregator verify`` share.

A replica or a shard worker that refuses to start, and ``verify`` reporting the same store, say
the same sentence: each sentence is made by one function here, and each refusal says what the
operator does next. A :class:`StoreRefused` carries one (``kind`` tells whether
``--accept-lost-records`` may override it: only a log shorter than, or other than, what was
acknowledged).
"""

from __future__ import annotations

from ldpsynth.shared.errors import LdpsynthError

#: Refusals that ``--accept-lost-records`` overrides (the operator gives the missing records up).
LOST = "lost"
REPLACED = "replaced"
ACKNOWLEDGED_UNKNOWN = "acknowledged-unknown"
ACCEPTABLE = frozenset({LOST, REPLACED, ACKNOWLEDGED_UNKNOWN})
#: The flag that serves a log that lost acknowledged records (one machine).
ACCEPT_FLAG = "--accept-lost-records"


class StoreRefused(LdpsynthError):
    """The store cannot be served as it is; the message says why and what to do."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(message)


def _give_up(one_machine: bool) -> str:
    if one_machine:
        return (f"or, to serve what is left and give those records up, serve once with {ACCEPT_FLAG} "
                "(the loss is recorded in the data directory)")
    return "or, to give those records up, serve the cluster from a new log"


def records_lost(shard: int, log_end: int, acknowledged: int, where: str, one_machine: bool = True) -> str:
    """The log ends before a sequence that was acknowledged (``where``: what remembers it)."""
    return (f"log of shard {shard} ends at sequence {log_end}, but sequence {acknowledged} was acknowledged "
            f"({where}): acknowledged records were lost. Restore the log from a copy that holds them (a later "
            f"backup, or a surviving replica), {_give_up(one_machine)}")


def in_snapshot(where: str) -> str:
    """How a refusal names the snapshot that remembers an acknowledged sequence."""
    return f"the shard's snapshot {where} reflects it"


def history_replaced(shard: int, sequence: int, where: str, one_machine: bool = True) -> str:
    """The log's record at an acknowledged sequence is not the record acknowledged there."""
    return (f"log of shard {shard}: the record at sequence {sequence} is not the one acknowledged there "
            f"({where}): the log was replaced by another history and acknowledged records were lost. Restore the "
            f"log that was served, {_give_up(one_machine)}")


def acknowledged_unknown(shard: int, problem: str) -> str:
    """The file that remembers shard ``shard``'s highest acknowledged sequence is missing or damaged."""
    return (f"{problem}: it remembers the highest acknowledged sequence of shard {shard}, without which a log "
            "that lost acknowledged records could be served. Restore it from a backup of the data directory, or "
            f"serve once with {ACCEPT_FLAG} to trust the log as it is (recorded in the data directory)")


def layout_edited(path: str, recorded: int, found: int) -> str:
    return (f"{path}: says {recorded} shards, the log holds {found}: the file was edited; put back "
            f'"shards": {found}')


def record_out_of_place(shard: int, sequence: int, before: int, total: int) -> str:
    """A record whose running report count does not follow the records before it."""
    return (f"log of shard {shard}, sequence {sequence}: follows {before} reports, but {total} precede it (a record "
            "is missing or out of place)")


def record_under_another_card(shard: int, sequence: int, collection: str) -> str:
    return (f"log of shard {shard}, sequence {sequence}: collection {collection!r} under a card that is not its "
            "registered one")


def damaged_log(detail: str) -> str:
    """A record of the log fails its checks (``detail`` names it)."""
    return f"{detail}; restore the log from a backup or a surviving replica"


def snapshot_rebuilt(shard: int, reason: str) -> str:
    """A snapshot that is not a view of this log (damaged, foreign, of another time, old format)."""
    return f"shard {shard}: snapshot refused ({reason}); rebuilding it from the log"


def snapshot_restored(shard: int, offset: int, replayed: int) -> str:
    return f"shard {shard}: snapshot at sequence {offset} restored, {replayed} records replayed after it"


def no_snapshot(shard: int, replayed: int) -> str:
    return f"shard {shard}: no snapshot, {replayed} records replayed from the log"


def loss_given_up(shard: int, log_end: int, acknowledged: int, reports: int | None, when: str, why: str) -> str:
    """A loss the operator accepted with ``--accept-lost-records`` (kept in the data directory)."""
    counted = "" if reports is None else f"; {reports} reports lost"
    return (f"shard {shard}: acknowledged records given up on {when} by {ACCEPT_FLAG}: the log ended at sequence "
            f"{log_end}, sequence {acknowledged} had been acknowledged{counted} ({why})")
