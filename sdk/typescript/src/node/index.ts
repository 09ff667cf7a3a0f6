/**
 * @ldpsynth/sdk/node: what needs Node's file system and HTTP/2 — the privacy ledger in a file, the
 * device path through it, and the gRPC client. The platform-neutral core is `@ldpsynth/sdk`.
 */
export {
  FileLedger,
  LedgerError,
  PrivacyBudgetExceeded,
  CardChanged,
  Budget,
  LedgerTransaction,
  collectionFingerprint,
  deviceKey,
  defaultLedgerPath,
  DEFAULT_BUDGET_MULTIPLE,
  LEDGER_ENV,
  type CentralGuarantee,
  type LedgerOptions,
  type MemoEntry,
} from "./ledger.js";
export { MARKER_SUFFIX } from "../ledger-rules.js";
export { prepareReports, type PathOptions, type PrepareOptions, type PreparedReports } from "./device.js";
export {
  Client,
  DEFAULT_TIMEOUT_MS,
  DEFAULT_MAX_MESSAGE_BYTES,
  type ClientOptions,
  type ShufflerOptions,
  type SubmitResult,
} from "./client.js";
export { SubmitError, type StreamResult } from "./streamer.js";
export { RetryPolicy, isRetryable, RETRYABLE_STATUSES, type RetryOptions } from "../retry.js";
