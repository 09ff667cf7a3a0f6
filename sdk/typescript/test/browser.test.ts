/**
 * The SDK in a real browser: headless Chromium (Debian's) loads a page with the bundled
 * `@ldpsynth/sdk/web`, which submits rows to a real replica's web port (Connect and gRPC-Web) through
 * its privacy ledger in IndexedDB; the replica's stored counts (its Export) must be exactly the reports
 * the page sent. The ledger's rules are checked in the browser (durable across a reload, budget stored
 * at creation, ε pinned, never silently recreated, reset; a shuffled collection's promise and one path
 * per report; a ledger of version 1 upgraded), CORS refuses a page of another origin, and
 * the browser's sampler passes chi-square tests against the exact pmf.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { BrowserContext } from "playwright-core";
import { MechanismCard } from "../src/card.js";
import { derive, weightCandidates } from "../src/weights.js";
import { BLANK_PAGE, jsonWithBigints, launch, NO_BROWSER, sdkBundle, sdkPage, serveStatic } from "./browser-harness.js";
import { chiSquarePValue } from "./chi-square.js";
import { countsOf, NO_REPLICA, startReplica, storedCounts, type Replica } from "./replica.js";
import { cases, str, vectors } from "./vectors.js";

type Sdk = typeof import("../src/web/index.js");
declare const window: { sdk: Sdk };

const DEMO = {
  name: "demo",
  epsilon: 1.0,
  attributes: [
    { name: "item", type: "integer", min: 0, max: 3, public: true },
    { name: "rating", type: "integer", min: 1, max: 5 },
  ],
};
/** α of each chi-square test; 6 tests in this file: a spurious failure has probability below 6e-6. */
const ALPHA = 1e-6;
const DRAWS = 200_000;
const SKIP = NO_BROWSER || NO_REPLICA;

/** Reports as the page returns them (bigints do not cross page.evaluate). */
interface SentReports {
  privateCodes: string[];
  publicCodes: string[][];
}

function asReports(sent: SentReports): { privateCodes: bigint[]; publicCodes: bigint[][] } {
  return { privateCodes: sent.privateCodes.map(BigInt), publicCodes: sent.publicCodes.map((c) => c.map(BigInt)) };
}

describe("the SDK in headless Chromium against a real replica", { skip: SKIP }, () => {
  const dir = mkdtempSync(join(tmpdir(), "ldpsynth-browser-"));
  let replica: Replica;
  let site: Awaited<ReturnType<typeof serveStatic>>;
  let browser: Awaited<ReturnType<typeof launch>>;
  let context: BrowserContext;
  const sent = new Map<string, number>();

  before(async () => {
    const files = {
      "/test.html": { type: "text/html", body: BLANK_PAGE },
      "/sdk.js": { type: "text/javascript", body: await sdkBundle() },
    };
    site = await serveStatic(files);
    writeFileSync(join(dir, "demo.json"), JSON.stringify(DEMO));
    replica = await startReplica([
      "--data-dir",
      join(dir, "data"),
      "--collection",
      join(dir, "demo.json"),
      "--shards",
      "2",
      "--web-origins",
      site.origin,
    ]);
    browser = await launch();
    context = browser.context;
  });

  after(async () => {
    await browser?.close();
    await site?.close();
    assert.equal(await replica?.stop(), 0);
    rmSync(dir, { recursive: true, force: true });
  });

  test("rows submitted through the IndexedDB ledger are stored exactly; the same rows again cost nothing", async () => {
    const page = await sdkPage(context, `${site.origin}/test.html`);
    const rows = [
      { item: 0, rating: 5 },
      { item: 1, rating: 4 },
      { item: 2, rating: 1 },
      { item: 3, rating: 3 },
      { item: 0, rating: 5 },
      { item: 1, rating: 2 },
    ];
    const out = await page.evaluate(
      async ({ url, rows }) => {
        const sdk = window.sdk;
        const ledger = await sdk.IndexedDbLedger.open("device", { budget: 50 });
        const client = new sdk.WebClient(url);
        const info = await client.getCollection("demo");
        const prepared = await sdk.prepareReports(info.card, sdk.encodeRows(info.card.schema, rows), ledger);
        const first = await client.submitReports(info, prepared.reports, 2);
        const again = await client.submit(info, rows, ledger);
        const grpcWeb = new sdk.WebClient(url, { protocol: "grpc-web" });
        const other = await grpcWeb.submit(
          "demo",
          [
            { item: 2, rating: 2 },
            { item: 3, rating: 5 },
          ],
          ledger,
        );
        const otherReports = await sdk.prepareReports(
          info.card,
          sdk.encodeRows(info.card.schema, [
            { item: 2, rating: 2 },
            { item: 3, rating: 5 },
          ]),
          ledger,
        );
        const strings = (r: { privateCodes: readonly bigint[]; publicCodes: readonly (readonly bigint[])[] }) => ({
          privateCodes: r.privateCodes.map(String),
          publicCodes: r.publicCodes.map((c) => c.map(String)),
        });
        const result = {
          first: [first.sent, first.acknowledged, first.duplicates, first.batches],
          again: [again.rows, again.sent, again.acknowledged, again.duplicates, again.memoized, again.epsilonSpent],
          other: [other.acknowledged, other.memoized],
          otherMemoized: otherReports.memoized,
          reports: [strings(prepared.reports), strings(otherReports.reports)],
          spent: await ledger.spent("demo"),
          count: await ledger.reports("demo"),
          epsilon: info.card.epsilon,
        };
        ledger.close();
        return result;
      },
      { url: replica.webUrl, rows },
    );
    assert.deepEqual(out.first, [5, 5, 0, 3]); // 6 rows, 5 distinct: batches of 2
    assert.deepEqual(out.again, [6, 5, 0, 5, 6, 0]);
    assert.deepEqual(out.other, [2, 0]);
    assert.equal(out.otherMemoized, 2);
    assert.equal(out.count, 7);
    assert.equal(out.spent, 7 * out.epsilon);
    for (const reports of out.reports) countsOf(asReports(reports), sent);
    assert.deepEqual(await storedCounts(replica.address, "demo"), sent);
    await page.close();
  });

  test("the ledger's rules in IndexedDB: durable, budget stored, epsilon pinned, never recreated, reset", async () => {
    const page = await sdkPage(context, `${site.origin}/test.html`);
    const key = (i: number): string => i.toString(16).padStart(64, "0");
    const first = await page.evaluate(
      async (keys) => {
        const sdk = window.sdk;
        const ledger = await sdk.IndexedDbLedger.open("rules", { budget: 3 });
        await ledger.transaction("c", 1.0, (tx) => Promise.resolve(tx.record(keys, new Uint8Array(32), [1n, 2n])));
        ledger.close();
        return keys.length;
      },
      [key(1), key(2)],
    );
    assert.equal(first, 2);
    await page.reload();
    await page.waitForFunction(() => "sdk" in window);
    const rules = await page.evaluate(
      async (keys) => {
        const sdk = window.sdk;
        const name = (err: unknown) => (err as Error).name + ": " + (err as Error).message;
        const outcome = async (f: () => Promise<unknown>) => {
          try {
            await f();
            return "ok";
          } catch (err) {
            return name(err);
          }
        };
        const ledger = await sdk.IndexedDbLedger.open("rules");
        const found = await ledger.transaction("c", 1.0, async (tx) => [...(await tx.lookup(keys)).keys()]);
        const result = {
          reports: await ledger.reports("c"),
          spent: await ledger.spent("c"),
          found,
          budget: ledger.budgetForEpsilon(1.0),
          higher: await outcome(() => sdk.IndexedDbLedger.open("rules", { budget: 5 })),
          over: await outcome(() =>
            ledger.transaction("c", 1.0, (tx) =>
              Promise.resolve(tx.record([keys[2]!, keys[3]!], new Uint8Array(32), [3n, 4n])),
            ),
          ),
          pinned: await outcome(() => ledger.transaction("c", 2.0, () => Promise.resolve(undefined))),
          reportsAfter: await ledger.reports("c"),
          deleted: "",
          replaced: "",
          resetReports: -1,
          resetMarker: false,
        };
        ledger.close();
        await new Promise((resolve) => {
          indexedDB.deleteDatabase("ldpsynth-ledger/rules").onsuccess = resolve;
        });
        result.deleted = await outcome(() => sdk.IndexedDbLedger.open("rules"));
        (await sdk.IndexedDbLedger.open("other")).close();
        const marker = JSON.parse(localStorage.getItem("ldpsynth-ledger/other.created")!) as Record<string, string>;
        localStorage.setItem("ldpsynth-ledger/other.created", JSON.stringify({ ...marker, ledger_id: "0".repeat(32) }));
        result.replaced = await outcome(() => sdk.IndexedDbLedger.open("other"));
        await sdk.IndexedDbLedger.reset("rules");
        const fresh = await sdk.IndexedDbLedger.open("rules");
        result.resetReports = await fresh.reports("c");
        result.resetMarker = "reset" in JSON.parse(localStorage.getItem("ldpsynth-ledger/rules.created")!);
        fresh.close();
        return result;
      },
      [key(1), key(2), key(3), key(4)],
    );
    assert.deepEqual([rules.reports, rules.spent, rules.budget], [2, 2, 3]);
    assert.deepEqual(rules.found, [key(1), key(2)]);
    assert.match(rules.higher, /^ValidationError: budget: .*at most 3/);
    assert.match(rules.over, /^PrivacyBudgetExceeded: .*over this device's budget of 3/);
    assert.match(rules.pinned, /^CardChanged: .*now released at epsilon 2/);
    assert.equal(rules.reportsAfter, 2);
    assert.match(rules.deleted, /^LedgerError: ledger: .*missing but its marker/);
    assert.match(rules.replaced, /^LedgerError: ledger: .*was replaced/);
    assert.deepEqual([rules.resetReports, rules.resetMarker], [0, true]);
    await page.close();
  });

  test("IndexedDB: a shuffled collection's promise with sealed reports, one path per report, version 1 upgraded", async () => {
    const page = await sdkPage(context, `${site.origin}/test.html`);
    const out = await page.evaluate(
      async (cardJson) => {
        const sdk = window.sdk;
        const card = sdk.MechanismCard.parse(cardJson);
        const rows = (pairs: number[][]) =>
          sdk.encodeRows(
            card.schema,
            pairs.map(([movie, rating]) => ({ movie, rating })),
          );
        const outcome = async (f: () => Promise<unknown>) => {
          try {
            await f();
            return "ok";
          } catch (err) {
            return `${(err as Error).name}: ${(err as { field?: string }).field}: ${(err as Error).message}`;
          }
        };
        const sealed = { sealed: true };
        const ledger = await sdk.IndexedDbLedger.open("promise", { budget: 100 });
        const first = await sdk.prepareReports(
          card,
          rows([
            [1, 1],
            [2, 2],
          ]),
          ledger,
          sealed,
        );
        const more = await sdk.prepareReports(
          card,
          rows([
            [3, 3],
            [4, 4],
          ]),
          ledger,
          sealed,
        );
        const inClear = await outcome(() =>
          sdk.prepareReports(
            card,
            rows([
              [5, 5],
              [1, 1],
            ]),
            ledger,
          ),
        );
        const after = [await ledger.reports("ratings"), await ledger.spent("ratings")];
        ledger.close();
        const reopened = await sdk.IndexedDbLedger.open("promise");
        const kept = await reopened.guarantees("ratings");
        const cleared = await sdk.prepareReports(card, rows([[6, 1]]), reopened); // a new row in clear: promise gone
        const gone = await reopened.guarantees("ratings");
        reopened.close();

        // A ledger of version 1, as the SDK wrote it before promises and paths: one report, its path not recorded (in clear).
        const secret = await crypto.subtle.importKey(
          "raw",
          crypto.getRandomValues(new Uint8Array(32)),
          { name: "HMAC", hash: "SHA-256" },
          false,
          ["sign"],
        );
        const fingerprint = await sdk.collectionFingerprint(sdk.collectionIdentity(card));
        const row = new DataView(new ArrayBuffer(16)); // movie 1 (code 0), rating 1 (code 0)
        const message = new Uint8Array([
          ...new TextEncoder().encode("ldpsynth-memo/1"),
          ...fingerprint,
          ...new Uint8Array(row.buffer),
        ]);
        const memoKey = Array.from(new Uint8Array(await crypto.subtle.sign("HMAC", secret, message)), (b) =>
          b.toString(16).padStart(2, "0"),
        ).join("");
        const epsilon = (() => {
          // the card's ε as the exact fraction the ledger writes: p/2^k
          let den = 1n;
          let x = card.epsilon;
          while (!Number.isInteger(x)) {
            x *= 2;
            den *= 2n;
          }
          return `${BigInt(x)}/${den}`;
        })();
        await new Promise<void>((resolve, reject) => {
          const req = indexedDB.open("ldpsynth-ledger/old", 1);
          req.onupgradeneeded = () => {
            const db = req.result;
            for (const store of ["device", "spend", "pinned", "memo"]) db.createObjectStore(store);
            const tx = req.transaction!;
            tx.objectStore("memo").createIndex("collection", "collection");
            const device = tx.objectStore("device");
            device.put("ldpsynth.idb-ledger/1", "format");
            device.put(secret, "secret");
            device.put({ multiple: 10 }, "budget");
            tx.objectStore("spend").put({ epsilon, reports: 1 }, "ratings");
            tx.objectStore("pinned").put(epsilon, "ratings");
            tx.objectStore("memo").put(
              { collection: "ratings", reportId: new Uint8Array(16), privateCode: "2" },
              memoKey,
            );
          };
          req.onsuccess = () => {
            req.result.close();
            resolve();
          };
          req.onerror = () => reject(req.error ?? new Error("the database did not open"));
        });
        const old = await sdk.IndexedDbLedger.open("old");
        const oldReports = await old.reports("ratings");
        const reused = await sdk.prepareReports(
          card,
          rows([
            [1, 1],
            [7, 2],
          ]),
          old,
        ); // an old report: in clear
        const oldSealed = await outcome(() => sdk.prepareReports(card, rows([[1, 1]]), old, sealed));
        const newSealed = await sdk.prepareReports(card, rows([[8, 3]]), old, sealed);
        const oldPromise = await old.guarantees("ratings");
        old.close();
        const version = await new Promise<[number, unknown]>((resolve) => {
          const req = indexedDB.open("ldpsynth-ledger/old");
          req.onsuccess = () => {
            const db = req.result;
            const get = db.transaction("device").objectStore("device").get("format");
            get.onsuccess = () => {
              resolve([db.version, get.result]);
              db.close();
            };
          };
        });
        return {
          first: first.central,
          more: more.central,
          inClear,
          after,
          kept,
          cleared: cleared.central,
          gone,
          epsilon: card.epsilon,
          oldReports,
          reused: reused.memoized,
          oldSealed,
          newSealed: [newSealed.memoized, newSealed.central],
          oldPromise,
          version,
        };
      },
      str(
        cases(vectors("cards.json"), "shuffled").find((c) => c["id"] === "assume-injected-above-rows-per-device")![
          "card_json"
        ],
      ),
    );
    const promise = (m: number) => ({
      delta: 1e-9,
      minBatch: 1000,
      assumeInjected: 50,
      rowsPerDevice: m,
      centralEpsilon: null,
      centralDelta: null,
      operator: true,
    });
    assert.deepEqual([out.first, out.more, out.kept], [promise(3), promise(4), promise(4)]);
    assert.match(out.inClear, /^ValidationError: rows: .*first sent sealed, through a shuffler; sending it in clear/);
    assert.deepEqual(out.after, [4, 4 * out.epsilon]); // the refused submission charged nothing
    assert.deepEqual([out.cleared, out.gone], [undefined, undefined]);
    assert.equal(out.oldReports, 1);
    assert.equal(out.reused, 1); // a version-1 report counts as sent in clear: resent in clear, never sealed
    assert.match(out.oldSealed, /^ValidationError: rows: .*first sent in clear; sending it sealed/);
    assert.deepEqual([out.newSealed, out.oldPromise], [[0, undefined], undefined]); // reports in clear before
    assert.deepEqual(out.version, [2, "ldpsynth.idb-ledger/2"]);
    await page.close();
  });

  test("a page of an origin not allowed (--web-origins) cannot submit: nothing is stored", async () => {
    const before = await storedCounts(replica.address, "demo");
    const page = await sdkPage(context, `http://localhost:${site.port}/test.html`);
    const error = await page.evaluate(async (url) => {
      const sdk = window.sdk;
      const client = new sdk.WebClient(url, { retry: new sdk.RetryPolicy({ maxAttempts: 2, initialBackoffMs: 10 }) });
      try {
        await client.getCollection("demo");
        return "ok";
      } catch (err) {
        return `${(err as { status?: string }).status}`;
      }
    }, replica.webUrl);
    assert.equal(error, "UNAVAILABLE"); // the browser refuses to read the answer: no answer at all for the page
    assert.deepEqual(await storedCounts(replica.address, "demo"), before);
    await page.close();
  });

  // (ε, |D|, true code): a binary domain, a fifth of the words rejected (ε 0.7, |D| 3), the survey's 5
  // ratings, a larger domain. Each sample must also reject E at ε + 0.5 (the test has power).
  const CONFIGS: [number, number, number][] = [
    [0.5, 2, 1],
    [0.7, 3, 0],
    [1.0, 5, 4],
    [1.0, 5, 0],
    [2.0, 24, 7],
    [4.0, 64, 31],
  ];
  for (const [eps, k, x] of CONFIGS) {
    test(`the browser's sampler follows eq. 16 (chi-square, alpha ${ALPHA}): eps=${eps}, |D|=${k}, x=${x}`, async () => {
      const page = await sdkPage(context, `${site.origin}/test.html`);
      const counts = await page.evaluate(
        ({ cardJson, x, draws }) => {
          const sdk = window.sdk;
          const card = sdk.MechanismCard.parse(cardJson);
          const out = new Array<number>(Number(card.domainSize)).fill(0);
          for (const y of sdk.perturb(card, new Array<bigint>(draws).fill(BigInt(x)))) out[Number(y)]!++;
          return out;
        },
        { cardJson: cardText(eps, k), x, draws: DRAWS },
      );
      assert.equal(
        counts.reduce((a, b) => a + b, 0),
        DRAWS,
      );
      const p = chiSquarePValue(counts, expected(MechanismCard.parse(cardText(eps, k)), x, DRAWS));
      assert.ok(p >= ALPHA, `p = ${p} < ${ALPHA}`);
      const wrong = MechanismCard.parse(cardText(eps + 0.5, k));
      assert.ok(chiSquarePValue(counts, expected(wrong, x, DRAWS)) < ALPHA, "the test cannot tell a wrong pmf");
      await page.close();
    });
  }
});

/** A card for one integer attribute of `domainSize` values, its numbers from the SDK's own recomputation. */
function cardText(epsilon: number, domainSize: number): string {
  const w = weightCandidates(epsilon, BigInt(domainSize))[0]!;
  const d = derive(w, BigInt(domainSize));
  return jsonWithBigints({
    format: "ldpsynth.mechanism-card/1",
    mechanism: "E",
    version: "E/1",
    schema: {
      name: "chi",
      epsilon,
      attributes: [{ name: "x", type: "integer", min: 0n, max: BigInt(domainSize - 1) }],
    },
    domain_size: BigInt(domainSize),
    keep_weight: String(w.keepWeight),
    lie_weight: String(w.lieWeight),
    total_weight: String(d.totalWeight),
    epsilon: d.epsilon,
    epsilon_requested: epsilon,
    keep_probability: d.keepProbability,
    lie_probability: d.lieProbability,
  });
}

/** Expected counts of `draws` perturbations of `x` (every one >= 5 here: chiSquarePValue checks). */
function expected(card: MechanismCard, x: number, draws: number): number[] {
  const keep = Number(card.keepWeight) / Number(card.totalWeight);
  const lie = Number(card.lieWeight) / Number(card.totalWeight);
  return Array.from({ length: Number(card.domainSize) }, (_, y) => draws * (y === x ? keep : lie));
}
