/**
 * The device's privacy ledger in a browser: IndexedDB, with the rules of every ledger of this SDK
 * (../ledger-rules.ts: budget fixed at creation and stored, ε pinned per collection, exact basic
 * composition) and the Python `PrivacyLedger`'s semantics (docs/contract.md §5, §14):
 *
 * - Memoization: a row (collection fingerprint, public codes, raw private code) is reported once;
 *   seen again, its first report (same id, same perturbed code) is reused and costs nothing. The memo
 *   is keyed by HMAC-SHA256 under a random 256-bit device secret, kept as a *non-extractable*
 *   WebCrypto key in the database: page scripts can use it but never read it out.
 * - Spend before send: a submission's pin, spend and memo are written in one `readwrite` transaction
 *   with `durability: "strict"` (flushed before it completes), which completes before any report is
 *   returned to be sent.
 * - Refused, never recreated: the database `ldpsynth-ledger/<name>` is created only where the origin's
 *   localStorage holds no marker `ldpsynth-ledger/<name>.created` (the ledger's id: an HMAC of a
 *   constant under the secret). A missing database whose marker is left, a database of another
 *   version or format, a missing or damaged table, secret, budget, spend, pin or memo, a memo count
 *   that differs from the spend, a database that is not the one its marker names: LedgerError, never
 *   a fresh ledger at ε = 0. `IndexedDbLedger.reset` starts over knowingly. (A browser's "clear site
 *   data" removes the database and the marker together, which no page can detect: then only the
 *   server's per-credential quota bounds the device; ask for `navigator.storage.persist()` so the
 *   browser does not evict the ledger by itself.)
 * - A shuffled collection's promise and one path per report (../ledger-rules.ts): a transaction for
 *   reports sent sealed through a shuffler records the guarantee the collection promised (table
 *   `central`, `guarantees`), while every report to it went that way; each memoized report records its
 *   path (`sealed`), and a submission that would send one the other way is refused, nothing charged.
 *   A database of version 1 (before promises and paths) is upgraded when opened: the `central` table is
 *   added, empty, and its memoized reports (without `sealed`) count as sent in clear (it recorded no
 *   promise), so its collections with reports never get a promise.
 */
import { ValidationError } from "../errors.js";
import type { MemoEntry, PathOptions } from "../device-core.js";
import * as frac from "../fraction.js";
import type { Fraction } from "../fraction.js";
import type { JsonValue } from "../json.js";
import {
  Budget,
  centralRecord,
  charge,
  checkedCentral,
  checkedPin,
  checkedSpend,
  checkPath,
  checkPinned,
  LedgerError,
  mayPromise,
  NO_SPEND,
  promised,
  type CentralGuarantee,
  type Spend,
} from "../ledger-rules.js";
import { REPORT_ID_BYTES, secureRandomBytes } from "../random.js";
import { checkEpsilon } from "../validation.js";

const FORMAT = "ldpsynth.idb-ledger/2";
/** The format of a database of version 1 (before promises and paths), upgraded when opened. */
const FORMAT_1 = "ldpsynth.idb-ledger/1";
const MARKER_FORMAT = "ldpsynth-ledger-marker/1";
const DB_PREFIX = "ldpsynth-ledger/";
export const MARKER_SUFFIX = ".created";
const VERSION = 2;
const STORES = ["device", "spend", "pinned", "memo", "central"] as const;
const SECRET_BYTES = 32;
const MEMO_DOMAIN = new TextEncoder().encode("ldpsynth-memo/1");
const ID_DOMAIN = new TextEncoder().encode("ldpsynth-ledger-id/1");
const NAME = /^[A-Za-z0-9._-]{1,64}$/;
const KEY_HEX = /^[0-9a-f]{64}$/;
const SOUND =
  "an intact ledger this SDK created, next to its marker (to start this device over knowingly: "
  + "IndexedDbLedger.reset; docs/contract.md §14)";

/** Where a ledger's marker is kept: the origin's localStorage by default. */
export type MarkerStore = Pick<Storage, "getItem" | "setItem" | "removeItem">;

export interface IndexedDbLedgerOptions {
  /**
   * The ε a device may spend per collection (finite, > 0). A new ledger stores it (undefined: 10 ×
   * each collection's ε); an existing one may only lower it for this session.
   */
  readonly budget?: number;
  /** The IndexedDB factory (default `globalThis.indexedDB`). */
  readonly indexedDB?: IDBFactory;
  /** Where the marker is kept (default `globalThis.localStorage`). */
  readonly markers?: MarkerStore;
}

function refused(name: string, problem: string): LedgerError {
  return new LedgerError(`IndexedDB ledger ${JSON.stringify(name)}: ${problem}`, SOUND);
}

function request<T>(req: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error ?? new DOMException("the request failed", "UnknownError"));
  });
}

/** A record read by key: `unknown` until checked (IndexedDB's `get` gives `any`). */
function stored(req: IDBRequest): Promise<unknown> {
  return request<unknown>(req);
}

/** A key of a damaged ledger, shown in its error (any IndexedDB key; a sound ledger's are strings). */
function keyText(key: IDBValidKey): string {
  // eslint-disable-next-line @typescript-eslint/no-base-to-string -- whatever key was found, as String() shows it
  return String(key);
}

function completion(tx: IDBTransaction): Promise<void> {
  return new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error ?? new DOMException("the transaction failed", "UnknownError"));
    tx.onabort = () => reject(tx.error ?? new DOMException("the transaction was aborted", "AbortError"));
  });
}

function hex(bytes: ArrayBuffer | Uint8Array): string {
  return Array.from(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes), (b) =>
    b.toString(16).padStart(2, "0"),
  ).join("");
}

function concat(...parts: Uint8Array[]): Uint8Array<ArrayBuffer> {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

async function ledgerId(secret: CryptoKey): Promise<string> {
  return hex(await crypto.subtle.sign("HMAC", secret, ID_DOMAIN)).slice(0, 32);
}

function defaults(options: IndexedDbLedgerOptions): { factory: IDBFactory; markers: MarkerStore } {
  const factory = options.indexedDB ?? globalThis.indexedDB;
  const markers = options.markers ?? globalThis.localStorage;
  if (!factory || !markers) {
    throw new ValidationError(
      "ledger",
      "a browser page with IndexedDB and localStorage (or both given as options)",
      "not available here",
    );
  }
  return { factory, markers };
}

function checkName(name: string): string {
  if (typeof name !== "string" || !NAME.test(name)) {
    throw new ValidationError("name", "1 to 64 characters among letters, digits, '.', '_' and '-'", "malformed");
  }
  return name;
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
function openDatabase(
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
async function verify(db: IDBDatabase, name: string): Promise<{ secret: CryptoKey; budget: Budget }> {
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

function readMarker(markers: MarkerStore, name: string): Record<string, unknown> | undefined {
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

function writeMarker(markers: MarkerStore, name: string, id: string, reset?: JsonValue): void {
  const content: Record<string, unknown> = {
    format: MARKER_FORMAT,
    ledger: DB_PREFIX + name,
    ledger_id: id,
    written: new Date().toISOString(),
  };
  if (reset !== undefined) content["reset"] = reset;
  markers.setItem(DB_PREFIX + name + MARKER_SUFFIX, JSON.stringify(content));
}

/** One submission's view of the ledger inside its transaction (see {@link IndexedDbLedger.transaction}). */
export class IdbLedgerTransaction {
  private readonly reportedBefore: boolean;

  constructor(
    private readonly tx: IDBTransaction,
    private readonly collection: string,
    private readonly epsilon: Fraction,
    private readonly budget: Fraction,
    private spend: Spend,
    /** This submission's path: sealed through a shuffler, or in clear. */
    readonly sealed: boolean,
    /** Whether a promise is recorded for the collection (at the transaction's start). */
    private readonly promisedBefore: boolean,
  ) {
    this.reportedBefore = spend.reports > 0;
  }

  /** ε spent on the collection so far, this transaction's records included. */
  get spent(): number {
    return frac.toFloat(this.spend.epsilon);
  }

  /** Reports charged to the collection so far, this transaction's records included. */
  get reports(): number {
    return this.spend.reports;
  }

  /**
   * The memoized report of every key (hex) that has one; LedgerError for a malformed one, ValidationError
   * naming `rows` (nothing recorded) if one was first sent the other way than this transaction's path.
   */
  async lookup(keys: readonly string[]): Promise<Map<string, MemoEntry>> {
    const memo = this.tx.objectStore("memo");
    const rows = await Promise.all(keys.map((key) => stored(memo.get(key))));
    const found = new Map<string, MemoEntry>();
    rows.forEach((row, i) => {
      if (row === undefined) return;
      const entry = row as Record<string, unknown>;
      const id = entry["reportId"];
      const code = entry["privateCode"];
      const sealed = entry["sealed"] ?? false; // a report memoized in version 1: in clear
      if (
        entry["collection"] !== this.collection
        || !(id instanceof Uint8Array)
        || id.length !== REPORT_ID_BYTES
        || typeof code !== "string"
        || !/^[0-9]+$/.test(code)
        || typeof sealed !== "boolean"
      ) {
        throw new LedgerError(`a memoized report of collection ${JSON.stringify(this.collection)} is malformed`, SOUND);
      }
      found.set(keys[i]!, { collection: this.collection, reportId: id, privateCode: BigInt(code), sealed });
    });
    checkPath(this.collection, this.sealed, [...found.values()].filter((m) => m.sealed !== this.sealed).length);
    return found;
  }

  /** Charge ε for new reports and memoize them; throws, recording nothing, if that would pass the budget. */
  record(keys: readonly string[], reportIds: Uint8Array, codes: readonly bigint[]): void {
    const spend = charge(this.collection, this.spend, this.epsilon, this.budget, keys.length);
    if (!keys.length) return;
    if (new Set(keys).size !== keys.length || keys.some((key) => !KEY_HEX.test(key))) {
      throw new LedgerError("a report recorded twice (memo keys must be new and distinct)", SOUND);
    }
    const memo = this.tx.objectStore("memo");
    keys.forEach((key, i) => {
      memo.add(
        {
          collection: this.collection,
          reportId: reportIds.slice(16 * i, 16 * i + 16),
          privateCode: String(codes[i]!),
          sealed: this.sealed,
        },
        key,
      );
    });
    this.tx.objectStore("spend").put({ epsilon: frac.format(spend.epsilon), reports: spend.reports }, this.collection);
    this.spend = spend;
  }

  /**
   * Whether {@link promise} records a guarantee: every report charged to the collection before this
   * transaction was charged for a shuffler (a guarantee is recorded for them, or there was none).
   */
  promisable(): boolean {
    return mayPromise(this.reportedBefore, () => this.promisedBefore);
  }

  /**
   * Record the guarantee the collection promised this submission's reports, sent sealed through a
   * shuffler (only when {@link promisable}), or with undefined remove it (sent in clear: known to be
   * this device's). Returns what is recorded now.
   */
  promise(guarantee: CentralGuarantee | undefined): CentralGuarantee | undefined {
    const recorded = promised(guarantee, this.sealed, this.reports, () => this.promisable());
    const central = this.tx.objectStore("central");
    if (recorded === undefined) central.delete(this.collection);
    else central.put(centralRecord(recorded), this.collection);
    return recorded;
  }
}

/** A device's privacy ledger in the origin's IndexedDB. Open it with {@link IndexedDbLedger.open}. */
export class IndexedDbLedger {
  private constructor(
    readonly name: string,
    private readonly db: IDBDatabase,
    private readonly secret: CryptoKey,
    /** The budget stored at creation. */
    readonly budget: Budget,
    private readonly session: Fraction | undefined,
  ) {}

  /** Open the ledger `name`, creating it only where none ever was (see the module comment). */
  static async open(name = "default", options: IndexedDbLedgerOptions = {}): Promise<IndexedDbLedger> {
    return IndexedDbLedger.openWith(checkName(name), options);
  }

  private static async openWith(
    name: string,
    options: IndexedDbLedgerOptions,
    reset?: JsonValue,
  ): Promise<IndexedDbLedger> {
    const { factory, markers } = defaults(options);
    const session = options.budget === undefined ? undefined : frac.fromFloat(checkEpsilon(options.budget, "budget"));
    const marker = readMarker(markers, name);
    const fresh = await crypto.subtle.importKey(
      "raw",
      concat(secureRandomBytes(SECRET_BYTES)),
      { name: "HMAC", hash: "SHA-256" },
      false,
      ["sign"],
    );
    const create: Record<string, unknown> = {
      format: FORMAT,
      secret: fresh,
      budget: Budget.of(options.budget).toJson(),
      created: new Date().toISOString(),
    };
    if (reset !== undefined) create["reset"] = reset;
    const db = await openDatabase(factory, name, marker !== undefined, create);
    try {
      const { secret, budget } = await verify(db, name);
      const id = await ledgerId(secret);
      if (marker === undefined) {
        writeMarker(markers, name, id, reset);
      } else if (marker["ledger_id"] !== id) {
        throw refused(name, "it is not the ledger its marker was written for: the ledger was replaced");
      }
      if (session !== undefined && budget.epsilon !== undefined) budget.effective(budget.epsilon, session); // not higher
      return new IndexedDbLedger(name, db, secret, budget, session);
    } catch (err) {
      db.close();
      throw err;
    }
  }

  /**
   * Start this device over, knowingly: the ledger's database and marker are deleted (a browser cannot
   * move them aside) and a new ledger, with `budget`, records the reset. ε restarts at 0: only the
   * server's per-credential quota bounds what the device adds afterwards. Close every open handle of
   * the ledger first. Returns the record.
   */
  static async reset(name = "default", options: IndexedDbLedgerOptions = {}): Promise<Record<string, JsonValue>> {
    checkName(name);
    const { factory, markers } = defaults(options);
    const record: Record<string, JsonValue> = {
      at: new Date().toISOString(),
      budget: Budget.of(options.budget).describe(),
    };
    await new Promise<void>((resolve, reject) => {
      const req = factory.deleteDatabase(DB_PREFIX + name);
      req.onsuccess = () => resolve();
      req.onerror = () => reject(refused(name, `cannot delete it (${req.error?.message ?? "unknown error"})`));
      req.onblocked = () => reject(refused(name, "it is open elsewhere: close it before a reset"));
    });
    markers.removeItem(DB_PREFIX + name + MARKER_SUFFIX);
    const ledger = await IndexedDbLedger.openWith(name, options, record);
    ledger.close();
    return record;
  }

  /** Close the database (transactions in flight finish). */
  close(): void {
    this.db.close();
  }

  /** The budget of a collection released at `epsilon` (this session's, if it set a lower one). */
  budgetForEpsilon(epsilon: number): number {
    return frac.toFloat(this.budget.effective(frac.fromFloat(checkEpsilon(epsilon)), this.session));
  }

  private async readSpend(collection: string): Promise<Spend> {
    const tx = this.db.transaction("spend", "readonly");
    const row = await stored(tx.objectStore("spend").get(collection));
    if (row === undefined) return NO_SPEND;
    const spend = checkedSpend(collection, row);
    if (typeof spend === "string") throw refused(this.name, spend);
    return spend;
  }

  /** ε this device has spent on `collection`. */
  async spent(collection: string): Promise<number> {
    return frac.toFloat((await this.readSpend(collection)).epsilon);
  }

  /** Distinct reports this device has released to `collection`. */
  async reports(collection: string): Promise<number> {
    return (await this.readSpend(collection)).reports;
  }

  /**
   * The guarantee `collection` promised this device's reports, sent sealed through a shuffler; undefined
   * for a collection that is not shuffled, never reported to, or some of whose reports were sent in clear
   * or before the ledger recorded promises (version 2).
   */
  async guarantees(collection: string): Promise<CentralGuarantee | undefined> {
    const tx = this.db.transaction("central", "readonly");
    const row = await stored(tx.objectStore("central").get(collection));
    if (row === undefined) return undefined;
    const checked = checkedCentral(collection, row);
    if (typeof checked === "string") throw refused(this.name, checked);
    return checked;
  }

  /**
   * The memo key (64 hex digits) of every row: HMAC-SHA256 under the device secret of a domain tag,
   * the collection's fingerprint, and the row's public codes and raw private code as little-endian uint64.
   */
  async memoKeys(
    fingerprint: Uint8Array,
    publicCodes: readonly (readonly bigint[])[],
    privateCodes: readonly bigint[],
  ): Promise<string[]> {
    const width = 8 * (publicCodes.length + 1);
    const prefix = concat(MEMO_DOMAIN, fingerprint);
    return Promise.all(
      privateCodes.map(async (code, i) => {
        const row = new DataView(new ArrayBuffer(width));
        publicCodes.forEach((column, j) => row.setBigUint64(8 * j, column[i]!, true));
        row.setBigUint64(width - 8, code, true);
        return hex(await crypto.subtle.sign("HMAC", this.secret, concat(prefix, new Uint8Array(row.buffer))));
      }),
    );
  }

  /**
   * Run `body` as one transaction on `collection` released at `epsilon`, for reports sent sealed through
   * a shuffler (`sealed`) or (default) in clear: the ε is pinned (CardChanged if the collection was
   * reported to at another ε), and what `body` records is durable before this returns. If `body` throws
   * (e.g. PrivacyBudgetExceeded, or a memoized report of the other path) nothing is written. `body` may
   * await only the transaction's own lookups (IndexedDB commits a transaction left without a request).
   */
  async transaction<T>(
    collection: string,
    epsilon: number,
    body: (tx: IdbLedgerTransaction) => Promise<T>,
    options: PathOptions = {},
  ): Promise<T> {
    const eps = frac.fromFloat(checkEpsilon(epsilon, "epsilon"));
    const tx = this.db.transaction(["spend", "pinned", "memo", "central"], "readwrite", { durability: "strict" });
    const done = completion(tx);
    try {
      const [pinnedRow, spendRow, centralRow] = await Promise.all([
        stored(tx.objectStore("pinned").get(collection)),
        stored(tx.objectStore("spend").get(collection)),
        stored(tx.objectStore("central").get(collection)),
      ]);
      const pinned = pinnedRow === undefined ? undefined : checkedPin(pinnedRow);
      if (pinnedRow !== undefined && pinned === undefined) {
        throw refused(
          this.name,
          `collection ${JSON.stringify(collection)}: its pinned epsilon is not an exact number > 0`,
        );
      }
      checkPinned(collection, pinned, eps);
      if (pinned === undefined) tx.objectStore("pinned").put(frac.format(eps), collection);
      const spend = spendRow === undefined ? NO_SPEND : checkedSpend(collection, spendRow);
      if (typeof spend === "string") throw refused(this.name, spend);
      const promise = centralRow === undefined ? undefined : checkedCentral(collection, centralRow);
      if (typeof promise === "string") throw refused(this.name, promise);
      const result = await body(
        new IdbLedgerTransaction(
          tx,
          collection,
          eps,
          this.budget.effective(eps, this.session),
          spend,
          options.sealed ?? false,
          promise !== undefined,
        ),
      );
      tx.commit();
      await done;
      return result;
    } catch (err) {
      try {
        tx.abort();
      } catch {
        // already finished
      }
      await done.catch(() => undefined);
      throw err;
    }
  }
}

/** SHA-256 of a collection's identity text (../fingerprint.ts), with WebCrypto. */
export async function collectionFingerprint(identity: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(identity)));
}
