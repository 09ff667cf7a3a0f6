/**
 * The Node client through a real shuffler: `ldpsynth aggregator serve` (a one-machine replica, which
 * makes its own sealing key) and `ldpsynth shuffler serve` in front of it, both on 127.0.0.1 and
 * stopped by their pids. Devices seal each report to the key the collection publishes and send
 * SealedBatches to the shuffler; the replica must store exactly the reports the devices charged,
 * once each, and a resubmission (memoized rows, sealed afresh) adds nothing. A pool that misses its
 * threshold is UNAVAILABLE, retried, and fails for good with SubmitError (nothing stored, ε charged);
 * a collection without `sealing` is refused before anything is charged. Skipped, saying why, where
 * the Python environment is missing.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { ValidationError } from "../src/errors.js";
import { Client } from "../src/node/client.js";
import { prepareReports } from "../src/node/device.js";
import { FileLedger } from "../src/node/ledger.js";
import { SubmitError } from "../src/node/streamer.js";
import type { CollectionInfo } from "../src/reports.js";
import { RetryPolicy } from "../src/retry.js";
import { encodeRows, type Row } from "../src/rows.js";
import { countsOf, NO_REPLICA, startReplica, startServer, storedCounts, type Replica, type Server } from "./replica.js";

/**
 * min_batch 20 and --threshold 20: a pool is released at t in [20, 25] reports. No public attribute
 * (one public key, 0): the replica releases (exports) a group of a shuffled collection only from
 * min_batch reports on. A device sends 13 reports (rows_per_device); the devices have no credentials
 * at the shuffler, which forwards them only with --anonymous-devices (and no per-device limit: they
 * all share one credential).
 */
const POLL = {
  name: "poll",
  epsilon: 2.0,
  attributes: [{ name: "score", type: "integer", min: 0, max: 19 }],
  shuffle: { delta: 1e-9, min_batch: 20, rows_per_device: 13, shuffler: "independent" },
};
/** 13 distinct rows per device: one device's call (13 < 20) never releases a pool, two (26 > 25) always do. */
const PER_DEVICE = 13;
const rowsOf = (device: number): Row[] =>
  Array.from({ length: PER_DEVICE }, (_, i) => ({ score: (device * 7 + i) % 20 }));

describe("the Node client through a real shuffler", { skip: NO_REPLICA }, () => {
  const dir = mkdtempSync(join(tmpdir(), "ldpsynth-ts-shuffler-"));
  let replica: Replica | undefined;
  let shuffler: Server | undefined;
  let impatient: Server | undefined;
  const clients: Client[] = [];
  const client = (through: Server, retry = new RetryPolicy({ maxAttempts: 3 })): Client => {
    const made = new Client(replica!.address, { retry, shuffler: { target: through.listening.address } });
    clients.push(made);
    return made;
  };
  /** A device's ledger, its budget room for two submissions of 13 new reports (the default, 10 × ε, holds 10). */
  const ledger = (): FileLedger =>
    new FileLedger(join(mkdtempSync(join(dir, "device-")), "ledger.json"), { budget: 100 });
  const devices = [0, 1, 2, 3].map(() => ({ ledger: undefined as FileLedger | undefined }));

  before(async () => {
    writeFileSync(join(dir, "poll.json"), JSON.stringify(POLL));
    replica = await startReplica([
      "--data-dir",
      join(dir, "data"),
      "--collection",
      join(dir, "poll.json"),
      "--shards",
      "1",
    ]);
    const serve = (maxWait: string): Promise<Server> =>
      startServer([
        "shuffler",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--aggregator",
        replica!.address,
        "--threshold",
        "20",
        "--max-wait",
        maxWait,
        "--grace",
        "1",
        "--anonymous-devices",
        "--max-reports-per-device",
        "0",
      ]);
    [shuffler, impatient] = await Promise.all([serve("30"), serve("1")]);
    devices.forEach((d) => (d.ledger = ledger()));
  });

  after(async () => {
    for (const made of clients) made.close();
    assert.equal(await shuffler?.stop(), 0, "the shuffler stops cleanly on SIGTERM");
    assert.equal(await impatient?.stop(), 0);
    assert.equal(await replica?.stop(), 0, "the replica stops cleanly on SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  });

  test("the shuffler option is checked: HOST:PORT, concurrency", () => {
    assert.throws(
      () => new Client("127.0.0.1:1", { shuffler: { target: "no-port" } }),
      (err) => err instanceof ValidationError && err.field === "shuffler.target",
    );
    assert.throws(
      () => new Client("127.0.0.1:1", { shuffler: { target: "127.0.0.1:2", concurrency: 0 } }),
      (err) => err instanceof ValidationError && err.field === "shuffler.concurrency",
    );
  });

  test("a collection without sealing is refused naming `sealing`, before anything is charged", async () => {
    const device = client(shuffler!);
    const { sealing: _published, ...clear }: CollectionInfo = await device.getCollection("poll");
    const book = ledger();
    await assert.rejects(
      device.submit(clear, rowsOf(0), book),
      (err) => err instanceof ValidationError && err.field === "sealing",
    );
    assert.equal(book.reports("poll"), 0);
  });

  test("four devices at once: every charged report stored exactly once; a resubmission adds nothing", async () => {
    const info = await client(shuffler!).getCollection("poll");
    const results = await Promise.all(devices.map((d, i) => client(shuffler!).submit(info, rowsOf(i), d.ledger!)));
    for (const r of results) {
      assert.deepEqual(
        [r.rows, r.sent, r.acknowledged, r.duplicates, r.memoized],
        [PER_DEVICE, PER_DEVICE, PER_DEVICE, 0, 0],
      );
      assert.ok(Math.abs(r.epsilonSpent - PER_DEVICE * info.card.epsilon) < 1e-9, "ε charged for every new report");
      // The promise: min_batch 20, F = rows_per_device = 13 by default, against the operator too (independent).
      assert.deepEqual(r.central, {
        delta: 1e-9,
        minBatch: 20,
        assumeInjected: 13,
        rowsPerDevice: 13,
        centralEpsilon: null,
        centralDelta: null,
        operator: true,
      });
    }
    // What each device sent: its memoized reports (the same ids and codes, charged once).
    const expected = new Map<string, number>();
    for (const [i, d] of devices.entries()) {
      const memo = prepareReports(info.card, encodeRows(info.card.schema, rowsOf(i)), d.ledger!, { sealed: true });
      assert.deepEqual([memo.memoized, memo.epsilonSpent], [PER_DEVICE, 0]);
      countsOf(memo.reports, expected);
    }
    assert.deepEqual(await storedCounts(replica!.address, "poll"), expected);

    const again = await Promise.all(devices.map((d, i) => client(shuffler!).submit("poll", rowsOf(i), d.ledger!)));
    for (const r of again) assert.deepEqual([r.acknowledged, r.memoized, r.epsilonSpent], [PER_DEVICE, PER_DEVICE, 0]);
    assert.deepEqual(await storedCounts(replica!.address, "poll"), expected);
  });

  test("a pool below its threshold is UNAVAILABLE, retried, then SubmitError; nothing stored, ε stays charged", async () => {
    const before = await storedCounts(replica!.address, "poll");
    const device = client(impatient!, new RetryPolicy({ maxAttempts: 2, initialBackoffMs: 10 }));
    const book = ledger();
    await assert.rejects(
      device.submit("poll", rowsOf(2), book),
      (err) =>
        err instanceof SubmitError
        && err.method === "SubmitSealed"
        && err.status === "UNAVAILABLE"
        && err.attempts === 2
        && err.acknowledged === 0,
    );
    assert.equal(book.reports("poll"), PER_DEVICE);
    assert.deepEqual(await storedCounts(replica!.address, "poll"), before);
  });
});
