"""Turn a device's encoded rows into the reports it may send: memoize, charge ε, perturb.

This is the only place where raw private codes meet randomness, and the randomness is the
operating system's CSPRNG: :meth:`MechanismE.perturb_secure` (docs/contract.md §5; WYZ eq. 16,
keep the true code with probability :math:`A/N \\le 1/g(\\epsilon)`, else report each other
code with probability :math:`L/N`), or the card's frequency oracle's exact sampler
(:meth:`FrequencyOracle.perturb_secure <ldpsynth.shared.mechanisms.oracle.FrequencyOracle.perturb_secure>`).
What comes out holds only perturbed codes (or reports), the public codes and fresh random report ids;
the raw private codes stay here.

Reports of a shuffled collection sent through a shuffler are charged with what the collection promises
them per party (:func:`promised_guarantee`), recorded in the same ledger transaction. A memoized report
keeps the path it was first sent by: sealed or in clear (:func:`prepare_reports`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ldpsynth.client.ledger import CentralGuarantee, PrivacyLedger
from ldpsynth.client.rows import EncodedRows
from ldpsynth.shared.card import MechanismCard, oracle_fields
from ldpsynth.shared.errors import ValidationError
from ldpsynth.shared.guarantees import ANALYSTS, RELEASE, of_card
from ldpsynth.shared.mechanism import MechanismE
from ldpsynth.shared.mechanisms.registry import layout_of
from ldpsynth.shared.protocol import CollectionInfo
from ldpsynth.shared.reports import REPORT_ID_BYTES, Reports, new_report_ids

__all__ = [
    "PreparedReports",
    "collection_fingerprint",
    "promised_guarantee",
    "prepare_reports",
]


@dataclass(frozen=True)
class PreparedReports:
    """The reports of one submission, already charged and memoized in the ledger.

    Attributes
    ----------
    reports:
        One report per *distinct* row (identical rows share their memoized report), in the
        order of first appearance.
    rows:
        Rows submitted.
    memoized:
        Rows that reused a memoized report (from an earlier submission or an identical earlier
        row of this one) and so cost no ε.
    epsilon_spent:
        ε charged by this submission (new reports × the collection's ε).
    epsilon_total:
        ε this device has spent on the collection, this submission included.
    central:
        The central guarantee the ledger records for the collection with this submission (sent through
        a shuffler to a shuffled collection); ``None`` otherwise.
    """

    reports: Reports
    rows: int
    memoized: int
    epsilon_spent: float
    epsilon_total: float
    central: CentralGuarantee | None = None


def collection_fingerprint(card: MechanismCard) -> bytes:
    """SHA-256 of what a report means: the schema (name, ε, attributes) and E's exact weights (a frequency
    oracle: its card's exact probabilities and sampler).

    Memoized reports are bound to it, so a collection re-created with another schema or
    mechanism gets fresh reports (each charged again), while cosmetic card changes do not.
    """
    m = card.mechanism
    if isinstance(m, MechanismE):
        identity = {"schema": card.schema.to_json(), "version": card.version, "domain_size": m.domain_size,
                    "keep_weight": str(m.keep_weight), "lie_weight": str(m.lie_weight)}
    else:  # a frequency oracle: its exact probabilities and sampler's integers (the card's fields)
        identity = {"schema": card.schema.to_json(), "version": card.version, **oracle_fields(m)}
    return hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode("utf-8")).digest()


def promised_guarantee(card: MechanismCard, reports: int) -> CentralGuarantee:
    """What a shuffled collection promises, per party, a device that has sent it ``reports`` reports.

    By the rule every release states (docs/shuffle-accountant.md §6: :func:`ldpsynth.shared.guarantees.of_card`,
    :meth:`~ldpsynth.shared.guarantees.Guarantees.against`): against analysts, and against the aggregator's
    operator when ``shuffle.shuffler`` is ``"independent"`` (``operator``), the central guarantee at the pool
    floor, ``composed_epsilon(ε0, |D|, ⌊(min_batch − F)/m⌋, δ, m)`` for F = ``shuffle.assume_injected``
    (:attr:`~ldpsynth.shared.schema.ShuffleSpec.injected`, recorded as ``assume_injected``), or the local
    (m·ε0, 0) when that is no better; against the shuffler the local guarantee. m is the collection's
    ``shuffle.rows_per_device``, or ``reports`` when the device has sent more than that (its reports then
    compose over more rounds; docs/internals.md, ``ldpsynth.shared.guarantees``). Without scipy the central ε
    is not computed (``None``).
    """
    spec = card.schema.shuffle
    if spec is None:
        raise ValidationError("card", "the card of a shuffled collection (with a shuffle block)",
                              f"collection {card.schema.name!r} is not shuffled")
    m = max(spec.rows_per_device, reports)
    stated = of_card(card, RELEASE, [], np.zeros(0, np.int64), rows_per_device=m)
    if stated.central is None:  # not computed: no accountant
        central: tuple[float | None, float | None] = (None, None)
    else:
        analysts = stated.against(ANALYSTS)
        central = (analysts.epsilon, analysts.delta)
    return CentralGuarantee(spec.delta, spec.min_batch, m, central[0], central[1], assume_injected=spec.injected,
                            operator=spec.independent)


def prepare_reports(info: CollectionInfo, rows: EncodedRows, ledger: PrivacyLedger, *,
                    sealed: bool = False, charge_as: str | None = None) -> PreparedReports:
    """Memoize-or-perturb every row and record the spend, in one ledger transaction, before sending.

    Rows with a memoized report reuse its id and perturbed code (a frequency oracle's: its report). The
    other distinct rows are perturbed with the card's mechanism's ``perturb_secure`` (E:
    :meth:`MechanismE.perturb_secure`; an oracle: its exact sampler on ``os.urandom``), get fresh random ids
    and are charged the
    collection's ε each; if that would exceed the budget the ledger raises
    :class:`~ldpsynth.shared.errors.PrivacyBudgetExceeded` and nothing is recorded.

    ``sealed``: the reports go through a shuffler. For a shuffled collection the same transaction then
    records what it promises them (:func:`promised_guarantee`, when every earlier report to it went through
    a shuffler too), and removes it when they are sent in clear. Each new report is memoized with its path
    (sealed or in clear), and a memoized report is only ever resent the same way: a row whose report was
    first sent the other way refuses the whole submission with :class:`~ldpsynth.shared.errors.ValidationError`
    naming ``rows`` (it would link the report to this device), before anything is charged or recorded.

    ``charge_as``: the name the ledger charges (default the collection's): a discovery round's parent
    (:mod:`ldpsynth.shared.heavy_hitters.collection`), so the device's budget sees one collection.
    """
    card = info.card
    mechanism = card.mechanism
    layout = layout_of(mechanism)
    keys = ledger.memo_keys(collection_fingerprint(card), rows.public_codes, rows.private_codes)
    first_row: dict[bytes, int] = {}
    for i, key in enumerate(keys):
        first_row.setdefault(key, i)
    distinct = list(first_row)
    rows_of = np.fromiter(first_row.values(), dtype=np.int64, count=len(distinct))
    report_ids = np.empty((len(distinct), REPORT_ID_BYTES), np.uint8)
    codes = np.empty((len(distinct), layout.width), np.uint8) if layout.bitmap else np.empty(len(distinct), np.int64)
    with ledger.transaction(charge_as or card.schema.name, mechanism.epsilon, sealed=sealed) as tx:
        known = tx.lookup(distinct, layout.width)
        fresh = np.fromiter((key not in known for key in distinct), dtype=bool, count=len(distinct))
        for j in np.flatnonzero(~fresh):
            report_id, code = known[distinct[j]]
            report_ids[j] = np.frombuffer(report_id, np.uint8)
            codes[j] = np.frombuffer(code, np.uint8) if isinstance(code, bytes) else code
        fresh_ids = new_report_ids(int(fresh.sum()))
        # E's codes or the oracle's reports (OLH's words as int64), from the OS CSPRNG
        fresh_codes = layout.check(mechanism.perturb_secure(rows.private_codes[rows_of[fresh]]).astype(
            np.uint8 if layout.bitmap else np.int64), "reports")
        tx.record([distinct[j] for j in np.flatnonzero(fresh)], fresh_ids, fresh_codes)
        report_ids[fresh] = fresh_ids
        codes[fresh] = fresh_codes
        total = tx.spent
        shuffled = tx.sealed and card.schema.shuffle is not None and tx.promisable()
        central = tx.promise(promised_guarantee(card, tx.reports) if shuffled else None)
    new = int(fresh.sum())
    reports = Reports(report_ids, codes, rows.public_codes[rows_of])
    return PreparedReports(reports, len(rows), len(rows) - new, float(new * Fraction(mechanism.epsilon)), total,
                           central)
