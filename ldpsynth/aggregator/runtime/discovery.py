"""Discovery collections on one machine: their state in the data directory, what ``serve`` registers, and
``ldpsynth aggregator advance`` (docs/heavy-hitters.md, "The collection mode").

A ``--collection`` file with a ``"discovery"`` block (:class:`~ldpsynth.shared.heavy_hitters.collection.
DiscoverySchema`) is served as its open round's ordinary sub-collection (``NAME/round-r``, whose reports are
stored, sharded and tallied like any collection's) plus ``GetCollection(NAME)``, which answers the
:class:`~ldpsynth.shared.heavy_hitters.collection.DiscoveryCard` (``mechanism_version`` ``discovery/1``).
The state (:class:`~ldpsynth.shared.heavy_hitters.collection.DiscoveryState`) lives in
``DIR/discovery/<sha256 of NAME>.json``, written at the first start and by each ``advance``.

``advance`` runs on a stopped aggregator's data directory, as ``retire`` does: it reads the log (the store
of record; every record checked), counts the open round's reports, closes the round (refused below
``min_reports_per_round``) and writes the state (:func:`store`: the state file is the commit point); the next
``serve`` opens the next round, or, once the discovery is finished, serves the finished card and the results
(``DIR/discovery/<...>.results.json``). A running server closes its rounds itself
(:mod:`ldpsynth.aggregator.operate.rounds`, ``QueryService.AdvanceRound``) and stores the state the same way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ldpsynth.aggregator.runtime.offline_log import embedded_log
from ldpsynth.aggregator.storage.datadir import DataDir, DataDirError, os_problem
from ldpsynth.aggregator.storage.jetstream import ReplicatedLog
from ldpsynth.aggregator.storage.log_records import LogCorruption, card_digest, decode
from ldpsynth.aggregator.storage.refusals import record_out_of_place
from ldpsynth.serving.errors import ConfigError
from ldpsynth.shared import jsonio
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.files import write_durably
from ldpsynth.shared.heavy_hitters.collection import DiscoveryCard, DiscoverySchema, DiscoveryState, round_name
from ldpsynth.shared.heavy_hitters.server import support_counts

__all__ = ["DISCOVERY_DIR", "state_file", "stored_schema", "open_state", "expand", "advance", "summary", "store"]

DISCOVERY_DIR = "discovery"


def state_file(data_dir: str | Path, name: str, suffix: str = ".json") -> Path:
    """Where the discovery ``name``'s state (or, ``suffix`` ``.results.json``, its results) is kept."""
    return Path(data_dir) / DISCOVERY_DIR / (hashlib.sha256(name.encode("utf-8")).hexdigest()[:32] + suffix)


def _write(path: Path, text: str) -> None:
    """``text`` into ``path``, durably: a temporary file fsynced, renamed over it, the directory fsynced."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_durably(path, text)
    except OSError as exc:
        raise DataDirError(f"cannot write {path} ({os_problem(exc)})") from None


def _stored(data_dir: str | Path, name: str) -> DiscoveryState:
    path = state_file(data_dir, name)
    try:
        return DiscoveryState.from_json(jsonio.read_text(path, "state"))
    except ValidationError as exc:
        raise ConfigError(f"{path}: not a sound discovery state ({exc})") from None


def stored_schema(data_dir: str | Path, name: str) -> DiscoverySchema:
    """The schema of the discovery ``name`` whose state ``data_dir`` keeps (verified as the state is)."""
    return _stored(data_dir, name).schema


def open_state(data_dir: str | Path, schema: DiscoverySchema) -> DiscoveryState:
    """The stored state of ``schema``'s discovery (verified: replayed, and its schema must be ``schema``), or a
    new one at round 0, written."""
    path = state_file(data_dir, schema.name)
    if not path.exists():
        state = DiscoveryState(schema)
        _write(path, state.dumps())
        return state
    state = _stored(data_dir, schema.name)
    if state.schema != schema:
        raise ConfigError(f"--collection: the discovery {schema.name!r} differs from the one {path} was started "
                          "with (a discovery's schema cannot change while it runs)")
    return state


def expand(collections: Iterable[MechanismCard | DiscoverySchema], data_dir: Path | None,
           states: Mapping[str, DiscoveryState] | None = None
           ) -> tuple[tuple[MechanismCard, ...], tuple[DiscoveryCard, ...]]:
    """The cards ``serve`` registers (every ordinary collection and each open round's sub-collection) and the
    discovery cards it answers for the parents: of the discoveries' ``states`` (a cluster's, read from the log:
    :mod:`ldpsynth.aggregator.operate.states`), else of those stored in ``data_dir``."""
    cards: list[MechanismCard] = []
    discoveries: list[DiscoveryCard] = []
    for item in collections:
        if isinstance(item, MechanismCard):
            cards.append(item)
            continue
        if states is not None:
            card = states[item.name].card()
        elif data_dir is None:
            raise ConfigError(f"--collection: the discovery {item.name!r} keeps its rounds' state in --data-dir "
                              "(one machine) or in the log of a cluster (--nats)")
        else:
            card = open_state(data_dir, item).card()
        discoveries.append(card)
        if card.card is not None:
            cards.append(card.card)
    return tuple(cards), tuple(discoveries)


async def _round_reports(log: ReplicatedLog, layout_id: str, shards: int, collection: str, digest: str
                         ) -> np.ndarray:
    """The private parts of every stored report of ``collection`` (under the card of ``digest``)."""
    parts: list[np.ndarray] = []
    for shard in range(shards):
        total = 0
        async for sequence, data in log.read(shard, 2, (await log.state(shard)).last):
            record = decode(data, layout=layout_id, shard=shard, sequence=sequence)
            if record.before != total:
                raise LogCorruption(record_out_of_place(shard, sequence, record.before, total))
            total += record.reports
            for section in record.sections:
                if section.collection != collection:
                    continue
                if section.card != digest:
                    raise LogCorruption(f"reports of {collection!r} under another card than its round's")
                parts.append(section.private_codes)
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


async def advance(path: str, name: str) -> dict[str, Any]:
    """Close the open round of the discovery ``name`` from the reports a stopped aggregator's data directory
    ``path`` holds, and store the state (module docstring). Returns what was done, and the heavy hitters once
    the discovery is finished; a :class:`~ldpsynth.shared.heavy_hitters.collection.RoundNotReady` leaves the
    state as it was."""
    datadir = DataDir(path)
    datadir.check_exists()
    if not state_file(path, name).exists():
        raise ConfigError(f"--collection: no discovery {name[:128]!r} was served from --data-dir {path}")
    state = _stored(path, name)
    spec = state.spec()
    card = state.card().card
    assert card is not None
    collection = round_name(name, spec.index)
    recorded = datadir.recorded_layout()
    async with embedded_log(datadir) as settings:
        log = await ReplicatedLog.connect(settings, name="ldpsynth-advance")
        try:
            if recorded is None:
                reports = np.zeros(0, np.int64)
            else:
                layout = await log.open_layout(None, expected_id=recorded[0], create=False)
                reports = await _round_reports(log, layout.id, layout.shards, collection, card_digest(card.dumps()))
        finally:
            await log.close()
    state.close_round(*support_counts(spec, reports))
    return store(path, state)


def summary(state: DiscoveryState) -> dict[str, Any]:
    """What closing the last closed round of ``state`` did: the round and its reports, then the round open now
    and its candidates, or the heavy hitters once the discovery is finished."""
    out: dict[str, Any] = {"collection": state.schema.name, "closed_round": state.round - 1,
                           "reports": state.closed[-1][1]}
    if state.finished:
        out["results"] = state.result_json()
    else:
        out["open_round"] = state.round
        out["candidates"] = len(state.candidates)
    return out


def store(path: str | Path, state: DiscoveryState) -> dict[str, Any]:
    """Store ``state`` after it closed a round, durably: the results first when it is finished, then the state
    file, which is the commit point (a crash before it leaves the round open, as it was); returns
    :func:`summary`."""
    out = summary(state)
    if state.finished:
        _write(state_file(path, state.schema.name, ".results.json"),
               json.dumps(out["results"], sort_keys=True, indent=1))
    _write(state_file(path, state.schema.name), state.dumps())
    return out
