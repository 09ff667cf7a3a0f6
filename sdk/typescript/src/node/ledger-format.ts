/**
 * The file format of the Node ledger (./ledger.ts): `ldpsynth.ts-ledger/3`, and the formats 1 and 2 it
 * reads to upgrade them (./ledger-files.ts). A file is parsed and checked whole on every read; any damage
 * is refused with LedgerError, never repaired.
 */
import { readFileSync } from "node:fs";
import type { MemoEntry } from "../device-core.js";
import * as frac from "../fraction.js";
import type { Fraction } from "../fraction.js";
import type { JsonValue } from "../json.js";
import {
  Budget,
  centralRecord,
  checkedCentral,
  checkedPin,
  checkedSpend,
  KEY_HEX,
  LedgerError,
  SECRET_BYTES,
  type CentralGuarantee,
  type Spend,
} from "../ledger-rules.js";

export const FORMAT = "ldpsynth.ts-ledger/3";
/** The formats written before budgets and pins were stored (1), before promises and paths (2): upgraded at their first open. */
const FORMAT_1 = "ldpsynth.ts-ledger/1";
const FORMAT_2 = "ldpsynth.ts-ledger/2";
const FORMATS = [FORMAT_1, FORMAT_2, FORMAT];
export const SOUND =
  "an intact ledger this SDK created, next to its marker (to start this device over knowingly: "
  + "FileLedger.reset; docs/contract.md §14)";

/** A ledger file, read and checked. */
export interface State {
  /** The format read (written back as the current one). */
  format: string;
  secret: Buffer;
  device: Record<string, JsonValue>;
  /** undefined: a ledger of format 1, whose budget is stored at its first open. */
  budget: Budget | undefined;
  pinned: Map<string, Fraction>;
  spend: Map<string, Spend>;
  memo: Map<string, MemoEntry>;
  /** The promise of each shuffled collection whose reports all went through a shuffler. */
  central: Map<string, CentralGuarantee>;
}

/** The LedgerError refusing the ledger at `path`. */
export function refused(path: string, problem: string): LedgerError {
  return new LedgerError(`${path}: ${problem}`, SOUND);
}

/** A value found in a damaged ledger, as its error shows it (at most 40 characters). */
export function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length <= 40 ? text : `${text.slice(0, 37)}...`;
}

/** The ledger's text (its budget must be known: a format-1 state is upgraded first). */
export function serialise(state: State): string {
  const spend: Record<string, JsonValue> = {};
  for (const [collection, s] of state.spend)
    spend[collection] = { epsilon: frac.format(s.epsilon), reports: s.reports };
  const memo: Record<string, JsonValue> = {};
  for (const [key, m] of state.memo) {
    memo[key] = [m.collection, Buffer.from(m.reportId).toString("hex"), String(m.privateCode), m.sealed];
  }
  const pinned: Record<string, JsonValue> = {};
  for (const [collection, epsilon] of state.pinned) pinned[collection] = frac.format(epsilon);
  const central: Record<string, JsonValue> = {};
  for (const [collection, guarantee] of state.central) central[collection] = centralRecord(guarantee);
  return JSON.stringify({
    format: FORMAT,
    memo_secret: state.secret.toString("hex"),
    device: state.device,
    budget: state.budget!.toJson(),
    pinned,
    spend,
    memo,
    central,
  });
}

const SECRET_HEX = new RegExp(`^[0-9a-f]{${2 * SECRET_BYTES}}$`);
const ID_HEX = /^[0-9a-f]{32}$/;

function isPlain(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Parse and check a whole ledger file (see ./ledger.ts); LedgerError on any damage. */
export function readState(path: string): State {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw refused(
      path,
      (err as NodeJS.ErrnoException).code === "ENOENT"
        ? "the ledger is missing (deleted or moved): a new one would let rows already reported be reported afresh"
        : `cannot read it (${(err as Error).message})`,
    );
  }
  if (bytes.length === 0) {
    throw refused(path, "the ledger file is empty (0 bytes): an earlier ledger was truncated or replaced");
  }
  let doc: unknown;
  try {
    doc = JSON.parse(bytes.toString("utf-8"));
  } catch {
    throw refused(path, "the ledger file is not a ledger of this SDK (not JSON)");
  }
  if (!isPlain(doc) || !FORMATS.includes(doc["format"] as string)) {
    throw refused(path, `it is not a ledger of format ${FORMAT}`);
  }
  const format = doc["format"] as string;
  const current = format !== FORMAT_1; // a budget and pins stored
  const paths = format === FORMAT; // each memoized report's path, and the promises
  const secretHex = doc["memo_secret"];
  if (typeof secretHex !== "string" || !SECRET_HEX.test(secretHex)) {
    throw refused(path, `its memo secret is ${shown(secretHex)}, not ${SECRET_BYTES} random bytes`);
  }
  const spendDoc = doc["spend"];
  const memoDoc = doc["memo"];
  const device = doc["device"];
  if (!isPlain(spendDoc) || !isPlain(memoDoc) || !isPlain(device)) {
    throw refused(path, "its tables are missing or malformed");
  }
  const budget = current ? Budget.fromJson(doc["budget"]) : undefined;
  if (current && !budget) throw refused(path, `its budget is ${shown(doc["budget"])}, not a budget the ledger writes`);
  const pinnedDoc = current ? doc["pinned"] : {};
  if (!isPlain(pinnedDoc)) throw refused(path, "its tables are missing or malformed");
  const pinned = new Map<string, Fraction>();
  for (const [collection, value] of Object.entries(pinnedDoc)) {
    const epsilon = checkedPin(value);
    if (!epsilon) {
      throw refused(
        path,
        `collection ${shown(collection)}: its pinned epsilon is ${shown(value)}, not an exact number > 0`,
      );
    }
    pinned.set(collection, epsilon);
  }
  const spend = new Map<string, Spend>();
  for (const [collection, row] of Object.entries(spendDoc)) {
    const checked = checkedSpend(collection, row);
    if (typeof checked === "string") throw refused(path, checked);
    spend.set(collection, checked);
  }
  const memo = new Map<string, MemoEntry>();
  const counts = new Map<string, number>();
  for (const [key, row] of Object.entries(memoDoc)) {
    if (
      !KEY_HEX.test(key)
      || !Array.isArray(row)
      || row.length !== (paths ? 4 : 3)
      || typeof row[0] !== "string"
      || typeof row[1] !== "string"
      || !ID_HEX.test(row[1])
      || typeof row[2] !== "string"
      || !/^[0-9]+$/.test(row[2])
      || (paths && typeof row[3] !== "boolean")
    ) {
      throw refused(path, "a memoized report is malformed");
    }
    memo.set(key, {
      collection: row[0],
      reportId: new Uint8Array(Buffer.from(row[1], "hex")),
      privateCode: BigInt(row[2]),
      sealed: row[3] === true,
    });
    counts.set(row[0], (counts.get(row[0]) ?? 0) + 1);
  }
  for (const collection of new Set([...spend.keys(), ...counts.keys()])) {
    const reports = spend.get(collection)?.reports ?? 0;
    const stored = counts.get(collection) ?? 0;
    if (stored !== reports) {
      throw refused(
        path,
        `collection ${shown(collection)}: ${reports} reports counted but ${stored} memoized `
          + "(the ledger records both together)",
      );
    }
  }
  const centralDoc = paths ? doc["central"] : {};
  if (!isPlain(centralDoc)) throw refused(path, "its tables are missing or malformed");
  const central = new Map<string, CentralGuarantee>();
  for (const [collection, row] of Object.entries(centralDoc)) {
    const checked = checkedCentral(collection, row);
    if (typeof checked === "string") throw refused(path, checked);
    if (!(spend.get(collection)?.reports ?? 0)) {
      throw refused(
        path,
        `collection ${shown(collection)}: a central guarantee is recorded but no report (the ledger `
          + "records it with the spend)",
      );
    }
    const clear = [...memo.values()].filter((m) => m.collection === collection && !m.sealed).length;
    if (clear) {
      throw refused(
        path,
        `collection ${shown(collection)}: a central guarantee is recorded but ${clear} of its `
          + "memoized reports were sent in clear (the ledger records one only while every report went through a shuffler)",
      );
    }
    central.set(collection, checked);
  }
  return {
    format,
    secret: Buffer.from(secretHex, "hex"),
    device: device as Record<string, JsonValue>,
    budget,
    pinned,
    spend,
    memo,
    central,
  };
}
