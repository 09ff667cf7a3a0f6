/**
 * Numeric, wide and discovery collections from a browser: headless Chromium loads the bundled
 * `@ldpsynth/sdk/web`, whose WebClient submits through the IndexedDB ledger to a real replica's web port; the
 * device perturbs a numeric value, reports its ledger's view of a wide collection (charged under the wide
 * collection) and its discovery round's cells (or nothing, not being its round).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { BrowserContext } from "playwright-core";
import { Client } from "../src/node/client.js";
import { BLANK_PAGE, launch, NO_BROWSER, sdkBundle, sdkPage, serveStatic } from "./browser-harness.js";
import { NO_REPLICA, startReplica, storedCounts, type Replica } from "./replica.js";

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
    for (const schema of [WAIT, WIDE, WORDS]) {
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
});
