"""The ledger records both guarantees (format 4): a shuffled collection's reports sent through a shuffler
are charged with the central guarantee it promised them, in the spend's transaction; none in clear or for a
collection that is not shuffled; a ledger of format 3 is upgraded; a damaged guarantee is refused at open."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from contextlib import closing
from fractions import Fraction

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


def shuffled_info(min_batch: int = 1000, rows_per_device: int = 1, schema_min_batch: int = 1) -> CollectionInfo:
    """The ratings collection (|D| = 10) behind a shuffler, with its sealing key."""
    schema = dataclasses.replace(ratings_schema(1.0), shuffle=ShuffleSpec(DELTA, min_batch, rows_per_device),
                                 min_batch=schema_min_batch)
    return CollectionInfo(MechanismCard.for_schema(schema), Limits(), sealing=KEY.public)


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
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:
        prepared = prepare(ledger, info, ratings_rows(1, seed=1))
        assert prepared.central == ledger.guarantees("ratings") == CentralGuarantee(DELTA, 1000, 1, expected, DELTA)
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:  # durable, and exact: the same floats back
        assert ledger.guarantees("ratings") == CentralGuarantee(DELTA, 1000, 1, expected, DELTA)


def test_the_guarantee_composes_over_rows_per_device_and_over_more_reports_when_the_device_sent_more(tmp_path) -> None:
    """m = shuffle.rows_per_device: composed_epsilon at n = (min_batch - F) // m (F = m by default); a device that
    has sent r > m reports: at m = r (its own reports compose over r rounds)."""
    info = shuffled_info(min_batch=600, rows_per_device=2)
    eps0 = info.card.mechanism.epsilon
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:
        prepare(ledger, info, ratings_rows(2, seed=2))
        at_two = amplification.composed_epsilon(eps0, 10, 299, DELTA, 2, bound="blanket")
        assert ledger.guarantees("ratings") == CentralGuarantee(DELTA, 600, 2, at_two, DELTA)
        prepare(ledger, info, ratings_rows(1, seed=2, start=2))
        at_three = amplification.composed_epsilon(eps0, 10, 199, DELTA, 3, bound="blanket")
        assert ledger.guarantees("ratings") == CentralGuarantee(DELTA, 600, 3, at_three, DELTA)
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
    """min_batch 1 at rows_per_device 2: n = 0 per round, so (m x epsilon0, 0), the rule every release states."""
    info = shuffled_info(min_batch=1, rows_per_device=2)
    with PrivacyLedger(tmp_path / "l.sqlite") as ledger:
        guarantee = prepare(ledger, info, ratings_rows(1)).central
    assert guarantee == CentralGuarantee(DELTA, 1, 2, 2 * info.card.mechanism.epsilon, 0.0)


def test_no_guarantee_for_a_collection_that_is_not_shuffled_or_for_reports_sent_in_clear(tmp_path) -> None:
    with PrivacyLedger(tmp_path / "l.sqlite", budget=100.0) as ledger:
        assert prepare(ledger, ratings_info(1.0), ratings_rows(2)).central is None  # sealed, but not shuffled
        assert ledger.guarantees("ratings") is None
        info = dataclasses.replace(shuffled_info(), card=MechanismCard.for_schema(
            dataclasses.replace(shuffled_info().schema, name="other")))
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
        assert prepare(ledger, info, ratings_rows(1)).central is not None
        assert prepare(ledger, info, ratings_rows(1), sealed=False).central is None  # memoized, resent in clear
        assert ledger.guarantees("ratings") is None
        assert prepare(ledger, info, ratings_rows(1, start=1)).central is None
        assert ledger.reports("ratings") == 2


def test_a_refused_spend_records_no_guarantee(tmp_path) -> None:
    info = shuffled_info()
    with PrivacyLedger(tmp_path / "l.sqlite", budget=1.0) as ledger:
        with pytest.raises(PrivacyBudgetExceeded, match="over this device's budget"):
            prepare(ledger, info, ratings_rows(5))
        assert ledger.guarantees("ratings") is None and ledger.reports("ratings") == 0


def test_a_ledger_of_format_3_is_upgraded_with_its_records_kept(tmp_path) -> None:
    """Format 3 (before the central guarantees) opens as format 4: every table kept as it was, the central one
    added empty (which earlier reports went through a shuffler is not known, so none is promised for them),
    and a guarantee recorded with the first sealed submission of a collection that had no report."""
    path = tmp_path / "l.sqlite"
    info = shuffled_info()
    with PrivacyLedger(path, budget=50.0) as ledger:
        prepare(ledger, info, ratings_rows(3))
    edit(path, "DROP TABLE central", "PRAGMA user_version = 3")
    tables = ("device", "spend", "pinned", "memo", "memo_report")

    def contents() -> dict[str, list]:
        with closing(sqlite3.connect(path)) as conn:
            return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables}

    before = contents()
    PrivacyLedger(path).close()
    assert contents() == before
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 4
        assert conn.execute("SELECT COUNT(*) FROM central").fetchone()[0] == 0
    with PrivacyLedger(path) as ledger:
        assert ledger.reports("ratings") == 3 and ledger.budget_for(1.0) == 50.0
        assert prepare(ledger, info, ratings_rows(3)).memoized == 3  # the same reports, sealed: still unknown
        assert ledger.guarantees("ratings") is None
        other = dataclasses.replace(info, card=MechanismCard.for_schema(dataclasses.replace(info.schema, name="new")))
        assert prepare(ledger, other, ratings_rows(1)).central == ledger.guarantees("new") is not None


#: A damaged row of the central table, and the problem the refusal names.
DAMAGED = [
    ("UPDATE central SET central_epsilon = 'nan'", "central guarantee's central_epsilon is 'nan', not an exact"),
    ("UPDATE central SET central_epsilon = '-1/2'", "central_epsilon is '-1/2', not an exact number > 0"),
    ("UPDATE central SET central_epsilon = '0'", "central_epsilon is '0', not an exact number > 0"),
    ("UPDATE central SET central_epsilon = x'01'", "central_epsilon is b'\\\\x01', not an exact"),
    ("UPDATE central SET central_epsilon = 0.5", "central_epsilon is '0.5', not an exact"),  # TEXT: stored '0.5'

    ("UPDATE central SET delta = '1'", "delta is '1', not an exact number in \\(0, 1\\)"),
    ("UPDATE central SET delta = 'inf'", "delta is 'inf'"),
    ("UPDATE central SET min_batch = 0", "min_batch is 0, not an integer >= 1"),
    ("UPDATE central SET rows_per_device = 'two'", "rows_per_device is 'two', not an integer >= 1"),
    ("UPDATE central SET rows_per_device = -3", "rows_per_device is -3, not an integer >= 1"),
    ("UPDATE central SET central_delta = '1/3'", "central_delta is '1/3', not its delta or 0"),
    ("UPDATE central SET central_delta = NULL", "central_delta is None, not its delta or 0"),
    ("UPDATE central SET central_epsilon = NULL", "central_delta is '.*, not its delta or 0 \\(none only with"),
    ("INSERT INTO central SELECT 'unknown', delta, min_batch, rows_per_device, central_epsilon, central_delta "
     "FROM central", "collection 'unknown': a central guarantee is recorded but no report"),
    ("DROP TABLE central", "its table 'central' is missing"),
]


@pytest.mark.parametrize(("damage", "problem"), DAMAGED, ids=[d[1][:40] for d in DAMAGED])
def test_a_damaged_guarantee_is_refused_on_open_naming_the_ledger_and_the_problem(tmp_path, damage, problem) -> None:
    path = tmp_path / "l.sqlite"
    with PrivacyLedger(path) as ledger:
        prepare(ledger, shuffled_info(), ratings_rows(2))
    edit(path, damage)
    with pytest.raises(LedgerError, match=rf"ledger: .*l\.sqlite: .*{problem}"):
        PrivacyLedger(path)


def test_without_the_accountant_the_terms_are_recorded_and_no_epsilon(tmp_path, monkeypatch) -> None:
    """A device without scipy (the [client] and [shuffle] extras) records the promise's terms, its central
    epsilon and delta as not computed; the ledger reads that row back."""
    monkeypatch.setattr(guarantees, "accountant_available", lambda: False)
    path = tmp_path / "l.sqlite"
    with PrivacyLedger(path) as ledger:
        assert prepare(ledger, shuffled_info(), ratings_rows(1)).central == CentralGuarantee(DELTA, 1000, 1, None, None)
    with PrivacyLedger(path) as ledger:
        assert ledger.guarantees("ratings") == CentralGuarantee(DELTA, 1000, 1, None, None)


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
        assert ledger.guarantees("ratings") == CentralGuarantee(DELTA, 1000, 3, expected, DELTA)


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
