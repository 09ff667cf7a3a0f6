"""The ledger's rules on their own: pure functions (no SQLite, no files), exact in ε."""

from __future__ import annotations

import ast
import inspect
from fractions import Fraction

import pytest

from ldpsynth.client.ledger import rules
from ldpsynth.client.ledger.rules import (
    Budget,
    CentralGuarantee,
    central_row,
    charge,
    check_path,
    checked_central,
    promised,
)
from ldpsynth.shared.errors import LedgerError, PrivacyBudgetExceeded, ValidationError


def test_the_rules_touch_no_database_and_no_file() -> None:
    tree = ast.parse(inspect.getsource(rules))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {(node.module or "").split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"sqlite3", "os", "shutil", "tempfile"}
    assert "open(" not in inspect.getsource(rules)


def test_charge_is_exact_and_refuses_past_the_budget() -> None:
    tenth = Fraction(0.1)
    assert charge("c", Fraction(0), tenth, Fraction(1), 3) == 3 * tenth  # exact: not 0.30000000000000004
    assert charge("c", 3 * tenth, tenth, 3 * tenth, 0) == 3 * tenth
    with pytest.raises(PrivacyBudgetExceeded, match="collection 'c': 1 new reports .* over this device's budget"):
        charge("c", 3 * tenth, tenth, Fraction(0.3), 1)


def test_a_session_may_lower_the_budget_never_raise_it() -> None:
    assert Budget.of(None).effective(Fraction(1, 2), None) == 5
    assert Budget.of(None).effective(Fraction(1, 2), Fraction(2)) == 2
    with pytest.raises(ValidationError, match="at most 5, the budget this ledger was created with"):
        Budget.of(None).effective(Fraction(1, 2), Fraction(6))
    with pytest.raises(ValidationError, match="at most 2"):
        Budget.of(2.0).check_session(Fraction(3))
    Budget.of(None).check_session(Fraction(100))  # a multiple is checked per collection


def test_a_central_guarantee_is_stored_exactly_and_read_back_the_same() -> None:
    guarantee = CentralGuarantee(1e-6, 1000, 2, 0.37, 1e-6)
    assert checked_central("l.sqlite", "c", *central_row(guarantee)) == guarantee
    for promise in (CentralGuarantee(1e-6, 1000, 2, 0.1 + 0.2, 1e-6, assume_injected=999, operator=True),
                    CentralGuarantee(0.3, 5, 1, None, None, assume_injected=0),
                    CentralGuarantee(1e-9, 7, 3, 3.0, 0.0, assume_injected=None, operator=False)):
        row = central_row(promise)
        assert row[2] == promise.assume_injected and row[6] == int(promise.operator)
        assert checked_central("l.sqlite", "c", *row) == promise


@pytest.mark.parametrize(("field", "value", "problem"), [
    (2, 1000, "assume_injected is 1000, not an integer in \\[0, 999\\]"),
    (2, True, "assume_injected is True, not an integer"),
    (6, 2, "operator is 2, not 0 or 1"),
    (6, None, "operator is None, not 0 or 1"),
])
def test_a_promise_the_ledger_does_not_write_is_refused(field, value, problem) -> None:
    row = list(central_row(CentralGuarantee(1e-6, 1000, 1, 0.5, 1e-6, assume_injected=1, operator=True)))
    row[field] = value
    with pytest.raises(LedgerError, match=problem):
        checked_central("l.sqlite", "c", *row)
    row = list(central_row(CentralGuarantee(1e-6, 1000, 1, 0.5, 1e-6)))
    row[6] = 1  # a promise of the former rule (F unknown) never holds against the operator
    with pytest.raises(LedgerError, match="operator is 1, not 0 for a promise carried over from format 4"):
        checked_central("l.sqlite", "c", *row)


def test_only_a_sealed_submission_of_a_promisable_collection_leaves_a_promise() -> None:
    promise = CentralGuarantee(1e-6, 1000, 1, 0.5, 1e-6, assume_injected=1)
    assert promised(promise, True, 3, lambda: True) is promise
    assert promised(promise, False, 3, lambda: True) is None  # in clear
    assert promised(promise, True, 0, lambda: True) is None  # no report
    assert promised(promise, True, 3, lambda: False) is None  # an earlier report went in clear
    assert promised(None, True, 3, lambda: True) is None


def test_a_memoized_report_is_resent_only_the_way_it_was_first_sent() -> None:
    check_path("c", True, 0)
    check_path("c", False, 0)
    with pytest.raises(ValidationError, match="rows: .*collection 'c': 2 of these rows have a report first sent in "
                                              "clear; sending it sealed would link the report to this device"):
        check_path("c", True, 2)
    with pytest.raises(ValidationError, match="rows: .*1 of these rows have a report first sent sealed, through a "
                                              "shuffler; sending it in clear would link"):
        check_path("c", False, 1)
