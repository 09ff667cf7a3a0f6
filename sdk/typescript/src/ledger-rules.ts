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
 */
import { ValidationError } from "./errors.js";
import * as frac from "./fraction.js";
import type { Fraction } from "./fraction.js";
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
  const text = typeof value === "bigint" ? String(value) : JSON.stringify(value) ?? String(value);
  return text.length <= 40 ? text : `${text.slice(0, 37)}...`;
}

/** The budget a ledger was created with: an ε per collection, or a multiple of each collection's ε. */
export class Budget {
  private constructor(readonly epsilon: Fraction | undefined, readonly multiple: number) {}

  /** `budget` ε per collection, or the default multiple when undefined. */
  static of(budget: number | undefined): Budget {
    return budget === undefined ? new Budget(undefined, DEFAULT_BUDGET_MULTIPLE)
      : new Budget(frac.fromFloat(checkEpsilon(budget, "budget")), DEFAULT_BUDGET_MULTIPLE);
  }

  forCollection(epsilon: Fraction): Fraction {
    return this.epsilon ?? frac.times(epsilon, BigInt(this.multiple));
  }

  describe(): string {
    return this.epsilon ? `epsilon ${frac.toFloat(this.epsilon).toPrecision(6)} per collection`
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
      throw new ValidationError("budget", `at most ${frac.toFloat(stored).toPrecision(6)}, the budget this ledger `
        + "was created with (a higher one needs a reset of the ledger, which starts this device over)",
      `got ${frac.toFloat(session).toPrecision(6)}`);
    }
    return session;
  }
}

/** Refuse a collection re-issued at another ε than the one pinned (undefined: not pinned yet). */
export function checkPinned(collection: string, pinned: Fraction | undefined, epsilon: Fraction): void {
  if (pinned !== undefined && frac.compare(pinned, epsilon) !== 0) {
    throw new CardChanged(`collection ${JSON.stringify(collection)} is now released at epsilon `
      + `${frac.toFloat(epsilon).toPrecision(6)}, but this device's reports to it were made at epsilon `
      + `${frac.toFloat(pinned).toPrecision(6)}: the same rows would get fresh reports that could be averaged `
      + "with the old ones. To report to the re-issued collection, start this device over knowingly (reset the "
      + "ledger)");
  }
}

/** The spend after `count` new reports at `epsilon` each; PrivacyBudgetExceeded if it passes `budget`. */
export function charge(collection: string, current: Spend, epsilon: Fraction, budget: Fraction, count: number): Spend {
  const total = frac.add(current.epsilon, frac.times(epsilon, BigInt(count)));
  if (frac.compare(total, budget) > 0) {
    throw new PrivacyBudgetExceeded(`collection ${JSON.stringify(collection)}: ${count} new reports at epsilon `
      + `${frac.toFloat(epsilon).toPrecision(6)} each would bring the epsilon spent to `
      + `${frac.toFloat(total).toPrecision(6)}, over this device's budget of `
      + `${frac.toFloat(budget).toPrecision(6)} (spent so far ${frac.toFloat(current.epsilon).toPrecision(6)}; `
      + "basic composition)");
  }
  return { epsilon: total, reports: current.reports + count };
}

/** A stored spend as the ledger writes it (`{epsilon: "p/q", reports}`), or the problem with it. */
export function checkedSpend(collection: string, row: unknown): Spend | string {
  const record = typeof row === "object" && row !== null ? row as Record<string, unknown> : {};
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
