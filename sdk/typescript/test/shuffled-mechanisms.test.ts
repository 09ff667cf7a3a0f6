/**
 * Shuffled numeric (HM) and frequency oracle (OLH, OUE) collections from the Node client through a real
 * Python shuffler (`ldpsynth shuffler serve`) to a real replica (`ldpsynth aggregator serve`), on 127.0.0.1 and
 * stopped by their pids (test/replica.ts). Each device verifies the card (its shuffle block states FMT21's clone
 * bound), seals its reports as the reference lays them out (a number in 8 bytes, OUE's bit set in ⌈|D|/8⌉), and
 * its ledger records the collection's promise with the same terms as E's; the replica stores exactly the reports
 * charged, and answers
 * the mean (HM) and the marginals (OLH, OUE) within their stated standard errors. Skipped where the Python
 * environment is missing.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createAsyncIterable } from "@connectrpc/connect/protocol";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { shuffleBound } from "../src/card.js";
import { EstimateRequestSchema, QueryService } from "../src/gen/ldpsynth/v1/query_pb.js";
import { NumericCard } from "../src/numeric-card.js";
import { OracleCard } from "../src/oracle-card.js";
import { Client } from "../src/node/client.js";
import { prepareReports } from "../src/node/device.js";
import { FileLedger } from "../src/node/ledger.js";
import type { Columns } from "../src/rows.js";
import { encodeColumns } from "../src/rows.js";
import {
  countsOf,
  NO_REPLICA,
  startReplica,
  startServer,
  storedCounts,
  storedOracleReports,
  type Replica,
  type Server,
} from "./replica.js";

/** min_batch 20 (shuffler --threshold 20); F defaults to rows_per_device = 1; no public attribute (one pool key). */
const SHUFFLE = { delta: 1e-6, min_batch: 20, shuffler: "independent" };
const HOURS = {
  name: "hours",
  epsilon: 2.0,
  attributes: [{ name: "hours", type: "numeric", range: [0, 10], mechanism: "HM" }],
  shuffle: SHUFFLE,
};
/** Shuffled oracle collections over 100 values: OLH (a number sealed in 8 bytes) and OUE (its 13-byte bit set). */
const ORACLES = (["OLH", "OUE"] as const).map((mechanism) => ({
  name: `choice-${mechanism.toLowerCase()}`,
  epsilon: 2.0,
  mechanism,
  attributes: [{ name: "choice", type: "integer", min: 0, max: 99 }],
  shuffle: SHUFFLE,
}));
const DEVICES = 4;
/** Rows per device: each submission alone fills a pool (50 >= 20), so no pool waits on another device. */
const PER_DEVICE = 50;
/** |estimate − truth| <= Z standard errors: α = 2·(1 − Φ(5)) ≈ 5.7e-7 per answer, 201 answers in all (α ≈ 1.2e-4). */
const Z = 5;

/** Device i's hours: distinct values in [0, 10] (mean of all 200: 6.3). */
const hoursOf = (device: number): number[] =>
  Array.from({ length: PER_DEVICE }, (_, j) => 2.5 + 7.5 * ((device * PER_DEVICE + j) / (DEVICES * PER_DEVICE)) ** 0.5);
/** Device i's choices: 0, ..., 49 (distinct rows, one report each): a count of 4 in the first half, 0 in the second. */
const choicesOf = (): bigint[] => Array.from({ length: PER_DEVICE }, (_, j) => BigInt(j));

/**
 * The answers of a JSON query batch: estimate and std_error per answer (QueryService.Estimate, over gRPC); the
 * first page's guarantees must name FMT21's clone bound.
 */
async function estimate(address: string, collection: string, queries: object[]): Promise<[number, number][]> {
  const client = createClient(QueryService, createGrpcTransport({ baseUrl: `http://${address}` }));
  const requests = createAsyncIterable([
    create(EstimateRequestSchema, { collection, queries: { case: "queriesJson", value: JSON.stringify(queries) } }),
  ]);
  const floats = (bytes: Uint8Array): number[] => {
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return Array.from({ length: bytes.byteLength / 8 }, (_, i) => view.getFloat64(8 * i, true));
  };
  const out: [number, number][] = [];
  let bound: string | undefined;
  for await (const page of client.estimate(requests, { timeoutMs: 60_000 })) {
    const [est, se] = [floats(page.estimate), floats(page.stdError)];
    est.forEach((e, i) => out.push([e, se[i]!]));
    bound ??= page.guarantees?.centralBound;
  }
  assert.equal(bound, "fmt21-numerical", "the answers' guarantees name the clone bound");
  return out;
}

describe("shuffled HM, OLH and OUE collections through a real shuffler", { skip: NO_REPLICA }, () => {
  const dir = mkdtempSync(join(tmpdir(), "ldpsynth-ts-shuffled-mechanisms-"));
  let replica: Replica | undefined;
  let shuffler: Server | undefined;
  const clients: Client[] = [];
  const client = (): Client => {
    const made = new Client(replica!.address, { shuffler: { target: shuffler!.listening.address } });
    clients.push(made);
    return made;
  };
  const ledger = (): FileLedger =>
    new FileLedger(join(mkdtempSync(join(dir, "device-")), "ledger.json"), { budget: 1000 });

  before(async () => {
    writeFileSync(join(dir, "hours.json"), JSON.stringify(HOURS));
    for (const c of ORACLES) writeFileSync(join(dir, `${c.name}.json`), JSON.stringify(c));
    replica = await startReplica([
      "--data-dir",
      join(dir, "data"),
      "--collection",
      join(dir, "hours.json"),
      ...ORACLES.flatMap((c) => ["--collection", join(dir, `${c.name}.json`)]),
      "--shards",
      "1",
    ]);
    shuffler = await startServer([
      "shuffler",
      "serve",
      "--listen",
      "127.0.0.1:0",
      "--aggregator",
      replica.address,
      "--threshold",
      "20",
      "--max-wait",
      "60",
      "--grace",
      "1",
      "--anonymous-devices",
      "--max-reports-per-device",
      "0",
    ]);
  });

  after(async () => {
    for (const made of clients) made.close();
    assert.equal(await shuffler?.stop(), 0, "the shuffler stops cleanly on SIGTERM");
    assert.equal(await replica?.stop(), 0, "the replica stops cleanly on SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  });

  /** Every device submits its rows through the shuffler; each result is checked, and the ledgers returned. */
  async function submitAll(collection: string, rowsOf: (device: number) => Columns): Promise<FileLedger[]> {
    const info = await client().getCollection(collection);
    const books = Array.from({ length: DEVICES }, ledger);
    const results = await Promise.all(books.map((book, i) => client().submit(info, rowsOf(i), book)));
    for (const r of results) {
      assert.deepEqual([r.rows, r.acknowledged, r.memoized, r.shuffled], [PER_DEVICE, PER_DEVICE, 0, true]);
      assert.ok(Math.abs(r.epsilonSpent - PER_DEVICE * info.card.epsilon) < 1e-9, "ε charged per new report");
      // The promise, with E's terms: min_batch 20, F = rows_per_device = 1, m = this device's 50 reports.
      assert.deepEqual(r.central, {
        delta: 1e-6,
        minBatch: 20,
        assumeInjected: 1,
        rowsPerDevice: PER_DEVICE,
        centralEpsilon: null,
        centralDelta: null,
        operator: true,
      });
    }
    return books;
  }

  test("HM: the clone bound's card, every charged report stored once, the mean within its error", async () => {
    const info = await client().getCollection("hours");
    assert.ok(info.card instanceof NumericCard);
    assert.equal(shuffleBound(info.card.schema.mechanism), "fmt21-numerical");
    const books = await submitAll("hours", (i) => ({ hours: hoursOf(i) }));
    const expected = new Map<string, number>();
    books.forEach((book, i) => {
      const memo = prepareReports(info.card, encodeColumns(info.card.schema, { hours: hoursOf(i) }), book, {
        sealed: true,
      });
      assert.equal(memo.memoized, PER_DEVICE);
      countsOf(memo.reports, expected);
    });
    assert.deepEqual(await storedCounts(replica!.address, "hours"), expected);
    const all = Array.from({ length: DEVICES }, (_, i) => hoursOf(i)).flat();
    const truth = all.reduce((s, x) => s + x, 0) / all.length;
    const [[mean, se]] = (await estimate(replica!.address, "hours", [{ kind: "mean", attribute: "hours" }])) as [
      [number, number],
    ];
    assert.ok(se > 0 && se < 1, `a standard error of ${se}`);
    assert.ok(Math.abs(mean - truth) <= Z * se, `mean ${mean} vs ${truth} (SE ${se})`);
  });

  for (const { name, mechanism } of ORACLES) {
    test(`${mechanism}: the clone bound's card, every charged report stored once, the marginal within its errors`, async () => {
      const info = await client().getCollection(name);
      assert.ok(info.card instanceof OracleCard);
      assert.equal(info.card.mechanism, mechanism);
      const books = await submitAll(name, () => ({ choice: choicesOf() }));
      const sent: bigint[] = [];
      books.forEach((book) => {
        const memo = prepareReports(info.card, encodeColumns(info.card.schema, { choice: choicesOf() }), book, {
          sealed: true,
        });
        sent.push(...memo.reports.privateCodes);
      });
      const stored = await storedOracleReports(replica!.address, name, info.card.oracle);
      const sort = (xs: bigint[]): bigint[] => [...xs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      assert.deepEqual(sort(stored), sort(sent));
      const truth = Array.from({ length: 100 }, (_, v) => (v < PER_DEVICE ? DEVICES : 0));
      const answers = await estimate(replica!.address, name, [{ kind: "marginal", attributes: ["choice"] }]);
      assert.equal(answers.length, truth.length);
      answers.forEach(([count, se], v) => {
        assert.ok(se > 0, `cell ${v}: a standard error of ${se}`);
        assert.ok(Math.abs(count - truth[v]!) <= Z * se, `cell ${v}: ${count} vs ${truth[v]} (SE ${se})`);
      });
    });
  }
});
