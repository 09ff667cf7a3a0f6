/**
 * Deliver one submission's batches by unary SubmitBatch calls (docs/contract.md §15), as a browser
 * must: the reports are cut once into batches numbered 0, 1, ...; each batch is sent until it is
 * acknowledged, always with the same report ids, so the server stores every report once whatever
 * is retried. A retryable failure moves to the next target (failover); once every target has
 * failed in a row, the next try waits a backoff. A final status, or `maxAttempts` failures in a row
 * without an acknowledgement, ends the submission with SubmitError (what was acknowledged stays).
 */
import { Code, ConnectError, type Client } from "@connectrpc/connect";
import type { CollectionService, ReportBatch } from "../gen/ldpsynth/v1/collection_pb.js";
import { isRetryable, statusOf, type RetryPolicy } from "../retry.js";
import { SubmitError, type StreamResult } from "../submit-error.js";

export interface DeliveryOptions {
  readonly timeoutMs: number;
  readonly headers: Record<string, string>;
  readonly retry: RetryPolicy;
}

/** Where one run of calls is: the target to call next, the failures in a row, the calls made. */
export class Failover {
  failures = 0;
  attempts = 0;

  constructor(
    readonly targets: number,
    public current: number,
  ) {}

  /** After a retryable failure: the next target, and the milliseconds to wait before calling it. */
  failed(retry: RetryPolicy): number {
    this.failures++;
    this.current = (this.current + 1) % this.targets;
    return this.failures % this.targets === 0 ? retry.backoffMs(this.failures / this.targets) : 0;
  }
}

/**
 * The status of a failed web call: the server's, or UNAVAILABLE when `fetch` itself failed (no
 * answer: the replica is down or unreachable; a browser tells a refused CORS preflight no otherwise).
 */
export function webStatusOf(err: unknown): { status: string; details: string } {
  const e = ConnectError.from(err);
  if (e.code === Code.Unknown && e.cause instanceof TypeError) {
    return { status: "UNAVAILABLE", details: `no answer from the web port (${e.cause.message})` };
  }
  return statusOf(err);
}

function sleep(ms: number): Promise<void> {
  return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve();
}

/** Send every batch until acknowledged, starting at `where`'s target; the counts, or SubmitError. */
export async function deliverBatches(
  clients: readonly Client<typeof CollectionService>[],
  batches: ReadonlyMap<bigint, ReportBatch>,
  sent: number,
  options: DeliveryOptions,
  where: Failover,
): Promise<StreamResult> {
  let acknowledged = 0;
  let duplicates = 0;
  for (const [sequence, batch] of batches) {
    for (;;) {
      where.attempts++;
      let failure;
      try {
        const ack = await clients[where.current]!.submitBatch(batch, {
          timeoutMs: options.timeoutMs,
          headers: options.headers,
        });
        if (ack.sequence === sequence) {
          acknowledged += ack.accepted;
          duplicates += ack.duplicates;
          where.failures = 0;
          break;
        }
        failure = {
          status: "ABORTED",
          details: `the server acknowledged sequence ${ack.sequence} for batch ${sequence}`,
        };
      } catch (err) {
        failure = webStatusOf(err);
      }
      if (!isRetryable(failure.status) || where.failures + 1 >= options.retry.maxAttempts) {
        throw new SubmitError(
          "SubmitBatch",
          failure.status,
          failure.details,
          where.attempts,
          sent,
          acknowledged,
          duplicates,
        );
      }
      await sleep(where.failed(options.retry));
    }
  }
  return { sent, acknowledged, duplicates, batches: batches.size, retries: where.attempts - batches.size };
}
