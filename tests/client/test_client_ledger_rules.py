"""The ledger's rules on their own: pure functions (no SQLite, no files), exact in ε."""

from __future__ import annotations

import ast
import inspect
from fractions import Fraction

import pytest

from ldpsynth.client.ledger import rules
from ldpsynth.client.ledger.rules import Budget, CentralGuarantee, central_row, charge, checked_central
from ldpsynth.shared.errors import PrivacyBudgetExceeded, ValidationError


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
