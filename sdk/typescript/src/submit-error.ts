/**
 * How a submission ends when it fails for good, and what it achieved (docs/contract.md §9): the
 * same result and error whatever the transport (gRPC streams in Node, unary calls on the web port).
 */

/** A call failed for good: a final status, or a retryable one after the last attempt. */
export class SubmitError extends Error {
  constructor(
    readonly method: "GetCollection" | "SubmitReports" | "SubmitBatch" | "SubmitSealed",
    /** The gRPC status name, e.g. `INVALID_ARGUMENT`. */
    readonly status: string,
    /** The server's message (the contract forbids it to echo a private value). */
    readonly details: string,
    readonly attempts: number,
    readonly sent = 0,
    /** Reports newly committed before the failure (they stay committed). */
    readonly acknowledged = 0,
    readonly duplicates = 0,
  ) {
    const tries = attempts > 1 ? ` after ${attempts} attempts` : "";
    const progress =
      method !== "GetCollection"
        ? `; ${acknowledged + duplicates} of ${sent} reports acknowledged before the error (${acknowledged} new, `
          + `${duplicates} duplicates)`
        : "";
    super(`${method} failed with ${status}${tries}: ${details || "no details"}${progress}`);
    this.name = "SubmitError";
  }
}

export interface StreamResult {
  /** Reports in the submission (each counted once, however often it was resent). */
  readonly sent: number;
  /** Reports the server newly committed. */
  readonly acknowledged: number;
  /** Reports the server already held. */
  readonly duplicates: number;
  readonly batches: number;
  /** Attempts after the first. */
  readonly retries: number;
}
