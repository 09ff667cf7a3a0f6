"""A wide collection on the server: its file, its sub-collections in the catalog, GetCollection of the parent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ldpsynth.aggregator.runtime.config import Catalog, ConfigError, ServerConfig, expand_collections, load_collection
from ldpsynth.serving.auth import ROLES, Credential, TokenTable
from ldpsynth.serving.errors import PermissionDenied, WrongState
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.protocol import CollectionInfo, Limits
from ldpsynth.shared.wide.collection import VIEWS_VERSION, WideCard, WideSchema

from ..conftest import RATINGS_CARD

WIDE_DOC = {"name": "survey", "epsilon": 1.0,
            "attributes": [{"name": n, "type": "categorical", "values": ["x", "y", "z"]} for n in ("a", "b", "c")],
            "views": {"kind": "pairs", "salt": "aa" * 16}}
WIDE = WideCard.for_schema(WideSchema.from_json(WIDE_DOC))


def test_a_wide_file_is_a_wide_schema_or_a_wide_card(tmp_path: Path) -> None:
    schema_file, card_file, tampered = tmp_path / "wide.json", tmp_path / "card.json", tmp_path / "tampered.json"
    schema_file.write_text(json.dumps(WIDE_DOC))
    card_file.write_text(WIDE.dumps())
    assert load_collection(schema_file) == WIDE
    assert load_collection(card_file) == WIDE
    tampered.write_text(WIDE.dumps().replace('"collection": "survey/a+b"', '"collection": "survey/b+a"'))
    with pytest.raises(ConfigError, match=r"card\.views\[0\]\.collection"):
        load_collection(tampered)
    cards, wide = expand_collections([RATINGS_CARD, WIDE])
    assert [c.schema.name for c in cards] == ["ratings", "survey/a+b", "survey/a+c", "survey/b+c"]
    assert wide == (WIDE,)


def test_a_parent_name_is_a_collection_name(tmp_path: Path) -> None:
    clash = WideCard.for_schema(WideSchema.from_json({**WIDE_DOC, "name": "ratings"}))
    with pytest.raises(ConfigError, match="distinct collection names"):
        ServerConfig(data_dir=tmp_path, collections=(RATINGS_CARD, *clash.cards), wide=(clash,))


def test_the_catalog_serves_the_parents_card_and_refuses_its_reports() -> None:
    catalog = Catalog(WIDE.cards, Limits(), wide=(WIDE,))
    assert catalog.names == ["survey/a+b", "survey/a+c", "survey/b+c"]
    message = catalog.proto("survey")
    assert (message.name, message.mechanism_version) == ("survey", VIEWS_VERSION)
    assert WideCard.from_json(message.card_json) == WIDE
    assert WideSchema.from_json(message.schema_json) == WIDE.schema
    with pytest.raises(WrongState, match=r"wide collection.*survey/a\+b.*survey/b\+c"):
        catalog.get("survey")                                   # what SubmitReports and queries on the parent meet
    assert catalog.get("survey/a+c").card == WIDE.cards[1]
    assert catalog.cards_json()["survey"] == WIDE.dumps()      # registered in the log with the sub-collections
    with pytest.raises(ValidationError) as info:                # an SDK that knows no wide card: a clear refusal
        CollectionInfo.from_proto(message)
    assert info.value.field == "card.format"


def test_a_token_for_the_parent_may_use_its_views() -> None:
    catalog = Catalog(WIDE.cards, Limits(), wide=(WIDE,))
    assert catalog.views == {"survey": ("survey/a+b", "survey/a+c", "survey/b+c")}
    table = TokenTable([(b"t-survey", Credential("device", ROLES, frozenset({"survey"}))),
                        (b"t-ratings", Credential("other", ROLES, frozenset({"ratings"}))),
                        (b"t-all", Credential("analyst", ROLES, None))]).with_views(catalog.views)
    device, other, analyst = (table.lookup(t) for t in (b"t-survey", b"t-ratings", b"t-all"))
    assert device is not None and other is not None and analyst is not None
    for name in ("survey", *WIDE.names):
        device.require_collection(name)
        analyst.require_collection(name)
        with pytest.raises(PermissionDenied):
            other.require_collection(name)
    assert analyst.collections is None
