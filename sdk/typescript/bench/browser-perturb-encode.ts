/**
 * Per-report cost of the device path in a browser: the bundled `@ldpsynth/sdk/web` in headless Chromium
 * (Debian's), the same stages and rows as bench/perturb-encode.ts in Node: encode rows (validate + mixed
 * radix), perturb with E (crypto.getRandomValues, BigInt rejection sampling), draw report ids,
 * serialise the ReportBatch; then one submission's rows through the IndexedDB ledger (memo keys by
 * WebCrypto HMAC, lookup, perturb, the durable write). `npm run bench:browser` prints reports/s and writes
 * ../../benchmarks/results/browser.md with the bundle sizes and the machine's load.
 */
import { writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { gzipSync } from "node:zlib";
import { BLANK_PAGE, jsonWithBigints, launch, sdkBundle, sdkPage, serveStatic } from "../test/browser-harness.js";
import { RATINGS_CARD } from "./ratings-card.js";

type Sdk = typeof import("../src/web/index.js");
declare const window: { sdk: Sdk };

const ROWS = 65_536;
const ROUNDS = 5;
const cardJson = jsonWithBigints(RATINGS_CARD);

const load = loadavg()
  .map((x) => x.toFixed(2))
  .join(" ");
const bundle = await sdkBundle();
const site = await serveStatic({
  "/bench.html": { type: "text/html", body: BLANK_PAGE },
  "/sdk.js": { type: "text/javascript", body: bundle },
});
const browser = await launch();
try {
  const page = await sdkPage(browser.context, `${site.origin}/bench.html`);
  const version = browser.context.browser()?.version() ?? (await page.evaluate(() => navigator.userAgent));
  const rates = await page.evaluate(
    ({ cardJson, rows, rounds }) => {
      const sdk = window.sdk;
      const card = sdk.MechanismCard.parse(cardJson);
      const genres = ["drama", "comedy", "horror", "other"];
      const columns = {
        movie: Array.from({ length: rows }, (_, i) => (i % 1682) + 1),
        rating: Array.from({ length: rows }, (_, i) => (i % 5) + 1),
        watched: Array.from({ length: rows }, (_, i) => i % 2),
        genre: Array.from({ length: rows }, (_, i) => genres[i % 4]!),
      };
      const rate = (run: () => void): number => {
        run(); // warm up
        const start = performance.now();
        for (let i = 0; i < rounds; i++) run();
        return (rounds * rows) / ((performance.now() - start) / 1000);
      };
      const encoded = sdk.encodeColumns(card.schema, columns);
      const reports = sdk.newReports(card, encoded);
      return {
        "encode (validate + mixed radix)": rate(() => sdk.encodeColumns(card.schema, columns)),
        "perturb (E, CSPRNG, BigInt)": rate(() => sdk.perturb(card, encoded.privateCodes)),
        "serialise ReportBatch": rate(() => sdk.encodeReportBatch(reports, "ratings", "E/1", 0n)),
        "whole path (encode+perturb+ids+batch)": rate(() =>
          sdk.encodeReportBatch(sdk.newReports(card, sdk.encodeColumns(card.schema, columns)), "ratings", "E/1", 0n),
        ),
      };
    },
    { cardJson, rows: ROWS, rounds: ROUNDS },
  );
  const ledgerRows = 4096;
  const ledgerRate = await page.evaluate(
    async ({ cardJson, rows }) => {
      const sdk = window.sdk;
      const card = sdk.MechanismCard.parse(cardJson);
      const encoded = sdk.encodeColumns(card.schema, {
        movie: Array.from({ length: rows }, (_, i) => (i % 1682) + 1),
        rating: Array.from({ length: rows }, (_, i) => (i % 5) + 1),
        watched: Array.from({ length: rows }, (_, i) => (i >> 3) % 2),
        genre: Array.from({ length: rows }, () => "drama"),
      });
      const ledger = await sdk.IndexedDbLedger.open("bench", { budget: 1e6 });
      const start = performance.now();
      await sdk.prepareReports(card, encoded, ledger);
      const seconds = (performance.now() - start) / 1000;
      ledger.close();
      return rows / seconds;
    },
    { cardJson, rows: ledgerRows },
  );
  const all: Record<string, number> = {
    ...rates,
    [`through the IndexedDB ledger (HMAC, lookup, perturb, durable write; ${ledgerRows} rows)`]: ledgerRate,
  };
  const lines = Object.entries(all).map(
    ([label, perSecond]) =>
      `| ${label} | ${Math.round(perSecond).toLocaleString("en-US")} | ${(1e6 / perSecond).toFixed(2)} |`,
  );
  for (const [label, perSecond] of Object.entries(all)) {
    console.log(
      `${label.padEnd(40)} ${Math.round(perSecond).toLocaleString("en-US").padStart(12)} reports/s`
        + `  (${(1e6 / perSecond).toFixed(2)} us/report)`,
    );
  }
  const out = new URL("../../../../benchmarks/results/browser.md", import.meta.url).pathname;
  writeFileSync(
    out,
    [
      "# Browser benchmark",
      "",
      "`cd sdk/typescript && npm run bench:browser`",
      "",
      `date ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC, headless Chromium ${version} (Debian), `
        + `Node ${process.version}, load average at start ${load}`,
      "",
      `Bundle of \`@ldpsynth/sdk/web\` (esbuild, ESM, minified, dependencies included): ${bundle.length.toLocaleString("en-US")} `
        + `bytes, ${gzipSync(bundle, { level: 9 }).length.toLocaleString("en-US")} gzipped.`,
      "",
      `${ROWS.toLocaleString("en-US")} rows of a 4-attribute schema (|D| = 40), ${ROUNDS} rounds after a warm-up, in the page `
        + "(the ledger's line: one submission of new rows to a fresh IndexedDB ledger):",
      "",
      "| stage | reports/s | µs/report |",
      "|---|---:|---:|",
      ...lines,
      "",
    ].join("\n"),
  );
} finally {
  await browser.close();
  await site.close();
}
