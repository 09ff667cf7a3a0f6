"""A wide collection: a collection JSON with a ``"views"`` block, expanded into one ordinary collection per view.

.. code-block:: json

    {"name": "adult", "epsilon": 1, "attributes": [...],
     "views": {"kind": "pairs", "attributes": ["age", "sex", "income"], "one_way": false,
               "salt": "<hex, at least 16 bytes>"}}

``kind`` ``"pairs"``: every 2-way view of ``attributes`` (default: every private attribute), after their
1-way views when ``one_way``; ``"list"``: the views listed, ``"views": [["a", "b"], ["c"]]``. The wide row's
private domain is never materialized, so it may exceed a :class:`~ldpsynth.shared.schema.Schema`'s 2^28.

A device reports one view (docs/wide.md "The collection mode"): view
:math:`i = \\mathrm{assign\\_view}(\\mathrm{salt}, \\mathrm{key}, m)` (:mod:`.assignment`, exactly uniform over
the m views), its key derived from the device's ledger secret, and it submits its row's projection on the
view's attributes (and every public attribute) to the view's *sub-collection*, an ordinary collection
named ``"<name>/<a>+<b>"`` (attribute names are identifiers: no ``/`` nor ``+`` in them) with the view's
best oracle (:func:`.measure.best_mechanism`; E whenever the collection is shuffled: k-RR's blanket bound amplifies far
more than the clone bound an oracle gets, ``registry.shuffle_bound``). Storage, shards,
shuffler and queries serve the sub-collections unchanged.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ..attributes import NumericAttribute
from ..card import MechanismCard
from ..collection_fields import collection_fields_json, parse_collection_fields
from ..errors import SchemaError, ValidationError, schema_field
from ..jsonio import loads
from ..mechanisms.registry import name_of
from ..schema import MAX_BATCH_WEIGHTS, Attribute, Schema, ShuffleSpec
from ..validation import check_choice
from .assignment import MIN_SALT_BYTES, assign_view
from .measure import best_mechanism

__all__ = ["KINDS", "SEPARATOR", "VIEWS_VERSION", "WIDE_CARD_FORMAT", "ViewSpec", "WideCard", "WideSchema"]

#: How the views block lists its views.
KINDS = ("pairs", "list")
#: Between the parent's name and a view's attributes in a sub-collection's name (``"+"`` between attributes).
SEPARATOR = "/"
#: The format of :class:`WideCard`'s JSON.
WIDE_CARD_FORMAT = "ldpsynth.wide-card/1"
#: The parent's ``mechanism_version`` in ``GetCollection``.
VIEWS_VERSION = "views/1"
#: The assignment rule a wide card states (:mod:`.assignment`).
ASSIGNMENT_RULE = ("view = the first w below floor(2^64/m)*m, mod m, of w_r = the first 8 bytes (big-endian) of "
                   "HMAC-SHA256(salt, device_key || byte r), r = 0, 1, ...; m = the number of views")
#: The domain tag of a device's view key (HMAC-SHA256 under the ledger's secret of the tag and the collection's name).
VIEW_KEY_TAG = b"ldpsynth view key/1"
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})+")
_FIELDS = ("name", "epsilon", "attributes", "views", "shuffle", "opens", "closes", "min_batch")


@dataclass(frozen=True)
class ViewSpec:
    """The ``"views"`` block: how the views are chosen and the assignment's salt.

    ``kind`` ``"pairs"``: every 2-way view of ``attributes`` (``None``: every private attribute), after their
    1-way views when ``one_way``; ``"list"``: ``listed``, the views as tuples of attribute names.
    """

    kind: str
    salt: bytes
    attributes: tuple[str, ...] | None = None
    one_way: bool = False
    listed: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        with schema_field():
            check_choice(self.kind, "views.kind", KINDS)
        if not isinstance(self.salt, bytes) or len(self.salt) < MIN_SALT_BYTES:
            raise SchemaError("views.salt", f"hex of at least {MIN_SALT_BYTES} bytes", "too short")
        if not isinstance(self.one_way, bool):
            raise SchemaError("views.one_way", "true or false", f"got {type(self.one_way).__name__}")
        if self.kind == "pairs" and self.listed:
            raise SchemaError("views.views", "absent with kind 'pairs' (the pairs of views.attributes)", "present")
        if self.kind == "list" and (self.attributes is not None or self.one_way):
            raise SchemaError("views.attributes" if self.attributes is not None else "views.one_way",
                              "absent with kind 'list' (the views are listed in views.views)", "present")

    def resolve(self, private: Sequence[str]) -> tuple[tuple[str, ...], ...]:
        """The views, as tuples of attribute names, of a collection whose private attributes are ``private``."""
        if self.kind == "list":
            if not self.listed:
                raise SchemaError("views.views", "a non-empty list of views (lists of private attribute names)",
                                  "missing or empty")
            for i, view in enumerate(self.listed):
                if not view:
                    raise SchemaError(f"views.views[{i}]", "a non-empty list of private attribute names", "empty")
                for j, name in enumerate(view):
                    _check_private(name, private, f"views.views[{i}][{j}]")
                if len(set(view)) != len(view):
                    raise SchemaError(f"views.views[{i}]", "distinct attribute names", "a name repeats")
            if len({frozenset(v) for v in self.listed}) != len(self.listed):
                raise SchemaError("views.views", "distinct views (as sets of attributes)", "a view repeats")
            return self.listed
        chosen = tuple(private) if self.attributes is None else self.attributes
        for j, name in enumerate(chosen):
            _check_private(name, private, f"views.attributes[{j}]")
        if len(set(chosen)) != len(chosen):
            raise SchemaError("views.attributes", "distinct attribute names", "a name repeats")
        if len(chosen) < 2:
            raise SchemaError("views.attributes", "at least 2 private attributes (kind 'pairs')",
                              f"got {len(chosen)}")
        ones = [(a,) for a in chosen] if self.one_way else []
        return (*ones, *((a, b) for i, a in enumerate(chosen) for b in chosen[i + 1:]))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "salt": self.salt.hex()}
        if self.kind == "list":
            out["views"] = [list(v) for v in self.listed]
            return out
        if self.attributes is not None:
            out["attributes"] = list(self.attributes)
        out["one_way"] = self.one_way
        return out

    @classmethod
    def from_json(cls, obj: object) -> ViewSpec:
        """The block of its JSON object; a :class:`SchemaError` naming ``views...``."""
        if not isinstance(obj, Mapping):
            raise SchemaError("views", "an object with kind, salt and attributes, one_way or views", "not an object")
        extra = set(obj) - {"kind", "salt", "attributes", "one_way", "views"}
        if extra:
            raise SchemaError("views", "fields kind, salt, attributes, one_way, views",
                              f"unknown fields {sorted(extra)}")
        kind = obj.get("kind")
        for key in ("attributes", "one_way") if kind == "list" else ("views",) if kind == "pairs" else ():
            if key in obj:
                raise SchemaError(f"views.{key}", f"absent with kind {kind!r}", "present")
        salt = obj.get("salt")
        if not isinstance(salt, str) or not _HEX.fullmatch(salt):
            raise SchemaError("views.salt", f"a hex string of at least {MIN_SALT_BYTES} bytes",
                              "missing" if salt is None else "not hex")
        attrs = obj.get("attributes")
        if attrs is not None and not (isinstance(attrs, list) and all(isinstance(a, str) for a in attrs)):
            raise SchemaError("views.attributes", "a list of private attribute names", "not a list of strings")
        listed = obj.get("views", [])
        if not isinstance(listed, list) or not all(isinstance(v, list) and all(isinstance(a, str) for a in v)
                                                   for v in listed):
            raise SchemaError("views.views", "a list of views, each a list of private attribute names",
                              "not a list of lists of strings")
        return cls(cast(str, kind), bytes.fromhex(salt), None if attrs is None else tuple(attrs),
                   cast(bool, obj.get("one_way", False)), tuple(tuple(v) for v in listed))


def _check_private(name: str, private: Sequence[str], field: str) -> None:
    if name not in private:
        raise SchemaError(field, f"one of the private attributes {list(private)}", "not a private attribute")


@dataclass(frozen=True)
class WideSchema:
    """A wide collection (module docstring): the fields of a :class:`~ldpsynth.shared.schema.Schema` but the
    mechanism, and its :class:`ViewSpec`. Every error is a :class:`SchemaError` naming the field."""

    name: str
    epsilon: float
    attributes: tuple[Attribute, ...]
    views: ViewSpec
    shuffle: ShuffleSpec | None = None
    opens: int | None = None
    closes: int | None = None
    min_batch: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", tuple(self.attributes))
        names = [a.name for a in self.attributes]
        if len(set(names)) != len(names):
            raise SchemaError("attributes", "distinct attribute names", "duplicate names")
        if not isinstance(self.views, ViewSpec):
            raise SchemaError("views", "a ViewSpec", f"got {type(self.views).__name__}")
        numeric = next((a.name for a in self.attributes if isinstance(a, NumericAttribute)), None)
        if numeric is not None:
            raise SchemaError(f"attributes[{numeric}].type", "categorical, binary, integer or continuous in a "
                              "collection with views (a numeric attribute is collected by its own mechanism, in a "
                              "collection of its own: docs/numeric.md)", "got numeric")
        self.view_schemas()  # every view an ordinary schema: checks the name, ε, lifecycle, min_batch, shuffle

    @property
    def salt(self) -> bytes:
        return self.views.salt

    @property
    def view_attributes(self) -> tuple[tuple[str, ...], ...]:
        """The views, as tuples of attribute names."""
        return self.views.resolve([a.name for a in self.attributes if not a.public])

    def view_name(self, view: Sequence[str]) -> str:
        """The sub-collection name of ``view``: ``f"{name}/{'+'.join(view)}"``."""
        return f"{self.name}{SEPARATOR}{'+'.join(view)}"

    def view_schemas(self) -> tuple[Schema, ...]:
        """One ordinary schema per view: its attributes private, every public attribute, the same ε, lifecycle,
        min_batch and shuffle, the view's :func:`~.measure.best_mechanism` (E when shuffled)."""
        if not isinstance(self.name, str) or not self.name:
            raise SchemaError("name", "a non-empty string of at most 128 characters", f"got {self.name!r}")
        by_name = {a.name: a for a in self.attributes}
        public = [a for a in self.attributes if a.public]
        out = []
        for i, view in enumerate(self.view_attributes):
            size = 1
            for a in view:
                size *= by_name[a].size
            if size > MAX_BATCH_WEIGHTS:
                raise SchemaError(f"views[{i}]", f"a view of at most {MAX_BATCH_WEIGHTS} cells", f"got {size}")
            name = self.view_name(view)
            if len(name) > 128:
                raise SchemaError("name", "a name short enough that every view's sub-collection name "
                                  f"(name{SEPARATOR}a+b) has at most 128 characters", f"view {i} has {len(name)}")
            with schema_field():
                mechanism = "E" if self.shuffle is not None else name_of(best_mechanism(self.epsilon, size))
            attrs = tuple(by_name[a] for a in view) + tuple(public)
            out.append(Schema(name, self.epsilon, attrs, self.shuffle, mechanism, self.opens, self.closes,
                              self.min_batch))
        return tuple(out)

    def to_json(self) -> dict[str, Any]:
        return {**collection_fields_json(self.name, self.epsilon, self.attributes, self.shuffle, self.opens,
                                         self.closes, self.min_batch), "views": self.views.to_json()}

    def dumps(self) -> str:
        """Compact JSON text with sorted keys."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | str) -> WideSchema:
        """The wide schema of a JSON object (module docstring) or its text; a :class:`SchemaError` naming the field."""
        if isinstance(obj, str):
            with schema_field():
                obj = loads(obj, "schema", "a JSON object")
        if not isinstance(obj, Mapping):
            raise SchemaError("schema", "a JSON object with name, epsilon, attributes, views", "not an object")
        extra = set(obj) - set(_FIELDS)
        if extra:
            raise SchemaError("schema", f"fields {', '.join(_FIELDS)} (a wide collection has no mechanism: each view "
                              "has its best)", f"unknown fields {sorted(extra)}")
        if "views" not in obj:
            raise SchemaError("views", "a views block (kind, salt, ...)", "missing")
        return cls(**parse_collection_fields(obj), views=ViewSpec.from_json(obj["views"]))


@dataclass(frozen=True)
class WideCard:
    """The card of a wide collection: its schema, the assignment rule and salt, and per view the sub-collection's
    name and :class:`~ldpsynth.shared.card.MechanismCard`. :meth:`from_json` recomputes it all from the schema."""

    schema: WideSchema
    cards: tuple[MechanismCard, ...]

    @classmethod
    def for_schema(cls, schema: WideSchema) -> WideCard:
        return cls(schema, tuple(MechanismCard.for_schema(s) for s in schema.view_schemas()))

    @property
    def names(self) -> tuple[str, ...]:
        """The sub-collections' names, in view order."""
        return tuple(c.schema.name for c in self.cards)

    def route(self, device_key: bytes) -> tuple[int, str]:
        """``(view index, sub-collection name)`` of the device ``device_key`` (:func:`.assignment.assign_view`)."""
        index = assign_view(self.schema.salt, device_key, len(self.cards))
        return index, self.cards[index].schema.name

    def project(self, columns: Mapping[str, Any], index: int) -> dict[str, Any]:
        """The columns of view ``index``'s sub-collection (its private attributes, every public one) of the wide
        rows ``columns`` (attribute -> values, as ``Client.submit`` takes them), every column checked first:
        ValidationError naming an unknown or missing attribute, or a bad value (at its position)."""
        known = {a.name for a in self.schema.attributes}
        for name in columns:
            if name not in known:
                raise ValidationError(str(name), f"one of the attributes of {self.schema.name!r}: {sorted(known)}",
                                      "not an attribute of the collection")
        for attr in self.schema.attributes:
            if attr.name not in columns:
                raise ValidationError(attr.name, attr.legal_range, "missing column")
            attr.encode(columns[attr.name])
        return {a.name: columns[a.name] for a in self.cards[index].schema.attributes}

    def to_json(self) -> dict[str, Any]:
        return {"format": WIDE_CARD_FORMAT, "version": VIEWS_VERSION, "schema": self.schema.to_json(),
                "assignment": {"rule": ASSIGNMENT_RULE, "salt": self.schema.salt.hex(), "views": len(self.cards)},
                "views": [{"attributes": list(v), "collection": c.schema.name, "card": c.to_json()}
                          for v, c in zip(self.schema.view_attributes, self.cards)]}

    def dumps(self) -> str:
        """Indented JSON text with sorted keys."""
        return json.dumps(self.to_json(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any] | str) -> WideCard:
        """Parse and verify a wide card: every field must be what its schema makes (ValidationError naming
        ``card.<path>`` of the first that differs; a :class:`SchemaError` for the schema)."""
        if isinstance(obj, str):
            obj = loads(obj, "card", "a JSON wide card")
        if not isinstance(obj, Mapping) or obj.get("format") != WIDE_CARD_FORMAT:
            raise ValidationError("card.format", repr(WIDE_CARD_FORMAT), "not a wide card of this format")
        card = cls.for_schema(WideSchema.from_json(cast(Mapping[str, Any], obj.get("schema"))))
        _same(obj, card.to_json(), "card")
        return card


def _same(found: object, expected: object, path: str) -> None:
    """ValidationError naming the first path where ``found`` differs from ``expected`` (JSON values)."""
    if isinstance(expected, Mapping) and isinstance(found, Mapping):
        for key in sorted(set(expected) | set(found)):
            _same(found.get(key), expected.get(key), f"{path}.{key}")
    elif isinstance(expected, list) and isinstance(found, list) and len(expected) == len(found):
        for i, (f, e) in enumerate(zip(found, expected)):
            _same(f, e, f"{path}[{i}]")
    elif found != expected or isinstance(found, bool) != isinstance(expected, bool):
        raise ValidationError(path, f"{json.dumps(expected)[:200]} (recomputed from the card's schema)", "inconsistent")
