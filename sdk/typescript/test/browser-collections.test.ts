/**
 * Numeric, wide and discovery collections from a browser: headless Chromium loads the bundled
 * `@ldpsynth/sdk/web`, whose WebClient submits through the IndexedDB ledger to a real replica's web port; the
 * device perturbs a numeric value, reports its ledger's view of a wide collection (charged under the wide
 * collection) and its discovery round's cells (or nothing, not being its round); and perturbs with OUE, OLH and
 * HR (ordinary collections, and a discovery round on OLH).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { BrowserContext } from "playwright-core";
import { Client } from "../src/node/client.js";
import { BLANK_PAGE, launch, NO_BROWSER, sdkBundle, sdkPage, serveStatic } from "./browser-harness.js";
import { OracleCard } from "../src/oracle-card.js";
import { NO_REPLICA, startReplica, storedCounts, storedOracleReports, type Replica } from "./replica.js";

type Sdk = typeof import("../src/web/index.js");
declare const window: { sdk: Sdk };

const WAIT = {
  name: "wait",
  epsilon: 1.0,
  attributes: [{ name: "minutes", type: "numeric", range: [0, 60], mechanism: "SW" }],
};
const WIDE = {
  name: "wide",
  epsilon: 2.0,
  attributes: [
    { name: "colour", type: "categorical", values: ["red", "green", "blue"] },
    { name: "smoker", type: "binary" },
  ],
  views: { kind: "pairs", salt: "101112131415161718191a1b1c1d1e1f", one_way: true },
};
const WORDS = {
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

/** Ordinary collections of the three oracles, and a discovery whose round 0 (2^8 cells) uses OLH. */
const ORACLES = (["OUE", "OLH", "HR"] as const).map((mechanism) => ({
  name: `b-${mechanism.toLowerCase()}`,
  epsilon: 1.0,
  mechanism,
  attributes: [{ name: "score", type: "integer", min: 0, max: 99 }],
}));
const WORDS_OLH = { ...WORDS, name: "wordso", epsilon: 2.0, discovery: { ...WORDS.discovery, first_bits: 8 } };

describe("numeric, wide and discovery collections in headless Chromium", { skip: NO_BROWSER || NO_REPLICA }, () => {
  const dir = mkdtempSync(join(tmpdir(), "ldpsynth-browser-collections-"));
  let replica: Replica;
  let site: Awaited<ReturnType<typeof serveStatic>>;
  let browser: Awaited<ReturnType<typeof launch>>;
  let context: BrowserContext;

  before(async () => {
    site = await serveStatic({
      "/test.html": { type: "text/html", body: BLANK_PAGE },
      "/sdk.js": { type: "text/javascript", body: await sdkBundle() },
    });
    const args = ["--data-dir", join(dir, "data"), "--shards", "1", "--web-origins", site.origin];
    for (const schema of [WAIT, WIDE, WORDS, ...ORACLES, WORDS_OLH]) {
      writeFileSync(join(dir, `${schema.name}.json`), JSON.stringify(schema));
      args.push("--collection", join(dir, `${schema.name}.json`));
    }
    replica = await startReplica(args);
    browser = await launch();
    context = browser.context;
  });

  after(async () => {
    await browser?.close();
    await site?.close();
    assert.equal(await replica?.stop(), 0);
    rmSync(dir, { recursive: true, force: true });
  });

  test("a numeric value, a wide row's view and a string's round cells, each charged under its collection", async () => {
    const page = await sdkPage(context, `${site.origin}/test.html`);
    const out = await page.evaluate(async (url) => {
      const sdk = window.sdk;
      const client = new sdk.WebClient(url);
      const results = [];
      // Ledgers until one reported to the discovery's open round 0 (1 in 4 does: 100 miss with probability 3e-13).
      for (let d = 0; d < 100; d++) {
        const ledger = await sdk.IndexedDbLedger.open(`device-${d}`, { budget: 100 });
        const numeric = await client.submit("wait", { minutes: [12.5, 60] }, ledger);
        const wide = await client.submit("wide", { colour: ["red", "blue"], smoker: [0, 1] }, ledger);
        const words = await client.submit("words", { word: ["abc", "cab"] }, ledger);
        const view = (await client.getWideCollection("wide")).route(await ledger.viewKey("wide"));
        results.push({
          numeric: [numeric.acknowledged, numeric.epsilonSpent, await ledger.spent("wait")],
          wide: [
            wide.part,
            (await view).name,
            wide.acknowledged,
            await ledger.spent("wide"),
            await ledger.spent(wide.part!),
          ],
          words: [words.status, words.part ?? null, words.acknowledged, await ledger.spent("words")],
        });
        ledger.close();
        if (words.status === "sent") break;
      }
      return results;
    }, replica.webUrl);
    const node = new Client(replica.address);
    const epsilon = (await node.getCollection("wait")).card.epsilon;
    node.close();
    for (const r of out) {
      assert.deepEqual(r.numeric, [2, 2 * epsilon, 2 * epsilon]);
      assert.equal(r.wide[0], r.wide[1], "the view the ledger's key routes to");
      assert.deepEqual(r.wide.slice(2), [2, 2 * WIDE.epsilon, 0]);
    }
    const last = out.at(-1)!;
    assert.deepEqual(last.words, ["sent", "words/round-0", 2, 2 * WORDS.epsilon]);
    for (const r of out.slice(0, -1)) assert.deepEqual(r.words, ["not your round yet", null, 0, 0]);
    const stored = await storedCounts(replica.address, "words/round-0");
    assert.equal(
      [...stored.values()].reduce((a, b) => a + b, 0),
      2,
    );
    await page.close();
  });

  test("OUE, OLH and HR collections and a discovery round on OLH: perturbed with the oracle, stored by the server", async () => {
    const page = await sdkPage(context, `${site.origin}/test.html`);
    const names = ORACLES.map((o) => o.name);
    const out = await page.evaluate(
      async ([url, oracles]) => {
        const sdk = window.sdk;
        const client = new sdk.WebClient(url);
        const ledger = await sdk.IndexedDbLedger.open("oracle-device", { budget: 100 });
        const sent = [];
        for (const name of oracles) {
          const r = await client.submit(name, { score: [0, 42, 99] }, ledger);
          sent.push([r.acknowledged, r.epsilonSpent, await ledger.spent(name)]);
        }
        ledger.close();
        // Ledgers until one reports to round 0 (at least 1 in 4 does: 100 miss with probability 3e-13).
        let round = null;
        for (let d = 0; d < 100 && round === null; d++) {
          const book = await sdk.IndexedDbLedger.open(`oracle-round-${d}`, { budget: 100 });
          const r = await client.submit("wordso", { word: ["abc", "cab"] }, book);
          if (r.status === "sent") round = [r.part ?? null, r.acknowledged, await book.spent("wordso")];
          book.close();
        }
        return { sent, round };
      },
      [replica.webUrl, names] as const,
    );
    const node = new Client(replica.address);
    for (const [i, name] of names.entries()) {
      const card = (await node.getCollection(name)).card;
      assert.ok(card instanceof OracleCard);
      assert.deepEqual(out.sent[i], [3, 3 * card.epsilon, 3 * card.epsilon], name);
      const stored = await storedOracleReports(replica.address, name, card.oracle);
      assert.equal(stored.length, 3, `${name}: every report stored once in the oracle's fields`);
    }
    assert.deepEqual(out.round, ["wordso/round-0", 2, 2 * WORDS_OLH.epsilon]);
    const round = (await node.getCollection("wordso/round-0")).card;
    assert.ok(round instanceof OracleCard && round.mechanism === "OLH");
    assert.equal((await storedOracleReports(replica.address, "wordso/round-0", round.oracle)).length, 2);
    node.close();
    await page.close();
  });
});
