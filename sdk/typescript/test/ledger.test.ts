/**
 * The Node ledger: exact spend, budget, memoization, durability before sending, and refusal of damage; a
 * shuffled collection's promise recorded with sealed submissions, one path per memoized report.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { parseCard } from "../src/any-card.js";
import { MechanismCard } from "../src/card.js";
import { NumericCard } from "../src/numeric-card.js";
import { prepareReports } from "../src/node/device.js";
import {
  CardChanged,
  FileLedger,
  LedgerError,
  PrivacyBudgetExceeded,
  type CentralGuarantee,
} from "../src/node/ledger.js";
import { ValidationError } from "../src/errors.js";
import { encodeRows } from "../src/rows.js";
import type { JsonObject } from "../src/json.js";
import * as frac from "../src/fraction.js";
import { cases, str, vectors } from "./vectors.js";

const card = MechanismCard.parse(str((vectors("wire.json")["collections"] as JsonObject[])[0]!["card_json"]));
const row = (age: number, smoker: number, region = "south"): Record<string, string | number> => ({
  region,
  age,
  smoker,
  score: 0.6,
});

const scratch = mkdtempSync(join(tmpdir(), "ldpsynth-ledger-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

function fresh(): string {
  return join(mkdtempSync(join(scratch, "case-")), "dev", "ledger.json");
}

function refusedWith(action: () => unknown, problem: RegExp): void {
  assert.throws(
    action,
    (err: unknown) => err instanceof LedgerError && err.field === "ledger" && problem.test(err.problem),
  );
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
  const ten = Array.from({ length: 10 }, (_, i) => row(18 + (i % 3), (i >> 2) % 2, i % 2 ? "north" : "south")).map(
    (r, i) => ({ ...r, score: i / 10 }),
  );
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
  assert.throws(
    () => prepareReports(card, encodeRows(card.schema, [row(18, 0), row(19, 0), row(20, 0)]), ledger),
    PrivacyBudgetExceeded,
  );
  assert.equal(ledger.reports("demo"), 0);
  assert.equal(prepareReports(card, encodeRows(card.schema, [row(18, 0), row(19, 0)]), ledger).memoized, 0);
  assert.throws(
    () => new FileLedger(path, { budget: 0 }),
    (err: unknown) => err instanceof Error && (err as { field?: string }).field === "budget",
  );
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
  damaged((d) => {
    d.spend.demo.epsilon = "nan";
  }, /not an exact number >= 0/);
  damaged((d) => {
    d.spend.demo.epsilon = "-1/2";
  }, /not an exact number >= 0/);
  damaged((d) => {
    d.spend.demo.reports = 5;
  }, /5 reports counted but 2 memoized/);
  damaged((d) => {
    d.spend.demo.reports = -1;
  }, /not an integer >= 0/);
  damaged((d) => {
    d.memo = {};
  }, /2 reports counted but 0 memoized/);
  damaged((d) => {
    d.memo_secret = "00";
  }, /memo secret/);
  damaged((d) => {
    d.format = "other/1";
  }, /not a ledger of format/);

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
  const gone = spawnSync(process.execPath, ["-e", "process.exit(0)"]).pid;
  writeFileSync(`${path}.lock`, String(gone));
  assert.equal(prepareReports(card, encodeRows(card.schema, [row(18, 0)]), ledger).memoized, 0);
  assert.ok(!existsSync(`${path}.lock`));
});

test("the stored budget holds when the ledger is opened again: lower for a session, never higher", () => {
  const path = fresh();
  new FileLedger(path, { budget: 2 * card.epsilon });
  assert.equal(new FileLedger(path).budgetForEpsilon(card.epsilon), 2 * card.epsilon);
  assert.equal(new FileLedger(path, { budget: card.epsilon }).budgetForEpsilon(card.epsilon), card.epsilon);
  assert.throws(
    () => new FileLedger(path, { budget: 3 * card.epsilon }),
    (err: unknown) =>
      err instanceof Error && (err as { field?: string }).field === "budget" && /at most/.test(err.message),
  );
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
  assert.throws(
    () => new FileLedger(path).transaction("demo", card.epsilon / 2, () => undefined),
    (err: unknown) => err instanceof CardChanged && /reset the ledger/.test(err.message),
  );
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
  delete doc.central;
  for (const key of Object.keys(doc.memo)) doc.memo[key] = doc.memo[key].slice(0, 3);
  writeFileSync(path, JSON.stringify(doc));
  const upgraded = new FileLedger(path, { budget: 3 * card.epsilon });
  const stored = JSON.parse(readFileSync(path, "utf-8"));
  assert.equal(stored.format, "ldpsynth.ts-ledger/3");
  assert.deepEqual(stored.budget, { epsilon: frac.format(frac.times(frac.fromFloat(card.epsilon), 3n)) });
  assert.deepEqual(stored.pinned, { demo: frac.format(frac.fromFloat(card.epsilon)) });
  assert.equal(upgraded.reports("demo"), 2);
  assert.throws(() => upgraded.transaction("demo", 2 * card.epsilon, () => undefined), CardChanged);
  assert.equal(new FileLedger(path).budgetForEpsilon(card.epsilon), 3 * card.epsilon);
});

test("a damaged budget or pin is refused", () => {
  for (const [edit, problem] of [
    [
      (d: Record<string, any>) => {
        d.budget = { epsilon: "0" };
      },
      /budget/,
    ],
    [
      (d: Record<string, any>) => {
        d.budget = { multiple: 2.5 };
      },
      /budget/,
    ],
    [
      (d: Record<string, any>) => {
        delete d.budget;
      },
      /budget/,
    ],
    [
      (d: Record<string, any>) => {
        d.pinned = { demo: "nan" };
      },
      /pinned epsilon/,
    ],
    [
      (d: Record<string, any>) => {
        d.pinned = [];
      },
      /malformed/,
    ],
  ] as const) {
    const path = fresh();
    prepareReports(card, encodeRows(card.schema, [row(18, 0)]), new FileLedger(path));
    const doc = JSON.parse(readFileSync(path, "utf-8"));
    edit(doc);
    writeFileSync(path, JSON.stringify(doc));
    refusedWith(() => new FileLedger(path), problem);
  }
});

/** A shuffled collection (movie public, rating private): min_batch 1000, rows_per_device 3, F = 50, independent. */
const shuffled = MechanismCard.parse(
  str(
    cases(vectors("cards.json"), "shuffled").find((c) => c["id"] === "assume-injected-above-rows-per-device")![
      "card_json"
    ],
  ),
);
const ratings = (...pairs: [number, number][]) =>
  encodeRows(
    shuffled.schema,
    pairs.map(([movie, rating]) => ({ movie, rating })),
  );
const SEALED = { sealed: true } as const;
const promise = (rowsPerDevice: number): CentralGuarantee => ({
  delta: 1e-9,
  minBatch: 1000,
  assumeInjected: 50,
  rowsPerDevice,
  centralEpsilon: null,
  centralDelta: null,
  operator: true,
});

test("a sealed submission to a shuffled collection records its promise at the pool floor, ε and δ not computed", () => {
  const path = fresh();
  const ledger = new FileLedger(path);
  const first = prepareReports(shuffled, ratings([1, 1], [2, 2]), ledger, SEALED);
  assert.deepEqual(first.central, promise(3)); // m = rows_per_device while the device has sent fewer
  assert.deepEqual(ledger.guarantees("ratings"), promise(3));
  const stored = JSON.parse(readFileSync(path, "utf-8"));
  assert.equal(stored.format, "ldpsynth.ts-ledger/3");
  assert.deepEqual(stored.central, {
    ratings: {
      delta: frac.format(frac.fromFloat(1e-9)),
      min_batch: 1000,
      assume_injected: 50,
      rows_per_device: 3,
      central_epsilon: null,
      central_delta: null,
      operator: true,
    },
  });
  assert.deepEqual(
    Object.values(stored.memo).map((row) => (row as unknown[])[3]),
    [true, true],
  );
  // Two more reports: the device has sent 4 > 3, so its guarantee composes over 4.
  assert.deepEqual(prepareReports(shuffled, ratings([3, 3], [4, 4], [1, 1]), ledger, SEALED).central, promise(4));
  assert.deepEqual(new FileLedger(path).guarantees("ratings"), promise(4));
  // The same rows again, memoized, through a shuffler: nothing charged, the promise stays.
  const again = prepareReports(shuffled, ratings([1, 1], [2, 2]), ledger, SEALED);
  assert.deepEqual([again.memoized, again.epsilonSpent, again.central], [2, 0, promise(4)]);
});

test("a shuffled oracle's or numeric collection's promise has E's terms (the card's bound is its clone bound)", () => {
  for (const c of cases(vectors("cards.json"), "shuffled_mechanisms")) {
    const shuffledCard = parseCard(str(c["card_json"]));
    const numeric = shuffledCard instanceof NumericCard;
    const rows = encodeRows(
      shuffledCard.schema,
      numeric
        ? [
            { x: 1.5, region: "north" },
            { x: 9.25, region: "south" },
          ]
        : [
            { value: 3, region: "north" },
            { value: 97, region: "south" },
          ],
    );
    const block = c["shuffle"] as JsonObject;
    const expected: CentralGuarantee = {
      delta: block["delta"] as number,
      minBatch: Number(block["min_batch"]),
      assumeInjected: Number(c["assume_injected"]),
      rowsPerDevice: Math.max(Number(block["rows_per_device"] ?? 1n), 2),
      centralEpsilon: null,
      centralDelta: null,
      operator: c["independent"] as boolean,
    };
    const ledger = new FileLedger(fresh());
    const name = shuffledCard.schema.name;
    assert.deepEqual(prepareReports(shuffledCard, rows, ledger, SEALED).central, expected, str(c["id"]));
    assert.deepEqual(ledger.guarantees(name), expected);
    assert.equal(ledger.reports(name), 2);
    // In clear, the promise goes, as for E.
    assert.equal(prepareReports(shuffledCard, rows, new FileLedger(fresh())).central, undefined);
  }
});

test("no promise for reports in clear, for a collection that is not shuffled, or once a report went in clear", () => {
  const ledger = new FileLedger(fresh());
  assert.equal(prepareReports(card, encodeRows(card.schema, [row(18, 0)]), ledger, SEALED).central, undefined);
  assert.equal(ledger.guarantees("demo"), undefined);
  assert.equal(prepareReports(shuffled, ratings([1, 1]), ledger).central, undefined); // in clear
  assert.equal(prepareReports(shuffled, ratings([2, 2]), ledger, SEALED).central, undefined); // an earlier one in clear
  assert.equal(ledger.guarantees("ratings"), undefined);
  assert.equal(ledger.reports("ratings"), 2);
  const other = new FileLedger(fresh());
  assert.deepEqual(prepareReports(shuffled, ratings([1, 1]), other, SEALED).central, promise(3));
  assert.equal(prepareReports(shuffled, ratings([2, 2]), other).central, undefined); // in clear: the promise goes
  assert.equal(other.guarantees("ratings"), undefined);
  assert.equal(prepareReports(shuffled, ratings([3, 3]), other, SEALED).central, undefined); // and does not come back
});

test("a memoized report is never sent the other way: refused naming `rows`, nothing charged", () => {
  const refusedPath = (err: unknown): boolean =>
    err instanceof ValidationError
    && err.field === "rows"
    && /1 of these rows have a report first sent .* would link the report to this device/.test(err.message);
  const ledger = new FileLedger(fresh());
  prepareReports(shuffled, ratings([1, 1], [2, 2]), ledger, SEALED);
  const before = [ledger.reports("ratings"), ledger.spent("ratings")];
  assert.throws(() => prepareReports(shuffled, ratings([5, 5], [1, 1]), ledger), refusedPath); // sealed before, now clear
  assert.deepEqual([ledger.reports("ratings"), ledger.spent("ratings")], before);
  assert.deepEqual(ledger.guarantees("ratings"), promise(3)); // nothing changed
  assert.equal(prepareReports(shuffled, ratings([5, 5]), ledger, SEALED).memoized, 0); // the new row was not memoized
  const clear = new FileLedger(fresh());
  prepareReports(card, encodeRows(card.schema, [row(18, 0)]), clear);
  assert.throws(
    () => prepareReports(card, encodeRows(card.schema, [row(18, 0), row(19, 0)]), clear, SEALED),
    refusedPath,
  ); // in clear before, now sealed
  assert.equal(clear.reports("demo"), 1);
});

test("a ledger of format 2 opens, upgraded: no promise, its memoized reports marked sent in clear", () => {
  const path = fresh();
  prepareReports(shuffled, ratings([1, 1], [2, 2]), new FileLedger(path), SEALED);
  const doc = JSON.parse(readFileSync(path, "utf-8"));
  doc.format = "ldpsynth.ts-ledger/2";
  delete doc.central;
  for (const key of Object.keys(doc.memo)) doc.memo[key] = doc.memo[key].slice(0, 3);
  writeFileSync(path, JSON.stringify(doc));
  const upgraded = new FileLedger(path);
  const stored = JSON.parse(readFileSync(path, "utf-8"));
  assert.equal(stored.format, "ldpsynth.ts-ledger/3");
  assert.deepEqual(stored.central, {});
  assert.deepEqual(
    Object.values(stored.memo).map((r) => (r as unknown[])[3]),
    [false, false],
  );
  assert.equal(upgraded.guarantees("ratings"), undefined);
  // It recorded no promise, so its reports count as sent in clear (as the Python ledger's upgrade marks them):
  // resent in clear, never sealed; the collection's later sealed reports get no promise.
  assert.equal(prepareReports(shuffled, ratings([1, 1]), upgraded).memoized, 1);
  assert.throws(
    () => prepareReports(shuffled, ratings([2, 2], [3, 3]), upgraded, SEALED),
    (err) => err instanceof ValidationError && err.field === "rows",
  );
  const sealed = prepareReports(shuffled, ratings([3, 3]), upgraded, SEALED);
  assert.deepEqual([sealed.memoized, sealed.central, upgraded.reports("ratings")], [0, undefined, 3]);
});

test("a damaged promise or path is refused", () => {
  const base = (): string => {
    const path = fresh();
    prepareReports(shuffled, ratings([1, 1]), new FileLedger(path), SEALED);
    return path;
  };
  for (const [edit, problem] of [
    [
      (d: Record<string, any>) => {
        d.central.ratings.delta = "1";
      },
      /delta is "1", not an exact number in \(0, 1\)/,
    ],
    [
      (d: Record<string, any>) => {
        d.central.ratings.assume_injected = 1000;
      },
      /assume_injected/,
    ],
    [
      (d: Record<string, any>) => {
        d.central.ratings.rows_per_device = 0;
      },
      /rows_per_device/,
    ],
    [
      (d: Record<string, any>) => {
        d.central.ratings.central_epsilon = "0";
      },
      /central_epsilon/,
    ],
    [
      (d: Record<string, any>) => {
        d.central.ratings.central_epsilon = "1/2";
      },
      /central_delta/,
    ],
    [
      (d: Record<string, any>) => {
        d.central.ratings.operator = "yes";
      },
      /operator/,
    ],
    [
      (d: Record<string, any>) => {
        d.central.ratings.extra = 1;
      },
      /fields/,
    ],
    [
      (d: Record<string, any>) => {
        d.central.other = d.central.ratings;
      },
      /"other": a central guarantee is recorded but no report/,
    ],
    [
      (d: Record<string, any>) => {
        delete d.central;
      },
      /malformed/,
    ],
    [
      (d: Record<string, any>) => {
        for (const k of Object.keys(d.memo)) d.memo[k][3] = "sealed";
      },
      /memoized report is malformed/,
    ],
    [
      (d: Record<string, any>) => {
        for (const k of Object.keys(d.memo)) d.memo[k][3] = null;
      },
      /memoized report is malformed/,
    ],
    [
      (d: Record<string, any>) => {
        for (const k of Object.keys(d.memo)) d.memo[k][3] = false;
      },
      /a central guarantee is recorded but 1 of its memoized reports were sent in clear/,
    ],
    [
      (d: Record<string, any>) => {
        for (const k of Object.keys(d.memo)) d.memo[k].pop();
      },
      /memoized report is malformed/,
    ],
  ] as const) {
    const path = base();
    const doc = JSON.parse(readFileSync(path, "utf-8"));
    edit(doc);
    writeFileSync(path, JSON.stringify(doc));
    refusedWith(() => new FileLedger(path), problem);
  }
});
