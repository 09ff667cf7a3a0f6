/**
 * A device's rows to the reports it may send through its file ledger (as the Python SDK's
 * `prepare_reports`, client/device.py); the memo-or-perturb step is the platform-neutral device core.
 */
import type { Card } from "../any-card.js";
import {
  fillReports,
  planReports,
  prepared,
  promisedGuarantee,
  chargeOf,
  type PathOptions,
  type PrepareOptions,
  type PreparedReports,
} from "../device-core.js";
import type { EncodedRows } from "../rows.js";
import { collectionFingerprint, type FileLedger } from "./ledger.js";

export type { PathOptions, PrepareOptions, PreparedReports };

/**
 * Memoize-or-perturb every row and record the spend in one ledger transaction, before anything is
 * sent. Throws PrivacyBudgetExceeded (nothing recorded) if the new reports would pass the budget, and
 * ValidationError naming `rows` (nothing recorded) if a memoized row's report was first sent the other way
 * than `sealed` says this one goes. With `sealed` (the reports go through a shuffler), a shuffled
 * collection's promise is recorded in the same transaction (while every earlier report to it went
 * through a shuffler too); sent in clear, it is removed.
 */
export function prepareReports(
  card: Card,
  rows: EncodedRows,
  ledger: FileLedger,
  options: PrepareOptions = {},
): PreparedReports {
  const sealed = options.sealed ?? false;
  const charge = chargeOf(card, options.charge);
  const spec = card.schema.shuffle;
  const plan = planReports(ledger.memoKeys(collectionFingerprint(card), rows.publicCodes, rows.privateCodes));
  return ledger.transaction(
    charge.collection,
    charge.epsilon,
    (tx) => {
      const filled = fillReports(card, rows, plan, tx.lookup(plan.distinct));
      tx.record(filled.freshKeys, filled.freshIds, filled.freshCodes);
      const shuffled = sealed && spec !== undefined && tx.promisable();
      const central = tx.promise(shuffled ? promisedGuarantee(spec, tx.reports) : undefined);
      return { ...prepared(charge.epsilon, rows, filled, tx.spent), central };
    },
    { sealed },
  );
}
