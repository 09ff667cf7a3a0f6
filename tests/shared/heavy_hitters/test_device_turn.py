"""A device's side of a discovery: its round key (the ledger's), its turn, its rows of the round's sub-collection,
and its report through the ordinary path charged under the parent's name."""

from __future__ import annotations

import hmac
import sqlite3

import numpy as np
import pytest

from ldpsynth.client import PrivacyLedger
from ldpsynth.client.device import prepare_reports
from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.heavy_hitters.collection import (
    NOT_YET,
    PASSED,
    REPORT,
    DiscoveryCard,
    DiscoverySchema,
    device_turn,
    round_rows,
)
from ldpsynth.shared.protocol import CollectionInfo, Limits

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def schema() -> DiscoverySchema:
    return DiscoverySchema.from_json({
        "name": "words", "epsilon": 2.0,
        "attributes": [{"name": "word", "type": "string", "max_length": 6, "alphabet": LETTERS},
                       {"name": "app", "type": "categorical", "values": ["a", "b"], "public": True}],
        "discovery": {"first_bits": 10, "fragment_bits": 10, "top_k": 5, "salt": "cd" * 16,
                      "min_reports_per_round": 10}})


def test_round_key_is_the_hmac_of_the_memo_secret(tmp_path) -> None:
    path = tmp_path / "l.sqlite"
    with PrivacyLedger(path) as ledger:
        key = ledger.round_key("words")
        assert key != ledger.round_key("other") and len(key) == 32
        with pytest.raises(ValidationError, match="collection"):
            ledger.round_key("")
    with sqlite3.connect(path) as conn:
        secret = conn.execute("SELECT value FROM device WHERE name = 'memo_secret'").fetchone()[0]
    assert key == hmac.digest(secret, b"ldpsynth round key/1" + b"words", "sha256")
    with PrivacyLedger(path) as again:                       # stable for the ledger's life
        assert again.round_key("words") == key
    with PrivacyLedger(tmp_path / "other.sqlite") as other:  # another device, another key
        assert other.round_key("words") != key


def test_a_device_reports_only_in_its_own_round() -> None:
    s = schema()
    keys = {}
    for i in range(200):                                     # a key of each round (3 rounds)
        keys.setdefault(s.device_round(f"k{i}".encode()), f"k{i}".encode())
    assert sorted(keys) == [0, 1, 2]
    one = DiscoveryCard.for_round(s, 1, np.array([[1, 0], [9, 0]], np.uint8))
    assert [device_turn(one, keys[r]).status for r in range(3)] == [PASSED, REPORT, NOT_YET]
    done = DiscoveryCard.for_round(s, None, np.zeros((0, 0), np.uint8))
    assert {device_turn(done, keys[r]).status for r in range(3)} == {PASSED}


def test_round_rows_go_through_the_ordinary_path_charged_to_the_parent(tmp_path) -> None:
    s = schema()
    candidates = np.array([[1, 0], [9, 0]], np.uint8)
    card = DiscoveryCard.for_round(s, 1, candidates)
    rows = round_rows(card, {"word": ["ab"], "app": ["b"]})
    assert rows["app"] == ["b"] and rows["cell"].tolist() == card.spec.cells_of(s.encoding.encode(["ab"])).tolist()
    with pytest.raises(ValidationError, match="rows"):
        round_rows(card, {"word": ["ab"]})
    with pytest.raises(ValidationError, match="values"):      # outside the alphabet: named, never shown
        round_rows(card, {"word": ["AB"], "app": ["a"]})
    assert card.card is not None
    info = CollectionInfo(card.card, Limits())
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:
        out = prepare_reports(info, encode_columns(info.schema, rows), ledger, charge=(s.name, s.epsilon))
        assert ledger.spent("words") == pytest.approx(s.epsilon)
        assert ledger.spent("words/round-1") == 0
    assert len(out.reports.report_ids) == 1
    assert card.card.mechanism.epsilon <= s.epsilon               # the round delivers at most the parent's ε
