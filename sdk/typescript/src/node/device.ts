/**
 * A device's rows to the reports it may send: memoize, charge ε, perturb (as the Python SDK's
 * `prepare_reports`, client/device.py). The only place where raw private codes meet randomness.
 */
import type { MechanismCard } from "../card.js";
import * as frac from "../fraction.js";
import { newReportIds, REPORT_ID_BYTES } from "../random.js";
import type { Reports } from "../reports.js";
import type { EncodedRows } from "../rows.js";
import { perturb } from "../sampler.js";
import { collectionFingerprint, type FileLedger } from "./ledger.js";

/** The reports of one submission, already charged and memoized in the ledger. */
export interface PreparedReports {
  /** One report per distinct row, in the order of first appearance (identical rows share theirs). */
  readonly reports: Reports;
  readonly rows: number;
  /** Rows that reused a memoized report (from an earlier submission or an identical earlier row). */
  readonly memoized: number;
  /** ε charged by this submission (new reports × the card's delivered ε). */
  readonly epsilonSpent: number;
  /** ε spent on the collection by this device, this submission included. */
  readonly epsilonTotal: number;
}

/**
 * Memoize-or-perturb every row and record the spend in one ledger transaction, before anything is
 * sent. Throws PrivacyBudgetExceeded (nothing recorded) if the new reports would pass the budget.
 */
export function prepareReports(card: MechanismCard, rows: EncodedRows, ledger: FileLedger): PreparedReports {
  const keys = ledger.memoKeys(collectionFingerprint(card), rows.publicCodes, rows.privateCodes);
  const firstRow = new Map<string, number>();
  keys.forEach((key, i) => {
    if (!firstRow.has(key)) firstRow.set(key, i);
  });
  const distinct = [...firstRow.keys()];
  const rowOf = [...firstRow.values()];
  const ids = new Uint8Array(REPORT_ID_BYTES * distinct.length);
  const codes = new Array<bigint>(distinct.length);
  const name = card.schema.name;
  const { fresh, total } = ledger.transaction(name, card.epsilon, (tx) => {
    const known = tx.lookup(distinct);
    const freshAt = distinct.flatMap((key, j) => (known.has(key) ? [] : [j]));
    distinct.forEach((key, j) => {
      const memo = known.get(key);
      if (memo) {
        ids.set(memo.reportId, REPORT_ID_BYTES * j);
        codes[j] = memo.privateCode;
      }
    });
    const freshIds = newReportIds(freshAt.length);
    const freshCodes = perturb(card, freshAt.map((j) => rows.privateCodes[rowOf[j]!]!));
    tx.record(freshAt.map((j) => distinct[j]!), freshIds, freshCodes);
    freshAt.forEach((j, k) => {
      ids.set(freshIds.subarray(REPORT_ID_BYTES * k, REPORT_ID_BYTES * (k + 1)), REPORT_ID_BYTES * j);
      codes[j] = freshCodes[k]!;
    });
    return { fresh: freshAt.length, total: tx.spent };
  });
  return {
    reports: { reportIds: ids, privateCodes: codes, publicCodes: rows.publicCodes.map((col) => rowOf.map((i) => col[i]!)) },
    rows: rows.privateCodes.length,
    memoized: rows.privateCodes.length - fresh,
    epsilonSpent: frac.toFloat(frac.times(frac.fromFloat(card.epsilon), BigInt(fresh))),
    epsilonTotal: total,
  };
}
