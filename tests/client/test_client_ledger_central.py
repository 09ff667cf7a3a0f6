"""The ledger records the promise per party (format 5): a shuffled collection's reports sent through a shuffler
are charged with the central guarantee it promised them at the pool floor (F, and whether it holds against the
aggregator's operator), in the spend's transaction; none in clear or for a collection that is not shuffled; a
memoized report keeps its path (sealed or in clear); ledgers of formats 3 and 4 are upgraded; a damaged
promise is refused at open."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from contextlib import closing
from fractions import Fraction

import numpy as np
import pytest

from ldpsynth.cli import main as cli_main
from ldpsynth.client import Client, PrivacyLedger, RetryPolicy, Shuffler
from ldpsynth.client.device import prepare_reports, promised_guarantee
from ldpsynth.client.ledger import CentralGuarantee
from ldpsynth.client.rows import encode_columns
from ldpsynth.shared import amplification, guarantees
from ldpsynth.shared.card import MechanismCard
from ldpsynth.shared.errors import LedgerError, PrivacyBudgetExceeded, ValidationError
from ldpsynth.shared.protocol import CollectionInfo, Limits
from ldpsynth.shared.schema import ShuffleSpec
from ldpsynth.shared.sealing import OpeningKey, sealed_report_bytes

from .client_fakes import (
    FakeCollectionService,
    FakeShufflerService,
    ServerThread,
    ratings_info,
    ratings_rows,
    ratings_schema,
)

KEY = OpeningKey.generate()
DELTA = 1e-6


def shuffled_info(min_batch: int = 1000, rows_per_device: int = 1, schema_min_batch: int = 1,
                  shuffler: str = "aggregator-operator", assume_injected: int | None = None) -> CollectionInfo:
    """The ratings collection (|D| = 10) behind a shuffler, with its sealing key."""
    spec = ShuffleSpec(DELTA, min_batch, rows_per_device, shuffler, assume_injected)
    schema = dataclasses.replace(ratings_schema(1.0), shuffle=spec, min_batch=schema_min_batch)
    return CollectionInfo(MechanismCard.for_schema(schema), Limits(), sealing=KEY.public)


def renamed(info: CollectionInfo, name: str) -> CollectionInfo:
    return dataclasses.replace(info, card=MechanismCard.for_schema(dataclasses.replace(info.schema, name=name)))


def prepare(ledger: PrivacyLedger, info: CollectionInfo, rows: dict, sealed: bool = True):
    return prepare_reports(info, encode_columns(info.schema, rows), ledger, sealed=sealed)


def edit(path, *statements: str) -> None:
    with closing(sqlite3.connect(path)) as conn:
        for statement in statements:
            conn.execute(statement)
        conn.commit()


def test_a_sealed_submission_records_the_accountants_guarantee_at_the_minimum_batch(tmp_path) -> None:
    info = shuffled_info(min_batch=1000)
    eps0 = info.card.mechanism.epsilon
    expected = amplification.central_epsilon(eps0, 10, 999, DELTA, bound="blanket")  # the pool floor: 1000 - F
    assert 0 < expected < eps0
    promise = CentralGuarantee(DELTA, 1000, 1, expected, DELTA, assume_injected=1, operator=False)
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:
        prepared = prepare(ledger, info, ratings_rows(1, seed=1))
        assert prepared.central == ledger.guarantees("ratings") == promise
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:  # durable, and exact: the same floats back
        assert ledger.guarantees("ratings") == promise
    stated = guarantees.of_card(info.card, guarantees.RELEASE, [], np.zeros(0, np.int64))
    assert (stated.analysts.epsilon, stated.analysts.delta) == (expected, DELTA)  # what analysts are told
    assert not stated.operator.central  # the operator runs the shuffler: local only, and operator False


def test_the_promise_per_party_records_f_and_the_operator_and_round_trips_exactly(tmp_path) -> None:
    """An independent shuffler and shuffle.assume_injected 37 at 2 rows per device: the pool floor
    (1000 - 37) // 2 = 481 per round, against analysts and the operator; the stored row holds exactly the floats
    of the statement."""
    info = shuffled_info(min_batch=1000, rows_per_device=2, shuffler="independent", assume_injected=37)
    eps0 = info.card.mechanism.epsilon
    expected = amplification.composed_epsilon(eps0, 10, 481, DELTA, 2, bound="blanket")
    promise = CentralGuarantee(DELTA, 1000, 2, expected, DELTA, assume_injected=37, operator=True)
    path = tmp_path / "l.sqlite"
    with PrivacyLedger(path) as ledger:
        assert prepare(ledger, info, ratings_rows(2, seed=5)).central == promise
    stated = guarantees.of_card(info.card, guarantees.RELEASE, [], np.zeros(0, np.int64), rows_per_device=2)
    for party in (stated.analysts, stated.operator):
        assert (party.central, party.epsilon, party.delta) == (True, expected, DELTA)
    with closing(sqlite3.connect(path)) as conn:
        row = conn.execute("SELECT * FROM promise").fetchone()
    assert row == ("ratings", str(Fraction(DELTA)), 1000, 37, 2, str(Fraction(expected)), str(Fraction(DELTA)), 1)
    with PrivacyLedger(path) as ledger:
        recorded = ledger.guarantees("ratings")
    assert recorded == promise and recorded is not None
    assert recorded.central_epsilon == expected and type(recorded.operator) is bool


def test_the_guarantee_composes_over_rows_per_device_and_over_more_reports_when_the_device_sent_more(tmp_path) -> None:
    """m = shuffle.rows_per_device: composed_epsilon at n = (min_batch - F) // m (F = m by default); a device that
    has sent r > m reports: at m = r (its own reports compose over r rounds)."""
    info = shuffled_info(min_batch=600, rows_per_device=2)
    eps0 = info.card.mechanism.epsilon
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:
        prepare(ledger, info, ratings_rows(2, seed=2))
        at_two = amplification.composed_epsilon(eps0, 10, 299, DELTA, 2, bound="blanket")
        assert ledger.guarantees("ratings") == CentralGuarantee(DELTA, 600, 2, at_two, DELTA, 2)
        prepare(ledger, info, ratings_rows(1, seed=2, start=2))
        at_three = amplification.composed_epsilon(eps0, 10, 199, DELTA, 3, bound="blanket")  # F stays the spec's
        assert ledger.guarantees("ratings") == CentralGuarantee(DELTA, 600, 3, at_three, DELTA, 2)
        assert at_three > at_two


def test_the_guarantee_is_at_the_shuffle_blocks_minimum_batch(tmp_path) -> None:
    """A larger schema min_batch makes pools larger still; the promise counts the shuffle block's (safe)."""
    info = shuffled_info(min_batch=100, schema_min_batch=1000)
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:
        guarantee = prepare(ledger, info, ratings_rows(1)).central
    assert guarantee is not None and guarantee.min_batch == 100
    assert guarantee.central_epsilon == amplification.central_epsilon(info.card.mechanism.epsilon, 10, 99, DELTA,
                                                                      bound="blanket")


def test_a_minimum_batch_too_small_to_amplify_records_the_local_guarantee(tmp_path) -> None:
    """min_batch 1 at rows_per_device 2 (F clipped to 0): n = 0 per round, so (m x epsilon0, 0), the rule every
    release states."""
    info = shuffled_info(min_batch=1, rows_per_device=2)
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:
        guarantee = prepare(ledger, info, ratings_rows(1)).central
    assert guarantee == CentralGuarantee(DELTA, 1, 2, 2 * info.card.mechanism.epsilon, 0.0, 0)


def test_no_guarantee_for_a_collection_that_is_not_shuffled_or_for_reports_sent_in_clear(tmp_path) -> None:
    with PrivacyLedger(tmp_path / "l.sqlite", budget=100.0) as ledger:
        assert prepare(ledger, ratings_info(1.0), ratings_rows(2)).central is None  # sealed, but not shuffled
        assert ledger.guarantees("ratings") is None
        info = renamed(shuffled_info(), "other")
        assert prepare(ledger, info, ratings_rows(2), sealed=False).central is None  # shuffled, in clear
        assert ledger.guarantees("other") is None
        # Reports already sent in clear are this device's to the aggregator: a later sealed submission promises
        # nothing for the collection.
        assert prepare(ledger, info, ratings_rows(2, start=2)).central is None
        assert ledger.guarantees("other") is None
        with pytest.raises(ValidationError, match="card: .*collection 'ratings' is not shuffled"):
            promised_guarantee(ratings_info(1.0).card, 1)


def test_a_submission_in_clear_withdraws_the_guarantee(tmp_path) -> None:
    info = shuffled_info()
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:
        promise = prepare(ledger, info, ratings_rows(1)).central
        assert promise is not None
        with pytest.raises(ValidationError, match="rows: .*link the report to this device"):
            prepare(ledger, info, ratings_rows(1), sealed=False)  # memoized sealed: never resent in clear
        assert ledger.guarantees("ratings") == promise  # refused whole: nothing changed
        assert prepare(ledger, info, ratings_rows(1, start=1), sealed=False).central is None  # a new row in clear
        assert ledger.guarantees("ratings") is None
        assert prepare(ledger, info, ratings_rows(1, start=2)).central is None
        assert ledger.reports("ratings") == 3


def test_a_refused_spend_records_no_guarantee(tmp_path) -> None:
    info = shuffled_info()
    with PrivacyLedger(tmp_path / "l.sqlite", budget=1.0) as ledger:
        with pytest.raises(PrivacyBudgetExceeded, match="over this device's budget"):
            prepare(ledger, info, ratings_rows(5))
        assert ledger.guarantees("ratings") is None and ledger.reports("ratings") == 0


def test_a_ledger_of_format_3_is_upgraded_with_its_records_kept(tmp_path) -> None:
    """Format 3 (before the central guarantees) opens as format 5: every table kept as it was, the promise
    and sealed-memo tables added empty (which earlier reports went through a shuffler is not known, so none
    is promised for them and their memos are in clear), and a promise recorded with the first sealed
    submission of a collection that had no report."""
    path = tmp_path / "l.sqlite"
    info = shuffled_info()
    with PrivacyLedger(path, budget=50.0) as ledger:
        prepare(ledger, info, ratings_rows(3))
    edit(path, "DROP TABLE promise", "DROP TABLE memo_sealed", "PRAGMA user_version = 3")
    tables = ("device", "spend", "pinned", "memo", "memo_report")

    def contents() -> dict[str, list]:
        with closing(sqlite3.connect(path)) as conn:
            return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables}

    before = contents()
    PrivacyLedger(path).close()
    assert contents() == before
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 5
        assert conn.execute("SELECT COUNT(*) FROM promise").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM memo_sealed").fetchone()[0] == 0
    with PrivacyLedger(path) as ledger:
        assert ledger.reports("ratings") == 3 and ledger.budget_for(1.0) == 50.0
        with pytest.raises(ValidationError, match="rows: .*3 of these rows have a report first sent in clear"):
            prepare(ledger, info, ratings_rows(3))  # the same reports, sealed: memoized in clear as far as known
        assert ledger.guarantees("ratings") is None
        other = renamed(info, "new")
        assert prepare(ledger, other, ratings_rows(1)).central == ledger.guarantees("new") is not None


#: The tables of format 4 as its SDK created them.
CENTRAL_4 = ("CREATE TABLE central (collection TEXT PRIMARY KEY, delta TEXT NOT NULL, min_batch INTEGER NOT NULL,"
             " rows_per_device INTEGER NOT NULL, central_epsilon TEXT, central_delta TEXT) WITHOUT ROWID")


def as_format_4(path) -> None:
    """Rewrite a format-5 ledger as format 4 wrote it: its promises in ``central`` (F and operator gone),
    no record of which memos were sealed."""
    edit(path, CENTRAL_4, "INSERT INTO central SELECT collection, delta, min_batch, rows_per_device, central_epsilon,"
         " central_delta FROM promise", "DROP TABLE promise", "DROP TABLE memo_sealed", "PRAGMA user_version = 4")


def test_a_ledger_of_format_4_is_upgraded_its_promises_kept_by_the_former_rule_and_their_memos_sealed(
        tmp_path) -> None:
    """Format 4 opens as format 5: each ``central`` row becomes a promise with assume_injected NULL (made by
    the former rule) and operator 0; the memos of exactly those collections are marked sealed (all their
    reports went through a shuffler), the others stay in clear; the next sealed submission recomputes the
    promise by the rule of format 5."""
    path = tmp_path / "l.sqlite"
    info = shuffled_info(shuffler="independent")
    with PrivacyLedger(path, budget=50.0) as ledger:
        prepare(ledger, info, ratings_rows(3))                                 # promised, sealed
        prepare(ledger, renamed(info, "withdrawn"), ratings_rows(2), sealed=False)  # shuffled, in clear
        prepare(ledger, ratings_info(1.0, name="plain"), ratings_rows(2), sealed=False)  # not shuffled, in clear
        promise = ledger.guarantees("ratings")
    assert promise is not None and promise.operator and promise.assume_injected == 1
    as_format_4(path)
    tables = ("device", "spend", "pinned", "memo", "memo_report")

    def contents() -> dict[str, list]:
        with closing(sqlite3.connect(path)) as conn:
            return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables}

    before = contents()
    PrivacyLedger(path).close()
    assert contents() == before
    carried = dataclasses.replace(promise, assume_injected=None, operator=False)
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 5
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'central'").fetchall() == []
        assert conn.execute("SELECT assume_injected, operator FROM promise").fetchall() == [(None, 0)]
        sealed = conn.execute("SELECT collection, COUNT(*) FROM memo JOIN memo_sealed USING (memo_key)"
                              " GROUP BY collection").fetchall()
    assert sealed == [("ratings", 3)]  # not "withdrawn" (no central row) nor "plain"
    with PrivacyLedger(path) as ledger:
        assert ledger.guarantees("ratings") == carried  # the same floats back, F unknown, not against the operator
        assert ledger.guarantees("withdrawn") is None
        with pytest.raises(ValidationError, match="rows: .*first sent sealed.*in clear would link"):
            prepare(ledger, info, ratings_rows(3), sealed=False)
        with pytest.raises(ValidationError, match="rows: .*first sent in clear.*sealed would link"):
            prepare(ledger, ratings_info(1.0, name="plain"), ratings_rows(2))
        again = prepare(ledger, info, ratings_rows(3))  # sealed again: memoized, the promise recomputed
        assert again.memoized == 3 and again.central == ledger.guarantees("ratings") == promise
        assert (ledger.reports("ratings"), ledger.reports("withdrawn"), ledger.reports("plain")) == (3, 2, 2)


def test_a_damaged_promise_of_format_4_is_refused_before_the_upgrade(tmp_path) -> None:
    path = tmp_path / "l.sqlite"
    with PrivacyLedger(path) as ledger:
        prepare(ledger, shuffled_info(), ratings_rows(2))
    as_format_4(path)
    edit(path, "UPDATE central SET min_batch = 0")
    with pytest.raises(LedgerError, match=r"l\.sqlite: .*min_batch is 0, not an integer >= 1"):
        PrivacyLedger(path)
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 4  # refused, never upgraded


#: A damaged row of the promise table (or of the sealed memos), and the problem the refusal names.
DAMAGED = [
    ("UPDATE promise SET central_epsilon = 'nan'", "central guarantee's central_epsilon is 'nan', not an exact"),
    ("UPDATE promise SET central_epsilon = '-1/2'", "central_epsilon is '-1/2', not an exact number > 0"),
    ("UPDATE promise SET central_epsilon = '0'", "central_epsilon is '0', not an exact number > 0"),
    ("UPDATE promise SET central_epsilon = x'01'", "central_epsilon is b'\\\\x01', not an exact"),
    ("UPDATE promise SET central_epsilon = 0.5", "central_epsilon is '0.5', not an exact"),  # TEXT: stored '0.5'

    ("UPDATE promise SET delta = '1'", "delta is '1', not an exact number in \\(0, 1\\)"),
    ("UPDATE promise SET delta = 'inf'", "delta is 'inf'"),
    ("UPDATE promise SET min_batch = 0", "min_batch is 0, not an integer >= 1"),
    ("UPDATE promise SET rows_per_device = 'two'", "rows_per_device is 'two', not an integer >= 1"),
    ("UPDATE promise SET rows_per_device = -3", "rows_per_device is -3, not an integer >= 1"),
    ("UPDATE promise SET central_delta = '1/3'", "central_delta is '1/3', not its delta or 0"),
    ("UPDATE promise SET central_delta = NULL", "central_delta is None, not its delta or 0"),
    ("UPDATE promise SET central_epsilon = NULL", "central_delta is '.*, not its delta or 0 \\(none only with"),
    ("INSERT INTO promise SELECT 'unknown', delta, min_batch, assume_injected, rows_per_device, central_epsilon, "
     "central_delta, operator FROM promise", "collection 'unknown': a central guarantee is recorded but no report"),
    ("DROP TABLE promise", "its table 'promise' is missing"),
    ("UPDATE promise SET assume_injected = 1000", "assume_injected is 1000, not an integer in \\[0, 999\\]"),
    ("UPDATE promise SET assume_injected = -1", "assume_injected is -1, not an integer in \\[0, 999\\]"),
    ("UPDATE promise SET assume_injected = 'one'", "assume_injected is 'one', not an integer"),
    ("UPDATE promise SET assume_injected = 2.5", "assume_injected is 2.5, not an integer"),
    ("UPDATE promise SET operator = 2", "the central guarantee's operator is 2, not 0 or 1"),
    ("UPDATE promise SET operator = 'yes'", "operator is 'yes', not 0 or 1"),
    ("UPDATE promise SET assume_injected = NULL, operator = 1",
     "operator is 1, not 0 for a promise carried over from format 4"),
    ("DELETE FROM memo_sealed WHERE memo_key = (SELECT MIN(memo_key) FROM memo_sealed)",
     "collection 'ratings': a central guarantee is recorded but 1 of its 2 memoized reports were sent in clear"),
    ("INSERT INTO memo_sealed (memo_key) VALUES (x'00')", "a report marked sealed has no memo row"),
    ("DROP TABLE memo_sealed", "its table 'memo_sealed' is missing"),
    ("DROP TABLE memo_sealed; CREATE TABLE memo_sealed (memo_key BLOB PRIMARY KEY)",
     "its table 'memo_sealed' is missing or not the one"),
]


@pytest.mark.parametrize(("damage", "problem"), DAMAGED, ids=[d[1][:40] for d in DAMAGED])
def test_a_damaged_guarantee_is_refused_on_open_naming_the_ledger_and_the_problem(tmp_path, damage, problem) -> None:
    path = tmp_path / "l.sqlite"
    with PrivacyLedger(path) as ledger:
        prepare(ledger, shuffled_info(), ratings_rows(2))
    edit(path, *damage.split("; "))
    with pytest.raises(LedgerError, match=rf"ledger: .*l\.sqlite: .*{problem}"):
        PrivacyLedger(path)


def test_without_the_accountant_the_terms_are_recorded_and_no_epsilon(tmp_path, monkeypatch) -> None:
    """A device without scipy (the [client] and [shuffle] extras) records the promise's terms, its central
    epsilon and delta as not computed; the ledger reads that row back."""
    monkeypatch.setattr(guarantees, "accountant_available", lambda: False)
    path = tmp_path / "l.sqlite"
    with PrivacyLedger(path) as ledger:
        assert prepare(ledger, shuffled_info(), ratings_rows(1)).central == CentralGuarantee(DELTA, 1000, 1, None, None,
                                                                                            1)
    with PrivacyLedger(path) as ledger:
        assert ledger.guarantees("ratings") == CentralGuarantee(DELTA, 1000, 1, None, None, 1)


def test_cli_submit_through_a_shuffler_prints_the_central_guarantee(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(cli_main, "SUBCOMMAND_MODULES", ("ldpsynth.cli.client_cmd",))
    info = shuffled_info(rows_per_device=3)  # three rows: m = 3, n = (1000 - 3) // 3 per round
    expected = amplification.composed_epsilon(info.card.mechanism.epsilon, 10, 332, DELTA, 3, bound="blanket")
    shuffler = FakeShufflerService(sealed_report_bytes(info.schema, info.card.version))
    rows = tmp_path / "rows.csv"
    data = ratings_rows(3, seed=7)
    rows.write_text("movie,region,rating,watched\n" + "".join(
        f"{m},{r},{x},{w}\n" for m, r, x, w in zip(data["movie"], data["region"], data["rating"], data["watched"])))
    with ServerThread(FakeCollectionService(info)) as agg, ServerThread(None, shuffler=shuffler) as shuf:
        code = cli_main.main(["client", "submit", "--target", agg.target, "--collection", "ratings", "--rows",
                              str(rows), "--ledger", str(tmp_path / "l.sqlite"), "--shuffler", shuf.target])
        out = json.loads(capsys.readouterr().out)
        assert code == 0 and out["shuffled"] and len(shuffler.sealed) == 3
        assert (out["central_epsilon"], out["central_delta"]) == (expected, DELTA)
        with Client(agg.target, retry=RetryPolicy(max_attempts=2, initial_backoff=0.01, max_backoff=0.05)) as client, \
                PrivacyLedger(tmp_path / "l2.sqlite") as ledger:
            with pytest.raises(ValidationError, match="shuffler"):  # the same collection in clear: refused
                client.submit("ratings", data, ledger=ledger)
            assert ledger.spent("ratings") == 0
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:
        assert ledger.guarantees("ratings") == CentralGuarantee(DELTA, 1000, 3, expected, DELTA, 3)


def test_the_sdk_result_through_a_shuffler_carries_the_recorded_guarantee(tmp_path) -> None:
    info = shuffled_info(min_batch=500)
    shuffler = FakeShufflerService(sealed_report_bytes(info.schema, info.card.version))
    with ServerThread(FakeCollectionService(info)) as agg, ServerThread(None, shuffler=shuffler) as shuf, \
            PrivacyLedger(tmp_path / "l.sqlite") as ledger, Client(agg.target, shuffler=Shuffler(shuf.target)) as c:
        result = c.submit("ratings", ratings_rows(1, seed=3), ledger=ledger)
        recorded = ledger.guarantees("ratings")
    assert recorded is not None and result.shuffled
    assert (result.central_epsilon, result.central_delta) == (recorded.central_epsilon, recorded.central_delta)
    assert result.central_epsilon == amplification.central_epsilon(info.card.mechanism.epsilon, 10, 499, DELTA,
                                                                   bound="blanket")
    assert Fraction(result.central_epsilon) < Fraction(info.card.mechanism.epsilon)
