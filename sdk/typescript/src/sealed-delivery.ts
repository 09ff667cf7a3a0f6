/**
 * Deliver one submission's sealed reports to a shuffler by unary ShufflerService.SubmitSealed calls
 * (docs/contract.md §16), as the Python SDK's SealedSender does: the sealed reports are cut once
 * into SealedBatches numbered 0, 1, ...; an attempt sends every batch not yet acknowledged, up to
 * `concurrency` calls at once; after a retryable failure the next attempt, after a backoff, resends
 * exactly the batches still unacknowledged with the same sealed bytes (the same report ids inside:
 * the replicas store each once). A shuffler answers a call only once the replicas acknowledged its
 * reports, or UNAVAILABLE when its pool missed the threshold within its max-wait. A shuffler cannot
 * open reports, so it cannot tell duplicates: what it acknowledges counts as `acknowledged`.
 */
import type { Client } from "@connectrpc/connect";
import type { SealedBatch } from "./gen/ldpsynth/v1/collection_pb.js";
import type { ShufflerService } from "./gen/ldpsynth/v1/shuffler_pb.js";
import { isRetryable, type RetryPolicy } from "./retry.js";
import { SubmitError, type StreamResult } from "./submit-error.js";

export interface SealedDeliveryOptions {
  /** Milliseconds each call may take (a call waits for its pool: allow the shuffler's max-wait). */
  readonly timeoutMs: number;
  readonly headers: Record<string, string>;
  readonly retry: RetryPolicy;
  /** Calls in flight at once. */
  readonly concurrency: number;
  /** The status name and message of a failed call (gRPC's in Node, the web port's in a browser). */
  readonly statusOf: (err: unknown) => { status: string; details: string };
}

/** Send every batch until acknowledged; the counts, or SubmitError (what was acknowledged stays). */
export async function deliverSealed(
  client: Client<typeof ShufflerService>,
  batches: ReadonlyMap<bigint, SealedBatch>,
  sent: number,
  options: SealedDeliveryOptions,
): Promise<StreamResult> {
  const pending = new Map(batches);
  let acknowledged = 0;
  let attempts = 0;
  let stalled = 0;

  /** One attempt over every pending batch; the first failure, if any. */
  const attempt = async (): Promise<{ status: string; details: string } | undefined> => {
    const queue = [...pending.entries()];
    let failure: { status: string; details: string } | undefined;
    const worker = async (): Promise<void> => {
      for (let next = queue.shift(); next && !failure; next = queue.shift()) {
        const [sequence, batch] = next;
        try {
          const ack = await client.submitSealed(batch, { timeoutMs: options.timeoutMs, headers: options.headers });
          if (ack.sequence === sequence && pending.delete(sequence)) acknowledged += ack.accepted;
        } catch (err) {
          failure ??= options.statusOf(err);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(options.concurrency, queue.length) }, worker));
    return failure;
  };

  while (pending.size) {
    attempts++;
    const before = pending.size;
    let failure = await attempt();
    if (!pending.size) break;
    failure ??= {
      status: "ABORTED",
      details: `the shuffler acknowledged other sequences than the ${pending.size} sent`,
    };
    stalled = pending.size < before ? 0 : stalled + 1;
    if (!isRetryable(failure.status) || stalled >= options.retry.maxAttempts) {
      throw new SubmitError("SubmitSealed", failure.status, failure.details, attempts, sent, acknowledged, 0);
    }
    await new Promise((resolve) => setTimeout(resolve, options.retry.backoffMs(Math.max(stalled, 1))));
  }
  return { sent, acknowledged, duplicates: 0, batches: batches.size, retries: Math.max(attempts - 1, 0) };
}
