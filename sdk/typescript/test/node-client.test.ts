/**
 * The Node client against a real aggregator replica (`ldpsynth aggregator serve` from the repository's
 * .venv, on 127.0.0.1, stopped by its pid): GetCollection, SubmitReports through the ledger, duplicates
 * when the same ids are sent again, and the server's statuses as SubmitError status names. Skipped,
 * saying why, where the Python environment is missing (`make env` creates it; `make test-ts` does).
 */
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { MechanismCard } from "../src/card.js";
import { CollectionService } from "../src/gen/ldpsynth/v1/collection_pb.js";
import { Client } from "../src/node/client.js";
import { prepareReports } from "../src/node/device.js";
import { FileLedger } from "../src/node/ledger.js";
import { RetryPolicy } from "../src/retry.js";
import { streamReports, SubmitError } from "../src/node/streamer.js";
import type { Reports } from "../src/reports.js";
import { encodeRows, type Row } from "../src/rows.js";
import { NO_REPLICA, startReplica, type Replica } from "./replica.js";

const DEVICE = "tok-device-1-0123456789abcdef";
const DEVICE2 = "tok-device-2-0123456789abcdef";
const ANALYST = "tok-analyst-fedcba9876543210";
const DEMO = {
  name: "demo",
  epsilon: 1.0,
  attributes: [
    { name: "region", type: "categorical", values: ["north", "south"], public: true },
    { name: "age", type: "integer", min: 18, max: 20 },
    { name: "smoker", type: "binary" },
    { name: "score", type: "continuous", lo: 0.0, hi: 1.0, bits: 2 },
  ],
};
const RATINGS = { name: "ratings", epsilon: 1.0, attributes: [{ name: "rating", type: "integer", min: 1, max: 5 }] };

/** Every distinct demo row: 2 regions × 3 ages × 2 × 4 buckets = 48. */
const ALL_ROWS: Row[] = ["north", "south"].flatMap((region) =>
  [18, 19, 20].flatMap((age) =>
    [0, 1].flatMap((smoker) => [0, 0.25, 0.5, 0.75].map((score) => ({ region, age, smoker, score }))),
  ),
);

function statusOf(status: string, method?: string): (err: unknown) => boolean {
  return (err) =>
    err instanceof SubmitError && err.status === status && (method === undefined || err.method === method);
}

describe("against a real aggregator", { skip: NO_REPLICA }, () => {
  const dir = mkdtempSync(join(tmpdir(), "ldpsynth-ts-e2e-"));
  let server: Replica | undefined;
  let address = "";
  const ledger = (budget?: number): FileLedger =>
    new FileLedger(join(mkdtempSync(join(dir, "device-")), "ledger.json"), budget === undefined ? {} : { budget });
  const clients: Client[] = [];
  const client = (token?: string): Client => {
    const made = new Client(address, {
      ...(token === undefined ? {} : { token }),
      retry: new RetryPolicy({ maxAttempts: 3 }),
    });
    clients.push(made);
    return made;
  };

  before(async () => {
    writeFileSync(join(dir, "demo.json"), JSON.stringify(DEMO));
    writeFileSync(join(dir, "ratings.json"), JSON.stringify(RATINGS));
    writeFileSync(
      join(dir, "tokens.json"),
      JSON.stringify({
        clients: [
          { id: "device-1", token: DEVICE, collections: "*", roles: ["submit"] },
          { id: "device-2", token: DEVICE2, collections: "*", roles: ["submit"] },
          { id: "analyst", token: ANALYST, collections: ["demo"], roles: ["query"] },
        ],
      }),
    );
    chmodSync(join(dir, "tokens.json"), 0o600);
    server = await startReplica([
      "--data-dir",
      join(dir, "data"),
      "--collection",
      join(dir, "demo.json"),
      "--collection",
      join(dir, "ratings.json"),
      "--shards",
      "1",
      "--tokens",
      join(dir, "tokens.json"),
      "--max-rows-per-client",
      "40",
    ]);
    address = server.address;
  });

  after(async () => {
    for (const made of clients) made.close();
    assert.equal(await server?.stop(), 0, "the server stops cleanly on SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  });

  test("GetCollection: the card verifies and the limits are read", async () => {
    const info = await client(DEVICE).getCollection("demo");
    assert.equal(info.card.schema.name, "demo");
    assert.equal(info.card.domainSize, 24n);
    assert.ok(info.card instanceof MechanismCard);
    assert.equal(info.card.keepWeight, 469186693326110464n); // contract §12
    assert.equal(info.limits.maxRowsPerClient, 40n);
    assert.equal(info.limits.maxBatchReports, 65536);
  });

  test("GetCollection statuses: UNAUTHENTICATED, FAILED_PRECONDITION, PERMISSION_DENIED (final, one attempt)", async () => {
    await assert.rejects(client().getCollection("demo"), statusOf("UNAUTHENTICATED", "GetCollection"));
    await assert.rejects(client("tok-unknown-0000000000000000").getCollection("demo"), statusOf("UNAUTHENTICATED"));
    await assert.rejects(
      client(DEVICE).getCollection("nope"),
      (err) => statusOf("FAILED_PRECONDITION")(err) && (err as SubmitError).attempts === 1,
    );
    await assert.rejects(client(ANALYST).getCollection("ratings"), statusOf("PERMISSION_DENIED"));
  });

  test("submit: new rows are acknowledged; the same rows again are memoized and counted as duplicates", async () => {
    const device = client(DEVICE);
    const book = ledger();
    const rows = [ALL_ROWS[0]!, ALL_ROWS[1]!, ALL_ROWS[0]!, ALL_ROWS[30]!];
    const first = await device.submit("demo", rows, book, 2);
    assert.deepEqual(
      [first.rows, first.sent, first.acknowledged, first.duplicates, first.memoized, first.batches],
      [4, 3, 3, 0, 1, 2],
    );
    const info = await device.getCollection("demo");
    assert.equal(first.epsilonSpent, 3 * info.card.epsilon);
    const again = await device.submit(info, rows, book);
    assert.deepEqual(
      [again.sent, again.acknowledged, again.duplicates, again.memoized, again.epsilonSpent],
      [3, 0, 3, 4, 0],
    );
    assert.equal(book.reports("demo"), 3);
  });

  test("resending the same reports (a lost acknowledgement) stores nothing twice", async () => {
    const device = client(DEVICE);
    const info = await device.getCollection("demo");
    const prepared = prepareReports(info.card, encodeRows(info.card.schema, ALL_ROWS.slice(10, 16)), ledger());
    const sent = await device.submitReports(info, prepared.reports, 4);
    assert.deepEqual([sent.acknowledged, sent.duplicates, sent.batches], [6, 0, 2]);
    const resent = await device.submitReports(info, prepared.reports, 5);
    assert.deepEqual([resent.acknowledged, resent.duplicates], [0, 6]);
    // The same id twice in one batch: the first is stored, the second is a duplicate.
    const id = globalThis.crypto.getRandomValues(new Uint8Array(16));
    const twice: Reports = {
      reportIds: new Uint8Array([...id, ...id]),
      privateCodes: [0n, 4n],
      publicCodes: [[0n, 0n]],
    };
    const both = await device.submitReports(info, twice);
    assert.deepEqual([both.acknowledged, both.duplicates], [1, 1]);
  });

  test("server statuses of a stream are final and named: PERMISSION_DENIED, INVALID_ARGUMENT, FAILED_PRECONDITION", async () => {
    await assert.rejects(
      client(ANALYST).submit("demo", [ALL_ROWS[2]!], ledger()),
      statusOf("PERMISSION_DENIED", "SubmitReports"),
    );
    const raw = createClient(CollectionService, createGrpcTransport({ baseUrl: `http://${address}` }));
    const options = {
      collection: "demo",
      mechanismVersion: "E/1",
      capacity: 10,
      timeoutMs: 30_000,
      headers: { authorization: `Bearer ${DEVICE}` },
      retry: new RetryPolicy({ maxAttempts: 3 }),
    };
    const report = (code: bigint): Reports => ({
      reportIds: globalThis.crypto.getRandomValues(new Uint8Array(16)),
      privateCodes: [code],
      publicCodes: [[0n]],
    });
    await assert.rejects(
      streamReports(raw, report(24n), options),
      (err) =>
        statusOf("INVALID_ARGUMENT")(err)
        && (err as SubmitError).attempts === 1
        && (err as SubmitError).acknowledged === 0,
    );
    await assert.rejects(
      streamReports(raw, report(3n), { ...options, mechanismVersion: "E/2" }),
      statusOf("FAILED_PRECONDITION"),
    );
    await assert.rejects(
      streamReports(raw, report(3n), { ...options, collection: "nope" }),
      statusOf("FAILED_PRECONDITION"),
    );
  });

  test("the server's quota: a batch over max_rows_per_client is RESOURCE_EXHAUSTED and stores nothing", async () => {
    const device = client(DEVICE2);
    const book = ledger(100);
    const rows = ALL_ROWS.slice(0, 41);
    await assert.rejects(
      device.submit("demo", rows, book),
      (err) => statusOf("RESOURCE_EXHAUSTED", "SubmitReports")(err) && (err as SubmitError).acknowledged === 0,
    );
    // The ledger charged the 41 before sending; 40 of them go through now, memoized, at no new cost.
    const retried = await device.submit("demo", rows.slice(0, 40), book);
    assert.deepEqual([retried.acknowledged, retried.memoized, retried.epsilonSpent], [40, 40, 0]);
  });
});
