/**
 * @ldpsynth/sdk/web: what a browser needs beyond the core — the privacy ledger in IndexedDB, the
 * device path through it, and the client of the aggregator's web port (Connect or gRPC-Web, unary
 * SubmitBatch, several replicas with failover). Everything of the core is re-exported.
 */
export * from "../index.js";
export { IndexedDbLedger, IdbLedgerTransaction, collectionFingerprint, type IndexedDbLedgerOptions } from "./ledger.js";
export type { MarkerStore } from "./ledger-database.js";
export { prepareReports } from "./device.js";
export { WebClient, type WebClientOptions, type WebProtocol } from "./client.js";
export {
  Budget,
  CardChanged,
  LedgerError,
  PrivacyBudgetExceeded,
  DEFAULT_BUDGET_MULTIPLE,
  MARKER_SUFFIX,
  type CentralGuarantee,
} from "../ledger-rules.js";
export { RetryPolicy, isRetryable, RETRYABLE_STATUSES, type RetryOptions } from "../retry.js";
export { SubmitError, type StreamResult } from "../submit-error.js";
export { DEFAULT_TIMEOUT_MS, DEFAULT_MAX_MESSAGE_BYTES, type SubmitResult } from "../call-options.js";
export { collectionIdentity } from "../fingerprint.js";
export type { MemoEntry, PathOptions, PreparedReports } from "../device-core.js";
