/**
 * The web client (`@ldpsynth/sdk/web`'s WebClient) from Node against a real replica's web port: the
 * official Connect clients — connect-web over `fetch` (HTTP/1.1, Connect and gRPC-Web) and
 * connect-node (HTTP/2) — for GetCollection and unary SubmitBatch, duplicates when the same ids are
 * sent again, every bad input's status, a lost acknowledgement, failover to a second target, and a
 * replica killed and restarted under a submission. The stored counts are read back with Export.
 */
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import {
  createConnectTransport as webConnectTransport,
  createGrpcWebTransport as webGrpcWebTransport,
} from "@connectrpc/connect-web";
import { ValidationError } from "../src/errors.js";
import { encodeRows, type Row } from "../src/rows.js";
import { prepareReports } from "../src/node/device.js";
import { FileLedger } from "../src/node/ledger.js";
import { RetryPolicy } from "../src/retry.js";
import type { CollectionInfo, Reports } from "../src/reports.js";
import { SubmitError } from "../src/submit-error.js";
import { WebClient, type WebClientOptions } from "../src/web/client.js";
import type { IndexedDbLedger } from "../src/web/ledger.js";
import { MechanismCard } from "../src/card.js";
import { cases, str, vectors } from "./vectors.js";
import { countsOf, NO_REPLICA, startReplica, storedCounts, type Replica } from "./replica.js";

const DEVICE = "tok-web-device-0123456789abcdef";
const ANALYST = "tok-web-analyst-fedcba9876543210";
const GRAPH_ONLY = "tok-web-graph-0000000000000000";
const DEMO = {
  name: "demo",
  epsilon: 1.0,
  attributes: [
    { name: "region", type: "categorical", values: ["north", "south"], public: true },
    { name: "age", type: "integer", min: 18, max: 20 },
    { name: "smoker", type: "binary" },
  ],
};
const GRAPH = { name: "graph", epsilon: 1.0, attributes: [{ name: "edge", type: "binary" }] };
const ROWS: Row[] = ["north", "south"].flatMap((region) =>
  [18, 19, 20].flatMap((age) => [0, 1].map((smoker) => ({ region, age, smoker }))),
);
const FAST = new RetryPolicy({ maxAttempts: 3, initialBackoffMs: 10, maxBackoffMs: 50 });

function statusOf(status: string, attempts?: number): (err: unknown) => boolean {
  return (err) =>
    err instanceof SubmitError
    && err.status === status
    && err.method !== "SubmitReports"
    && (attempts === undefined || err.attempts === attempts);
}

/** A free port on 127.0.0.1 nobody listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

test("a shuffler option is refused, never ignored: the web client has no sealed path", () => {
  const options = { shuffler: { target: "127.0.0.1:7300" } } as WebClientOptions;
  assert.throws(
    () => new WebClient("http://127.0.0.1:1", options),
    (err) => err instanceof ValidationError && err.field === "shuffler",
  );
});

test("a shuffled collection is refused naming `shuffler` before the ledger is touched: it takes no report in clear", async () => {
  const card = MechanismCard.parse(str(cases(vectors("cards.json"), "shuffled")[0]!["card_json"]));
  const info: CollectionInfo = { card, limits: { maxRowsPerClient: 0n, maxBatchReports: 0, maxMessageBytes: 0 } };
  const untouched = new Proxy({}, { get: () => assert.fail("the ledger was touched") }) as IndexedDbLedger;
  const web = new WebClient("http://127.0.0.1:1");
  const refused = (err: unknown): boolean =>
    err instanceof ValidationError && err.field === "shuffler" && /is shuffled/.test(err.message);
  await assert.rejects(web.submit(info, [{ movie: 3, rating: 1 }], untouched), refused);
  await assert.rejects(
    web.submitReports(info, { reportIds: new Uint8Array(16), privateCodes: [0n], publicCodes: [[2n]] }),
    refused,
  );
});

describe("WebClient against a real replica's web port", { skip: NO_REPLICA }, () => {
  const dir = mkdtempSync(join(tmpdir(), "ldpsynth-web-e2e-"));
  let replica: Replica;
  const ledger = (): FileLedger =>
    new FileLedger(join(mkdtempSync(join(dir, "device-")), "ledger.json"), { budget: 100 });
  const client = (options: WebClientOptions = {}, targets?: string[]): WebClient =>
    new WebClient(targets ?? [replica.webUrl], { token: DEVICE, retry: FAST, ...options });
  const sent = new Map<string, number>();

  before(async () => {
    writeFileSync(join(dir, "demo.json"), JSON.stringify(DEMO));
    writeFileSync(join(dir, "graph.json"), JSON.stringify(GRAPH));
    writeFileSync(
      join(dir, "tokens.json"),
      JSON.stringify({
        clients: [
          { id: "device", token: DEVICE, collections: "*", roles: ["submit"] },
          { id: "analyst", token: ANALYST, collections: "*", roles: ["query"] },
          { id: "graph-only", token: GRAPH_ONLY, collections: ["graph"], roles: ["submit"] },
        ],
      }),
    );
    chmodSync(join(dir, "tokens.json"), 0o600);
    replica = await startReplica([
      "--data-dir",
      join(dir, "data"),
      "--collection",
      join(dir, "demo.json"),
      "--collection",
      join(dir, "graph.json"),
      "--shards",
      "2",
      "--tokens",
      join(dir, "tokens.json"),
      "--max-rows-per-client",
      "60",
    ]);
  });

  after(async () => {
    assert.equal(await replica?.stop(), 0, "the server stops cleanly on SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  });

  const transports: [string, (url: string) => Transport][] = [
    ["connect-web, Connect, HTTP/1.1", (url) => createWebConnect(url)],
    ["connect-web, gRPC-Web, HTTP/1.1", (url) => createWebGrpcWeb(url)],
    [
      "connect-node, Connect, HTTP/2",
      (url) => createConnectTransport({ baseUrl: url, httpVersion: "2", useBinaryFormat: true }),
    ],
    ["connect-node, gRPC-Web, HTTP/2", (url) => createGrpcWebTransport({ baseUrl: url, httpVersion: "2" })],
    ["connect-node, Connect JSON, HTTP/1.1", (url) => createConnectTransport({ baseUrl: url, httpVersion: "1.1" })],
  ];
  for (const [name, transport] of transports) {
    test(`${name}: GetCollection, SubmitBatch, the same reports again are duplicates`, async () => {
      const web = client({ transport });
      const info = await web.getCollection("demo");
      assert.equal(info.card.domainSize, 6n);
      assert.equal(info.limits.maxRowsPerClient, 60n);
      const prepared = prepareReports(info.card, encodeRows(info.card.schema, ROWS.slice(0, 5)), ledger());
      const first = await web.submitReports(info, prepared.reports, 2);
      assert.deepEqual(
        [first.sent, first.acknowledged, first.duplicates, first.batches, first.retries],
        [5, 5, 0, 3, 0],
      );
      const again = await web.submitReports(info, prepared.reports);
      assert.deepEqual([again.acknowledged, again.duplicates, again.batches], [0, 5, 1]);
      countsOf(prepared.reports, sent);
    });
  }

  test("the same id twice in one batch: the first is stored, the second is a duplicate", async () => {
    const web = client();
    const info = await web.getCollection("demo");
    const id = globalThis.crypto.getRandomValues(new Uint8Array(16));
    const twice: Reports = {
      reportIds: new Uint8Array([...id, ...id]),
      privateCodes: [0n, 4n],
      publicCodes: [[0n, 0n]],
    };
    const both = await web.submitReports(info, twice);
    assert.deepEqual([both.acknowledged, both.duplicates], [1, 1]);
    countsOf({ privateCodes: [0n], publicCodes: [[0n]] }, sent);
  });

  test(
    "statuses are final and named, one attempt: UNAUTHENTICATED, PERMISSION_DENIED, FAILED_PRECONDITION, "
      + "INVALID_ARGUMENT",
    async () => {
      await assert.rejects(
        client({ token: undefined as unknown as string }).getCollection("demo"),
        statusOf("UNAUTHENTICATED", 1),
      );
      await assert.rejects(
        client({ token: "tok-unknown-000000000000" }).getCollection("demo"),
        statusOf("UNAUTHENTICATED"),
      );
      await assert.rejects(client().getCollection("nope"), statusOf("FAILED_PRECONDITION", 1));
      const info = await client().getCollection("demo");
      const report = (code: bigint, pub = 0n): Reports => ({
        reportIds: globalThis.crypto.getRandomValues(new Uint8Array(16)),
        privateCodes: [code],
        publicCodes: [[pub]],
      });
      await assert.rejects(
        client({ token: GRAPH_ONLY }).submitReports(info, report(1n)),
        statusOf("PERMISSION_DENIED", 1),
      );
      await assert.rejects(
        client({ token: ANALYST }).submitReports(info, report(1n)),
        statusOf("PERMISSION_DENIED", 1),
      );
      // A report the SDK would refuse to build: through the raw client, as another implementation might send it.
      const { createClient } = await import("@connectrpc/connect");
      const { CollectionService } = await import("../src/gen/ldpsynth/v1/collection_pb.js");
      const { reportBatch } = await import("../src/reports.js");
      const raw = createClient(CollectionService, createWebConnect(replica.webUrl));
      const headers = { authorization: `Bearer ${DEVICE}` };
      const refused = async (batch: Parameters<typeof raw.submitBatch>[0], code: Code, words: string) => {
        await assert.rejects(
          raw.submitBatch(batch, { headers }),
          (err) => err instanceof ConnectError && err.code === code && err.rawMessage.includes(words),
        );
      };
      await refused(reportBatch(report(6n), "demo", "E/1", 0n), Code.InvalidArgument, "private_codes at position 0");
      await refused(reportBatch(report(1n, 2n), "demo", "E/1", 0n), Code.InvalidArgument, "public_codes[region]");
      await refused(reportBatch(report(1n), "demo", "E/0", 0n), Code.FailedPrecondition, "mechanism_version");
      await refused(reportBatch(report(1n), "nope", "E/1", 0n), Code.FailedPrecondition, "'nope' is not served");
      await refused(
        { ...reportBatch(report(1n), "demo", "E/1", 0n), reportIds: new Uint8Array(15) },
        Code.InvalidArgument,
        "report_ids",
      );
    },
  );

  test("a lost acknowledgement: the batch is sent again with the same ids and stored once", async () => {
    let lost = 1;
    const loseFirstAnswer: Interceptor = (next) => async (req) => {
      const answer = await next(req);
      if (req.method.name === "SubmitBatch" && lost-- > 0)
        throw new ConnectError("the answer was lost", Code.Unavailable);
      return answer;
    };
    const lossy = (url: string): Transport =>
      webConnectTransport({ baseUrl: url, useBinaryFormat: true, interceptors: [loseFirstAnswer] });
    const web = client({ transport: lossy });
    const info = await web.getCollection("demo");
    const prepared = prepareReports(info.card, encodeRows(info.card.schema, ROWS.slice(5, 12)), ledger());
    const result = await web.submitReports(info, prepared.reports, 4);
    assert.deepEqual([result.acknowledged, result.duplicates, result.batches, result.retries], [3, 4, 2, 1]);
    countsOf(prepared.reports, sent);
  });

  test("failover: a target that does not answer is skipped, the next one takes the batches", async () => {
    const dead = `http://127.0.0.1:${await closedPort()}`;
    const web = client({}, [dead, replica.webUrl]);
    const info = await web.getCollection("demo");
    const prepared = prepareReports(info.card, encodeRows(info.card.schema, ROWS.slice(0, 3)), ledger());
    const result = await web.submitReports(info, prepared.reports);
    assert.deepEqual([result.acknowledged, result.retries], [3, 0]); // the client stays on the target that answered
    countsOf(prepared.reports, sent);
    await assert.rejects(client({}, [dead]).getCollection("demo"), statusOf("UNAVAILABLE", 3));
  });

  test("the quota: a batch over max_rows_per_client is RESOURCE_EXHAUSTED and stores nothing", async () => {
    const web = client();
    const info = await web.getCollection("graph");
    const before = await storedCounts(replica.address, "graph", ANALYST);
    const many: Reports = {
      reportIds: globalThis.crypto.getRandomValues(new Uint8Array(16 * 61)),
      privateCodes: Array.from({ length: 61 }, () => 1n),
      publicCodes: [],
    };
    await assert.rejects(
      web.submitReports(info, many),
      (err) => statusOf("RESOURCE_EXHAUSTED", 1)(err) && (err as SubmitError).acknowledged === 0,
    );
    assert.deepEqual(await storedCounts(replica.address, "graph", ANALYST), before);
  });

  test("the stored counts are exactly the reports sent", async () => {
    assert.deepEqual(await storedCounts(replica.address, "demo", ANALYST), sent);
  });
});

describe("WebClient through a replica killed and restarted", { skip: NO_REPLICA }, () => {
  test("the unacknowledged batches are sent again, with the same ids, once the replica is back", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ldpsynth-web-kill-"));
    writeFileSync(join(dir, "demo.json"), JSON.stringify(DEMO));
    const args = ["--data-dir", join(dir, "data"), "--collection", join(dir, "demo.json"), "--shards", "1"];
    let replica = await startReplica(args);
    const port = new URL(replica.webUrl).port;
    try {
      const web = new WebClient(replica.webUrl, {
        retry: new RetryPolicy({ maxAttempts: 60, initialBackoffMs: 100, maxBackoffMs: 1000 }),
      });
      const info = await web.getCollection("demo");
      const prepared = prepareReports(
        info.card,
        encodeRows(info.card.schema, ROWS),
        new FileLedger(join(dir, "ledger.json"), { budget: 100 }),
      );
      const first = await web.submitReports(info, prepared.reports, 4);
      assert.equal(first.acknowledged, 12);
      await replica.kill();
      const resent = web.submitReports(info, prepared.reports, 4); // fails over and over while the replica is down
      replica = await startReplica([...args, "--web-port", port]);
      const result = await resent;
      assert.equal(result.acknowledged, 0);
      assert.equal(result.duplicates, 12);
      assert.ok(result.retries >= 1, `retries ${result.retries}`);
      assert.deepEqual(await storedCounts(replica.address, "demo"), countsOf(prepared.reports));
    } finally {
      assert.equal(await replica.stop(), 0);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** connect-web's own transports (over Node's `fetch`), as a browser uses them. */
function createWebConnect(url: string): Transport {
  return webConnectTransport({ baseUrl: url, useBinaryFormat: true });
}

function createWebGrpcWeb(url: string): Transport {
  return webGrpcWebTransport({ baseUrl: url, useBinaryFormat: true });
}
