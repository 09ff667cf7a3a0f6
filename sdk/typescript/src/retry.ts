/**
 * When to retry a call and how long to wait first (docs/contract.md §9; the Python SDK's
 * client/retry.py): UNAVAILABLE, DEADLINE_EXCEEDED, ABORTED and CANCELLED are retried with
 * exponential backoff and equal jitter; every other status is final.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { ValidationError } from "./errors.js";

/** gRPC status names by code (Connect's codes are gRPC's). */
const NAMES: Record<number, string> = {
  0: "OK",
  1: "CANCELLED",
  2: "UNKNOWN",
  3: "INVALID_ARGUMENT",
  4: "DEADLINE_EXCEEDED",
  5: "NOT_FOUND",
  6: "ALREADY_EXISTS",
  7: "PERMISSION_DENIED",
  8: "RESOURCE_EXHAUSTED",
  9: "FAILED_PRECONDITION",
  10: "ABORTED",
  11: "OUT_OF_RANGE",
  12: "UNIMPLEMENTED",
  13: "INTERNAL",
  14: "UNAVAILABLE",
  15: "DATA_LOSS",
  16: "UNAUTHENTICATED",
};

export const RETRYABLE_STATUSES: ReadonlySet<string> = new Set([
  "UNAVAILABLE",
  "DEADLINE_EXCEEDED",
  "ABORTED",
  "CANCELLED",
]);

export function isRetryable(status: string): boolean {
  return RETRYABLE_STATUSES.has(status);
}

/** The gRPC status name and the server's message of any error a call raised. */
export function statusOf(err: unknown): { status: string; details: string } {
  const e = ConnectError.from(err);
  return { status: NAMES[e.code] ?? NAMES[Code.Unknown]!, details: e.rawMessage };
}

export interface RetryOptions {
  /** Attempts in a row without progress before a call fails for good (1: no retry). */
  readonly maxAttempts?: number;
  readonly initialBackoffMs?: number;
  readonly maxBackoffMs?: number;
  readonly multiplier?: number;
}

export class RetryPolicy {
  readonly maxAttempts: number;
  readonly initialBackoffMs: number;
  readonly maxBackoffMs: number;
  readonly multiplier: number;

  constructor(options: RetryOptions = {}) {
    this.maxAttempts = options.maxAttempts ?? 8;
    this.initialBackoffMs = options.initialBackoffMs ?? 100;
    this.maxBackoffMs = options.maxBackoffMs ?? 10_000;
    this.multiplier = options.multiplier ?? 2;
    if (!Number.isSafeInteger(this.maxAttempts) || this.maxAttempts < 1 || this.maxAttempts > 1000) {
      throw new ValidationError("maxAttempts", "an integer in [1, 1000]", "out of range");
    }
    if (!(this.initialBackoffMs > 0 && Number.isFinite(this.initialBackoffMs))) {
      throw new ValidationError("initialBackoffMs", "a finite number of milliseconds > 0", "out of range");
    }
    if (!(this.maxBackoffMs >= this.initialBackoffMs && Number.isFinite(this.maxBackoffMs))) {
      throw new ValidationError("maxBackoffMs", "a finite number of milliseconds >= initialBackoffMs", "out of range");
    }
    if (!(this.multiplier >= 1 && Number.isFinite(this.multiplier))) {
      throw new ValidationError("multiplier", "a finite number >= 1", "out of range");
    }
  }

  /** Milliseconds to wait after `failures` (>= 1) failed attempts in a row: uniform in [c/2, c]. */
  backoffMs(failures: number, random: () => number = Math.random): number {
    const cap = Math.min(this.maxBackoffMs, this.initialBackoffMs * this.multiplier ** Math.min(failures - 1, 64));
    return cap / 2 + random() * (cap / 2);
  }
}
