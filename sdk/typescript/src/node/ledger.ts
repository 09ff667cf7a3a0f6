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
 * file `<ledger>.lock` holding the writer's pid; a lock whose process is gone is taken over).
 */
import { createHash, createHmac, randomBytes } from "node:crypto";
import {
  closeSync,
  fsyncSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
} from "node:fs";
import { homedir } from "node:os";
import { basename, dirname, join } from "node:path";
import type { MechanismCard } from "../card.js";
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
  checkedCentral,
  checkedPin,
  checkedSpend,
  checkPath,
  checkPinned,
  DEFAULT_BUDGET_MULTIPLE,
  LedgerError,
  mayPromise,
  NO_SPEND,
  PrivacyBudgetExceeded,
  promised,
  type CentralGuarantee,
  type Spend,
} from "../ledger-rules.js";
import { checkEpsilon } from "../validation.js";

export { Budget, CardChanged, DEFAULT_BUDGET_MULTIPLE, LedgerError, PrivacyBudgetExceeded };

export type { CentralGuarantee, MemoEntry };

export const LEDGER_ENV = "LDPSYNTH_TS_LEDGER";
export const MARKER_SUFFIX = ".created";
const LOCK_SUFFIX = ".lock";
const FORMAT = "ldpsynth.ts-ledger/3";
/** The formats written before budgets and pins were stored (1), before promises and paths (2): upgraded at their first open. */
const FORMAT_1 = "ldpsynth.ts-ledger/1";
const FORMAT_2 = "ldpsynth.ts-ledger/2";
const FORMATS = [FORMAT_1, FORMAT_2, FORMAT];
const MARKER_FORMAT = "ldpsynth-ledger-marker/1";
const SECRET_BYTES = 32;
const MEMO_DOMAIN = Buffer.from("ldpsynth-memo/1");
const ID_DOMAIN = Buffer.from("ldpsynth-ledger-id/1");
const LOCK_WAIT_MS = 30_000;
const SOUND =
  "an intact ledger this SDK created, next to its marker (to start this device over knowingly: "
  + "FileLedger.reset; docs/contract.md §14)";

/** `$LDPSYNTH_TS_LEDGER`, else `$XDG_DATA_HOME/ldpsynth/ledger.json` (`~/.local/share` by default). */
export function defaultLedgerPath(): string {
  const explicit = process.env[LEDGER_ENV];
  if (explicit) return explicit;
  return join(process.env["XDG_DATA_HOME"] || join(homedir(), ".local", "share"), "ldpsynth", "ledger.json");
}

interface State {
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

function refused(path: string, problem: string): LedgerError {
  return new LedgerError(`${path}: ${problem}`, SOUND);
}

function shown(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length <= 40 ? text : `${text.slice(0, 37)}...`;
}

function ledgerId(secret: Buffer): string {
  return createHmac("sha256", secret).update(ID_DOMAIN).digest().subarray(0, 16).toString("hex");
}

function fsyncDirectory(dir: string): void {
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Write `text` to a fresh file next to `path` (owner-only, fsynced) and return its name. */
function staged(path: string, text: string): string {
  const name = join(dirname(path), `${basename(path)}.new-${randomBytes(8).toString("hex")}`);
  const fd = openSync(name, "wx", 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return name;
}

/** The ledger's text (its budget must be known: a format-1 state is upgraded first). */
function serialise(state: State): string {
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
const KEY_HEX = /^[0-9a-f]{64}$/;
const ID_HEX = /^[0-9a-f]{32}$/;

function isPlain(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Parse and check a whole ledger file (see the module comment); LedgerError on any damage. */
function readState(path: string): State {
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

function writeMarker(path: string, id: string, reset?: JsonValue): void {
  const content: Record<string, JsonValue> = {
    format: MARKER_FORMAT,
    ledger: basename(path),
    ledger_id: id,
    written: new Date().toISOString(),
  };
  if (reset !== undefined) content["reset"] = reset;
  const marker = `${path}${MARKER_SUFFIX}`;
  renameSync(staged(marker, `${JSON.stringify(content)}\n`), marker);
  fsyncDirectory(dirname(path));
}

function checkMarker(path: string, id: string): void {
  const marker = `${path}${MARKER_SUFFIX}`;
  let recorded: unknown;
  try {
    recorded = (JSON.parse(readFileSync(marker, "utf-8")) as Record<string, unknown>)["ledger_id"];
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") {
      writeMarker(path, id); // a ledger whose creation stopped between the link and the marker
      return;
    }
    throw refused(path, `its marker ${basename(marker)} is not a ledger marker`);
  }
  if (recorded !== id) {
    throw refused(path, `it is not the ledger its marker ${basename(marker)} was written for: the ledger was replaced`);
  }
}

function exists(path: string): boolean {
  try {
    lstatSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Build a complete new ledger under a temporary name and link it into place (never over a file). */
function createLedger(path: string, budget: Budget, device: Record<string, JsonValue> = {}): Buffer {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const secret = randomBytes(SECRET_BYTES);
  const built = staged(
    path,
    serialise({
      format: FORMAT,
      secret,
      device,
      budget,
      pinned: new Map(),
      spend: new Map(),
      memo: new Map(),
      central: new Map(),
    }),
  );
  try {
    linkSync(built, path);
  } finally {
    unlinkSync(built);
  }
  fsyncDirectory(dirname(path));
  return secret;
}

/**
 * Format 1 or 2 -> 3 under the lock: (1 -> 2) store `budget`, pin each collection's ε at its spend per
 * report; (2 -> 3) write the (empty) table of promises and each memoized report's path, in clear.
 */
function upgrade(path: string, budget: Budget): State {
  return locked(path, () => {
    const state = readState(path);
    if (state.format === FORMAT) return state; // another process just did it
    if (state.budget === undefined) {
      state.budget = budget;
      for (const [collection, spend] of state.spend) {
        if (spend.reports > 0) {
          state.pinned.set(collection, frac.fraction(spend.epsilon.num, spend.epsilon.den * BigInt(spend.reports)));
        }
      }
    }
    renameSync(staged(path, serialise(state)), path);
    fsyncDirectory(dirname(path));
    state.format = FORMAT;
    return state;
  });
}

function sleep(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

function processAlive(pid: number): boolean {
  if (pid === process.pid) return false; // transactions are synchronous: a lock of this pid is a leftover
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Hold `<ledger>.lock` while `body` runs (one writer at a time; a dead writer's lock is taken over). */
function locked<T>(path: string, body: () => T): T {
  const lock = `${path}${LOCK_SUFFIX}`;
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      const fd = openSync(lock, "wx", 0o600);
      writeSync(fd, String(process.pid));
      closeSync(fd);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") {
        throw refused(path, `cannot lock it (${(err as Error).message})`);
      }
      let holder: number;
      try {
        holder = Number(readFileSync(lock, "utf-8"));
      } catch {
        continue; // released meanwhile
      }
      if (Number.isSafeInteger(holder) && !processAlive(holder)) {
        try {
          unlinkSync(lock);
        } catch {
          // another process took it over first
        }
        continue;
      }
      if (Date.now() > deadline) throw refused(path, `locked by process ${holder} for over ${LOCK_WAIT_MS / 1000} s`);
      sleep(20);
    }
  }
  try {
    return body();
  } finally {
    unlinkSync(lock);
  }
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
      if (tx.changed || pinned === undefined) {
        renameSync(staged(this.path, serialise(state)), this.path);
        fsyncDirectory(dirname(this.path));
      }
      return result;
    });
  }
}

/** SHA-256 of what a report means: the schema, the version, |D| and E's exact weights. */
export function collectionFingerprint(card: MechanismCard): Uint8Array {
  return new Uint8Array(createHash("sha256").update(collectionIdentity(card)).digest());
}
