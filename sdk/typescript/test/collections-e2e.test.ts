/**
 * The device paths of numeric, frequency oracle (OUE, OLH, HR), wide and discovery collections against a real
 * Python aggregator (test/replica.ts): the
 * Node client fetches and verifies the card the server serves, perturbs on the device, charges its ledger and
 * the server stores exactly the reports sent.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { ValidationError } from "../src/errors.js";
import { NumericCard } from "../src/numeric-card.js";
import { OracleCard } from "../src/oracle-card.js";
import { Client } from "../src/node/client.js";
import { FileLedger } from "../src/node/ledger.js";
import type { Columns } from "../src/rows.js";
import { NO_REPLICA, startReplica, storedCounts, storedOracleReports, type Replica } from "./replica.js";

const INCOME = {
  name: "income",
  epsilon: 2.0,
  attributes: [
    { name: "region", type: "categorical", values: ["north", "south"], public: true },
    { name: "income", type: "numeric", range: [0, 200000], mechanism: "HM" },
  ],
};
const WAIT = {
  name: "wait",
  epsilon: 1.0,
  attributes: [{ name: "minutes", type: "numeric", range: [0, 60], mechanism: "SW" }],
};
/** SW on declared levels (issue 42): ratings 1 … 5 every 1, and a decimal step (0.1 on [0, 25.5]: 256 levels). */
const RATINGS = {
  name: "ratings",
  epsilon: 1.0,
  attributes: [{ name: "rating", type: "numeric", range: [1, 5], mechanism: "SW", step: 1 }],
};
const TENTHS = {
  name: "tenths",
  epsilon: 2.0,
  attributes: [
    { name: "region", type: "categorical", values: ["north", "south"], public: true },
    { name: "dose", type: "numeric", range: [0, 25.5], mechanism: "SW", step: 0.1 },
  ],
};

const WIDE = {
  name: "wide",
  epsilon: 2.0,
  attributes: [
    { name: "region", type: "categorical", values: ["north", "south"], public: true },
    { name: "colour", type: "categorical", values: ["red", "green", "blue"] },
    { name: "age", type: "integer", min: 18, max: 27 },
    { name: "smoker", type: "binary" },
  ],
  views: { kind: "pairs", salt: "000102030405060708090a0b0c0d0e0f", attributes: ["colour", "smoker"], one_way: true },
};

const DISCOVERY = {
  name: "words",
  epsilon: 4.0,
  attributes: [{ name: "word", type: "string", max_length: 5, alphabet: "abc" }],
  discovery: {
    first_bits: 4,
    fragment_bits: 2,
    top_k: 3,
    salt: "0f0e0d0c0b0a09080706050403020100",
    min_reports_per_round: 10,
  },
};

/** Ordinary collections of each frequency oracle this SDK samples. */
const ORACLES = (["OUE", "OLH", "HR"] as const).map((mechanism) => ({
  name: `oracle-${mechanism.toLowerCase()}`,
  epsilon: 1.0,
  mechanism,
  attributes: [
    { name: "region", type: "categorical", values: ["north", "south"], public: true },
    { name: "score", type: "integer", min: 0, max: 99 },
  ],
}));

/** A wide collection whose views on `age` (40 values, and 80 or 120 with another) use OLH, the least variance. */
const WIDE_OLH = {
  name: "wideo",
  epsilon: 2.0,
  attributes: [
    { name: "region", type: "categorical", values: ["north", "south"], public: true },
    { name: "colour", type: "categorical", values: ["red", "green", "blue"] },
    { name: "age", type: "integer", min: 18, max: 57 },
    { name: "smoker", type: "binary" },
  ],
  views: {
    kind: "pairs",
    salt: "000102030405060708090a0b0c0d0e0f",
    attributes: ["age", "colour", "smoker"],
    one_way: true,
  },
};

/** A discovery whose round 0 (2^8 cells) uses OLH, the least variance at ε = 2. */
const DISCOVERY_OLH = {
  name: "wordso",
  epsilon: 2.0,
  attributes: [{ name: "word", type: "string", max_length: 5, alphabet: "abc" }],
  discovery: {
    first_bits: 8,
    fragment_bits: 2,
    top_k: 3,
    salt: "0f0e0d0c0b0a09080706050403020100",
    min_reports_per_round: 10,
  },
};

describe("collections against a real aggregator", { skip: NO_REPLICA }, () => {
  const dir = mkdtempSync(join(tmpdir(), "ldpsynth-ts-collections-"));
  let server: Replica | undefined;
  const clients: Client[] = [];
  const client = (): Client => {
    const made = new Client(server!.address);
    clients.push(made);
    return made;
  };
  const ledger = (): FileLedger => new FileLedger(join(mkdtempSync(join(dir, "device-")), "ledger.json"));

  before(async () => {
    writeFileSync(join(dir, "income.json"), JSON.stringify(INCOME));
    writeFileSync(join(dir, "wait.json"), JSON.stringify(WAIT));
    writeFileSync(join(dir, "ratings.json"), JSON.stringify(RATINGS));
    writeFileSync(join(dir, "tenths.json"), JSON.stringify(TENTHS));
    writeFileSync(join(dir, "wide.json"), JSON.stringify(WIDE));
    writeFileSync(join(dir, "words.json"), JSON.stringify(DISCOVERY));
    writeFileSync(join(dir, "wideo.json"), JSON.stringify(WIDE_OLH));
    writeFileSync(join(dir, "wordso.json"), JSON.stringify(DISCOVERY_OLH));
    ORACLES.forEach((o) => writeFileSync(join(dir, `${o.name}.json`), JSON.stringify(o)));
    server = await startReplica([
      ...[...ORACLES.map((o) => o.name), "wideo", "wordso"].flatMap((n) => ["--collection", join(dir, `${n}.json`)]),
      "--data-dir",
      join(dir, "data"),
      "--collection",
      join(dir, "income.json"),
      "--collection",
      join(dir, "wait.json"),
      "--collection",
      join(dir, "ratings.json"),
      "--collection",
      join(dir, "tenths.json"),
      "--collection",
      join(dir, "wide.json"),
      "--collection",
      join(dir, "words.json"),
      "--shards",
      "1",
    ]);
  });

  after(async () => {
    clients.forEach((c) => c.close());
    assert.equal(await server?.stop(), 0, "the server stops cleanly on SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  });

  test("numeric: the served HM and SW cards verify; reports are output indices the server stores as sent", async () => {
    const cases: [string, Columns, bigint[]][] = [
      [
        "income",
        { region: ["north", "south", "north", "south", "north"], income: [52000, 0, 200000, 52000.5, 131313.13] },
        [0n, 1n, 0n, 1n, 0n],
      ],
      ["wait", { minutes: [0, 12.5, 60, 59.999, "30"] }, []],
    ];
    for (const [name, rows, regions] of cases) {
      const device = client();
      const info = await device.getCollection(name);
      assert.ok(info.card instanceof NumericCard);
      const card = info.card;
      const book = ledger();
      const first = await device.submit(name, rows, book);
      assert.deepEqual([first.rows, first.sent, first.acknowledged, first.memoized], [5, 5, 5, 0]);
      assert.equal(first.epsilonSpent, 5 * card.epsilon);
      assert.equal(book.spent(name), 5 * card.epsilon);
      const again = await device.submit(info, rows, book);
      assert.deepEqual([again.sent, again.duplicates, again.memoized, again.epsilonSpent], [5, 5, 5, 0]);
      const stored = await storedCounts(server!.address, name);
      const byRegion = new Map<string, number>();
      for (const [key, count] of stored) {
        const words = key.split(",");
        const code = BigInt(words.at(-1)!);
        assert.ok(code >= 0n && code < card.domainSize, `${name}: a report in [0, K)`);
        const region = words.slice(0, -1).join(",");
        byRegion.set(region, (byRegion.get(region) ?? 0) + count);
      }
      const expected = new Map<string, number>();
      (regions.length ? regions.map(String) : ["", "", "", "", ""]).forEach((r) =>
        expected.set(r, (expected.get(r) ?? 0) + 1),
      );
      assert.deepEqual(byRegion, expected, `${name}: every report stored once, under its public code`);
    }
  });

  test("numeric levels: the served SW cards with a step verify; on-level values are sent, off-level ones refused", async () => {
    const cases: [string, string, Columns, Columns, number][] = [
      // 3.0000001 is within 1e-6 step of level 3 (0.30000001 and 0.1 + 0.2 of level 0.3, both "south"): encoded as
      // the level exactly, so the later row reuses the earlier row's report.
      ["ratings", "rating", { rating: [1, 2, 3, 3.0000001, "5"] }, { rating: [4, 2.5] }, 1],
      [
        "tenths",
        "dose",
        { region: ["north", "south", "north", "south", "north"], dose: [0.1, 0.1 + 0.2, 25.5, 0.30000001, 0] },
        { region: ["north", "north"], dose: [0.3, 0.35] },
        1,
      ],
    ];
    for (const [name, attribute, rows, offLevel, repeated] of cases) {
      const device = client();
      const info = await device.getCollection(name);
      assert.ok(info.card instanceof NumericCard);
      const card = info.card;
      assert.equal(card.attribute.step, name === "ratings" ? 1 : 0.1);
      assert.equal((card.fields["numeric"] as { step?: number }).step, card.attribute.step);
      const book = ledger();
      await assert.rejects(
        device.submit(name, offLevel, book),
        (e: unknown) => e instanceof ValidationError && e.field === attribute && e.position === 1,
      );
      assert.equal(book.spent(name), 0, `${name}: nothing charged for a refused batch`);
      const first = await device.submit(name, rows, book);
      assert.deepEqual(
        [first.rows, first.sent, first.acknowledged, first.memoized],
        [5, 5 - repeated, 5 - repeated, repeated],
      );
      assert.equal(first.epsilonSpent, (5 - repeated) * card.epsilon);
      const stored = await storedCounts(server!.address, name);
      let total = 0;
      for (const [key, count] of stored) {
        const code = BigInt(key.split(",").at(-1)!);
        assert.ok(code >= 0n && code < card.domainSize, `${name}: a report in [0, K)`);
        total += count;
      }
      assert.equal(total, 5 - repeated, `${name}: every report stored once`);
    }
  });

  test("wide: a device reports its ledger's view to the view's sub-collection, charged under the wide collection", async () => {
    const device = client();
    const wide = await device.getWideCollection("wide");
    assert.deepEqual(wide.names, ["wide/colour", "wide/smoker", "wide/colour+smoker"]);
    const rows = {
      region: ["north", "south", "south"],
      colour: ["red", "blue", "blue"],
      age: [18, 27, 27],
      smoker: [0, 1, 1],
    };
    for (let d = 0; d < 8; d++) {
      const book = ledger();
      const { index, name } = await wide.route(book.viewKey("wide"));
      const first = await device.submit("wide", rows, book);
      assert.equal(first.collection, "wide");
      assert.equal(first.part, name);
      assert.deepEqual([first.rows, first.sent, first.acknowledged, first.memoized], [3, 2, 2, 1]);
      assert.equal(first.epsilonSpent, 2 * wide.epsilon, "each new report costs the wide collection's ε");
      assert.equal(book.spent("wide"), 2 * wide.epsilon);
      assert.equal(book.spent(name), 0, "nothing is charged under the view");
      const again = await device.submit(wide, rows, book);
      assert.deepEqual([again.part, again.sent, again.duplicates, again.epsilonSpent], [name, 2, 2, 0]);
      assert.ok(wide.viewCard(index).schema.name === name);
    }
    let stored = 0;
    for (const name of wide.names) {
      for (const count of (await storedCounts(server!.address, name)).values()) stored += count;
    }
    assert.equal(stored, 2 * 8, "every device's two distinct rows stored once, in its view");
    await assert.rejects(
      device.submit("wide/colour", { colour: ["red"], region: ["north"] }, ledger()),
      (e: unknown) => e instanceof ValidationError && e.field === "collection",
    );
  });

  test("discovery: a device of the open round reports its cells, charged under the discovery; others send nothing", async () => {
    const device = client();
    const rows = { word: ["abc", "cab", "abc"] };
    // Ledgers until one is in round 0 (the open one) and one is not: each is with probability 1/4 and 3/4
    // (R = 4 rounds), so 200 ledgers miss either with probability below 1e-24.
    let reported = false;
    let waited = false;
    for (let d = 0; d < 200 && !(reported && waited); d++) {
      const book = ledger();
      const result = await device.submit("words", rows, book);
      if (result.status === "sent") {
        reported = true;
        assert.equal(result.collection, "words");
        assert.equal(result.part, "words/round-0");
        assert.deepEqual([result.rows, result.sent, result.acknowledged, result.memoized], [3, 2, 2, 1]);
        assert.equal(book.spent("words"), 2 * DISCOVERY.epsilon);
        assert.equal(book.spent("words/round-0"), 0);
      } else {
        waited = true;
        assert.equal(result.status, "not your round yet");
        assert.deepEqual([result.rows, result.sent, result.epsilonSpent, book.spent("words")], [0, 0, 0, 0]);
      }
    }
    assert.ok(reported && waited);
    const stored = await storedCounts(server!.address, "words/round-0");
    assert.ok(
      [...stored.keys()].every((k) => BigInt(k) >= 0n && BigInt(k) < 16n),
      "cells of round 0: 2^4 of them",
    );
  });

  test("oracles: OUE, OLH and HR cards verify; the server stores every report in the oracle's fields", async () => {
    const rows = { region: ["north", "south", "north", "south"], score: [0, 99, 42, 42] };
    for (const { name } of ORACLES) {
      const device = client();
      const info = await device.getCollection(name);
      assert.ok(info.card instanceof OracleCard, name);
      const card = info.card;
      const book = ledger();
      const first = await device.submit(name, rows, book);
      assert.deepEqual([first.rows, first.sent, first.acknowledged, first.memoized], [4, 4, 4, 0], name);
      assert.equal(book.spent(name), 4 * card.epsilon);
      const again = await device.submit(info, rows, book);
      assert.deepEqual([again.sent, again.duplicates, again.memoized, again.epsilonSpent], [4, 4, 4, 0], name);
      const stored = await storedOracleReports(server!.address, name, card.oracle);
      assert.equal(stored.length, 4, `${name}: every report stored once`);
      assert.ok(stored.every((r) => r >= card.oracle.reportLow && r < card.oracle.reportBound));
    }
  });

  test("wide: a device whose view uses OLH perturbs with it; the server stores its reports", async () => {
    const device = client();
    const wide = await device.getWideCollection("wideo");
    const olhViews = wide.views.flatMap((v, i) => (v.card["mechanism"] === "OLH" ? [i] : []));
    assert.deepEqual(
      olhViews.map((i) => wide.names[i]),
      ["wideo/age", "wideo/age+colour", "wideo/age+smoker"],
    );
    const rows = { region: ["north", "south"], colour: ["red", "blue"], age: [18, 57], smoker: [0, 1] };
    const sentTo = new Map<string, number>();
    // 3 of the 6 views use OLH: 40 devices all miss them with probability 2^-40.
    for (let d = 0; d < 40; d++) {
      const book = ledger();
      const { index, name } = await wide.route(book.viewKey("wideo"));
      const result = await device.submit("wideo", rows, book);
      assert.deepEqual([result.part, result.sent, result.acknowledged], [name, 2, 2]);
      assert.equal(book.spent("wideo"), 2 * wide.epsilon);
      assert.equal(wide.viewCard(index) instanceof OracleCard, olhViews.includes(index));
      sentTo.set(name, (sentTo.get(name) ?? 0) + 2);
    }
    const olhNames = olhViews.map((i) => wide.names[i]!).filter((n) => sentTo.has(n));
    assert.ok(olhNames.length > 0);
    for (const name of olhNames) {
      const card = wide.viewCard(wide.names.indexOf(name));
      assert.ok(card instanceof OracleCard);
      const stored = await storedOracleReports(server!.address, name, card.oracle);
      assert.equal(stored.length, sentTo.get(name), `${name}: every report stored once`);
      assert.ok(stored.every((r) => r < card.oracle.reportBound));
    }
  });

  test("discovery: a round on OLH is perturbed with OLH; the server stores the round's reports", async () => {
    const device = client();
    const rows = { word: ["abc", "cab", "abc"] };
    let sent = 0;
    // Round 0 is a device's with probability 1/R >= 1/4: 200 ledgers miss it with probability below 1e-24.
    for (let d = 0; d < 200 && sent < 6; d++) {
      const result = await device.submit("wordso", rows, ledger());
      if (result.status !== "sent") continue;
      assert.deepEqual([result.part, result.sent, result.acknowledged, result.memoized], ["wordso/round-0", 2, 2, 1]);
      sent += 2;
    }
    assert.ok(sent > 0);
    const info = await device.getCollection("wordso/round-0");
    assert.ok(info.card instanceof OracleCard && info.card.mechanism === "OLH");
    const stored = await storedOracleReports(server!.address, "wordso/round-0", info.card.oracle);
    assert.equal(stored.length, sent);
  });
});
