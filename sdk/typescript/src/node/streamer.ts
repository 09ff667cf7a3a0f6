/**
 * Stream one submission's reports over SubmitReports (docs/contract.md §6-§7), as the Python SDK's
 * ReportStreamer does: the reports are cut once into batches numbered 0, 1, ... (their `sequence`);
 * an attempt writes every unacknowledged batch and reads acknowledgements as they come; after a
 * retryable failure the next attempt, after a backoff, resends exactly the batches still
 * unacknowledged, with the same report ids, so the server stores every report once.
 */
import type { Client } from "@connectrpc/connect";
import { cutBatches } from "../batching.js";
import type { Reports } from "../reports.js";
import type { CollectionService, ReportBatch } from "../gen/ldpsynth/v1/collection_pb.js";
import { isRetryable, statusOf, type RetryPolicy } from "../retry.js";
import { SubmitError, type StreamResult } from "../submit-error.js";

export { SubmitError, type StreamResult };

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

/** Deliver `reports`, retrying until every batch is acknowledged; SubmitError on a final failure. */
export async function streamReports(
  client: Client<typeof CollectionService>,
  reports: Reports,
  options: StreamOptions,
): Promise<StreamResult> {
  const n = reports.privateCodes.length;
  const pending = cutBatches(reports, options.capacity, options.collection, options.mechanismVersion);
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
      const acks = client.submitReports(requests(), {
        signal: abort.signal,
        timeoutMs: options.timeoutMs,
        headers: options.headers,
      });
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
    failure ??= {
      status: "ABORTED",
      details: `the server closed the stream with ${pending.size} batches unacknowledged`,
    };
    stalled = pending.size < before ? 0 : stalled + 1;
    if (!isRetryable(failure.status) || stalled >= options.retry.maxAttempts) {
      throw new SubmitError("SubmitReports", failure.status, failure.details, attempts, n, acknowledged, duplicates);
    }
    await new Promise((resolve) => setTimeout(resolve, options.retry.backoffMs(Math.max(stalled, 1))));
  }
  return { sent: n, acknowledged, duplicates, batches, retries: Math.max(attempts - 1, 0) };
}
