/**
 * Device cost per report in the TypeScript SDK beside the Python SDK's, measured in the same run
 * (benchmarks/bench_device_cost.py, which also builds every card the reports here use). One report = one row
 * from its raw values to the bytes of a ReportBatch, without the ledger or the network: encode the row,
 * perturb its private code on `crypto.getRandomValues` (E, the numeric HM and SW, the oracles OUE, OLH and HR),
 * a fresh report id, the serialized ReportBatch. A wide view's report first routes the device (HMAC-SHA256 of
 * its view key, WebCrypto) and projects the row; a discovery round's first computes the device's turn
 * (HMAC-SHA256 of its round key) and the string's cell. Cards are verified once, outside the loop (a device
 * fetches a card once per submission); their verification cost is a row of its own.
 *
 *   npm run bench:device            # prints a Markdown table (µs per report, best of 3 runs of 2000 reports)
 *
 * Goals (issues 39, 41): <= 1 ms per discovery report; <= 50 µs per numeric value. Needs the repository's
 * .venv (make env) or $LDPSYNTH_PYTHON for the Python side.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { parseCard, perturbCodes, type Card } from "../src/any-card.js";
import { DiscoveryCard, REPORT } from "../src/discovery-card.js";
import type { JsonObject, JsonValue } from "../src/json.js";
import { parseJson } from "../src/json.js";
import { encodeReportBatch, newReports } from "../src/reports.js";
import { encodeColumns, type Columns } from "../src/rows.js";
import { WideCard } from "../src/wide-card.js";

const REPORTS = Number(process.env["BENCH_REPORTS"] ?? 2000);
const REPEATS = 3;
const ROOT = new URL("../../../../", import.meta.url).pathname;
const PYTHON = process.env["LDPSYNTH_PYTHON"] ?? join(ROOT, ".venv", "bin", "python");

const ROWS: Record<string, Columns> = {
  E: { region: ["south"], score: [42] },
  OUE: { region: ["south"], score: [42] },
  OLH: { region: ["south"], score: [42] },
  HR: { region: ["south"], score: [42] },
  HM: { region: ["north"], income: [52000.5] },
  SW: { minutes: [12.5] },
};
const WIDE_ROW: Columns = { region: ["north"], colour: ["blue"], age: [33], smoker: [1] };
const DISCOVERY_ROW: Columns = { word: ["cab"] };

function fromHex(text: string): Uint8Array {
  return Uint8Array.from(text.match(/../g)!.map((b) => parseInt(b, 16)));
}

/** µs per call: the best of REPEATS runs of `count` calls (after `count` / 4 warm-up calls: the JIT settles). */
async function best(run: () => unknown, count = REPORTS): Promise<number> {
  for (let i = 0; i < Math.max(1, count / 4); i++) await run();
  let out = Infinity;
  for (let r = 0; r < REPEATS; r++) {
    const start = process.hrtime.bigint();
    for (let i = 0; i < count; i++) await run();
    out = Math.min(out, Number(process.hrtime.bigint() - start) / 1e3 / count);
  }
  return out;
}

function report(card: Card, columns: Columns): Uint8Array {
  const reports = newReports(card, encodeColumns(card.schema, columns));
  return encodeReportBatch(reports, card.schema.name, card.version, 0n);
}

console.error(`running ${PYTHON} benchmarks/bench_device_cost.py --json (the Python side, and the cards)`);
const python = parseJson(
  execFileSync(PYTHON, [join(ROOT, "benchmarks", "bench_device_cost.py"), "--json", "--reports", String(REPORTS)], {
    cwd: ROOT,
    encoding: "utf-8",
    stdio: ["ignore", "pipe", "inherit"],
    maxBuffer: 64 << 20,
  }),
  "python",
  "the JSON of bench_device_cost.py",
) as JsonObject;
const cards = python["cards"] as JsonObject;
const pythonUs = python["python_us"] as Record<string, number>;

/** [report, TypeScript µs per report, Python µs per report, TypeScript µs of the perturbation alone]. */
const rows: [string, number, number | undefined, number | undefined][] = [];
for (const name of Object.keys(ROWS)) {
  const card = parseCard(cards[name] as JsonValue);
  console.error(`ts ${name} (${card.version}, |D| = ${card.domainSize})`);
  const codes = encodeColumns(card.schema, ROWS[name]!).privateCodes;
  const alone = await best(() => perturbCodes(card, codes));
  rows.push([name, await best(() => report(card, ROWS[name]!)), pythonUs[name], alone]);
}

const wide = WideCard.parse(cards["wide"] as JsonValue);
const viewKey = fromHex(cards["wide_view_key"] as string);
const { index } = await wide.route(viewKey);
const viewCard = wide.viewCard(index);
console.error(`ts wide view ${wide.names[index]} (${viewCard.version})`);
rows.push([
  "wide view (OLH)",
  await best(async () => {
    const routed = await wide.route(viewKey);
    return report(viewCard, wide.project(WIDE_ROW, routed.index));
  }),
  pythonUs["wide view (OLH)"],
  undefined,
]);

const discovery = DiscoveryCard.parse(
  JSON.stringify(cards["discovery"], (_, v: unknown) => (typeof v === "bigint" ? Number(v) : v)),
);
const roundKey = fromHex(cards["round_key"] as string);
const roundCard = discovery.roundCard();
console.error(`ts discovery round ${discovery.round} (${roundCard.version}, |D| = ${roundCard.domainSize})`);
rows.push([
  "discovery round (OLH)",
  await best(async () => {
    if ((await discovery.turn(roundKey)) !== REPORT) throw new Error("not the device's round");
    return report(roundCard, discovery.roundRows(DISCOVERY_ROW));
  }),
  pythonUs["discovery round (OLH)"],
  undefined,
]);
const verify = await best(() => {
  WideCard.parse(cards["wide"] as JsonValue).viewCard(index);
  DiscoveryCard.parse(
    JSON.stringify(cards["discovery"], (_, v: unknown) => (typeof v === "bigint" ? Number(v) : v)),
  ).roundCard();
}, 20);

console.log(
  `Node ${process.version}, Python ${python["python"] as string}; µs per report, best of ${REPEATS} runs of ${REPORTS} reports, one report per call.\n`,
);
console.log("| report | TypeScript µs | Python µs | TypeScript µs, the perturbation alone |");
console.log("| --- | ---: | ---: | ---: |");
const shown = (x: number | undefined): string => (x === undefined ? "" : x.toFixed(1));
for (const [name, ts, py, alone] of rows) console.log(`| ${name} | ${shown(ts)} | ${shown(py)} | ${shown(alone)} |`);
console.log(
  `\nVerifying the wide card and its OLH view card, and the discovery card and its round's OLH card (once per submission): ${(verify / 1e3).toFixed(2)} ms.`,
);
const numeric = Math.max(...rows.filter(([n]) => n === "HM" || n === "SW").map(([, , , alone]) => alone!));
const disc = rows.find(([n]) => n.startsWith("discovery"))![1];
console.log(
  `Goals: discovery report ${disc.toFixed(1)} µs <= 1000 µs: ${disc <= 1000 ? "met" : "MISSED"}; numeric value perturbed ${numeric.toFixed(1)} µs <= 50 µs: ${numeric <= 50 ? "met" : "MISSED"}.`,
);
