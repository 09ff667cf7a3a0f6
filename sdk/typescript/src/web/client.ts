/**
 * A connection to the aggregator's web port from a browser (docs/contract.md §15): the Connect
 * protocol (default) or gRPC-Web, by @connectrpc/connect-web over `fetch`; several replicas with
 * failover. Fetch a collection (its card verified), then submit a device's rows through its
 * IndexedDB ledger: validate and encode, memoize or perturb and charge ε durably before sending,
 * then one unary SubmitBatch per batch until each is acknowledged, retrying with the same report ids.
 *
 * No shuffler path (contract §16): the reference shuffler serves gRPC only, and a browser cannot
 * speak gRPC, so a `shuffler` option is refused (ValidationError) rather than ignored, which would
 * send in clear what the caller meant to seal; and a shuffled collection, which takes no report in
 * clear, is refused (ValidationError naming `shuffler`) before anything is charged. Sealing itself
 * works in browsers (src/sealing.ts).
 */
import { createClient, type Client as ConnectClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { batchCapacity, cutBatches } from "../batching.js";
import {
  bearerHeaders,
  checkTimeout,
  DEFAULT_MAX_MESSAGE_BYTES,
  DEFAULT_TIMEOUT_MS,
  refuseInClear,
  type SubmitResult,
} from "../call-options.js";
import { answeredCollection } from "../collection.js";
import { ValidationError } from "../errors.js";
import { routeSubmission } from "../collection-router.js";
import type { Charge } from "../device-core.js";
import { CollectionService, type Collection } from "../gen/ldpsynth/v1/collection_pb.js";
import { wideOf, type WideCard } from "../wide-card.js";
import { validateReports, type CollectionInfo, type Reports } from "../reports.js";
import { isRetryable, RetryPolicy } from "../retry.js";
import { encodeSubmission, type Columns, type Row } from "../rows.js";
import { SubmitError, type StreamResult } from "../submit-error.js";
import { deliverBatches, Failover, webStatusOf } from "./delivery.js";
import { prepareReports } from "./device.js";
import type { IndexedDbLedger } from "./ledger.js";

export type WebProtocol = "connect" | "grpc-web";

export interface WebClientOptions {
  /** Bearer token, sent as `authorization: Bearer <token>` on every call. */
  readonly token?: string;
  readonly timeoutMs?: number;
  readonly retry?: RetryPolicy;
  /** `connect` (default: the Connect protocol, binary protobuf) or `grpc-web`. */
  readonly protocol?: WebProtocol;
  readonly maxMessageBytes?: number;
  /** The transport to a target's base URL (default: connect-web's for `protocol`, over `fetch`). */
  readonly transport?: (baseUrl: string) => Transport;
}

/** A target's base URL: `http(s)://host:port` of a replica's web port (a path prefix is kept). */
function baseUrl(target: string): string {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    throw new ValidationError("targets", "base URLs of web ports: http(s)://HOST:PORT", "not a URL");
  }
  if ((url.protocol !== "http:" && url.protocol !== "https:") || url.search || url.hash) {
    throw new ValidationError("targets", "base URLs of web ports: http(s)://HOST:PORT", "not an http(s) base URL");
  }
  return url.href.replace(/\/$/, "");
}

export class WebClient {
  readonly timeoutMs: number;
  readonly retry: RetryPolicy;
  readonly targets: readonly string[];
  private readonly headers: Record<string, string>;
  private readonly maxMessageBytes: number;
  private readonly clients: ConnectClient<typeof CollectionService>[];
  /** The target that answered last: the next call starts there. */
  private preferred = 0;

  /** `targets`: one or several replicas' web ports (`https://ingest.example.org:8443`). */
  constructor(targets: string | readonly string[], options: WebClientOptions = {}) {
    if ("shuffler" in options) {
      throw new ValidationError(
        "shuffler",
        "none: WebClient sends in clear to replicas' web ports (contract §15)",
        "the reference shuffler serves gRPC only, which a browser cannot speak; reports would not be sealed",
      );
    }
    const list = typeof targets === "string" ? [targets] : [...targets];
    if (!list.length) throw new ValidationError("targets", "at least one base URL", "empty");
    this.targets = list.map(baseUrl);
    this.timeoutMs = checkTimeout(options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    this.retry = options.retry ?? new RetryPolicy();
    this.headers = bearerHeaders(options.token);
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    const protocol = options.protocol ?? "connect";
    if (protocol !== "connect" && protocol !== "grpc-web") {
      throw new ValidationError("protocol", "connect or grpc-web", "unknown protocol");
    }
    const limits = { readMaxBytes: this.maxMessageBytes, writeMaxBytes: this.maxMessageBytes };
    const transport =
      options.transport
      ?? ((url: string) =>
        protocol === "connect"
          ? createConnectTransport({ baseUrl: url, useBinaryFormat: true, ...limits })
          : createGrpcWebTransport({ baseUrl: url, useBinaryFormat: true, ...limits }));
    this.clients = this.targets.map((url) => createClient(CollectionService, transport(url)));
  }

  /** The collection's verified card and limits; fails over and retries retryable failures, else SubmitError. */
  async getCollection(name: string): Promise<CollectionInfo> {
    return answeredCollection(await this.fetch(name), name);
  }

  /** A wide collection's verified card (src/wide-card.ts); ValidationError naming `card.format` for another. */
  async getWideCollection(name: string): Promise<WideCard> {
    return wideOf(await this.fetch(name), name);
  }

  /** GetCollection of `name`, failing over and retrying retryable failures (SubmitError when it fails for good). */
  private async fetch(name: string): Promise<Collection> {
    if (typeof name !== "string" || !name)
      throw new ValidationError("collection", "a non-empty collection name", "empty");
    const where = new Failover(this.clients.length, this.preferred);
    for (let attempts = 1; ; attempts++) {
      try {
        const message = await this.clients[where.current]!.getCollection(
          { collection: name },
          { timeoutMs: this.timeoutMs, headers: this.headers },
        );
        this.preferred = where.current;
        return message;
      } catch (err) {
        const { status, details } = webStatusOf(err);
        if (!isRetryable(status) || attempts >= this.retry.maxAttempts) {
          throw new SubmitError("GetCollection", status, details, attempts);
        }
        const wait = where.failed(this.retry);
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  /**
   * Validate, memoize-or-perturb, charge and deliver a device's rows (columns, or row objects).
   * A bad row (ValidationError), the budget (PrivacyBudgetExceeded) or a re-issued card (CardChanged):
   * nothing recorded, nothing sent. SubmitError when delivery fails for good: the ε stays charged,
   * and submitting the same rows again resends the same memoized reports at no further cost. A wide or
   * discovery collection's rows go to the device's view or round, charged under the collection
   * (src/collection-router.ts; `result.part`, `result.status`).
   */
  async submit(
    collection: string | CollectionInfo | WideCard,
    rows: Columns | readonly Row[],
    ledger: IndexedDbLedger,
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
    ledger: IndexedDbLedger,
    batchSize: number | undefined,
    charge?: Charge,
  ): Promise<SubmitResult> {
    const capacity = this.capacity(info, batchSize);
    const schema = info.card.schema;
    const encoded = encodeSubmission(schema, rows);
    const prepared = await prepareReports(info.card, encoded, ledger, { charge });
    const delivered = await this.deliver(info, prepared.reports, capacity);
    return {
      ...delivered,
      collection: charge?.collection ?? schema.name,
      ...(charge === undefined ? {} : { part: schema.name }),
      rows: prepared.rows,
      memoized: prepared.memoized,
      epsilonSpent: prepared.epsilonSpent,
      epsilonTotal: prepared.epsilonTotal,
      shuffled: false,
      status: "sent",
    };
  }

  /** Deliver reports that are already made (e.g. resend memoized ones), with no ledger; validated first. */
  async submitReports(info: CollectionInfo, reports: Reports, batchSize?: number): Promise<StreamResult> {
    validateReports(info.card.schema, reports);
    return this.deliver(info, reports, this.capacity(info, batchSize));
  }

  /** Reports per batch; a shuffled collection, which takes sealed reports only, is refused (naming `shuffler`). */
  private capacity(info: CollectionInfo, batchSize?: number): number {
    refuseInClear(
      info,
      "a collection that takes reports in clear: a shuffled one takes them only sealed, through a "
        + "shuffler, which WebClient has no path to (the Node Client's shuffler option has)",
    );
    return batchCapacity(info, this.maxMessageBytes, batchSize);
  }

  private async deliver(info: CollectionInfo, reports: Reports, capacity: number): Promise<StreamResult> {
    const batches = cutBatches(reports, capacity, info.card.schema.name, info.card.version);
    const where = new Failover(this.clients.length, this.preferred);
    try {
      return await deliverBatches(
        this.clients,
        batches,
        reports.privateCodes.length,
        { timeoutMs: this.timeoutMs, headers: this.headers, retry: this.retry },
        where,
      );
    } finally {
      this.preferred = where.current;
    }
  }
}
