/**
 * The survey demo (`ldpsynth simulate --web`) in headless Chromium: three people rate drinks on the survey
 * page (each a new device ledger in IndexedDB), the page perturbs and submits the ratings to the
 * replica's web port, and the analyst's page charts the live answers. The chart must show, per drink,
 * the exact number of ratings submitted (the drink is public), five bars whose debiased counts add up to
 * it, each within its 95 % interval; the replica must store exactly the ratings sent. Screenshots of
 * both pages are written to build/screenshots/.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import type { Page } from "playwright-core";
import { launch, NO_BROWSER } from "./browser-harness.js";
import { BIN, NO_REPLICA, storedCounts } from "./replica.js";

const SHOTS = new URL("../screenshots/", import.meta.url).pathname;
/** Each person's ratings (drink -> stars). */
const PEOPLE: Record<string, number>[] = [
  { espresso: 5, "green tea": 3, lemonade: 4 },
  { espresso: 4, "hot chocolate": 2 },
  { espresso: 5 },
];
const ITEMS = ["espresso", "green tea", "hot chocolate", "lemonade"];

interface Demo {
  survey: string;
  analyst: string;
  aggregator: string;
}

describe("the survey demo in headless Chromium", { skip: NO_BROWSER || NO_REPLICA }, () => {
  const proc = spawn(BIN, ["simulate", "--web"], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  proc.stderr.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const exited = new Promise<number | null>((resolve) => proc.on("exit", (code) => resolve(code)));
  let demo: Demo;
  let browser: Awaited<ReturnType<typeof launch>>;

  before(async () => {
    demo = await new Promise<Demo>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no demo line in 180 s: ${stderr}`)), 180_000);
      let out = "";
      proc.stdout.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        const line = out.split("\n").find((l) => l.includes('"demo"'));
        if (line) {
          clearTimeout(timer);
          resolve(JSON.parse(line) as Demo);
        }
      });
      proc.on("exit", (code) => reject(new Error(`ldpsynth simulate --web exited with ${code}: ${stderr}`)));
    });
    browser = await launch();
    mkdirSync(SHOTS, { recursive: true });
  });

  after(async () => {
    await browser?.close();
    if (proc.exitCode === null) proc.kill("SIGTERM");
    assert.equal(await exited, 0, `the demo stops cleanly on SIGTERM: ${stderr}`);
  });

  test("people rate on the survey page; the analyst's chart reflects exactly what was submitted", async () => {
    const survey = await browser.context.newPage();
    await survey.goto(demo.survey);
    for (const [i, ratings] of PEOPLE.entries()) {
      if (i > 0) await survey.click("#another");
      for (const [item, stars] of Object.entries(ratings)) {
        await survey.check(`input[data-item="${item}"][data-rating="${stars}"]`);
      }
      await survey.click("#submit");
      await survey.waitForSelector(`#status[data-sent="${Object.keys(ratings).length}"]`, { timeout: 60_000 });
    }
    await survey.screenshot({ path: `${SHOTS}survey.png`, fullPage: true });

    const expected = new Map(ITEMS.map((item) => [item, PEOPLE.filter((p) => item in p).length]));
    const total = [...expected.values()].reduce((a, b) => a + b, 0);
    const analyst = await browser.context.newPage();
    await analyst.goto(demo.analyst);
    await analyst.waitForSelector(`#summary[data-n="${total}"]`, { timeout: 60_000 });
    await analyst.waitForSelector(".panel svg");
    await analyst.screenshot({ path: `${SHOTS}analyst.png`, fullPage: true });
    const panels = await chartOf(analyst);
    assert.deepEqual(
      panels.map((p) => p.item),
      ITEMS,
    );
    for (const panel of panels) {
      assert.equal(panel.responses, expected.get(panel.item), panel.item);
      assert.deepEqual(
        panel.bars.map((b) => b.rating),
        [1, 2, 3, 4, 5],
      );
      const sum = panel.bars.reduce((a, b) => a + b.estimate, 0);
      assert.ok(Math.abs(sum - panel.responses) < 1e-6, `${panel.item}: the estimates add up to ${sum}`);
      for (const bar of panel.bars) assert.ok(bar.low <= bar.estimate && bar.estimate <= bar.high, JSON.stringify(bar));
      assert.ok(panel.height > 0, "the bars are drawn");
    }
    // The replica holds one report per rating: its public item codes are exactly the ratings per drink.
    const stored = await storedCounts(demo.aggregator, "survey");
    const perItem = new Map<number, number>();
    for (const [key, count] of stored) {
      const item = Number(key.split(",")[0]);
      perItem.set(item, (perItem.get(item) ?? 0) + count);
    }
    assert.deepEqual(
      ITEMS.map((_, i) => perItem.get(i) ?? 0),
      ITEMS.map((item) => expected.get(item)),
    );
  });
});

/** The chart as drawn: per panel, its drink, its count of ratings, its bars' data, the bars' total height. */
function chartOf(page: Page): Promise<
  {
    item: string;
    responses: number;
    height: number;
    bars: { rating: number; estimate: number; low: number; high: number }[];
  }[]
> {
  return page.$$eval(".panel", (sections) =>
    sections.map((section) => {
      const bars = Array.from(section.querySelectorAll<SVGRectElement>("rect.bar"));
      return {
        item: (section as HTMLElement).dataset["item"]!,
        responses: Number((section as HTMLElement).dataset["responses"]),
        height: bars.reduce((a, bar) => a + bar.getBBox().height, 0),
        bars: bars.map((bar) => ({
          rating: Number(bar.dataset["rating"]),
          estimate: Number(bar.dataset["estimate"]),
          low: Number(bar.dataset["low"]),
          high: Number(bar.dataset["high"]),
        })),
      };
    }),
  );
}
