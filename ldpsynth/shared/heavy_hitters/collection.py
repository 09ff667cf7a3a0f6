"""The discovery collection: a string attribute's heavy hitters found round by round, each round an ordinary
sub-collection (docs/heavy-hitters.md, "The collection mode").

A :class:`DiscoverySchema` is a collection JSON whose one private attribute is a string
(``{"name": ..., "type": "string", "max_length": L, "encoding": "utf-8"}`` or ``"alphabet": "..."``,
:class:`~ldpsynth.shared.heavy_hitters.encoding.StringEncoding`) with a ``"discovery"`` block
(:class:`Discovery`). Round r is expanded onto the existing path (:meth:`DiscoverySchema.round_schema`): a
collection named ``f"{name}/round-{r}"`` whose one private attribute ``cell`` is an integer in
:math:`[0, D_r)` (the device's cell :math:`y(x)`, :mod:`~ldpsynth.shared.heavy_hitters.device`), the parent's
public attributes, ε, lifecycle and minimum batch, and the round's mechanism (E when the collection is
shuffled: k-RR's blanket bound amplifies far more than the clone bound every other oracle gets,
``registry.shuffle_bound``). So storage, shards, the shuffler and per-round tallies work unchanged.

:class:`DiscoveryState` is the server's state machine: round r open, :meth:`DiscoveryState.close_round`
decodes its support counts with :class:`~ldpsynth.shared.heavy_hitters.server.HeavyHitterServer` and opens
round r + 1 with the next candidates, or finishes with the heavy hitters. The population N is estimated when
round 0 closes as :math:`\\hat N = R\\,n_0` (a device is in round 0 with probability 1/R), raised to
:math:`n_r` should a later round hold more reports. :class:`DiscoveryCard` is what devices fetch.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, cast

import numpy as np
import numpy.typing as npt

from .. import jsonio
from ..attributes import Attribute, IntegerAttribute, attribute_from_json
from ..card import MechanismCard
from ..errors import SchemaError, Status, ValidationError, schema_field
from ..lifecycle import format_time, parse_time
from ..mechanisms.registry import name_of
from ..schema import Schema
from ..shuffle_spec import ShuffleSpec
from ..validation import check_choice, check_epsilon, check_int, check_real
from .device import MAX_DOMAIN, RoundSpec
from .encoding import MAX_FRAGMENT_BITS, StringEncoding
from .rounds import RoundSchedule, round_of
from .server import HeavyHitters, HeavyHitterServer, RoundEstimate

__all__ = ["CARD_FORMAT", "STATE_FORMAT", "MECHANISM_VERSION", "ROUND_KEY_CONTEXT", "Discovery",
           "DiscoverySchema", "DiscoveryCard", "DiscoveryState", "RoundNotReady", "round_name", "parent_of",
           "is_discovery_json", "DeviceTurn", "device_turn", "round_rows", "REPORT", "NOT_YET", "PASSED"]

CARD_FORMAT = "ldpsynth.discovery-card/1"
STATE_FORMAT = "ldpsynth.discovery-state/1"
#: The ``mechanism_version`` a discovery collection is served with.
MECHANISM_VERSION = "discovery/1"
#: What a device's round key is an HMAC of, before the collection's name (the ledger's ``round_key``).
ROUND_KEY_CONTEXT = b"ldpsynth round key/1"
#: The private attribute of a round's sub-collection.
CELL = "cell"
_ROUND = re.compile(r"^(.+)/round-(0|[1-9][0-9]*)$")
_MAX_NAME = 128
_MAX_MIN_REPORTS = 10**12


def round_name(parent: str, r: int) -> str:
    """The name of round r's sub-collection, ``f"{parent}/round-{r}"``."""
    return f"{parent}/round-{r}"


def parent_of(name: str) -> tuple[str, int] | None:
    """``(parent, r)`` of a round's sub-collection name, or None for another name."""
    match = _ROUND.match(name)
    return None if match is None else (match.group(1), int(match.group(2)))


def is_discovery_json(obj: object) -> bool:
    """Whether a collection JSON object is a discovery collection's (it has a ``"discovery"`` block)."""
    return isinstance(obj, Mapping) and "discovery" in obj


class RoundNotReady(ValidationError):
    """A round cannot be closed yet (too few reports), or the discovery is finished."""

    refused_as: ClassVar[Status | None] = Status.FAILED_PRECONDITION


@dataclass(frozen=True)
class Discovery:
    """The ``"discovery"`` block: the schedule's ``first_bits`` :math:`b_0` (≤ 22: round 0's domain
    :math:`2^{b_0}` within :data:`~ldpsynth.shared.heavy_hitters.device.MAX_DOMAIN`) and ``fragment_bits`` g,
    what to find (``top_k`` or ``threshold``, a share of N), ``cap`` (candidates per round, default 2k or 256),
    ``salt`` (≥ 16 bytes, hex in JSON: the devices' split into rounds) and ``min_reports_per_round``."""

    first_bits: int
    fragment_bits: int
    salt: bytes
    min_reports_per_round: int
    top_k: int | None = None
    threshold: float | None = None
    cap: int | None = None

    FIELDS: ClassVar[tuple[str, ...]] = ("first_bits", "fragment_bits", "top_k", "threshold", "cap", "salt",
                                         "min_reports_per_round")

    def __post_init__(self) -> None:
        with schema_field():
            check_int(self.first_bits, "discovery.first_bits", 1, MAX_DOMAIN.bit_length() - 1)
            check_int(self.fragment_bits, "discovery.fragment_bits", 1, MAX_FRAGMENT_BITS)
            check_int(self.min_reports_per_round, "discovery.min_reports_per_round", 1, _MAX_MIN_REPORTS)
            if (self.top_k is None) == (self.threshold is None):
                raise ValidationError("discovery.top_k", "exactly one of top_k and threshold", "got both or neither")
            if self.top_k is not None:
                check_int(self.top_k, "discovery.top_k", 1, MAX_DOMAIN)
            if self.threshold is not None:
                check_real(self.threshold, "discovery.threshold", low=0.0, high=1.0, low_open=True)
            if self.cap is not None:
                check_int(self.cap, "discovery.cap", self.top_k or 1, MAX_DOMAIN)
        if not isinstance(self.salt, bytes) or len(self.salt) < 16:
            raise SchemaError("discovery.salt", "at least 16 bytes (32 hex digits)", "too short or not bytes")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"first_bits": self.first_bits, "fragment_bits": self.fragment_bits,
                               "salt": self.salt.hex(), "min_reports_per_round": self.min_reports_per_round}
        for key in ("top_k", "threshold", "cap"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    @classmethod
    def from_json(cls, obj: object) -> Discovery:
        legal = ("an object with first_bits, fragment_bits, top_k or threshold, salt, min_reports_per_round and "
                 "optionally cap")
        if not isinstance(obj, Mapping):
            raise SchemaError("discovery", legal, f"got {type(obj).__name__}")
        extra = set(obj) - set(cls.FIELDS)
        if extra:
            raise SchemaError("discovery", legal, f"unknown fields {sorted(extra)}")
        missing = sorted({"first_bits", "fragment_bits", "salt", "min_reports_per_round"} - set(obj))
        if missing:
            raise SchemaError(f"discovery.{missing[0]}", legal, "missing")
        salt = obj["salt"]
        if not isinstance(salt, str) or not re.fullmatch(r"(?:[0-9a-f]{2}){16,}", salt):
            raise SchemaError("discovery.salt", "lowercase hex of at least 16 bytes (32 digits)", "malformed")
        return cls(obj["first_bits"], obj["fragment_bits"], bytes.fromhex(salt), obj["min_reports_per_round"],
                   obj.get("top_k"), obj.get("threshold"), obj.get("cap"))


def _string_attribute(obj: Mapping[str, Any], position: int) -> tuple[str, StringEncoding]:
    """The name and encoding of the ``{"type": "string"}`` attribute at ``position``."""
    where = f"attributes[{position}]"
    name = obj.get("name")
    if not isinstance(name, str) or not name or not name.isidentifier():
        raise SchemaError(f"{where}.name", "a non-empty identifier (letters, digits, _)", f"got {name!r}")
    where = f"attributes[{name}]"
    extra = set(obj) - {"name", "type", "public", "max_length", "encoding", "alphabet"}
    if extra:
        raise SchemaError(where, "fields name, type, public, max_length and encoding or alphabet",
                          f"unknown fields {sorted(extra)}")
    if obj.get("public", False) is not False:
        raise SchemaError(f"{where}.public", "false (the string is the collection's private attribute)", "not false")
    if ("encoding" in obj) == ("alphabet" in obj):
        raise SchemaError(where, "exactly one of encoding ('utf-8') and alphabet", "got both or neither")
    with schema_field():
        if "encoding" in obj:
            check_choice(obj["encoding"], f"{where}.encoding", ("utf-8",))
        if "max_length" not in obj:
            raise ValidationError(f"{where}.max_length", "an integer in [1, 64]", "missing")
        try:
            encoding = StringEncoding(obj["max_length"], obj.get("alphabet"))
        except ValidationError as exc:
            raise ValidationError(f"{where}.{exc.field}", exc.legal, exc.problem) from None
    return name, encoding


@dataclass(frozen=True)
class DiscoverySchema:
    """A discovery collection (module docstring): its name, ε, string attribute (``word``, its ``encoding``,
    at index ``position`` of the attributes), the other (public) ``attributes``, shuffle block, lifecycle,
    minimum batch and :class:`Discovery` block."""

    name: str
    epsilon: float
    word: str
    encoding: StringEncoding
    discovery: Discovery
    attributes: tuple[Attribute, ...] = ()
    position: int = 0
    shuffle: ShuffleSpec | None = None
    opens: int | None = None
    closes: int | None = None
    min_batch: int = 1

    def __post_init__(self) -> None:
        with schema_field():
            object.__setattr__(self, "epsilon", check_epsilon(self.epsilon, "epsilon"))
        longest = _MAX_NAME - len(round_name("", self.schedule.rounds - 1))
        if not isinstance(self.name, str) or not self.name or len(self.name) > longest:
            raise SchemaError("name", f"a non-empty string of at most {longest} characters (its rounds' "
                              f"sub-collections are named name/round-r, at most {_MAX_NAME})", "too long or empty")
        if any(not a.public for a in self.attributes):
            raise SchemaError("attributes", f"public attributes besides the string {self.word!r}",
                              "another private attribute")
        check_int(self.position, "position", 0, len(self.attributes))
        self.round_schema(0, np.zeros((1, 0), np.uint8))  # the rest of the schema's checks, on round 0

    @property
    def schedule(self) -> RoundSchedule:
        """The rounds: :math:`B` bits of the encoding, :math:`b_0` and g of the discovery block."""
        return RoundSchedule(self.encoding.bits, self.discovery.first_bits, self.discovery.fragment_bits)

    @property
    def round_mechanism(self) -> str | None:
        """Every round's mechanism when fixed (E with a shuffle block: its blanket bound is far tighter than the
        clone bound of the oracles, docs/shuffle-accountant.md §9), else None (the least variance's)."""
        return "E" if self.shuffle is not None else None

    def round_spec(self, r: int, candidates: np.ndarray) -> RoundSpec:
        """Round r's :class:`~ldpsynth.shared.heavy_hitters.device.RoundSpec` against ``candidates``."""
        s = self.schedule
        return RoundSpec(r, s.start_bits(r), s.width(r), candidates, self.epsilon, self.round_mechanism)

    def round_schema(self, r: int, candidates: np.ndarray) -> Schema:
        """The ordinary schema of round r: one private integer ``cell`` in :math:`[0, D_r)`, the round's
        mechanism (module docstring)."""
        spec = self.round_spec(r, candidates)
        attrs = list(self.attributes)
        attrs.insert(self.position, IntegerAttribute(CELL, False, 0, spec.domain_size - 1))
        return Schema(round_name(self.name, r), self.epsilon, tuple(attrs), self.shuffle, name_of(spec.mechanism),
                      self.opens,
                      self.closes, self.min_batch)

    def device_round(self, round_key: bytes) -> int:
        """The round of the device whose round key (the ledger's, :data:`ROUND_KEY_CONTEXT`) is ``round_key``:
        :func:`~ldpsynth.shared.heavy_hitters.rounds.round_of` with the discovery block's salt."""
        return round_of(round_key, self.discovery.salt, self.schedule.rounds)

    def to_json(self) -> dict[str, Any]:
        word: dict[str, Any] = {"name": self.word, "type": "string", "max_length": self.encoding.max_length}
        if self.encoding.alphabet is None:
            word["encoding"] = "utf-8"
        else:
            word["alphabet"] = self.encoding.alphabet
        attrs = [a.to_json() for a in self.attributes]
        attrs.insert(self.position, word)
        out: dict[str, Any] = {"name": self.name, "epsilon": self.epsilon, "attributes": attrs,
                               "discovery": self.discovery.to_json()}
        if self.shuffle is not None:
            out["shuffle"] = self.shuffle.to_json()
        if self.opens is not None:
            out["opens"] = format_time(self.opens)
        if self.closes is not None:
            out["closes"] = format_time(self.closes)
        if self.min_batch != 1:
            out["min_batch"] = self.min_batch
        return out

    def dumps(self) -> str:
        """Compact JSON with sorted keys."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | str) -> DiscoverySchema:
        """The discovery schema of a collection JSON object (or its text); a
        :class:`~ldpsynth.shared.errors.SchemaError` naming the field out of its legal range."""
        if isinstance(obj, str):
            with schema_field():
                obj = jsonio.loads(obj, "schema", "a JSON object")
        if not isinstance(obj, Mapping):
            raise SchemaError("schema", "a JSON object with name, epsilon, attributes, discovery", "not an object")
        known = {"name", "epsilon", "attributes", "discovery", "shuffle", "opens", "closes", "min_batch"}
        extra = set(obj) - known
        if extra:
            raise SchemaError("schema", f"fields {', '.join(sorted(known))} (a discovery collection's mechanism "
                              "is chosen per round)", f"unknown fields {sorted(extra)}")
        for key in ("epsilon", "discovery"):
            if key not in obj:
                raise SchemaError(key, "present in a discovery collection", "missing")
        attrs = obj.get("attributes")
        if not isinstance(attrs, list) or not attrs:
            raise SchemaError("attributes", "a non-empty list of attribute objects", "missing or empty")
        strings = [i for i, a in enumerate(attrs) if isinstance(a, Mapping) and a.get("type") == "string"]
        if len(strings) != 1:
            raise SchemaError("attributes", "exactly one attribute of type 'string' (the one private attribute)",
                              f"got {len(strings)}")
        position = strings[0]
        word, encoding = _string_attribute(attrs[position], position)
        others = tuple(attribute_from_json(a, i) for i, a in enumerate(attrs) if i != position)
        if word in {a.name for a in others}:
            raise SchemaError("attributes", "distinct attribute names", "duplicate names")
        if CELL in {a.name for a in others}:
            raise SchemaError("attributes", f"no public attribute named {CELL!r} (each round's private attribute)",
                              "got one")
        with schema_field():
            epsilon = check_epsilon(obj["epsilon"], "epsilon")
            min_batch = check_int(obj.get("min_batch", 1), "min_batch", 1, _MAX_MIN_REPORTS)
        shuffle = ShuffleSpec.from_json(obj["shuffle"]) if "shuffle" in obj else None
        opens, closes = (parse_time(obj[key], key) if key in obj else None for key in ("opens", "closes"))
        return cls(cast(str, obj.get("name")), epsilon, word, encoding, Discovery.from_json(obj["discovery"]),
                   others, position, shuffle, opens, closes, min_batch)


def candidates_hex(candidates: np.ndarray) -> list[str]:
    """The candidate prefixes as hex strings, one per row (round 0's empty prefix is ``""``)."""
    return [bytes(row).hex() for row in candidates]


def candidates_of_hex(values: object, start_bits: int, where: str) -> np.ndarray:
    """The uint8 rows of hex candidate prefixes of ``start_bits`` bits (``where`` names the field)."""
    width = -(-start_bits // 8)
    legal = f"a non-empty list of hex strings of {width} bytes"
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise ValidationError(where, legal, "not a list of strings")
    if not all(re.fullmatch(f"[0-9a-f]{{{2 * width}}}", v) for v in values):
        raise ValidationError(where, legal, "malformed")
    out = np.frombuffer(b"".join(bytes.fromhex(v) for v in values), np.uint8).reshape(len(values), width)
    if start_bits % 8 and np.any(out[:, -1] & ((1 << (8 - start_bits % 8)) - 1)):
        raise ValidationError(where, f"prefixes of {start_bits} bits (later bits zero)", "bits set past the prefix")
    return out.copy()


@dataclass(frozen=True, eq=False)
class DiscoveryCard:
    """What a device fetches (format :data:`CARD_FORMAT`): the schema, its schedule, the current ``round``
    (None when the discovery is finished), its ``candidates`` and the round sub-collection's ``card``."""

    schema: DiscoverySchema
    round: int | None
    candidates: np.ndarray
    card: MechanismCard | None

    @classmethod
    def for_round(cls, schema: DiscoverySchema, r: int | None, candidates: np.ndarray) -> DiscoveryCard:
        """The card of round r against ``candidates`` (r None: finished)."""
        card = None if r is None else MechanismCard.for_schema(schema.round_schema(r, candidates))
        return cls(schema, r, candidates, card)

    @property
    def spec(self) -> RoundSpec:
        """The current round's spec (a :class:`RoundNotReady` when finished)."""
        if self.round is None:
            raise RoundNotReady("round", "an open round", "the discovery is finished")
        return self.schema.round_spec(self.round, self.candidates)

    def to_json(self) -> dict[str, Any]:
        s = self.schema.schedule
        out: dict[str, Any] = {
            "format": CARD_FORMAT, "mechanism_version": MECHANISM_VERSION, "schema": self.schema.to_json(),
            "schedule": {"total_bits": s.total_bits, "first_bits": s.first_bits, "fragment_bits": s.fragment_bits,
                         "rounds": s.rounds},
            "round": self.round, "candidates": candidates_hex(self.candidates) if self.round is not None else []}
        if self.round is not None and self.card is not None:
            out["round_collection"] = round_name(self.schema.name, self.round)
            out["card"] = self.card.to_json()
        return out

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | str) -> DiscoveryCard:
        """Parse and verify a card: the schedule, the candidates' shape and order, the round's name and its
        mechanism card are recomputed from the schema and must match (a ValidationError naming the field)."""
        if isinstance(obj, str):
            obj = jsonio.loads(obj, "card", "a JSON discovery card")
        if not isinstance(obj, Mapping) or obj.get("format") != CARD_FORMAT:
            raise ValidationError("card.format", repr(CARD_FORMAT), "not a discovery card of this format")
        if obj.get("mechanism_version") != MECHANISM_VERSION:
            raise ValidationError("card.mechanism_version", repr(MECHANISM_VERSION),
                                  f"got {obj.get('mechanism_version')!r}")
        schema = DiscoverySchema.from_json(cast(Mapping[str, Any], obj.get("schema")))
        s = schema.schedule
        schedule = {"total_bits": s.total_bits, "first_bits": s.first_bits, "fragment_bits": s.fragment_bits,
                    "rounds": s.rounds}
        if obj.get("schedule") != schedule:
            raise ValidationError("card.schedule", f"{schedule} (the schema's)", "inconsistent")
        r = obj.get("round")
        if r is None:
            if obj.get("candidates") != [] or "card" in obj or "round_collection" in obj:
                raise ValidationError("card.candidates", "empty, with no card, when the discovery is finished",
                                      "present")
            return cls(schema, None, np.zeros((0, 0), np.uint8), None)
        check_int(r, "card.round", 0, s.rounds - 1)
        candidates = candidates_of_hex(obj.get("candidates"), s.start_bits(r), "card.candidates")
        expected = cls.for_round(schema, r, candidates)   # RoundSpec checks order, distinctness and D_r
        if obj.get("round_collection") != round_name(schema.name, r):
            raise ValidationError("card.round_collection", repr(round_name(schema.name, r)), "inconsistent")
        card = MechanismCard.from_json(cast(Mapping[str, Any], obj.get("card")))
        assert expected.card is not None
        if card.to_json() != expected.card.to_json():
            raise ValidationError("card.card", "the mechanism card of the round's sub-collection (recomputed from "
                                  "the schema, round and candidates)", "inconsistent")
        return expected


#: A device's turn (:func:`device_turn`): its round is the open one, later, or earlier (or the discovery is over).
REPORT, NOT_YET, PASSED = "report", "not your round yet", "your round has passed"


@dataclass(frozen=True)
class DeviceTurn:
    """Whether a device reports now: its ``round`` (by its round key) against the card's ``open_round``
    (None: the discovery is finished); ``status`` one of :data:`REPORT`, :data:`NOT_YET`, :data:`PASSED`."""

    round: int
    open_round: int | None

    @property
    def status(self) -> str:
        if self.open_round is None or self.round < self.open_round:
            return PASSED
        return REPORT if self.round == self.open_round else NOT_YET


def device_turn(card: DiscoveryCard, round_key: bytes) -> DeviceTurn:
    """The turn of the device whose round key is ``round_key`` (the ledger's ``round_key(card.schema.name)``)."""
    return DeviceTurn(card.schema.device_round(round_key), card.round)


def round_rows(card: DiscoveryCard, columns: Mapping[str, Any]) -> dict[str, Any]:
    """A device's rows of the parent (the string column and the public ones) as rows of the open round's
    sub-collection: the string replaced by its cell :math:`y(x)` (RoundSpec.cells_of), the public columns
    as given. The ordinary path then randomizes the cell with the round's mechanism."""
    schema = card.schema
    expected = {schema.word, *(a.name for a in schema.attributes)}
    if set(columns) != expected:
        raise ValidationError("rows", f"the columns {sorted(expected)}", f"got {sorted(columns)}")
    out: dict[str, Any] = {k: v for k, v in columns.items() if k != schema.word}
    out[CELL] = card.spec.cells_of(schema.encoding.encode(list(columns[schema.word])))
    return out


def _pack(support: np.ndarray) -> str:
    return base64.b64encode(support.astype("<i8").tobytes()).decode("ascii")


def _unpack(text: object, where: str) -> np.ndarray:
    if not isinstance(text, str):
        raise ValidationError(where, "base64 of little-endian int64 support counts", "not a string")
    try:
        data = base64.b64decode(text, validate=True)
    except ValueError:
        raise ValidationError(where, "base64 of little-endian int64 support counts", "malformed") from None
    if len(data) % 8:
        raise ValidationError(where, "base64 of little-endian int64 support counts", "not whole int64s")
    return np.frombuffer(data, "<i8").astype(np.int64)


@dataclass(eq=False)
class DiscoveryState:
    """The server side of one discovery (module docstring): the closed rounds' support counts and numbers of
    reports, replayed through a :class:`~ldpsynth.shared.heavy_hitters.server.HeavyHitterServer`."""

    schema: DiscoverySchema
    closed: list[tuple[np.ndarray, int]] = field(default_factory=list)
    _server: HeavyHitterServer | None = None

    @property
    def round(self) -> int:
        """The open round (``schedule.rounds`` or fewer when finished: :attr:`finished`)."""
        return len(self.closed)

    @property
    def finished(self) -> bool:
        return self._server is not None and self._server.finished

    @property
    def candidates(self) -> np.ndarray:
        """The open round's candidate prefixes."""
        if self._server is None:
            return np.zeros((1, 0), np.uint8)
        return self._server.spec().candidates

    def spec(self) -> RoundSpec:
        """The open round's spec (:class:`RoundNotReady` when finished)."""
        if self.finished:
            raise RoundNotReady("round", "an open round", "the discovery is finished")
        return self.schema.round_spec(self.round, self.candidates)

    def round_schema(self) -> Schema:
        """The open round's sub-collection schema."""
        return self.schema.round_schema(self.round, self.spec().candidates)

    def card(self) -> DiscoveryCard:
        """What devices fetch now."""
        if self.finished:
            return DiscoveryCard.for_round(self.schema, None, np.zeros((0, 0), np.uint8))
        return DiscoveryCard.for_round(self.schema, self.round, self.candidates)

    def close_round(self, support: npt.ArrayLike, n: int) -> RoundEstimate:
        """Close the open round from its support counts (one per value of its mechanism's domain) and its
        number of reports n; a :class:`RoundNotReady` when n is below ``min_reports_per_round``."""
        spec = self.spec()
        check_int(n, "n", 0)
        need = self.schema.discovery.min_reports_per_round
        if n < need:
            raise RoundNotReady("reports", f"at least {need} reports (discovery.min_reports_per_round) to close "
                                f"round {spec.index}", f"round {spec.index} has {n}")
        counts = np.asarray(support)
        if counts.dtype.kind not in "iu" or counts.shape != (spec.mechanism.domain_size,):
            raise ValidationError("support", f"{spec.mechanism.domain_size} integer support counts",
                                  f"got shape {counts.shape}, dtype {counts.dtype}")
        if self._server is None:
            d = self.schema.discovery
            self._server = HeavyHitterServer(self.schema.encoding, self.schema.schedule, self.schema.epsilon,
                                             self.schema.schedule.rounds * n, top_k=d.top_k, threshold=d.threshold,
                                             cap=d.cap, mechanism=self.schema.round_mechanism)
        self._server.population = max(self._server.population, n)
        estimate = self._server.receive_support(counts, n)
        self.closed.append((counts.astype(np.int64), n))
        return estimate

    def result(self) -> HeavyHitters:
        """The heavy hitters (a :class:`RoundNotReady` before the discovery is finished)."""
        if not self.finished:
            raise RoundNotReady("round", "a finished discovery", f"round {self.round} is open")
        assert self._server is not None
        return self._server.result()

    def result_json(self) -> dict[str, Any]:
        """The heavy hitters as JSON: per value its estimated count, standard error and 95% CI."""
        hh = self.result()
        assert self._server is not None
        rows = [{"value": v, "count": float(c), "std_error": float(se), "ci_low": float(lo), "ci_high": float(hi)}
                for v, c, se, lo, hi in zip(hh.values, hh.counts, hh.std_errors, hh.ci_low, hh.ci_high, strict=True)]
        return {"collection": self.schema.name, "population": self._server.population,
                "confidence": hh.confidence, "rounds": [n for _, n in self.closed], "heavy_hitters": rows}

    def to_json(self) -> dict[str, Any]:
        """The state: the schema, each closed round's support counts and reports, and a digest of the open
        round's card (what :meth:`from_json` verifies after replaying the rounds)."""
        return {"format": STATE_FORMAT, "schema": self.schema.to_json(),
                "closed": [{"n": n, "support": _pack(s)} for s, n in self.closed],
                "round": self.round, "card_sha256": hashlib.sha256(self.card().dumps().encode()).hexdigest()}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | str) -> DiscoveryState:
        """Replay a stored state's rounds; the open round and its card must be those stored."""
        if isinstance(obj, str):
            obj = jsonio.loads(obj, "state", "a JSON discovery state")
        if not isinstance(obj, Mapping) or obj.get("format") != STATE_FORMAT:
            raise ValidationError("state.format", repr(STATE_FORMAT), "not a discovery state of this format")
        state = cls(DiscoverySchema.from_json(cast(Mapping[str, Any], obj.get("schema"))))
        closed = obj.get("closed")
        if not isinstance(closed, Sequence) or isinstance(closed, str):
            raise ValidationError("state.closed", "a list of closed rounds", "not a list")
        for i, entry in enumerate(closed):
            if not isinstance(entry, Mapping):
                raise ValidationError("state.closed", "objects with n and support", "not an object", i)
            state.close_round(_unpack(entry.get("support"), f"state.closed[{i}].support"),
                              check_int(entry.get("n"), f"state.closed[{i}].n", 0))
        if obj.get("round") != state.round:
            raise ValidationError("state.round", f"{state.round} (the rounds replayed)", "inconsistent")
        if obj.get("card_sha256") != hashlib.sha256(state.card().dumps().encode()).hexdigest():
            raise ValidationError("state.card_sha256", "the digest of the replayed state's card", "inconsistent")
        return state
