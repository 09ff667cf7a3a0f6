/**
 * A connection to an aggregator from Node, over gRPC (HTTP/2) with @connectrpc/connect-node
 * (docs/contract.md §6-§9): fetch a collection (its card verified), then submit a device's rows
 * through its ledger: validate and encode, memoize or perturb and charge ε durably before sending,
 * stream in batches until every batch is acknowledged, retrying with the same report ids.
 */
import { createClient, type Client as ConnectClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { batchCapacity } from "../batching.js";
import { answeredCollection } from "../collection.js";
import { ValidationError } from "../errors.js";
import { CollectionService } from "../gen/ldpsynth/v1/collection_pb.js";
import { validateReports, type CollectionInfo, type Reports } from "../reports.js";
import { encodeSubmission, type Columns, type Row } from "../rows.js";
import { prepareReports } from "./device.js";
import type { FileLedger } from "./ledger.js";
import { isRetryable, RetryPolicy, statusOf } from "../retry.js";
import { streamReports, SubmitError, type StreamResult } from "./streamer.js";
import { bearerHeaders, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_TIMEOUT_MS, type SubmitResult } from "../call-options.js";

export { DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_TIMEOUT_MS, type SubmitResult };

export interface ClientOptions {
  /** Bearer token, sent as `authorization: Bearer <token>` on every call. */
  readonly token?: string;
  readonly timeoutMs?: number;
  readonly retry?: RetryPolicy;
  readonly maxMessageBytes?: number;
}



export class Client {
  readonly timeoutMs: number;
  readonly retry: RetryPolicy;
  private readonly headers: Record<string, string>;
  private readonly maxMessageBytes: number;
  private readonly client: ConnectClient<typeof CollectionService>;
  private readonly session: Http2SessionManager;

  /** `target`: `HOST:PORT` of the aggregator (plain HTTP/2: loopback and demos; TLS is not wired yet). */
  constructor(target: string, options: ClientOptions = {}) {
    const match = /^(\[[0-9a-fA-F:.]+\]|[^\s:/[\]]+):([0-9]{1,5})$/.exec(target ?? "");
    if (!match || !(Number(match[2]) > 0 && Number(match[2]) < 65536)) {
      throw new ValidationError("target", "HOST:PORT of the aggregator", "not HOST:PORT");
    }
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(this.timeoutMs > 0 && Number.isFinite(this.timeoutMs))) {
      throw new ValidationError("timeoutMs", "a finite number of milliseconds > 0", "out of range");
    }
    this.retry = options.retry ?? new RetryPolicy();
    this.headers = bearerHeaders(options.token);
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    const baseUrl = `http://${target}`;
    this.session = new Http2SessionManager(baseUrl);
    const transport = createGrpcTransport({
      baseUrl, sessionManager: this.session, readMaxBytes: this.maxMessageBytes, writeMaxBytes: this.maxMessageBytes,
    });
    this.client = createClient(CollectionService, transport);
  }

  /** The collection's verified card and limits; retries retryable failures, else SubmitError. */
  async getCollection(name: string): Promise<CollectionInfo> {
    if (typeof name !== "string" || !name) throw new ValidationError("collection", "a non-empty collection name", "empty");
    for (let attempts = 1; ; attempts++) {
      let message;
      try {
        message = await this.client.getCollection({ collection: name }, { timeoutMs: this.timeoutMs,
          headers: this.headers });
      } catch (err) {
        const { status, details } = statusOf(err);
        if (!isRetryable(status) || attempts >= this.retry.maxAttempts) {
          throw new SubmitError("GetCollection", status, details, attempts);
        }
        await new Promise((resolve) => setTimeout(resolve, this.retry.backoffMs(attempts)));
        continue;
      }
      return answeredCollection(message, name);
    }
  }

  /**
   * Validate, memoize-or-perturb, charge and deliver a device's rows (columns, or row objects).
   * A bad row (ValidationError) or the budget (PrivacyBudgetExceeded): nothing recorded, nothing sent.
   * SubmitError when delivery fails for good: the ε stays charged, and submitting the same rows again
   * resends the same memoized reports at no further cost.
   */
  async submit(collection: string | CollectionInfo, rows: Columns | readonly Row[], ledger: FileLedger,
    batchSize?: number): Promise<SubmitResult> {
    const info = typeof collection === "string" ? await this.getCollection(collection) : collection;
    const capacity = batchCapacity(info, this.maxMessageBytes, batchSize);
    const schema = info.card.schema;
    const encoded = encodeSubmission(schema, rows);
    const prepared = prepareReports(info.card, encoded, ledger);
    const stream = await this.stream(info, prepared.reports, capacity);
    return { ...stream, collection: schema.name, rows: prepared.rows, memoized: prepared.memoized,
      epsilonSpent: prepared.epsilonSpent, epsilonTotal: prepared.epsilonTotal };
  }

  /**
   * Deliver reports that are already made (e.g. resend a submission's memoized reports), with no
   * ledger; they are validated against the collection first.
   */
  async submitReports(info: CollectionInfo, reports: Reports, batchSize?: number): Promise<StreamResult> {
    validateReports(info.card.schema, reports);
    return this.stream(info, reports, batchCapacity(info, this.maxMessageBytes, batchSize));
  }

  /** Close the HTTP/2 connection (calls in flight fail); the process need not wait for its idle timeout. */
  close(): void {
    this.session.abort();
  }

  private stream(info: CollectionInfo, reports: Reports, capacity: number): Promise<StreamResult> {
    return streamReports(this.client, reports, { collection: info.card.schema.name, mechanismVersion: info.card.version,
      capacity, timeoutMs: this.timeoutMs, headers: this.headers, retry: this.retry });
  }
}
