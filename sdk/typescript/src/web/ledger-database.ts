/**
 * The database of the browser ledger (./ledger.ts): `ldpsynth-ledger/<name>` in IndexedDB, of version 2
 * (and version 1, upgraded when opened), opened or created where none ever was and checked whole on one
 * snapshot; its marker in localStorage; and promises over IndexedDB's requests.
 */
import type { JsonValue } from "../json.js";
import {
  Budget,
  checkedCentral,
  checkedPin,
  checkedSpend,
  ID_DOMAIN,
  LedgerError,
  MARKER_SUFFIX,
  markerRecord,
} from "../ledger-rules.js";

export const FORMAT = "ldpsynth.idb-ledger/2";
/** The format of a database of version 1 (before promises and paths), upgraded when opened. */
const FORMAT_1 = "ldpsynth.idb-ledger/1";
export const DB_PREFIX = "ldpsynth-ledger/";
const VERSION = 2;
const STORES = ["device", "spend", "pinned", "memo", "central"] as const;
export const SOUND =
  "an intact ledger this SDK created, next to its marker (to start this device over knowingly: "
  + "IndexedDbLedger.reset; docs/contract.md §14)";

/** Where a ledger's marker is kept: the origin's localStorage by default. */
export type MarkerStore = Pick<Storage, "getItem" | "setItem" | "removeItem">;

/** The LedgerError refusing the ledger `name`. */
export function refused(name: string, problem: string): LedgerError {
  return new LedgerError(`IndexedDB ledger ${JSON.stringify(name)}: ${problem}`, SOUND);
}

function request<T>(req: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error ?? new DOMException("the request failed", "UnknownError"));
  });
}

/** A record read by key: `unknown` until checked (IndexedDB's `get` gives `any`). */
export function stored(req: IDBRequest): Promise<unknown> {
  return request<unknown>(req);
}

/** A key of a damaged ledger, shown in its error (any IndexedDB key; a sound ledger's are strings). */
function keyText(key: IDBValidKey): string {
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- whatever key was found, as String() shows it
  return String(key);
}

/** Resolves when `tx` commits; rejects when it fails or is aborted. */
export function completion(tx: IDBTransaction): Promise<void> {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error ?? new DOMException("the transaction failed", "UnknownError"));
    tx.onabort = () => reject(tx.error ?? new DOMException("the transaction was aborted", "AbortError"));
  });
}

/** Bytes as lower-case hex digits. */
export function hex(bytes: ArrayBuffer | Uint8Array): string {
  return Array.from(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes), (b) =>
    b.toString(16).padStart(2, "0"),
  ).join("");
}

/** The bytes of `parts` one after the other, in a new array. */
export function concat(...parts: Uint8Array[]): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

/** The ledger's id, recorded in its marker: an HMAC of a constant under its secret. */
export async function ledgerId(secret: CryptoKey): Promise<string> {
  return hex(await crypto.subtle.sign("HMAC", secret, ID_DOMAIN)).slice(0, 32);
}

/**
 * Version 1 -> 2, in the open's upgrade transaction: add the (empty) `central` table and mark the
 * format 2, only where the database is one of format 1 (anything else is left for verify to refuse).
 */
function upgradeFrom1(db: IDBDatabase, tx: IDBTransaction): void {
  if (!db.objectStoreNames.contains("central")) db.createObjectStore("central");
  if (!db.objectStoreNames.contains("device")) return;
  const device = tx.objectStore("device");
  const format = device.get("format");
  format.onsuccess = () => {
    if (format.result === FORMAT_1) device.put(FORMAT, "format");
  };
}

/** Open (or, where none ever was, create) the database; LedgerError for a missing or foreign one. */
export function openDatabase(
  factory: IDBFactory,
  name: string,
  markerExists: boolean,
  create: Record<string, unknown>,
): Promise<IDBDatabase> {
  return new Promise((resolve, reject) => {
    let problem: LedgerError | undefined;
    const req = factory.open(DB_PREFIX + name, VERSION);
    req.onupgradeneeded = (event) => {
      const tx = req.transaction!;
      if (event.oldVersion === 1) {
        upgradeFrom1(req.result, tx);
        return;
      }
      if (event.oldVersion !== 0) {
        problem = refused(name, `its database has version ${event.oldVersion}, not ${VERSION}`);
      } else if (markerExists) {
        problem = refused(
          name,
          "the ledger is missing but its marker shows that one was created here: a new ledger "
            + "would let rows already reported be reported afresh",
        );
      }
      if (problem) {
        tx.abort();
        return;
      }
      const db = req.result;
      for (const store of STORES) db.createObjectStore(store);
      tx.objectStore("memo").createIndex("collection", "collection");
      for (const [key, value] of Object.entries(create)) tx.objectStore("device").put(value, key);
    };
    req.onsuccess = () => resolve(req.result);
    req.onerror = () =>
      reject(
        problem
          ?? (req.error?.name === "VersionError"
            ? refused(name, `its database has a version above ${VERSION} (another SDK's ledger)`)
            : refused(name, `cannot open it (${req.error?.message ?? "unknown error"})`)),
      );
    req.onblocked = () => reject(refused(name, "another page holds an older version of it open"));
  });
}

/** Check the whole ledger on one snapshot; its secret, budget and marker record. */
export async function verify(db: IDBDatabase, name: string): Promise<{ secret: CryptoKey; budget: Budget }> {
  if (STORES.some((store) => !db.objectStoreNames.contains(store))) {
    throw refused(name, "a table is missing (not a database this SDK created)");
  }
  const tx = db.transaction([...STORES], "readonly");
  const device = tx.objectStore("device");
  const [format, secret, budgetJson, collections, spends, pins, pinned, promises, guarantees] = await Promise.all([
    stored(device.get("format")),
    stored(device.get("secret")),
    stored(device.get("budget")),
    request(tx.objectStore("spend").getAllKeys()),
    request(tx.objectStore("spend").getAll()),
    request(tx.objectStore("pinned").getAllKeys()),
    request(tx.objectStore("pinned").getAll()),
    request(tx.objectStore("central").getAllKeys()),
    request(tx.objectStore("central").getAll()),
  ]);
  if (format !== FORMAT) throw refused(name, `it is not a ledger of format ${FORMAT}`);
  if (!(secret instanceof CryptoKey) || secret.algorithm.name !== "HMAC" || secret.extractable) {
    throw refused(name, "its memo secret is missing or not a non-extractable HMAC key");
  }
  const budget = Budget.fromJson(budgetJson);
  if (!budget) throw refused(name, "its budget is missing or not one the ledger writes");
  pins.forEach((collection, i) => {
    if (typeof collection !== "string" || !checkedPin(pinned[i])) {
      throw refused(
        name,
        `collection ${JSON.stringify(keyText(collection))}: its pinned epsilon is not an exact number > 0`,
      );
    }
  });
  const memo = tx.objectStore("memo").index("collection");
  const counts = await Promise.all(collections.map((c) => request(memo.count(c as string))));
  collections.forEach((collection, i) => {
    const spend = checkedSpend(keyText(collection), spends[i]);
    if (typeof spend === "string") throw refused(name, spend);
    if (counts[i] !== spend.reports) {
      throw refused(
        name,
        `collection ${JSON.stringify(keyText(collection))}: ${spend.reports} reports counted but `
          + `${counts[i]} memoized (the ledger records both together)`,
      );
    }
  });
  const total = await request(tx.objectStore("memo").count());
  if (total !== counts.reduce((a, b) => a + b, 0)) throw refused(name, "memoized reports of no counted collection");
  const promisedMemos = await Promise.all(promises.map((c) => request(memo.getAll(c))));
  promises.forEach((collection, i) => {
    const shown = JSON.stringify(keyText(collection));
    const checked = checkedCentral(keyText(collection), guarantees[i]);
    if (typeof checked === "string") throw refused(name, checked);
    const at = collections.indexOf(collection);
    if (typeof collection !== "string" || at < 0 || !(spends[at] as { reports?: unknown }).reports) {
      throw refused(
        name,
        `collection ${shown}: a central guarantee is recorded but no report (the ledger records it `
          + "with the spend)",
      );
    }
    const clear = promisedMemos[i]!.filter((m) => (m as { sealed?: unknown }).sealed !== true).length;
    if (clear) {
      throw refused(
        name,
        `collection ${shown}: a central guarantee is recorded but ${clear} of its memoized reports `
          + "were sent in clear (the ledger records one only while every report went through a shuffler)",
      );
    }
  });
  return { secret, budget };
}

/** The marker of the ledger `name` (undefined: none); LedgerError for one that is not a marker. */
export function readMarker(markers: MarkerStore, name: string): Record<string, unknown> | undefined {
  const text = markers.getItem(DB_PREFIX + name + MARKER_SUFFIX);
  if (text === null) return undefined;
  try {
    const marker = JSON.parse(text) as unknown;
    if (
      typeof marker === "object"
      && marker !== null
      && typeof (marker as Record<string, unknown>)["ledger_id"] === "string"
    ) {
      return marker as Record<string, unknown>;
    }
  } catch {
    // refused below
  }
  throw refused(name, "its marker is not a ledger marker");
}

/** Write the marker of the ledger `name` of id `id` (and a reset's record). */
export function writeMarker(markers: MarkerStore, name: string, id: string, reset?: JsonValue): void {
  markers.setItem(DB_PREFIX + name + MARKER_SUFFIX, JSON.stringify(markerRecord(DB_PREFIX + name, id, reset)));
}
