/**
 * A connection to an aggregator from Node, over gRPC (HTTP/2) with @connectrpc/connect-node
 * (docs/contract.md §6-§9): fetch a collection (its card verified), then submit a device's rows
 * through its ledger: validate and encode, memoize or perturb and charge ε durably before sending,
 * stream in batches until every batch is acknowledged, retrying with the same report ids.
 *
 * With a `shuffler` (contract §16) the collection still comes from the aggregator (its card and its
 * sealing key), but the reports go to the shuffler: each sealed on its own to the aggregator's key
 * (src/sealing.ts), in SealedBatches of one public key each (`pool_key`, src/sealed-batching.ts) by
 * ShufflerService.SubmitSealed, resent with the same sealed bytes until acknowledged. Ledger and
 * memoization are the same either way: a memoized row is sealed afresh (a new ciphertext, the same
 * report id and perturbed code). A shuffled collection takes no report in clear: without a shuffler
 * it is refused before anything is charged.
 */
import { createClient, type Client as ConnectClient } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { batchCapacity } from "../batching.js";
import { answeredCollection } from "../collection.js";
import { ValidationError } from "../errors.js";
import type { Charge } from "../device-core.js";
import { CollectionService, type Collection } from "../gen/ldpsynth/v1/collection_pb.js";
import { routeSubmission } from "../collection-router.js";
import { wideOf, type WideCard } from "../wide-card.js";
import { validateReports, type CollectionInfo, type Reports } from "../reports.js";
import { encodeSubmission, type Columns, type Row } from "../rows.js";
import { ShufflerService } from "../gen/ldpsynth/v1/shuffler_pb.js";
import { deliverSealed } from "../sealed-delivery.js";
import { cutSealedBatches, sealedBatchCapacity } from "../sealed-batching.js";
import { sealingKey, sealReports, type SealingKey } from "../sealing.js";
import { prepareReports } from "./device.js";
import type { FileLedger } from "./ledger.js";
import { isRetryable, RetryPolicy, statusOf } from "../retry.js";
import { streamReports, SubmitError, type StreamResult } from "./streamer.js";
import {
  bearerHeaders,
  DEFAULT_MAX_MESSAGE_BYTES,
  DEFAULT_TIMEOUT_MS,
  refuseInClear,
  type SubmitResult,
} from "../call-options.js";

export { DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_TIMEOUT_MS, type SubmitResult };

export interface ClientOptions {
  /** Bearer token, sent as `authorization: Bearer <token>` on every call. */
  readonly token?: string;
  readonly timeoutMs?: number;
  readonly retry?: RetryPolicy;
  readonly maxMessageBytes?: number;
  /** Send the reports sealed through this shuffler instead of in clear to the aggregator (contract §16). */
  readonly shuffler?: ShufflerOptions;
}

export interface ShufflerOptions {
  /** `HOST:PORT` of the shuffler (plain HTTP/2, as the aggregator's). */
  readonly target: string;
  /** The device's bearer token at the shuffler (its own tokens file), if it has one. */
  readonly token?: string;
  /** SubmitSealed calls in flight at once (default 4). */
  readonly concurrency?: number;
}

/** `target` checked as `HOST:PORT`; ValidationError naming `field` otherwise. */
function checkTarget(target: string, field: string, what: string): string {
  const match = /^(\[[0-9a-fA-F:.]+\]|[^\s:/[\]]+):([0-9]{1,5})$/.exec(target ?? "");
  if (!match || !(Number(match[2]) > 0 && Number(match[2]) < 65536)) {
    throw new ValidationError(field, `HOST:PORT of ${what}`, "not HOST:PORT");
  }
  return target;
}

/** The shuffler's connection: its client, its session, its headers, the calls in flight at once. */
interface ShufflerConnection {
  readonly client: ConnectClient<typeof ShufflerService>;
  readonly session: Http2SessionManager;
  readonly headers: Record<string, string>;
  readonly concurrency: number;
}

export class Client {
  readonly timeoutMs: number;
  readonly retry: RetryPolicy;
  private readonly headers: Record<string, string>;
  private readonly maxMessageBytes: number;
  private readonly client: ConnectClient<typeof CollectionService>;
  private readonly session: Http2SessionManager;
  private readonly shuffler: ShufflerConnection | undefined;

  /** `target`: `HOST:PORT` of the aggregator (plain HTTP/2: loopback and demos; TLS is not wired yet). */
  constructor(target: string, options: ClientOptions = {}) {
    checkTarget(target, "target", "the aggregator");
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
      baseUrl,
      sessionManager: this.session,
      readMaxBytes: this.maxMessageBytes,
      writeMaxBytes: this.maxMessageBytes,
    });
    this.client = createClient(CollectionService, transport);
    this.shuffler = options.shuffler === undefined ? undefined : this.connectShuffler(options.shuffler);
  }

  private connectShuffler(options: ShufflerOptions): ShufflerConnection {
    const baseUrl = `http://${checkTarget(options.target, "shuffler.target", "the shuffler")}`;
    const concurrency = options.concurrency ?? 4;
    if (!Number.isSafeInteger(concurrency) || concurrency < 1 || concurrency > 1024) {
      throw new ValidationError("shuffler.concurrency", "an integer in [1, 1024]", "out of range");
    }
    const session = new Http2SessionManager(baseUrl);
    const transport = createGrpcTransport({
      baseUrl,
      sessionManager: session,
      readMaxBytes: this.maxMessageBytes,
      writeMaxBytes: this.maxMessageBytes,
    });
    return {
      client: createClient(ShufflerService, transport),
      session,
      headers: bearerHeaders(options.token),
      concurrency,
    };
  }

  /** The collection's verified card and limits; retries retryable failures, else SubmitError. */
  async getCollection(name: string): Promise<CollectionInfo> {
    return answeredCollection(await this.fetch(name), name);
  }

  /**
   * A wide collection's verified card (src/wide-card.ts): its schema, views, assignment and every view's
   * sub-collection and card; ValidationError naming `card.format` for an ordinary collection.
   */
  async getWideCollection(name: string): Promise<WideCard> {
    return wideOf(await this.fetch(name), name);
  }

  /** GetCollection of `name`, retrying retryable failures (SubmitError when it fails for good). */
  private async fetch(name: string): Promise<Collection> {
    if (typeof name !== "string" || !name)
      throw new ValidationError("collection", "a non-empty collection name", "empty");
    for (let attempts = 1; ; attempts++) {
      try {
        return await this.client.getCollection(
          { collection: name },
          { timeoutMs: this.timeoutMs, headers: this.headers },
        );
      } catch (err) {
        const { status, details } = statusOf(err);
        if (!isRetryable(status) || attempts >= this.retry.maxAttempts) {
          throw new SubmitError("GetCollection", status, details, attempts);
        }
        await new Promise((resolve) => setTimeout(resolve, this.retry.backoffMs(attempts)));
      }
    }
  }

  /**
   * Validate, memoize-or-perturb, charge and deliver a device's rows (columns, or row objects).
   * A bad row (ValidationError) or the budget (PrivacyBudgetExceeded): nothing recorded, nothing sent;
   * through a shuffler, likewise a collection whose sealing cannot be used (ValidationError naming `sealing`);
   * without one, a shuffled collection (naming `shuffler`); either way, rows whose memoized reports were
   * first sent the other way (naming `rows`). Through a shuffler to a shuffled collection, the ledger records the
   * collection's promise with the spend (`central` in the result: its terms; ε and δ not computed here).
   * SubmitError when delivery fails for good: the ε stays charged, and submitting the same rows again
   * resends the same memoized reports at no further cost. A wide or discovery collection's rows go to the
   * device's view or round, charged under the collection (src/collection-router.ts; `result.part`, `status`).
   */
  async submit(
    collection: string | CollectionInfo | WideCard,
    rows: Columns | readonly Row[],
    ledger: FileLedger,
    batchSize?: number,
  ): Promise<SubmitResult> {
    return routeSubmission(
      {
        fetch: (name) => this.fetch(name),
        submitTo: (info, part, charge) => this.submitTo(info, part, ledger, batchSize, charge),
      },
      collection,
      rows,
      ledger,
    );
  }

  /** Validate, memoize-or-perturb, charge (`charge`: whom, when not the collection itself) and deliver. */
  private async submitTo(
    info: CollectionInfo,
    rows: Columns | readonly Row[],
    ledger: FileLedger,
    batchSize: number | undefined,
    charge?: Charge,
  ): Promise<SubmitResult> {
    const route = await this.route(info, batchSize);
    const schema = info.card.schema;
    const encoded = encodeSubmission(schema, rows);
    const prepared = prepareReports(info.card, encoded, ledger, { sealed: route.key !== undefined, charge });
    const stream = await this.deliver(info, prepared.reports, route);
    return {
      ...stream,
      collection: charge?.collection ?? schema.name,
      ...(charge === undefined ? {} : { part: schema.name }),
      rows: prepared.rows,
      memoized: prepared.memoized,
      epsilonSpent: prepared.epsilonSpent,
      epsilonTotal: prepared.epsilonTotal,
      shuffled: route.key !== undefined,
      central: prepared.central,
      status: "sent",
    };
  }

  /**
   * Deliver reports that are already made (e.g. resend a submission's memoized reports), with no
   * ledger; they are validated against the collection first.
   */
  async submitReports(info: CollectionInfo, reports: Reports, batchSize?: number): Promise<StreamResult> {
    validateReports(info.card.schema, reports);
    return this.deliver(info, reports, await this.route(info, batchSize));
  }

  /** Close the HTTP/2 connections (calls in flight fail); the process need not wait for their idle timeout. */
  close(): void {
    this.session.abort();
    this.shuffler?.session.abort();
  }

  /**
   * Reports per batch, and through a shuffler the key to seal to: a collection whose sealing this
   * device cannot use is refused (ValidationError naming `sealing`) before anything is charged, and
   * never sent in clear instead; without a shuffler, so is a shuffled collection (naming `shuffler`).
   */
  private async route(info: CollectionInfo, batchSize?: number): Promise<Route> {
    if (this.shuffler === undefined) {
      refuseInClear(
        info,
        "a shuffler for a shuffled collection (new Client(target, { shuffler })): its reports "
          + "travel only sealed, never in clear",
      );
      return { capacity: batchCapacity(info, this.maxMessageBytes, batchSize) };
    }
    const key = await sealingKey(info);
    return { key, capacity: sealedBatchCapacity(info, key.sealedReportBytes, this.maxMessageBytes, batchSize) };
  }

  private async deliver(info: CollectionInfo, reports: Reports, route: Route): Promise<StreamResult> {
    const name = info.card.schema.name;
    if (this.shuffler === undefined || route.key === undefined) {
      return streamReports(this.client, reports, {
        collection: name,
        mechanismVersion: info.card.version,
        capacity: route.capacity,
        timeoutMs: this.timeoutMs,
        headers: this.headers,
        retry: this.retry,
      });
    }
    const sealed = await sealReports(route.key, name, info.card.version, reports);
    const n = reports.privateCodes.length;
    const batches = cutSealedBatches(
      sealed,
      route.key.sealedReportBytes,
      route.capacity,
      name,
      route.key.keyId,
      info.card.schema.foldPublicCodes(reports.publicCodes, n),
    );
    return deliverSealed(this.shuffler.client, batches, n, {
      timeoutMs: this.timeoutMs,
      headers: this.shuffler.headers,
      retry: this.retry,
      concurrency: this.shuffler.concurrency,
      statusOf,
    });
  }
}

/** Where a submission goes: its batch capacity, and the key to seal to when through a shuffler. */
interface Route {
  readonly capacity: number;
  readonly key?: SealingKey;
}
