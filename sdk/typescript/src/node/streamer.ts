/**
 * Stream one submission's reports over SubmitReports (docs/contract.md §6-§7), as the Python SDK's
 * ReportStreamer does: the reports are cut once into batches numbered 0, 1, ... (their `sequence`);
 * an attempt writes every unacknowledged batch and reads acknowledgements as they come; after a
 * retryable failure the next attempt, after a backoff, resends exactly the batches still
 * unacknowledged, with the same report ids, so the server stores every report once.
 */
import type { Client } from "@connectrpc/connect";
import { reportBatch, type Reports } from "../reports.js";
import type { CollectionService, ReportBatch } from "../gen/ldpsynth/v1/collection_pb.js";
import { isRetryable, statusOf, type RetryPolicy } from "./retry.js";

/** A call failed for good: a final status, or a retryable one after the last attempt. */
export class SubmitError extends Error {
  constructor(
    readonly method: "GetCollection" | "SubmitReports",
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
    const progress = method === "SubmitReports"
      ? `; ${acknowledged + duplicates} of ${sent} reports acknowledged before the error (${acknowledged} new, `
        + `${duplicates} duplicates)` : "";
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

export interface StreamOptions {
  readonly collection: string;
  readonly mechanismVersion: string;
  /** Reports per batch. */
  readonly capacity: number;
  /** Milliseconds each attempt may take. */
  readonly timeoutMs: number;
  readonly headers: Record<string, string>;
  readonly retry: RetryPolicy;
}

function slice(reports: Reports, start: number, stop: number): Reports {
  return {
    reportIds: reports.reportIds.subarray(16 * start, 16 * stop),
    privateCodes: reports.privateCodes.slice(start, stop),
    publicCodes: reports.publicCodes.map((col) => col.slice(start, stop)),
  };
}

/** Deliver `reports`, retrying until every batch is acknowledged; SubmitError on a final failure. */
export async function streamReports(client: Client<typeof CollectionService>, reports: Reports,
  options: StreamOptions): Promise<StreamResult> {
  const n = reports.privateCodes.length;
  const pending = new Map<bigint, ReportBatch>();
  for (let start = 0, seq = 0n; start < n; start += options.capacity, seq++) {
    pending.set(seq, reportBatch(slice(reports, start, Math.min(n, start + options.capacity)), options.collection,
      options.mechanismVersion, seq));
  }
  const batches = pending.size;
  let acknowledged = 0;
  let duplicates = 0;
  let attempts = 0;
  let stalled = 0;

  /** One stream: write the unacknowledged batches, read acknowledgements; the failure, if any. */
  const attempt = async (): Promise<{ status: string; details: string } | undefined> => {
    const abort = new AbortController();
    let finish: () => void = () => {};
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    async function* requests(): AsyncGenerator<ReportBatch> {
      for (const batch of [...pending.values()]) yield batch;
      await finished; // half-close once every batch is acknowledged, or the call has ended
    }
    try {
      const acks = client.submitReports(requests(), { signal: abort.signal, timeoutMs: options.timeoutMs,
        headers: options.headers });
      for await (const ack of acks) {
        if (pending.delete(ack.sequence)) {
          acknowledged += ack.accepted;
          duplicates += ack.duplicates;
        }
        if (pending.size === 0) finish();
      }
      return undefined;
    } catch (err) {
      return statusOf(err);
    } finally {
      finish();
      abort.abort();
    }
  };

  while (pending.size) {
    attempts++;
    const before = pending.size;
    let failure = await attempt();
    if (!pending.size) break;
    failure ??= { status: "ABORTED", details: `the server closed the stream with ${pending.size} batches unacknowledged` };
    stalled = pending.size < before ? 0 : stalled + 1;
    if (!isRetryable(failure.status) || stalled >= options.retry.maxAttempts) {
      throw new SubmitError("SubmitReports", failure.status, failure.details, attempts, n, acknowledged, duplicates);
    }
    await new Promise((resolve) => setTimeout(resolve, options.retry.backoffMs(Math.max(stalled, 1))));
  }
  return { sent: n, acknowledged, duplicates, batches, retries: Math.max(attempts - 1, 0) };
}
