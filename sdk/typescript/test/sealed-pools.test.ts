/**
 * The Node client's sealed path against an in-process shuffler (connect-node on 127.0.0.1) that keeps
 * every SealedBatch: a submission to a shuffled collection is cut into batches of one public key each,
 * whose `pool_key` is the key of every report in it (checked by opening each report with the vectors'
 * private key), the keys in order of first appearance, each key's reports in order, at most the
 * capacity per batch. The ledger records the collection's promise with the spend; a shuffled collection
 * without a shuffler, and rows reported in clear before through one, are refused before anything is charged.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, beforeEach, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { MechanismCard } from "../src/card.js";
import { ValidationError } from "../src/errors.js";
import { SealingSchema, type SealedBatch } from "../src/gen/ldpsynth/v1/collection_pb.js";
import { ShufflerService } from "../src/gen/ldpsynth/v1/shuffler_pb.js";
import {
  AEAD_ID,
  deriveKeyPair,
  KDF_ID,
  KEM_ID,
  keyScheduleContext,
  sealBase,
  type EphemeralKey,
} from "../src/hpke.js";
import type { JsonObject } from "../src/json.js";
import { decodeCollection } from "../src/collection.js";
import { Client } from "../src/node/client.js";
import { prepareReports } from "../src/node/device.js";
import { FileLedger } from "../src/node/ledger.js";
import type { CollectionInfo } from "../src/reports.js";
import { encodeRows } from "../src/rows.js";
import { sealedReportBytes, sealingInfo, SUITE_NAME } from "../src/sealing.js";
import { cases, fromHex, hex, str, vectors } from "./vectors.js";

const sealed = vectors("sealed.json");
const key = sealed["key"] as JsonObject;
/** A shuffled collection: movie (public, 1..1682) and rating (private); the shuffler independent. */
const card = MechanismCard.parse(
  str(cases(vectors("cards.json"), "shuffled").find((c) => c["id"] === "contract-example")!["card_json"]),
);
const schema = card.schema;
const WIDTH = sealedReportBytes(schema, card.version);
const info: CollectionInfo = {
  card,
  limits: { maxRowsPerClient: 0n, maxBatchReports: 0, maxMessageBytes: 0 },
  sealing: create(SealingSchema, {
    suite: SUITE_NAME,
    kemId: KEM_ID,
    kdfId: KDF_ID,
    aeadId: AEAD_ID,
    publicKey: fromHex(str(key["public_key"])),
    keyId: fromHex(str(key["key_id"])),
    sealedReportBytes: WIDTH,
  }),
};

/**
 * Open a sealed report with the recipient's key pair: RFC 9180 Decap computes X25519(skR, enc) over
 * enc || pkR, which is what sealBase computes with skR as the "ephemeral" key and enc as the recipient;
 * AES-GCM of zeros is its key stream, and sealing the plaintext found must give back ct and its tag.
 */
async function open(recipient: EphemeralKey, collection: string, report: Uint8Array): Promise<Uint8Array> {
  const enc = report.slice(0, 32);
  const ct = report.subarray(32);
  const n = ct.length - 16;
  const swapped = {
    bytes: recipient.publicKey,
    key: await globalThis.crypto.subtle.importKey("raw", enc, { name: "X25519" }, true, []),
  };
  const context = await keyScheduleContext(sealingInfo(collection));
  const decap = { privateKey: recipient.privateKey, publicKey: enc };
  const stream = (await sealBase(swapped, context, new Uint8Array(n), decap)).subarray(32, 32 + n);
  const plaintext = ct.subarray(0, n).map((b, i) => b ^ stream[i]!);
  assert.equal(hex((await sealBase(swapped, context, plaintext, decap)).subarray(32)), hex(ct), "the tag verifies");
  return plaintext;
}

const kept: SealedBatch[] = [];

function routes(router: ConnectRouter): void {
  router.service(ShufflerService, {
    submitSealed(batch) {
      kept.push(batch);
      return { sequence: batch.sequence, accepted: batch.reports.length / WIDTH };
    },
  });
}

const server = http2.createServer(connectNodeAdapter({ routes }));
const sessions = new Set<http2.ServerHttp2Session>();
server.on("session", (session) => sessions.add(session));
const scratch = mkdtempSync(join(tmpdir(), "ldpsynth-pools-"));
const clients: Client[] = [];
let target = "";

before(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  target = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => {
  for (const client of clients) client.close();
  for (const session of sessions) session.destroy();
  server.close();
  rmSync(scratch, { recursive: true, force: true });
});

beforeEach(() => {
  kept.length = 0;
});

/** A client whose aggregator is never called (the collection is given), through the fake shuffler or in clear. */
function client(sealedPath = true): Client {
  const made = new Client("127.0.0.1:1", sealedPath ? { shuffler: { target, concurrency: 1 } } : {});
  clients.push(made);
  return made;
}

function ledger(): FileLedger {
  return new FileLedger(join(mkdtempSync(join(scratch, "device-")), "ledger.json"), { budget: 1000 });
}

/** Movies 3, 7, 3, 9, 7, 3, 3 (public keys 2, 6, 2, 8, 6, 2, 2), every row distinct. */
const ROWS = [
  [3, 1],
  [7, 2],
  [3, 3],
  [9, 4],
  [7, 5],
  [3, 5],
  [3, 2],
].map(([movie, rating]) => ({ movie, rating }));

test("one SealedBatch per public key, pool_key in clear: the key of every report in it, opened", async () => {
  const recipient = await deriveKeyPair(fromHex(str(key["ikm"])));
  assert.equal(hex(recipient.publicKey), key["public_key"]);
  const book = ledger();
  const result = await client().submit(info, ROWS, book, 2);
  assert.deepEqual([result.sent, result.acknowledged, result.batches, result.shuffled], [7, 7, 4, true]);
  // The promise, recorded with the spend: min_batch 10000, F = rows_per_device = 1, m = the device's 7 reports.
  const promise = {
    delta: 1e-9,
    minBatch: 10000,
    assumeInjected: 1,
    rowsPerDevice: 7,
    centralEpsilon: null,
    centralDelta: null,
    operator: true,
  };
  assert.deepEqual(result.central, promise);
  assert.deepEqual(book.guarantees(schema.name), promise);
  const ordered = [...kept].sort((a, b) => Number(a.sequence - b.sequence));
  assert.deepEqual(
    ordered.map((b) => [b.sequence, b.poolKey, b.reports.length / WIDTH]),
    [
      [0n, 2n, 2],
      [1n, 2n, 2],
      [2n, 6n, 2],
      [3n, 8n, 1],
    ],
  );
  const movies: bigint[] = [];
  for (const batch of ordered) {
    assert.equal(batch.collection, schema.name);
    assert.equal(hex(batch.keyId), key["key_id"]);
    for (let at = 0; at < batch.reports.length; at += WIDTH) {
      const plaintext = await open(recipient, schema.name, batch.reports.subarray(at, at + WIDTH));
      const view = new DataView(plaintext.buffer, plaintext.byteOffset, plaintext.byteLength);
      const publicCode = view.getBigUint64(plaintext.length - 8, true); // the one public attribute, last
      assert.deepEqual(schema.foldPublicCodes([[publicCode]], 1), [batch.poolKey]);
      movies.push(publicCode + 1n);
    }
  }
  assert.deepEqual(movies, [3n, 3n, 3n, 3n, 7n, 7n, 9n]); // each key's reports in their order
});

test("a shuffled collection without a shuffler is refused naming `shuffler`, before anything is charged", async () => {
  const book = ledger();
  await assert.rejects(
    client(false).submit(info, ROWS, book),
    (err) => err instanceof ValidationError && err.field === "shuffler" && /shuffled/.test(err.message),
  );
  assert.equal(book.reports(schema.name), 0);
  assert.equal(book.spent(schema.name), 0);
  await assert.rejects(
    client(false).submitReports(info, { reportIds: new Uint8Array(16), privateCodes: [0n], publicCodes: [[0n]] }),
    (err) => err instanceof ValidationError && err.field === "shuffler",
  );
  assert.equal(kept.length, 0);
});

test("rows reported in clear are refused through a shuffler naming `rows`: nothing charged, nothing sent", async () => {
  const demo = decodeCollection(fromHex(str((sealed["collection"] as JsonObject)["hex"]))); // not shuffled, sealing
  const book = ledger();
  const rows = [{ region: "south", age: 18, smoker: 0, score: 0.5 }]; // south: region code 1, the public key 1
  prepareReports(demo.card, encodeRows(demo.card.schema, rows), book); // sent in clear (by another client)
  await assert.rejects(
    client().submit(demo, [...rows, { ...rows[0]!, age: 19 }], book),
    (err) => err instanceof ValidationError && err.field === "rows" && /first sent in clear/.test(err.message),
  );
  assert.deepEqual([book.reports("demo"), kept.length], [1, 0]);
  const through = await client().submit(demo, [{ ...rows[0]!, age: 19 }], book); // a new row goes sealed
  assert.deepEqual(
    [through.acknowledged, through.shuffled, through.central, kept[0]!.poolKey],
    [1, true, undefined, 1n],
  );
});
