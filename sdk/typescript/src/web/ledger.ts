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
 *
 * The database itself (opening, upgrading, checking it, its marker) is ./ledger-database.ts.
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
  KEY_HEX,
  LedgerError,
  MARKER_SUFFIX,
  mayPromise,
  MEMO_DOMAIN,
  NO_SPEND,
  promised,
  SECRET_BYTES,
  type CentralGuarantee,
  type Spend,
} from "../ledger-rules.js";
import { REPORT_ID_BYTES, secureRandomBytes } from "../random.js";
import { checkEpsilon } from "../validation.js";
import { ROUND_KEY_CONTEXT } from "../discovery-card.js";
import { VIEW_KEY_TAG } from "../wide-card.js";
import {
  completion,
  concat,
  DB_PREFIX,
  FORMAT,
  hex,
  ledgerId,
  type MarkerStore,
  openDatabase,
  readMarker,
  refused,
  SOUND,
  stored,
  verify,
  writeMarker,
} from "./ledger-database.js";

const NAME = /^[A-Za-z0-9._-]{1,64}$/;

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
  /** This device's view key for the wide collection `collection` (as the Node ledger's `viewKey`). */
  viewKey(collection: string): Promise<Uint8Array> {
    return this.deviceKey(VIEW_KEY_TAG, collection);
  }

  /** This device's round key for the discovery collection `collection` (as the Node ledger's `roundKey`). */
  roundKey(collection: string): Promise<Uint8Array> {
    return this.deviceKey(ROUND_KEY_CONTEXT, collection);
  }

  /** HMAC-SHA256 under the device secret of `tag` and the collection's name (UTF-8; `ledger.rules.device_key`). */
  private async deviceKey(tag: string, collection: string): Promise<Uint8Array> {
    if (typeof collection !== "string" || !collection) {
      throw new ValidationError("collection", "a non-empty collection name", "empty or not a string");
    }
    const text = new TextEncoder();
    return new Uint8Array(
      await crypto.subtle.sign("HMAC", this.secret, concat(text.encode(tag), text.encode(collection))),
    );
  }

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
