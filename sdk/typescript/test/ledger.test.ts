/** The Node ledger: exact spend, budget, memoization, durability before sending, and refusal of damage. */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { MechanismCard } from "../src/card.js";
import { prepareReports } from "../src/node/device.js";
import { CardChanged, FileLedger, LedgerError, PrivacyBudgetExceeded } from "../src/node/ledger.js";
import { encodeRows } from "../src/rows.js";
import type { JsonObject } from "../src/json.js";
import * as frac from "../src/fraction.js";
import { str, vectors } from "./vectors.js";

const card = MechanismCard.parse(str((vectors("wire.json")["collections"] as JsonObject[])[0]!["card_json"]));
const row = (age: number, smoker: number, region = "south"): Record<string, string | number> =>
  ({ region, age, smoker, score: 0.6 });

const scratch = mkdtempSync(join(tmpdir(), "ldpsynth-ledger-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

function fresh(): string {
  return join(mkdtempSync(join(scratch, "case-")), "dev", "ledger.json");
}

function refusedWith(action: () => unknown, problem: RegExp): void {
  assert.throws(action, (err: unknown) => err instanceof LedgerError && err.field === "ledger" && problem.test(err.problem));
}

test("a new ledger: owner-only files, a marker, nothing spent", () => {
  const path = fresh();
  const ledger = new FileLedger(path);
  assert.equal(statSync(path).mode & 0o777, 0o600);
  assert.equal(statSync(`${path}.created`).mode & 0o777, 0o600);
  assert.equal(statSync(join(path, "..")).mode & 0o777, 0o700);
  assert.equal(ledger.spent("demo"), 0);
  assert.equal(ledger.reports("demo"), 0);
  assert.equal(new FileLedger(path).reports("demo"), 0); // reopened, not recreated
});

test("rows are charged once, exactly, and memoized: the same row reuses its id and code", () => {
  const ledger = new FileLedger(fresh());
  const rows = encodeRows(card.schema, [row(18, 0), row(19, 1), row(18, 0), row(20, 1, "north")]);
  const first = prepareReports(card, rows, ledger);
  assert.equal(first.rows, 4);
  assert.equal(first.memoized, 1); // the repeated row
  assert.equal(first.reports.privateCodes.length, 3);
  assert.equal(first.epsilonSpent, 3 * card.epsilon);
  assert.equal(ledger.reports("demo"), 3);
  assert.equal(ledger.spent("demo"), 3 * card.epsilon);
  const again = prepareReports(card, rows, ledger);
  assert.equal(again.memoized, 4);
  assert.equal(again.epsilonSpent, 0);
  assert.deepEqual(again.reports.reportIds, first.reports.reportIds);
  assert.deepEqual(again.reports.privateCodes, first.reports.privateCodes);
  assert.deepEqual(again.reports.publicCodes, [[1n, 1n, 0n]]);
  // A reopened ledger remembers (the spend was written before prepareReports returned).
  const reopened = new FileLedger(ledger.path);
  assert.deepEqual(prepareReports(card, rows, reopened).reports.reportIds, first.reports.reportIds);
  // The same private value with another public code is another row.
  assert.equal(prepareReports(card, encodeRows(card.schema, [row(18, 0, "north")]), reopened).memoized, 0);
});

test("the spend is exact: 10 reports at the delivered ε reach a budget of 10 ε without rounding", () => {
  const ledger = new FileLedger(fresh());
  const ten = Array.from({ length: 10 }, (_, i) => row(18 + (i % 3), (i >> 2) % 2, i % 2 ? "north" : "south"))
    .map((r, i) => ({ ...r, score: i / 10 }));
  const prepared = prepareReports(card, encodeRows(card.schema, ten), ledger);
  assert.equal(prepared.memoized, 0);
  const stored = JSON.parse(readFileSync(ledger.path, "utf-8")) as { spend: Record<string, { epsilon: string }> };
  assert.equal(stored.spend["demo"]!.epsilon, frac.format(frac.times(frac.fromFloat(card.epsilon), 10n)));
  assert.equal(ledger.spent("demo"), ledger.budgetForEpsilon(card.epsilon)); // exactly at the budget: allowed
  const eleventh = encodeRows(card.schema, [{ ...row(20, 0, "north"), score: 0.99 }]);
  assert.throws(() => prepareReports(card, eleventh, ledger), PrivacyBudgetExceeded);
  assert.equal(ledger.reports("demo"), 10); // nothing recorded by the refused submission
});

test("the budget is stored when the ledger is created and refuses a submission whole", () => {
  const path = fresh();
  const ledger = new FileLedger(path, { budget: 2 * card.epsilon });
  assert.equal(ledger.budgetForEpsilon(card.epsilon), 2 * card.epsilon);
  assert.throws(() => prepareReports(card, encodeRows(card.schema, [row(18, 0), row(19, 0), row(20, 0)]), ledger),
    PrivacyBudgetExceeded);
  assert.equal(ledger.reports("demo"), 0);
  assert.equal(prepareReports(card, encodeRows(card.schema, [row(18, 0), row(19, 0)]), ledger).memoized, 0);
  assert.throws(() => new FileLedger(path, { budget: 0 }), (err: unknown) => err instanceof Error
    && (err as { field?: string }).field === "budget");
});

test("a deleted ledger is never recreated: not at open, not in a transaction", () => {
  const path = fresh();
  const ledger = new FileLedger(path);
  prepareReports(card, encodeRows(card.schema, [row(18, 0)]), ledger);
  unlinkSync(path);
  refusedWith(() => prepareReports(card, encodeRows(card.schema, [row(19, 0)]), ledger), /missing/);
  assert.ok(!existsSync(path));
  refusedWith(() => new FileLedger(path), /marker .* shows that one was created here/);
  assert.ok(!existsSync(path));
});

test("damaged or replaced ledgers are refused", () => {
  const damaged = (edit: (doc: Record<string, any>) => void, problem: RegExp): void => {
    const path = fresh();
    const ledger = new FileLedger(path);
    prepareReports(card, encodeRows(card.schema, [row(18, 0), row(19, 1)]), ledger);
    const doc = JSON.parse(readFileSync(path, "utf-8"));
    edit(doc);
    writeFileSync(path, JSON.stringify(doc));
    refusedWith(() => new FileLedger(path), problem);
    refusedWith(() => ledger.spent("demo"), problem);
  };
  damaged((d) => { d.spend.demo.epsilon = "nan"; }, /not an exact number >= 0/);
  damaged((d) => { d.spend.demo.epsilon = "-1/2"; }, /not an exact number >= 0/);
  damaged((d) => { d.spend.demo.reports = 5; }, /5 reports counted but 2 memoized/);
  damaged((d) => { d.spend.demo.reports = -1; }, /not an integer >= 0/);
  damaged((d) => { d.memo = {}; }, /2 reports counted but 0 memoized/);
  damaged((d) => { d.memo_secret = "00"; }, /memo secret/);
  damaged((d) => { d.format = "other/1"; }, /not a ledger of format/);

  const empty = fresh();
  new FileLedger(empty);
  writeFileSync(empty, "");
  refusedWith(() => new FileLedger(empty), /empty/);
  const sqlite = fresh();
  new FileLedger(sqlite);
  writeFileSync(sqlite, "SQLite format 3\0 the Python SDK's ledger");
  refusedWith(() => new FileLedger(sqlite), /not JSON/);
  // Another ledger put in place of this one: its marker names another ledger id.
  const a = fresh();
  const b = fresh();
  new FileLedger(a);
  new FileLedger(b);
  writeFileSync(a, readFileSync(b));
  refusedWith(() => new FileLedger(a), /not the ledger its marker/);
});

test("reset moves the old ledger aside and starts a new one that records it", () => {
  const path = fresh();
  const ledger = new FileLedger(path);
  prepareReports(card, encodeRows(card.schema, [row(18, 0)]), ledger);
  unlinkSync(path); // even a ledger lost this way is started over only by an explicit reset
  const record = FileLedger.reset(path);
  const moved = record["moved"] as Record<string, string>;
  assert.deepEqual(Object.keys(moved), ["ledger.json.created"]);
  assert.ok(existsSync(join(path, "..", moved["ledger.json.created"]!)));
  const after = new FileLedger(path);
  assert.equal(after.reports("demo"), 0);
  const again = FileLedger.reset(path);
  assert.deepEqual(Object.keys(again["moved"] as object).sort(), ["ledger.json", "ledger.json.created"]);
});

test("a lock left by a process that is gone is taken over; the lock is released after each transaction", () => {
  const path = fresh();
  const ledger = new FileLedger(path);
  const gone = spawnSync(process.execPath, ["-e", "process.exit(0)"]).pid!;
  writeFileSync(`${path}.lock`, String(gone));
  assert.equal(prepareReports(card, encodeRows(card.schema, [row(18, 0)]), ledger).memoized, 0);
  assert.ok(!existsSync(`${path}.lock`));
});

test("the stored budget holds when the ledger is opened again: lower for a session, never higher", () => {
  const path = fresh();
  new FileLedger(path, { budget: 2 * card.epsilon });
  assert.equal(new FileLedger(path).budgetForEpsilon(card.epsilon), 2 * card.epsilon);
  assert.equal(new FileLedger(path, { budget: card.epsilon }).budgetForEpsilon(card.epsilon), card.epsilon);
  assert.throws(() => new FileLedger(path, { budget: 3 * card.epsilon }), (err: unknown) => err instanceof Error
    && (err as { field?: string }).field === "budget" && /at most/.test(err.message));
  const byDefault = fresh();
  new FileLedger(byDefault);
  assert.equal(new FileLedger(byDefault).budgetForEpsilon(0.5), 5); // 10 x each collection's epsilon
  assert.deepEqual(JSON.parse(readFileSync(byDefault, "utf-8")).budget, { multiple: 10 });
});

test("a collection's epsilon is pinned at its first report: a card re-issued at another epsilon is refused", () => {
  const path = fresh();
  const ledger = new FileLedger(path);
  prepareReports(card, encodeRows(card.schema, [row(18, 0)]), ledger);
  assert.throws(() => ledger.transaction("demo", 2 * card.epsilon, () => undefined), CardChanged);
  assert.throws(() => new FileLedger(path).transaction("demo", card.epsilon / 2, () => undefined),
    (err: unknown) => err instanceof CardChanged && /reset the ledger/.test(err.message));
  assert.equal(prepareReports(card, encodeRows(card.schema, [row(18, 0)]), ledger).memoized, 1); // same epsilon: fine
  const pinned = JSON.parse(readFileSync(path, "utf-8")).pinned as Record<string, string>;
  assert.deepEqual(pinned, { demo: frac.format(frac.fromFloat(card.epsilon)) });
  FileLedger.reset(path);
  new FileLedger(path).transaction("demo", 2 * card.epsilon, () => undefined); // started over knowingly
});

test("a ledger of format 1 is upgraded at its first open: budget stored, epsilon pinned at spend per report", () => {
  const path = fresh();
  prepareReports(card, encodeRows(card.schema, [row(18, 0), row(19, 0)]), new FileLedger(path));
  const doc = JSON.parse(readFileSync(path, "utf-8"));
  doc.format = "ldpsynth.ts-ledger/1";
  delete doc.budget;
  delete doc.pinned;
  writeFileSync(path, JSON.stringify(doc));
  const upgraded = new FileLedger(path, { budget: 3 * card.epsilon });
  const stored = JSON.parse(readFileSync(path, "utf-8"));
  assert.equal(stored.format, "ldpsynth.ts-ledger/2");
  assert.deepEqual(stored.budget, { epsilon: frac.format(frac.times(frac.fromFloat(card.epsilon), 3n)) });
  assert.deepEqual(stored.pinned, { demo: frac.format(frac.fromFloat(card.epsilon)) });
  assert.equal(upgraded.reports("demo"), 2);
  assert.throws(() => upgraded.transaction("demo", 2 * card.epsilon, () => undefined), CardChanged);
  assert.equal(new FileLedger(path).budgetForEpsilon(card.epsilon), 3 * card.epsilon);
});

test("a damaged budget or pin is refused", () => {
  for (const [edit, problem] of [[(d: Record<string, any>) => { d.budget = { epsilon: "0" }; }, /budget/],
    [(d: Record<string, any>) => { d.budget = { multiple: 2.5 }; }, /budget/],
    [(d: Record<string, any>) => { delete d.budget; }, /budget/],
    [(d: Record<string, any>) => { d.pinned = { demo: "nan" }; }, /pinned epsilon/],
    [(d: Record<string, any>) => { d.pinned = []; }, /malformed/]] as const) {
    const path = fresh();
    prepareReports(card, encodeRows(card.schema, [row(18, 0)]), new FileLedger(path));
    const doc = JSON.parse(readFileSync(path, "utf-8"));
    edit(doc);
    writeFileSync(path, JSON.stringify(doc));
    refusedWith(() => new FileLedger(path), problem);
  }
});
