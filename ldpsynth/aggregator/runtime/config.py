"""Server configuration and the catalog of collections it serves.

A collection file (``--collection FILE``) is JSON: either a schema
(``{"name", "epsilon", "attributes"}``, see :mod:`ldpsynth.shared.schema`) or a full mechanism
card (format ``ldpsynth.mechanism-card/1``, verified on load); or a wide collection's schema (with a
``"views"`` block) or wide card (:mod:`ldpsynth.shared.wide.collection`), served as one ordinary collection
per view plus the parent, whose ``GetCollection`` is the wide card; or a discovery collection's schema (a
``"discovery"`` block: :mod:`ldpsynth.aggregator.runtime.discovery` expands it into its open round's
sub-collection). The server publishes the card, and the limits below, through ``GetCollection``.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from ldpsynth.aggregator.storage.log_layout import LogSettings
from ldpsynth.serving.errors import ConfigError, WrongState, flag_checks
from ldpsynth.serving.observe.tracing import check_endpoint
from ldpsynth.serving.tls import TlsFiles, check_pair
from ldpsynth.shared import jsonio
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.heavy_hitters.collection import (
    MECHANISM_VERSION,
    DiscoveryCard,
    DiscoverySchema,
    is_discovery_json,
    parent_of,
    round_name,
)
from ldpsynth.shared.protocol import CollectionInfo, Limits
from ldpsynth.shared.schema import Schema
from ldpsynth.shared.sealing import SealingKey
from ldpsynth.shared.validation import check_int, check_seconds
from ldpsynth.shared.wide.collection import VIEWS_VERSION, WIDE_CARD_FORMAT, WideCard, WideSchema
from ldpsynth.shared.wide.parent import WideFit
from ldpsynth.shared.wire import collection_pb2 as pb

#: A web page's origin as browsers send it: scheme, host (a name, IPv4 or [IPv6]) and an optional port.
_ORIGIN = re.compile(r"https?://(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?)(:[0-9]{1,5})?")
#: gRPC keeps message sizes in a signed 32-bit int.
MAX_MESSAGE_BYTES = 2**31 - 1


def load_collection(path: str | Path) -> MechanismCard | WideCard | DiscoverySchema:
    """Read a collection file: a schema JSON or a mechanism card JSON; a wide collection's (a schema with a
    ``"views"`` block, or a wide card) is its :class:`~ldpsynth.shared.wide.collection.WideCard`; a discovery
    collection's schema is its :class:`~ldpsynth.shared.heavy_hitters.collection.DiscoverySchema`."""
    try:
        obj = jsonio.load_file(path, "--collection", "a JSON schema or mechanism card")
    except ValidationError as exc:
        raise ConfigError(str(exc)) from None
    try:
        if isinstance(obj, dict) and obj.get("format") == WIDE_CARD_FORMAT:
            return WideCard.from_json(obj)
        if isinstance(obj, dict) and "format" in obj:
            return MechanismCard.from_json(obj)
        if isinstance(obj, dict) and "views" in obj:
            return WideCard.for_schema(WideSchema.from_json(obj))
        if is_discovery_json(obj):
            return DiscoverySchema.from_json(obj)
        return MechanismCard.for_schema(Schema.from_json(obj))
    except ValidationError as exc:
        raise ConfigError(f"--collection {path}: {exc}") from None


def expand_collections(loaded: Iterable[MechanismCard | WideCard]) -> tuple[tuple[MechanismCard, ...],
                                                                           tuple[WideCard, ...]]:
    """``(collections, wide)`` of what :func:`load_collection` read: every ordinary collection and every wide
    collection's view sub-collections (served as ordinary collections), and the wide collections' cards."""
    cards: list[MechanismCard] = []
    wide: list[WideCard] = []
    for item in loaded:
        if isinstance(item, WideCard):
            wide.append(item)
            cards.extend(item.cards)
        else:
            cards.append(item)
    return tuple(cards), tuple(wide)


@dataclass(frozen=True)
class ClusterConfig:
    """Where the replicated log lives when it is not embedded (``--nats``).

    ``servers``: ``nats://HOST:PORT`` of the NATS cluster's servers; ``replicas``: copies of every
    stream (3: the log survives the loss of any one server); ``tls_ca``/``tls_cert``/``tls_key``:
    TLS to the servers (the servers' authorization token, if any, is read from the environment
    variable ``LDPSYNTH_NATS_TOKEN`` of the replicas and of every Ray node); ``worker_dir``: the directory,
    on every Ray node, under which shard workers keep their snapshots (node-local);
    ``worker_resource``: a Ray custom resource the nodes meant for shard workers offer (the workers
    then run only there, e.g. not on the head node).
    """

    servers: tuple[str, ...]
    replicas: int = 3
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    worker_dir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()) / "ldpsynth-workers")
    worker_resource: str | None = None

    def __post_init__(self) -> None:
        if not self.servers:
            raise ConfigError("--nats: at least one nats://HOST:PORT")
        for url in self.servers:
            if not url.startswith(("nats://", "tls://")) or ":" not in url.split("://", 1)[1]:
                raise ConfigError(f"--nats: URLs of the form nats://HOST:PORT, got {url[:200]!r}")
        with flag_checks():
            check_int(self.replicas, "--log-replicas", 1, 5, legal="an integer in [1, 5] (JetStream's limit)")
        check_pair(self.tls_cert, self.tls_key, "--nats-tls-cert", "--nats-tls-key")

    def log_settings(self) -> LogSettings:
        """How a replica connects to the log (the token, if any, comes from the environment)."""
        return LogSettings(self.servers, self.replicas, _text(self.tls_ca), _text(self.tls_cert), _text(self.tls_key))


def _text(path: Path | None) -> str | None:
    return None if path is None else str(path)


@dataclass(frozen=True)
class ServerConfig:
    """Everything ``ldpsynth aggregator serve`` is told (see docs/contract.md).

    ``wide``: the wide collections' cards (their view sub-collections are in ``collections``;
    :func:`expand_collections`). ``cluster`` None: the one-machine default, an embedded log in ``data_dir``; else
    the replica is stateless and ``data_dir`` is unused. ``shards`` None: the log's existing layout, or one
    shard per CPU for a new one. ``ray_address`` None: join the Ray runtime of this process if
    there is one, else start a local one. ``max_inflight_batches`` bounds the batches of one
    stream being committed at once (acknowledged in order); ``max_group_rows`` bounds the reports
    of one group commit; ``max_commit_interval`` (``--max-commit-interval``) bounds the seconds between
    two group commits of a shard (the interval grows with the batches in flight up to it: larger groups,
    less CPU per report, later acks under load). ``snapshot_ids``: new report ids a shard worker holds in
    memory before it writes a snapshot (the most a restart replays from the log). ``verbose``: Ray's own log lines too.
    ``accept_lost_records`` (one machine): serve a log that lost acknowledged records, recording the
    loss in the data directory (``--accept-lost-records``). ``shuffle_key`` (cluster): the file of the
    key sealed reports are opened with, the same on every replica (``--shuffle-key``; one machine
    keeps its own in the data directory). ``open_processes``: worker processes that open sealed
    reports (0: one thread of the replica). ``metrics_port`` (None: off): serve
    Prometheus metrics on ``metrics_host:metrics_port`` (``/metrics``); ``otlp_endpoint`` (None: off):
    send trace spans, the replica's and the shard workers', to this OTLP/HTTP collector.
    """

    data_dir: Path | None
    collections: tuple[MechanismCard, ...]
    wide: tuple[WideCard, ...] = ()
    host: str = "127.0.0.1"
    port: int = 0
    shards: int | None = None
    ray_address: str | None = None
    cluster: ClusterConfig | None = None
    tls: TlsFiles | None = None
    tokens_file: Path | None = None
    limits: Limits = field(default_factory=Limits)
    reflection: bool = False
    grace_seconds: float = 5.0
    max_inflight_batches: int = 4
    max_group_rows: int = 1 << 20
    max_commit_interval: float = 0.3
    snapshot_ids: int = 1 << 20
    verbose: bool = False
    accept_lost_records: bool = False
    web_port: int | None = None
    web_origins: tuple[str, ...] = ()
    shuffle_key: Path | None = None
    open_processes: int = 0
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = None
    otlp_endpoint: str | None = None
    #: The discovery collections' cards (their open rounds' sub-collections are in ``collections``).
    discoveries: tuple[DiscoveryCard, ...] = ()
    #: How a wide collection's parent fits its model for queries (docs/wide.md "Answering queries").
    wide_fit: WideFit = field(default_factory=WideFit)

    def __post_init__(self) -> None:
        if self.shuffle_key is not None and self.cluster is None:
            raise ConfigError("--shuffle-key: only with --nats (one machine keeps its sealing key in --data-dir, "
                              "as DIR/sealing-key, created at its first start)")
        if self.cluster is None and self.data_dir is None:
            raise ConfigError("--data-dir: required unless the log is a NATS cluster (--nats)")
        if self.cluster is not None and self.accept_lost_records:
            raise ConfigError("--accept-lost-records: only with --data-dir (a cluster's log is repaired from its "
                              "surviving replicas)")
        if not self.collections:
            raise ConfigError("--collection: at least one collection file")
        names = ([c.schema.name for c in self.collections] + [w.schema.name for w in self.wide]
                 + [d.schema.name for d in self.discoveries])
        if len(set(names)) != len(names):
            raise ConfigError(f"--collection: distinct collection names, got {sorted(names)}")
        checks: Iterable[tuple[str, object, int, int]] = (
            ("--port", self.port, 0, 65535),
            ("--shards", 1 if self.shards is None else self.shards, 1, 4096),
            ("--max-rows-per-client", self.limits.max_rows_per_client, 0, 2**63 - 1),
            ("--max-batch-reports", self.limits.max_batch_reports, 1, 2**32 - 1),
            ("--max-message-bytes", self.limits.max_message_bytes, 1024, MAX_MESSAGE_BYTES),
            ("max_inflight_batches", self.max_inflight_batches, 1, 1024),
            ("max_group_rows", self.max_group_rows, 1, 2**31 - 1),
            ("--snapshot-every", self.snapshot_ids, 1, 2**40),
            ("--open-processes", self.open_processes, 0, 256),
            ("--metrics-port", 0 if self.metrics_port is None else self.metrics_port, 0, 65535),
        )
        with flag_checks():
            for name, value, low, high in checks:
                check_int(value, name, low, high)
            check_seconds(self.grace_seconds, "--grace", allow_zero=True)
            if check_seconds(self.max_commit_interval, "--max-commit-interval", allow_zero=True) > 10:
                raise ConfigError(f"--max-commit-interval: seconds from 0 to 10, got {self.max_commit_interval}")
            if self.web_port is not None:
                check_int(self.web_port, "--web-port", 0, 65535)
        check_endpoint(self.otlp_endpoint)
        self._check_web()

    def _check_web(self) -> None:
        """``--web-origins`` only with ``--web-port``, each an origin; a web port needs a way to authenticate
        a browser: tokens, or none at all (a browser presents no client certificate of ours)."""
        if self.web_port is None:
            if self.web_origins:
                raise ConfigError("--web-origins: only with --web-port")
            return
        for origin in self.web_origins:
            if origin != "*" and not _ORIGIN.fullmatch(origin):
                raise ConfigError(f"--web-origins: {origin[:80]!r} is not an origin; legal range: scheme://host[:port] "
                                  "with scheme http or https and no path (e.g. https://survey.example.org), or *")
        if self.tls is not None and self.tls.client_ca is not None and self.tokens_file is None:
            raise ConfigError("--web-port: with --tls-client-ca and no --tokens, calls are authenticated by client "
                              "certificates, which the web port does not take; give --tokens")


class Catalog:
    """The collections a server serves, with the limits it publishes for them."""

    def __init__(self, cards: Iterable[MechanismCard], limits: Limits, *, wide: Iterable[WideCard] = (),
                 discoveries: Iterable[DiscoveryCard] = ()):
        self.limits = limits
        self._infos = {card.schema.name: CollectionInfo(card, limits) for card in cards}
        self._protos = {name: info.to_proto() for name, info in self._infos.items()}
        self._wide = {card.schema.name: card for card in wide}
        #: The discovery collections: their cards (reports go to their open rounds' sub-collections).
        self._discovery_cards = {d.schema.name: d for d in discoveries}
        #: GetCollection's answers for the parents: a wide collection's (views/1) and a discovery's (discovery/1).
        self._parents = {name: pb.Collection(name=name, schema_json=card.schema.dumps(), card_json=card.dumps(),
                                             mechanism_version=VIEWS_VERSION, limits=limits.to_proto())
                         for name, card in self._wide.items()}
        for card in self._discovery_cards.values():
            self._parents[card.schema.name] = self._discovery_proto(card)
        #: Round sub-collections being closed (:meth:`close_round`).
        self._closing: set[str] = set()
        self._sealing: SealingKey | None = None

    def _discovery_proto(self, card: DiscoveryCard) -> pb.Collection:
        return pb.Collection(name=card.schema.name, schema_json=card.schema.dumps(), card_json=card.dumps(),
                             mechanism_version=MECHANISM_VERSION, limits=self.limits.to_proto())

    def publish_sealing(self, key: SealingKey | None) -> None:
        """Publish ``key`` with every collection (``Collection.sealing``; ``None``: no sealed reports)."""
        self._sealing = key
        self._infos = {name: replace(info, sealing=key) for name, info in self._infos.items()}
        self._protos = {name: info.to_proto() for name, info in self._infos.items()}

    # ----- a discovery's rounds on a running server (ldpsynth.aggregator.operate.rounds) ----------------
    def discovery(self, name: str) -> DiscoveryCard | None:
        """The card of the discovery collection ``name`` served now (``None``: not a discovery served here)."""
        return self._discovery_cards.get(name)

    def close_round(self, parent: str) -> None:
        """Stop taking reports for the open round of the discovery ``parent``: from now on :meth:`get` refuses its
        sub-collection (FAILED_PRECONDITION: fetch the discovery's card again) until :meth:`open_round` or
        :meth:`reopen_round`. Synchronous: no batch is admitted to it after this returns."""
        card = self._discovery_cards[parent].card
        assert card is not None
        self._closing.add(card.schema.name)

    def reopen_round(self, parent: str) -> None:
        """Take reports for the open round of ``parent`` again (its close was refused)."""
        card = self._discovery_cards[parent].card
        assert card is not None
        self._closing.discard(card.schema.name)

    def open_round(self, card: DiscoveryCard) -> None:
        """Serve ``card`` as its discovery's card: the closed round's sub-collection is no longer served, the new
        round's (if the discovery is not finished) is, with the published sealing key."""
        old = self._discovery_cards[card.schema.name].card
        if old is not None:
            self._infos.pop(old.schema.name, None)
            self._protos.pop(old.schema.name, None)
            self._closing.discard(old.schema.name)
        if card.card is not None:
            info = CollectionInfo(card.card, self.limits, sealing=self._sealing)
            self._infos[card.card.schema.name] = info
            self._protos[card.card.schema.name] = info.to_proto()
        self._discovery_cards[card.schema.name] = card
        self._parents[card.schema.name] = self._discovery_proto(card)

    @property
    def views(self) -> dict[str, tuple[str, ...]]:
        """Wide collection name -> its view sub-collections' names."""
        return {name: card.names for name, card in self._wide.items()}

    @property
    def rounds(self) -> dict[str, tuple[str, ...]]:
        """Discovery collection name -> the names of all its rounds' sub-collections (served one at a time)."""
        return {name: tuple(round_name(name, r) for r in range(card.schema.schedule.rounds))
                for name, card in self._discovery_cards.items()}

    @property
    def names(self) -> list[str]:
        return sorted(self._infos)

    def served(self) -> list[tuple[CollectionInfo, bool]]:
        """Every collection served now (a discovery's open round too, never a closed one), in name order, and
        whether it may take reports: False for a round being closed (:meth:`close_round`)."""
        return [(self._infos[name], name not in self._closing) for name in sorted(self._infos)]

    def cards_json(self) -> dict[str, str]:
        """Collection name -> card JSON (what the shards check their files against), a wide collection's wide card
        too: registered in the log, so every replica serves the same views and salt (a device keeps its view)."""
        return {**{name: info.card.dumps() for name, info in self._infos.items()},
                **{name: card.dumps() for name, card in self._wide.items()}}

    def wide(self, name: str) -> WideCard | None:
        """The wide card of the wide collection ``name`` (``None``: not a wide collection served here)."""
        return self._wide.get(name)

    def get(self, name: str) -> CollectionInfo:
        """The collection ``name``; FAILED_PRECONDITION if it is not served here."""
        if name in self._discovery_cards:
            card = self._discovery_cards[name].card
            where = "it is finished" if card is None else f"they go to {card.schema.name!r}"
            raise WrongState(f"collection: {name[:128]!r} is a discovery collection, which takes no reports itself "
                             f"({where}; docs/heavy-hitters.md)")
        round_of = parent_of(name)
        if round_of is not None and round_of[0] in self._discovery_cards and (
                name in self._closing or name not in self._infos):
            raise WrongState(f"collection: {name[:160]!r} is a closed round of the discovery {round_of[0][:128]!r} "
                             "and takes no more reports; fetch the discovery's card again (GetCollection) and report "
                             "in the round it names if that is the device's round")
        try:
            return self._infos[name]
        except KeyError:
            if name in self._wide:
                raise WrongState(f"collection: {name!r} is a wide collection of views; each device reports its view "
                                 f"to its sub-collection, one of {list(self._wide[name].names)}") from None
            raise WrongState(f"collection: {name[:128]!r} is not served here (unknown or closed)") from None

    def proto(self, name: str) -> pb.Collection:
        """``GetCollection``'s answer for ``name`` (built once): a wide collection's is its wide schema and card,
        of mechanism version ``views/1``; a discovery's its discovery card, ``discovery/1``."""
        if name in self._parents:
            return self._parents[name]
        self.get(name)
        return self._protos[name]
