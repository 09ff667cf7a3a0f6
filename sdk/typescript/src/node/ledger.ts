/**
 * The device's privacy ledger in Node (docs/contract.md §5, §14), with the semantics of the Python
 * SDK's `PrivacyLedger` (client/ledger/) and the rules every ledger of this SDK keeps
 * (../ledger-rules.ts):
 *
 * - Basic composition, exactly: a collection's spend is the sum of the card's delivered ε over its
 *   new reports, kept as an exact rational. The budget is fixed when the ledger is created and stored
 *   in it (`budget`, or 10 × each collection's ε); a later `budget` may lower it for a session, never
 *   raise it. A submission that would pass it is refused whole (PrivacyBudgetExceeded), nothing recorded.
 * - The ε a collection is released at is pinned at the device's first report to it: a card re-issued
 *   under the same name at another ε is refused (CardChanged) until `FileLedger.reset`.
 * - Memoization: a row (collection fingerprint, public codes, raw private code) is reported once;
 *   seen again, its first report (same id, same perturbed code) is reused and costs nothing. The memo
 *   is keyed by HMAC-SHA256 under a random 32-byte device secret, never by the raw row.
 * - Spend before send: the pin, the spend and the memo are written durably (a whole new file, fsynced,
 *   renamed over the old one, directory fsynced) before any report is returned to be sent.
 * - Refused, never repaired or recreated: a ledger is created only where there is no ledger file and
 *   no marker `<ledger>.created` (the ledger's id, an HMAC of a constant under its secret); a missing
 *   ledger whose marker is left, an empty or unreadable file, another format, a damaged budget, pin,
 *   spend or memo, a ledger that is not the one its marker names: LedgerError, never a fresh ledger at
 *   ε = 0. `FileLedger.reset` starts over knowingly, moving the old files aside. A ledger of format 1
 *   (written before budgets and pins were stored) is upgraded at its first open: the budget given
 *   then (else the default) is stored and each collection's ε is pinned at its spend per report; a
 *   ledger of format 2 (before the ledger recorded promises and paths) gets an empty table of promises
 *   and its memoized reports are marked sent in clear (it recorded no promise, as the Python ledger
 *   marks the memos of a collection without one), so its collections with reports never get a promise.
 * - A shuffled collection's promise and one path per report (../ledger-rules.ts): with a submission
 *   sent sealed through a shuffler the ledger records the guarantee the collection promised
 *   (`guarantees`), while every report to it went that way; each memoized report records its path, and
 *   a submission that would send one the other way is refused, nothing charged.
 *
 * The file is this SDK's own JSON format (not the Python SDK's SQLite file, which it refuses): a
 * device must keep using one SDK's ledger for a collection. One process at a time writes it (a lock
 * file `<ledger>.lock` holding the writer's pid; a lock whose process is gone is taken over). The format
 * is ./ledger-format.ts; the files, their marker and lock, ./ledger-files.ts.
 */
import { createHash, createHmac } from "node:crypto";
import { linkSync, mkdirSync, unlinkSync } from "node:fs";
import { homedir } from "node:os";
import { basename, dirname, join } from "node:path";
import type { Card } from "../any-card.js";
import type { MemoEntry, PathOptions } from "../device-core.js";
import * as frac from "../fraction.js";
import type { Fraction } from "../fraction.js";
import type { JsonValue } from "../json.js";
import { collectionIdentity } from "../fingerprint.js";
import {
  Budget,
  CardChanged,
  centralRecord,
  charge,
  checkPath,
  checkPinned,
  DEFAULT_BUDGET_MULTIPLE,
  LedgerError,
  MARKER_SUFFIX,
  mayPromise,
  MEMO_DOMAIN,
  NO_SPEND,
  PrivacyBudgetExceeded,
  promised,
  type CentralGuarantee,
  type Spend,
} from "../ledger-rules.js";
import { checkEpsilon } from "../validation.js";
import { ValidationError } from "../errors.js";
import { VIEW_KEY_TAG } from "../wide-card.js";
import { ROUND_KEY_CONTEXT } from "../discovery-card.js";
import {
  checkMarker,
  createLedger,
  exists,
  ledgerId,
  locked,
  replaceLedger,
  upgrade,
  writeMarker,
} from "./ledger-files.js";
import { FORMAT, readState, refused, shown, SOUND, type State } from "./ledger-format.js";

export { Budget, CardChanged, DEFAULT_BUDGET_MULTIPLE, LedgerError, PrivacyBudgetExceeded };

export type { CentralGuarantee, MemoEntry };

export const LEDGER_ENV = "LDPSYNTH_TS_LEDGER";

/** `$LDPSYNTH_TS_LEDGER`, else `$XDG_DATA_HOME/ldpsynth/ledger.json` (`~/.local/share` by default). */
export function defaultLedgerPath(): string {
  const explicit = process.env[LEDGER_ENV];
  if (explicit) return explicit;
  return join(process.env["XDG_DATA_HOME"] || join(homedir(), ".local", "share"), "ldpsynth", "ledger.json");
}

/** One submission's view of the ledger inside its transaction (see {@link FileLedger.transaction}). */
export class LedgerTransaction {
  private recorded = 0;
  private promiseChanged = false;
  private readonly reportedBefore: boolean;

  constructor(
    private readonly state: State,
    private readonly collection: string,
    private readonly epsilon: Fraction,
    private readonly budget: Fraction,
    /** This submission's path: sealed through a shuffler, or in clear. */
    readonly sealed: boolean,
  ) {
    this.reportedBefore = this.spend.reports > 0;
  }

  private get spend(): Spend {
    return this.state.spend.get(this.collection) ?? NO_SPEND;
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
   * The memoized report of every key (hex) that has one; ValidationError naming `rows` (nothing
   * recorded) if one of them was first sent the other way than this transaction's path.
   */
  lookup(keys: readonly string[]): Map<string, MemoEntry> {
    const found = new Map<string, MemoEntry>();
    for (const key of keys) {
      const entry = this.state.memo.get(key);
      if (entry === undefined) continue;
      if (entry.collection !== this.collection) {
        throw new LedgerError(
          `a memo key of collection ${shown(this.collection)} is recorded under another collection`,
          SOUND,
        );
      }
      found.set(key, entry);
    }
    checkPath(this.collection, this.sealed, [...found.values()].filter((m) => m.sealed !== this.sealed).length);
    return found;
  }

  /** Charge ε for new reports and memoize them; throws, recording nothing, if that would pass the budget. */
  record(keys: readonly string[], reportIds: Uint8Array, codes: readonly bigint[]): void {
    const count = keys.length;
    const spend = charge(this.collection, this.spend, this.epsilon, this.budget, count);
    if (!count) return;
    if (new Set(keys).size !== count || keys.some((key) => this.state.memo.has(key))) {
      throw new LedgerError("a report recorded twice (memo keys must be new and distinct)", SOUND);
    }
    keys.forEach((key, i) => {
      this.state.memo.set(key, {
        collection: this.collection,
        reportId: reportIds.slice(16 * i, 16 * i + 16),
        privateCode: codes[i]!,
        sealed: this.sealed,
      });
    });
    this.state.spend.set(this.collection, spend);
    this.recorded += count;
  }

  /**
   * Whether {@link promise} records a guarantee: every report charged to the collection before this
   * transaction was charged for a shuffler (a guarantee is recorded for them, or there was none).
   */
  promisable(): boolean {
    return mayPromise(this.reportedBefore, () => this.state.central.has(this.collection));
  }

  /**
   * Record the guarantee the collection promised this submission's reports, sent sealed through a
   * shuffler (only when {@link promisable}), or with undefined remove it (sent in clear: known to be
   * this device's). Returns what is recorded now.
   */
  promise(guarantee: CentralGuarantee | undefined): CentralGuarantee | undefined {
    const recorded = promised(guarantee, this.sealed, this.reports, () => this.promisable());
    const before = this.state.central.get(this.collection);
    if (recorded === undefined) this.state.central.delete(this.collection);
    else this.state.central.set(this.collection, recorded);
    this.promiseChanged ||=
      JSON.stringify(before && centralRecord(before)) !== JSON.stringify(recorded && centralRecord(recorded));
    return recorded;
  }

  /** Whether anything was recorded. */
  get changed(): boolean {
    return this.recorded > 0 || this.promiseChanged;
  }
}

export interface LedgerOptions {
  /**
   * The ε a device may spend per collection (finite, > 0). A new ledger stores it (undefined: 10 × each
   * collection's ε); with an existing ledger it may only lower the stored budget for this session.
   */
  readonly budget?: number;
}

/** A device's privacy ledger in one file next to its marker. */
export class FileLedger {
  readonly path: string;
  /** The budget stored when the ledger was created. */
  readonly budget: Budget;
  /** This session's budget per collection (undefined: the stored one). */
  readonly sessionBudget: number | undefined;
  private readonly secret: Buffer;

  /** Open the ledger at `path` (default {@link defaultLedgerPath}), creating it only where none ever was. */
  constructor(path: string = defaultLedgerPath(), options: LedgerOptions = {}) {
    this.sessionBudget = options.budget === undefined ? undefined : checkEpsilon(options.budget, "budget");
    this.path = path;
    if (!exists(path)) {
      const marker = `${path}${MARKER_SUFFIX}`;
      if (exists(marker)) {
        throw refused(
          path,
          `the ledger is missing but its marker ${basename(marker)} shows that one was created here: `
            + "a new ledger would let rows already reported be reported afresh",
        );
      }
      try {
        createLedger(path, Budget.of(this.sessionBudget));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "EEXIST") {
          throw refused(path, `cannot create it (${(err as Error).message})`);
        }
      }
    }
    let state = readState(path);
    this.secret = state.secret;
    checkMarker(path, ledgerId(state.secret));
    if (state.format !== FORMAT) state = upgrade(path, Budget.of(this.sessionBudget));
    this.budget = state.budget!;
    if (this.sessionBudget !== undefined && this.budget.epsilon !== undefined) {
      this.budget.effective(this.budget.epsilon, frac.fromFloat(this.sessionBudget)); // never above the stored one
    }
  }

  /**
   * Start this device over, knowingly: the ledger and its marker are renamed `<ledger>.reset-<UTC time>`
   * (never deleted) and a new ledger, with `budget` (undefined: the default), records what was moved.
   * ε restarts at 0: only the server's per-credential quota bounds what the device adds afterwards.
   * Returns the record.
   */
  static reset(path: string = defaultLedgerPath(), options: LedgerOptions = {}): Record<string, JsonValue> {
    const budget = Budget.of(options.budget);
    const now = new Date();
    const aside = `${path}.reset-${now.toISOString().replace(/[-:.]/g, "")}`;
    const moved: Record<string, JsonValue> = {};
    const record: Record<string, JsonValue> = { at: now.toISOString(), moved, budget: budget.describe() };
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    return locked(path, () => {
      for (const [from, to] of [
        [path, aside],
        [`${path}${MARKER_SUFFIX}`, `${aside}${MARKER_SUFFIX}`],
      ] as const) {
        if (!exists(from)) continue;
        linkSync(from, to); // never over an existing file; a crash leaves both names, not neither
        unlinkSync(from);
        moved[basename(from)] = basename(to);
      }
      const secret = createLedger(path, budget, { reset: record });
      writeMarker(path, ledgerId(secret), record);
      return record;
    });
  }

  private budgetFor(epsilon: number): Fraction {
    const session = this.sessionBudget === undefined ? undefined : frac.fromFloat(this.sessionBudget);
    return this.budget.effective(frac.fromFloat(checkEpsilon(epsilon, "epsilon")), session);
  }

  /** The budget of a collection released at `epsilon` (this session's, if it set a lower one). */
  budgetForEpsilon(epsilon: number): number {
    return frac.toFloat(this.budgetFor(epsilon));
  }

  /** ε this device has spent on `collection` (the file is read and checked again). */
  spent(collection: string): number {
    return frac.toFloat(readState(this.path).spend.get(collection)?.epsilon ?? frac.ZERO);
  }

  /** Distinct reports this device has released to `collection`. */
  reports(collection: string): number {
    return readState(this.path).spend.get(collection)?.reports ?? 0;
  }

  /**
   * The guarantee `collection` promised this device's reports, sent sealed through a shuffler; undefined
   * for a collection that is not shuffled, never reported to, or some of whose reports were sent in clear
   * or before the ledger recorded promises (format 3).
   */
  guarantees(collection: string): CentralGuarantee | undefined {
    return readState(this.path).central.get(collection);
  }

  /**
   * This device's key for the view assignment of the wide collection `collection`: HMAC-SHA256 under the
   * device secret of `ldpsynth view key/1` and the name (UTF-8; the reference's `PrivacyLedger.view_key`).
   * Stable for the ledger's life, so the device always reports the same view; unlinkable across devices.
   */
  viewKey(collection: string): Uint8Array {
    return deviceKey(this.secret, VIEW_KEY_TAG, collection);
  }

  /**
   * This device's round key for the discovery collection `collection` (its name, not a round's): HMAC-SHA256
   * under the device secret of `ldpsynth round key/1` and the name (the reference's `PrivacyLedger.round_key`).
   */
  roundKey(collection: string): Uint8Array {
    return deviceKey(this.secret, ROUND_KEY_CONTEXT, collection);
  }

  /**
   * The memo key (64 hex digits) of every row: HMAC-SHA256 under the device secret of a domain tag,
   * the collection's fingerprint, and the row's public codes and raw private code as little-endian uint64.
   */
  memoKeys(
    fingerprint: Uint8Array,
    publicCodes: readonly (readonly bigint[])[],
    privateCodes: readonly bigint[],
  ): string[] {
    const width = 8 * (publicCodes.length + 1);
    const row = Buffer.alloc(width);
    return privateCodes.map((code, i) => {
      publicCodes.forEach((column, j) => row.writeBigUInt64LE(column[i]!, 8 * j));
      row.writeBigUInt64LE(code, width - 8);
      return createHmac("sha256", this.secret).update(MEMO_DOMAIN).update(fingerprint).update(row).digest("hex");
    });
  }

  /**
   * Run `body` as one transaction on `collection` released at `epsilon`, for reports sent sealed through
   * a shuffler (`sealed`) or (default) in clear: the file is locked, read and checked again; what `body`
   * records is written durably before this returns. If `body` throws (e.g. PrivacyBudgetExceeded, or a
   * memoized report of the other path) nothing is written.
   */
  transaction<T>(
    collection: string,
    epsilon: number,
    body: (tx: LedgerTransaction) => T,
    options: PathOptions = {},
  ): T {
    const eps = frac.fromFloat(checkEpsilon(epsilon, "epsilon"));
    const budget = this.budgetFor(epsilon);
    return locked(this.path, () => {
      const state = readState(this.path);
      if (!state.secret.equals(this.secret))
        throw refused(this.path, "it is not the ledger opened (its secret changed)");
      if (state.budget === undefined) throw refused(this.path, "it was put back to format 1 after it was opened");
      const pinned = state.pinned.get(collection);
      checkPinned(collection, pinned, eps);
      const tx = new LedgerTransaction(state, collection, eps, budget, options.sealed ?? false);
      const result = body(tx);
      if (pinned === undefined) state.pinned.set(collection, eps);
      if (tx.changed || pinned === undefined) replaceLedger(this.path, state);
      return result;
    });
  }
}

/** SHA-256 of what a report means: the schema, the version, |D| and E's exact weights. */
/**
 * A device's key for splitting a collection's devices into parts (the reference's `ledger.rules.device_key`):
 * HMAC-SHA256 under the ledger's `secret` of `tag` and the collection's name (UTF-8); ValidationError naming
 * `collection` for an empty name.
 */
export function deviceKey(secret: Uint8Array, tag: string, collection: string): Uint8Array {
  if (typeof collection !== "string" || !collection) {
    throw new ValidationError("collection", "a non-empty collection name", "empty or not a string");
  }
  return new Uint8Array(createHmac("sha256", secret).update(tag).update(collection, "utf8").digest());
}

export function collectionFingerprint(card: Card): Uint8Array {
  return new Uint8Array(createHash("sha256").update(collectionIdentity(card)).digest());
}
