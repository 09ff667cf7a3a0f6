/**
 * A browser's rows to the reports it may send through its IndexedDB ledger: memo keys under the
 * device secret (WebCrypto), then one ledger transaction that looks the rows up, perturbs the new
 * ones (the platform-neutral device core) and records their spend before anything is sent.
 */
import type { Card } from "../any-card.js";
import {
  fillReports,
  planReports,
  prepared,
  promisedGuarantee,
  chargeOf,
  type PrepareOptions,
  type PreparedReports,
} from "../device-core.js";
import { collectionIdentity } from "../fingerprint.js";
import type { EncodedRows } from "../rows.js";
import { collectionFingerprint, type IndexedDbLedger } from "./ledger.js";

/**
 * Memoize-or-perturb every row and record the spend durably, before anything is sent. Throws
 * PrivacyBudgetExceeded or CardChanged (nothing recorded) when the ledger refuses, and ValidationError
 * naming `rows` (nothing recorded) if a memoized row's report was first sent the other way than `sealed`
 * says this one goes. With `sealed` (the reports go through a shuffler), a shuffled collection's
 * promise is recorded in the same transaction (while every earlier report to it went through a
 * shuffler too); sent in clear, it is removed. `charge`: the account and ε per new report when not the card's
 * collection at its ε (a wide collection's view charges the wide collection; ValidationError naming `epsilon`
 * below the card's ε).
 */
export async function prepareReports(
  card: Card,
  rows: EncodedRows,
  ledger: IndexedDbLedger,
  options: PrepareOptions = {},
): Promise<PreparedReports> {
  const sealed = options.sealed ?? false;
  const charge = chargeOf(card, options.charge);
  const spec = card.schema.shuffle;
  const fingerprint = await collectionFingerprint(collectionIdentity(card));
  const plan = planReports(await ledger.memoKeys(fingerprint, rows.publicCodes, rows.privateCodes));
  return ledger.transaction(
    charge.collection,
    charge.epsilon,
    async (tx) => {
      const filled = fillReports(card, rows, plan, await tx.lookup(plan.distinct));
      tx.record(filled.freshKeys, filled.freshIds, filled.freshCodes);
      const shuffled = sealed && spec !== undefined && tx.promisable();
      const central = tx.promise(shuffled ? promisedGuarantee(spec, tx.reports) : undefined);
      return { ...prepared(charge.epsilon, rows, filled, tx.spent), central };
    },
    { sealed },
  );
}
