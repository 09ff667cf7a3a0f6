/**
 * A device's rows to the reports it may send through its file ledger (as the Python SDK's
 * `prepare_reports`, client/device.py); the memo-or-perturb step is the platform-neutral device core.
 */
import type { MechanismCard } from "../card.js";
import { fillReports, planReports, prepared, type PreparedReports } from "../device-core.js";
import type { EncodedRows } from "../rows.js";
import { collectionFingerprint, type FileLedger } from "./ledger.js";

export type { PreparedReports };

/**
 * Memoize-or-perturb every row and record the spend in one ledger transaction, before anything is
 * sent. Throws PrivacyBudgetExceeded (nothing recorded) if the new reports would pass the budget.
 */
export function prepareReports(card: MechanismCard, rows: EncodedRows, ledger: FileLedger): PreparedReports {
  const plan = planReports(ledger.memoKeys(collectionFingerprint(card), rows.publicCodes, rows.privateCodes));
  return ledger.transaction(card.schema.name, card.epsilon, (tx) => {
    const filled = fillReports(card, rows, plan, tx.lookup(plan.distinct));
    tx.record(filled.freshKeys, filled.freshIds, filled.freshCodes);
    return prepared(card, rows, filled, tx.spent);
  });
}
