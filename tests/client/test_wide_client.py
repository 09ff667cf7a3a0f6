"""The device side of a wide collection: its view key, and ε charged once under the parent."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import pytest

from ldpsynth.client import PrivacyLedger
from ldpsynth.client.device import prepare_reports
from ldpsynth.client.rows import encode_columns
from ldpsynth.shared.errors import PrivacyBudgetExceeded, ValidationError
from ldpsynth.shared.protocol import CollectionInfo, Limits
from ldpsynth.shared.wide.collection import VIEW_KEY_TAG, WideCard, WideSchema

WIDE = WideCard.for_schema(WideSchema.from_json({
    "name": "survey", "epsilon": 1.0,
    "attributes": [{"name": n, "type": "integer", "min": 0, "max": 3} for n in ("a", "b", "c")],
    "views": {"kind": "pairs", "salt": "01" * 16}}))


def test_the_view_key_is_stable_per_ledger_and_collection(tmp_path: Path) -> None:
    with PrivacyLedger(tmp_path / "ledger.sqlite") as ledger:
        key = ledger.view_key("survey")
        assert len(key) == 32 and key != ledger.view_key("survey2")
        assert key == hmac.digest(ledger._secret, VIEW_KEY_TAG + b"survey", hashlib.sha256)  # the stated rule
    with PrivacyLedger(tmp_path / "ledger.sqlite") as again:
        assert again.view_key("survey") == key                           # the same view for the ledger's life
    with PrivacyLedger(tmp_path / "other.sqlite") as other:
        assert other.view_key("survey") != key


def _view(ledger: PrivacyLedger) -> tuple[CollectionInfo, dict[str, list[int]]]:
    index, _ = WIDE.route(ledger.view_key("survey"))
    info = CollectionInfo(WIDE.cards[index], Limits())
    return info, WIDE.project({"a": [1, 2], "b": [0, 3], "c": [2, 2]}, index)


def test_a_view_is_charged_under_the_parent_and_the_budget_is_the_parents() -> None:
    ledger = PrivacyLedger.for_simulation(budget=1.5)
    info, columns = _view(ledger)
    one = {name: column[:1] for name, column in columns.items()}
    first = prepare_reports(info, encode_columns(info.schema, one), ledger, charge=("survey", 1.0))
    assert (first.epsilon_spent, first.epsilon_total) == (1.0, 1.0)
    assert ledger.spent("survey") == 1.0 and ledger.spent(info.schema.name) == 0.0
    again = prepare_reports(info, encode_columns(info.schema, one), ledger, charge=("survey", 1.0))
    assert (again.memoized, again.epsilon_spent) == (1, 0.0)
    with pytest.raises(PrivacyBudgetExceeded):                         # a second row: 2.0 > 1.5 under the parent
        prepare_reports(info, encode_columns(info.schema, columns), ledger, charge=("survey", 1.0))
    assert ledger.spent("survey") == 1.0


def test_a_charge_below_the_views_epsilon_is_refused() -> None:
    ledger = PrivacyLedger.for_simulation()
    info, columns = _view(ledger)
    with pytest.raises(ValidationError, match="epsilon"):
        prepare_reports(info, encode_columns(info.schema, columns), ledger, charge=("survey", 0.5))
    assert ledger.spent("survey") == 0.0
