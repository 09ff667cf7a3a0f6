/**
 * What every client of the SDK sends and returns, whatever its transport (gRPC from Node, the
 * Connect protocol or gRPC-Web from a browser): the bearer token header, the default deadline and
 * message limit, and the result of a submission.
 */
import { ValidationError } from "./errors.js";
import type { CentralGuarantee } from "./ledger-rules.js";
import type { CollectionInfo } from "./reports.js";
import type { StreamResult } from "./submit-error.js";

/** Milliseconds each call may take (GetCollection, and each submission attempt). */
export const DEFAULT_TIMEOUT_MS = 30_000;
/** The channel's message limit when none is given: the protocol's default max_message_bytes. */
export const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;

export interface SubmitResult extends StreamResult {
  /** The collection charged: the one submitted to (a wide collection's name for its view's reports). */
  readonly collection: string;
  /** The sub-collection the reports went to, when not `collection` (a wide collection's view, a discovery's round). */
  readonly part?: string;
  /**
   * "sent"; for a discovery collection whose open round is not this device's, "not your round yet" or "your
   * round has passed": nothing was charged or sent.
   */
  readonly status: string;
  readonly rows: number;
  /** Rows that reused a memoized report and cost no ε. */
  readonly memoized: number;
  readonly epsilonSpent: number;
  readonly epsilonTotal: number;
  /** Whether the reports were sealed and sent through a shuffler. */
  readonly shuffled: boolean;
  /** The promise the ledger records for a shuffled collection with this submission (through a shuffler). */
  readonly central?: CentralGuarantee | undefined;
}

/**
 * Refuse to send a shuffled collection's reports in clear (contract §16: it takes sealed reports only,
 * and the replicas refuse the rest): ValidationError naming `shuffler`, before anything is charged.
 * `legal`: how this client sends them sealed, if it can.
 */
export function refuseInClear(info: CollectionInfo, legal: string): void {
  if (info.card.schema.shuffle !== undefined) {
    throw new ValidationError(
      "shuffler",
      legal,
      `collection ${JSON.stringify(info.card.schema.name)} is shuffled and no shuffler was given`,
    );
  }
}

/** `authorization: Bearer <token>` (none without a token); ValidationError for a malformed token. */
export function bearerHeaders(token: string | undefined): Record<string, string> {
  if (token === undefined) return {};
  if (typeof token !== "string" || !/^[\x21-\x7e]+$/.test(token)) {
    throw new ValidationError(
      "token",
      "a non-empty string of printable ASCII characters without spaces",
      "malformed token",
    );
  }
  return { authorization: `Bearer ${token}` };
}

/** A call's deadline in milliseconds, checked. */
export function checkTimeout(timeoutMs: number): number {
  if (!(timeoutMs > 0 && Number.isFinite(timeoutMs))) {
    throw new ValidationError("timeoutMs", "a finite number of milliseconds > 0", "out of range");
  }
  return timeoutMs;
}
