/**
 * The rules every privacy ledger of this SDK keeps, wherever it is stored (docs/contract.md §5, §14;
 * the Python SDK's `PrivacyLedger`, whose rules are client/ledger/rules.py), exactly, as rationals:
 *
 * - **Budget**, fixed when the ledger is created and stored in it: an ε per collection, or (default)
 *   {@link DEFAULT_BUDGET_MULTIPLE} × each collection's ε. A later session may lower it, never raise it.
 * - **Basic composition**: a collection's spend is the card's delivered ε times its new reports; a
 *   submission that would pass the budget is refused whole (PrivacyBudgetExceeded).
 * - **The ε a collection is released at is pinned** at the device's first report to it: a card
 *   re-issued under the same name at another ε is refused (CardChanged) until the ledger is reset.
 * - **The promise of a shuffled collection** (docs/shuffle-accountant.md §6): with each submission
 *   whose reports went sealed through a shuffler, the ledger records the guarantee the collection
 *   promised them ({@link CentralGuarantee}), as long as every report charged to the collection went
 *   that way; a submission in clear removes it.
 * - **One path per report** (the memo path rule): each memoized report records whether it was first
 *   sent sealed through a shuffler or in clear, and a submission that would send one the other way is
 *   refused whole before anything is charged (ValidationError naming `rows`): it would link the report
 *   to the device.
 * - **The marker and the memo keys**, alike in every store: a marker `<ledger>.created` records the
 *   ledger's id, an HMAC of a constant under the device secret; a row's memo key is an HMAC under it too.
 */
import { ValidationError } from "./errors.js";
import * as frac from "./fraction.js";
import type { Fraction } from "./fraction.js";
import type { JsonValue } from "./json.js";
import { checkEpsilon } from "./validation.js";

export const DEFAULT_BUDGET_MULTIPLE = 10;

/** The ledger is unreadable, damaged, replaced, or missing where one existed. `field` is `ledger`. */
export class LedgerError extends ValidationError {
  constructor(problem: string, legal: string) {
    super("ledger", legal, problem);
    this.name = "LedgerError";
  }
}

/** A submission would spend more ε on a collection than the device's budget allows. */
export class PrivacyBudgetExceeded extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PrivacyBudgetExceeded";
  }
}

/** A collection was re-issued at another ε than this device's reports to it were made at. */
export class CardChanged extends PrivacyBudgetExceeded {
  constructor(message: string) {
    super(message);
    this.name = "CardChanged";
  }
}

/** What a collection has cost this device: ε spent and distinct reports released. */
export interface Spend {
  readonly epsilon: Fraction;
  readonly reports: number;
}

export const NO_SPEND: Spend = { epsilon: frac.ZERO, reports: 0 };

function shown(value: unknown): string {
  const text = typeof value === "bigint" ? String(value) : (JSON.stringify(value) ?? String(value));
  return text.length <= 40 ? text : `${text.slice(0, 37)}...`;
}

/** The budget a ledger was created with: an ε per collection, or a multiple of each collection's ε. */
export class Budget {
  private constructor(
    readonly epsilon: Fraction | undefined,
    readonly multiple: number,
  ) {}

  /** `budget` ε per collection, or the default multiple when undefined. */
  static of(budget: number | undefined): Budget {
    return budget === undefined
      ? new Budget(undefined, DEFAULT_BUDGET_MULTIPLE)
      : new Budget(frac.fromFloat(checkEpsilon(budget, "budget")), DEFAULT_BUDGET_MULTIPLE);
  }

  forCollection(epsilon: Fraction): Fraction {
    return this.epsilon ?? frac.times(epsilon, BigInt(this.multiple));
  }

  describe(): string {
    return this.epsilon
      ? `epsilon ${frac.toFloat(this.epsilon).toPrecision(6)} per collection`
      : `${this.multiple} x each collection's epsilon`;
  }

  /** As stored: `{"epsilon": "p/q"}` or `{"multiple": m}`. */
  toJson(): Record<string, string | number> {
    return this.epsilon ? { epsilon: frac.format(this.epsilon) } : { multiple: this.multiple };
  }

  /** The stored budget; undefined unless it is one {@link toJson} writes. */
  static fromJson(value: unknown): Budget | undefined {
    if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
    const keys = Object.keys(value);
    const record = value as Record<string, unknown>;
    if (keys.length === 1 && keys[0] === "epsilon") {
      const epsilon = frac.parse(record["epsilon"]);
      return epsilon && epsilon.num > 0n ? new Budget(epsilon, DEFAULT_BUDGET_MULTIPLE) : undefined;
    }
    const multiple = record["multiple"];
    if (keys.length === 1 && typeof multiple === "number" && Number.isSafeInteger(multiple) && multiple > 0) {
      return new Budget(undefined, multiple);
    }
    return undefined;
  }

  /**
   * The budget of a collection released at `epsilon` in a session that asked for `session` (undefined:
   * the stored one); a session budget above the stored one is refused.
   */
  effective(epsilon: Fraction, session: Fraction | undefined): Fraction {
    const stored = this.forCollection(epsilon);
    if (session === undefined) return stored;
    if (frac.compare(session, stored) > 0) {
      throw new ValidationError(
        "budget",
        `at most ${frac.toFloat(stored).toPrecision(6)}, the budget this ledger `
          + "was created with (a higher one needs a reset of the ledger, which starts this device over)",
        `got ${frac.toFloat(session).toPrecision(6)}`,
      );
    }
    return session;
  }
}

/** Refuse a collection re-issued at another ε than the one pinned (undefined: not pinned yet). */
export function checkPinned(collection: string, pinned: Fraction | undefined, epsilon: Fraction): void {
  if (pinned !== undefined && frac.compare(pinned, epsilon) !== 0) {
    throw new CardChanged(
      `collection ${JSON.stringify(collection)} is now released at epsilon `
        + `${frac.toFloat(epsilon).toPrecision(6)}, but this device's reports to it were made at epsilon `
        + `${frac.toFloat(pinned).toPrecision(6)}: the same rows would get fresh reports that could be averaged `
        + "with the old ones. To report to the re-issued collection, start this device over knowingly (reset the "
        + "ledger)",
    );
  }
}

/** The spend after `count` new reports at `epsilon` each; PrivacyBudgetExceeded if it passes `budget`. */
export function charge(collection: string, current: Spend, epsilon: Fraction, budget: Fraction, count: number): Spend {
  const total = frac.add(current.epsilon, frac.times(epsilon, BigInt(count)));
  if (frac.compare(total, budget) > 0) {
    throw new PrivacyBudgetExceeded(
      `collection ${JSON.stringify(collection)}: ${count} new reports at epsilon `
        + `${frac.toFloat(epsilon).toPrecision(6)} each would bring the epsilon spent to `
        + `${frac.toFloat(total).toPrecision(6)}, over this device's budget of `
        + `${frac.toFloat(budget).toPrecision(6)} (spent so far ${frac.toFloat(current.epsilon).toPrecision(6)}; `
        + "basic composition)",
    );
  }
  return { epsilon: total, reports: current.reports + count };
}

/** A stored spend as the ledger writes it (`{epsilon: "p/q", reports}`), or the problem with it. */
export function checkedSpend(collection: string, row: unknown): Spend | string {
  const record = typeof row === "object" && row !== null ? (row as Record<string, unknown>) : {};
  const epsilon = frac.parse(record["epsilon"]);
  if (epsilon === undefined || epsilon.num < 0n) {
    return `collection ${shown(collection)}: the epsilon spent is ${shown(record["epsilon"])}, not an exact number >= 0`;
  }
  const reports = record["reports"];
  if (typeof reports !== "number" || !Number.isSafeInteger(reports) || reports < 0) {
    return `collection ${shown(collection)}: the reports count is ${shown(reports)}, not an integer >= 0`;
  }
  if ((epsilon.num === 0n) !== (reports === 0)) {
    return `collection ${shown(collection)}: epsilon spent for ${reports} reports (every report costs epsilon > 0)`;
  }
  return { epsilon, reports };
}

/** A stored pinned ε (`"p/q"` > 0), or undefined if it is not one. */
export function checkedPin(value: unknown): Fraction | undefined {
  const pinned = frac.parse(value);
  return pinned && pinned.num > 0n ? pinned : undefined;
}

/**
 * The guarantee a shuffled collection promised this device's reports, as its ledger records it: the
 * reference's per-party guarantee at the pool floor (docs/shuffle-accountant.md §6). Against analysts,
 * and against the aggregator's operator when the shuffler is independent (`operator`), the central
 * (ε, δ) = `composed_epsilon(ε0, |D|, ⌊(minBatch − assumeInjected) / rowsPerDevice⌋, delta,
 * rowsPerDevice)` under the collection's bound (k-RR's blanket for E, FMT21's clones for an oracle or a numeric
 * mechanism: card.ts `shuffleBound`, named by the card's shuffle block; the terms are the same); against the
 * shuffler, the local ε0 only. This SDK has no accountant (the reference's
 * needs SciPy), so it records the terms and leaves the central ε and δ not computed (null), as the
 * Python SDK does without SciPy; with the card's ε0 and |D| anyone can compute them.
 */
export interface CentralGuarantee {
  /** The collection's δ (`shuffle.delta`). */
  readonly delta: number;
  /** The fewest reports of one public key in any pool the aggregator stores (`shuffle.min_batch`). */
  readonly minBatch: number;
  /** F: the reports of a pool assumed not honest (`shuffle.assume_injected`, by default one device's quota). */
  readonly assumeInjected: number;
  /** m: the reports per device the guarantee composes over: `shuffle.rows_per_device`, or this device's when more. */
  readonly rowsPerDevice: number;
  /** The central ε at the pool floor; null: not computed (no accountant here). */
  readonly centralEpsilon: number | null;
  /** The δ with it (`delta`, or 0 with the local ε); null when `centralEpsilon` is. */
  readonly centralDelta: number | null;
  /** Whether the central guarantee holds against the aggregator's operator too (the shuffler is independent). */
  readonly operator: boolean;
}

const CENTRAL_FIELDS = [
  "delta",
  "min_batch",
  "assume_injected",
  "rows_per_device",
  "central_epsilon",
  "central_delta",
  "operator",
];

/** A guarantee as the ledger stores it: its fields by their reference names, exact rationals as text (like a spend). */
export function centralRecord(guarantee: CentralGuarantee): Record<string, JsonValue> {
  const exact = (x: number | null): string | null => (x === null ? null : frac.format(frac.fromFloat(x)));
  return {
    delta: exact(guarantee.delta),
    min_batch: guarantee.minBatch,
    assume_injected: guarantee.assumeInjected,
    rows_per_device: guarantee.rowsPerDevice,
    central_epsilon: exact(guarantee.centralEpsilon),
    central_delta: exact(guarantee.centralDelta),
    operator: guarantee.operator,
  };
}

/** A stored guarantee as {@link centralRecord} writes it, or the problem with it. */
export function checkedCentral(collection: string, row: unknown): CentralGuarantee | string {
  const bad = (field: string, value: unknown, legal: string): string =>
    `collection ${shown(collection)}: the central guarantee's ${field} is ${shown(value)}, not ${legal}`;
  if (typeof row !== "object" || row === null || Array.isArray(row)) return bad("record", row, "an object");
  const record = row as Record<string, unknown>;
  const keys = Object.keys(record).sort();
  if (keys.join() !== [...CENTRAL_FIELDS].sort().join())
    return bad("fields", keys, `the fields ${CENTRAL_FIELDS.join(", ")}`);
  const delta = frac.parse(record["delta"]);
  if (!delta || frac.compare(delta, frac.ZERO) <= 0 || frac.compare(delta, frac.fraction(1n)) >= 0) {
    return bad("delta", record["delta"], "an exact number in (0, 1)");
  }
  const integer = (v: unknown, low: number): v is number =>
    typeof v === "number" && Number.isSafeInteger(v) && v >= low;
  const [minBatch, injected, rows] = [record["min_batch"], record["assume_injected"], record["rows_per_device"]];
  if (!integer(minBatch, 1)) return bad("min_batch", minBatch, "an integer >= 1");
  if (!integer(injected, 0) || injected >= minBatch)
    return bad("assume_injected", injected, "an integer in [0, min_batch)");
  if (!integer(rows, 1)) return bad("rows_per_device", rows, "an integer >= 1");
  const rawEps = record["central_epsilon"];
  const eps = rawEps === null ? null : frac.parse(rawEps);
  if (eps === undefined || (eps !== null && frac.compare(eps, frac.ZERO) <= 0)) {
    return bad("central_epsilon", rawEps, "an exact number > 0 (or null: not computed)");
  }
  const rawDelta = record["central_delta"];
  const dlt = rawDelta === null ? null : frac.parse(rawDelta);
  if (
    dlt === undefined
    || (dlt === null) !== (eps === null)
    || (dlt !== null && frac.compare(dlt, frac.ZERO) !== 0 && frac.compare(dlt, delta) !== 0)
  ) {
    return bad("central_delta", rawDelta, "its delta or 0 (null only with central_epsilon)");
  }
  if (typeof record["operator"] !== "boolean") return bad("operator", record["operator"], "true or false");
  return {
    delta: frac.toFloat(delta),
    minBatch,
    assumeInjected: injected,
    rowsPerDevice: rows,
    centralEpsilon: eps === null ? null : frac.toFloat(eps),
    centralDelta: dlt === null ? null : frac.toFloat(dlt),
    operator: record["operator"],
  };
}

/**
 * Whether a guarantee may be recorded: every report charged before was charged for a shuffler (there was
 * none, or `promisedBefore()`: a guarantee is recorded for them).
 */
export function mayPromise(reportedBefore: boolean, promisedBefore: () => boolean): boolean {
  return !reportedBefore || promisedBefore();
}

/**
 * What a submission leaves recorded for its collection (the promise rule): `guarantee` when it went
 * through a shuffler (`sealed`), the collection has reports and `promisable()` ({@link mayPromise});
 * else none, and any promise recorded before is removed: a submission in clear leaves reports the
 * aggregator knows are this device's, and no later sealed submission brings the promise back.
 */
export function promised(
  guarantee: CentralGuarantee | undefined,
  sealed: boolean,
  reports: number,
  promisable: () => boolean,
): CentralGuarantee | undefined {
  return guarantee === undefined || !sealed || !reports || !promisable() ? undefined : guarantee;
}

/**
 * The memo path rule (the reference's `check_path`): a memoized report is always resent the way it was
 * first sent. A report memoized in clear is never later sealed (its sealed copy would be matched to the
 * clear one, which the aggregator knows is this device's), and a report first sent sealed never later
 * goes in clear (that links the device to its sealed report). `switched`: the rows of a submission sent
 * `sealed` (or not) whose memoized reports were first sent the other way; any refuses the whole
 * submission with ValidationError naming `rows`, before anything is charged or recorded.
 */
export function checkPath(collection: string, sealed: boolean, switched: number): void {
  if (!switched) return;
  const [first, now] = sealed ? ["in clear", "sealed"] : ["sealed, through a shuffler", "in clear"];
  throw new ValidationError(
    "rows",
    "rows sent the way their memoized reports were first sent (a report memoized in "
      + "clear is never sealed later, nor a sealed one sent in clear)",
    `collection ${JSON.stringify(collection)}: `
      + `${switched} of these rows have a report first sent ${first}; sending it ${now} would link the report to this `
      + "device (nothing was charged or sent)",
  );
}

/** A ledger's marker is named after the ledger with this suffix (`<ledger>.created`). */
export const MARKER_SUFFIX = ".created";
const MARKER_FORMAT = "ldpsynth-ledger-marker/1";
/** The size of the device secret: a row's memo key and the ledger's id are HMAC-SHA256 under it. */
export const SECRET_BYTES = 32;
/** The domain tag before a row in its memo key. */
export const MEMO_DOMAIN = new TextEncoder().encode("ldpsynth-memo/1");
/** The ledger's id is the HMAC of this tag alone. */
export const ID_DOMAIN = new TextEncoder().encode("ldpsynth-ledger-id/1");
/** A memo key: 64 hex digits. */
export const KEY_HEX = /^[0-9a-f]{64}$/;

/** What a marker holds: its format, the `ledger` it was written for and that ledger's `id`, when, and a reset's record. */
export function markerRecord(ledger: string, id: string, reset?: JsonValue): Record<string, JsonValue> {
  const content: Record<string, JsonValue> = {
    format: MARKER_FORMAT,
    ledger,
    ledger_id: id,
    written: new Date().toISOString(),
  };
  if (reset !== undefined) content["reset"] = reset;
  return content;
}
