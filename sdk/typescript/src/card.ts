/**
 * The mechanism card (docs/contract.md §4), parsed and verified as the reference's
 * `MechanismCard.from_json` does: the weights are recomputed from the schema's ε and |D| and every
 * stored number must equal them, so a tampered or inconsistent card is refused, naming the first
 * field that differs (`card.keep_weight`, `card.epsilon`, ...). On top of that, the privacy
 * conditions are checked directly and exactly: 1 <= L < A, N = A + (|D| − 1)·L <= 2^62, and
 * A <= L·e^ε (the loss of one report, ln(A/L), is at most the ε asked for).
 *
 * A shuffled collection's card has a top-level `shuffle` block (the reference's `shuffle_block`,
 * docs/shuffle-accountant.md §6): the schema's shuffle spec, the local guarantee and the central one
 * per party with the pool floor it rests on (`assume_injected` F, `honest_reports_per_pool` =
 * `min_batch` − F). It is recomputed from the schema and compared field by field with Python's
 * equality (so `500.0` equals `500`), then its fields as a set; a card of a collection that is not
 * shuffled must have none.
 */
import { ValidationError } from "./errors.js";
import { ratioAtMostExp } from "./exact-exp.js";
import { isJsonObject, parseJson, type JsonObject, type JsonValue } from "./json.js";
import { Schema } from "./schema.js";
import type { ShuffleSpec } from "./shuffle-spec.js";
import { SPACE, derive, weightCandidates, type Weights } from "./weights.js";

export const CARD_FORMAT = "ldpsynth.mechanism-card/1";
export const MECHANISM_VERSION = "E/1";

/** Python's `==` between a JSON value and an expected number (an int compares exactly with a float). */
function equalsNumber(value: JsonValue | undefined, expected: number | bigint): boolean {
  if (typeof value === "boolean") value = value ? 1n : 0n;
  if (typeof value !== "number" && typeof value !== "bigint") return false;
  if (typeof value === typeof expected) return value === expected;
  const asFloat = typeof value === "number" ? value : (expected as number);
  const asInt = typeof value === "bigint" ? value : (expected as bigint);
  return Number.isInteger(asFloat) && BigInt(asFloat) === asInt;
}

/** Python's `==` between two JSON values: numbers by value (`1 == 1.0 == true`), lists and objects member by member. */
export function pythonEquals(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  const numeric = (v: JsonValue | undefined): v is number | bigint | boolean =>
    typeof v === "number" || typeof v === "bigint" || typeof v === "boolean";
  if (numeric(a) && numeric(b)) return equalsNumber(a, typeof b === "boolean" ? (b ? 1n : 0n) : b);
  if (
    a === undefined
    || b === undefined
    || a === null
    || b === null
    || typeof a !== "object"
    || typeof b !== "object"
  ) {
    return a === b;
  }
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => pythonEquals(x, b[i]));
  }
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && pythonEquals(a[k], b[k]));
}

/** Whom the local guarantee protects against (every card of a shuffled collection says it). */
export const LOCAL_AGAINST = "everyone: the aggregator's operator, the shuffler and analysts";

/**
 * The accountant's bound of a shuffled collection of `mechanism` (the reference's `shuffle_bound`,
 * docs/shuffle-accountant.md §9): E's k-RR blanket, FMT21's clone bound for every other ε0-LDP mechanism.
 */
export function shuffleBound(mechanism: string): "blanket" | "fmt21-numerical" {
  return mechanism === "E" ? "blanket" : "fmt21-numerical";
}

/** How the card's central ε is computed (the reference's `_central_rule`): E's words, or the clone bound's. */
function centralRule(mechanism: string): string {
  if (shuffleBound(mechanism) === "blanket") {
    return (
      "composed_epsilon(epsilon0, |D|, honest_reports_per_pool // rows_per_device, delta, rows_per_device) "
      + "(ldpsynth.shared.amplification, blanket bound; docs/shuffle-accountant.md §6), stated with every answer "
      + "and release"
    );
  }
  return (
    "composed_epsilon(epsilon0, |D|, honest_reports_per_pool // rows_per_device, delta, rows_per_device, "
    + `bound='${shuffleBound(mechanism)}') (ldpsynth.shared.amplification, FMT21's clone bound for any `
    + `epsilon0-LDP mechanism, here ${mechanism}; docs/shuffle-accountant.md §6 and §9), stated with every `
    + "answer and release"
  );
}

/**
 * The card's `shuffle` block of a shuffled collection of `mechanism` released at the delivered ε0 `epsilon0`:
 * the spec, the guarantee against each party and what it rests on, in the reference's words (`shuffle_block`).
 */
export function shuffleBlock(spec: ShuffleSpec, epsilon0: number, mechanism = "E"): JsonObject {
  return {
    ...spec.toJson(),
    local: { epsilon: epsilon0, delta: 0, per: "report", against: LOCAL_AGAINST },
    central: {
      delta: spec.delta,
      honest_reports_per_pool: spec.honestPerPool,
      assume_injected: spec.injected,
      per: "device",
      epsilon: centralRule(mechanism),
      against: {
        shuffler: "the local guarantee only: the shuffler sees who sends each report",
        operator: spec.independent
          ? "the central guarantee: the shuffler is run by an independent party"
          : "the local guarantee only: the aggregator's operator runs the shuffler too",
        analysts:
          "the central guarantee, whenever they ask: answers asked before and after one pool lands differ "
          + "by that pool",
      },
    },
  };
}

/**
 * The card's `shuffle` block checked against the schema's spec and mechanism, field by field, as the
 * reference's `_check_shuffle_block` (absent when the schema has no shuffle block).
 */
export function checkShuffleBlock(obj: JsonObject, schema: Schema, epsilon0: number): void {
  const spec = schema.shuffle;
  if (spec === undefined) {
    if ("shuffle" in obj) {
      throw new ValidationError("card.shuffle", "absent (the card's schema has no shuffle block)", "present");
    }
    return;
  }
  const block = obj["shuffle"];
  if (!isJsonObject(block)) {
    throw new ValidationError(
      "card.shuffle",
      "the shuffle block of the schema's shuffle spec",
      block === undefined || block === null ? "missing" : "not an object",
    );
  }
  const expected = shuffleBlock(spec, epsilon0, schema.mechanism);
  for (const [key, value] of Object.entries(expected)) {
    if (!pythonEquals(block[key], value)) {
      const shown = typeof value === "object" ? "the block the schema's shuffle spec gives" : String(value);
      throw new ValidationError(`card.shuffle.${key}`, `${shown} (from the schema's shuffle block)`, "inconsistent");
    }
  }
  const unknown = Object.keys(block)
    .filter((k) => !Object.hasOwn(expected, k))
    .sort();
  if (unknown.length) {
    throw new ValidationError(
      "card.shuffle",
      `the fields ${JSON.stringify(Object.keys(expected).sort())}`,
      `unknown fields ${JSON.stringify(unknown)}`,
    );
  }
}

/** A verified card: what a device needs to perturb (the exact weights) and to charge (`epsilon`). */
export class MechanismCard {
  private constructor(
    readonly schema: Schema,
    /** The ε asked for (the schema's). */
    readonly epsilonRequested: number,
    /** The ε delivered, ln(A/L) rounded up: what the ledger charges per new report. */
    readonly epsilon: number,
    /** |D|. */
    readonly domainSize: bigint,
    /** A: the true code owns A of the N points. */
    readonly keepWeight: bigint,
    /** L: every other code owns L points. */
    readonly lieWeight: bigint,
    /** N = A + (|D| − 1)·L. */
    readonly totalWeight: bigint,
    /** A/N, for display only: never sample from it. */
    readonly keepProbability: number,
    readonly lieProbability: number,
  ) {}

  /** What every ReportBatch of the collection names. */
  get version(): string {
    return MECHANISM_VERSION;
  }

  /** Parse and verify a card (its JSON text, or an object as `parseJson` returns it). */
  static parse(input: string | JsonValue): MechanismCard {
    const obj = typeof input === "string" ? parseJson(input, "card", "a JSON mechanism card") : input;
    if (!isJsonObject(obj) || obj["format"] !== CARD_FORMAT) {
      throw new ValidationError("card.format", JSON.stringify(CARD_FORMAT), "not a mechanism card of this format");
    }
    if (obj["version"] !== MECHANISM_VERSION) {
      throw new ValidationError("card.version", JSON.stringify(MECHANISM_VERSION), "another version");
    }
    if (obj["mechanism"] !== "E") throw new ValidationError("card.mechanism", '"E"', "another mechanism");
    const schema = Schema.parse(obj["schema"]);
    if (schema.numeric !== undefined) {
      throw new ValidationError(
        "card.mechanism",
        `${JSON.stringify(schema.mechanism)} (the schema's mechanism; parseCard reads a numeric card)`,
        "another mechanism",
      );
    }
    const domainSize = schema.privateDomainSize;
    const candidates = weightCandidates(schema.epsilon, domainSize);
    // The candidate the card was computed with (they differ only where libm's exp may round either way).
    const stated = (key: string): string | undefined => (typeof obj[key] === "string" ? obj[key] : undefined);
    const weights: Weights =
      candidates.find(
        (w) => String(w.keepWeight) === stated("keep_weight") && String(w.lieWeight) === stated("lie_weight"),
      ) ?? candidates[0]!;
    const d = derive(weights, domainSize);
    const expected: [string, (v: JsonValue | undefined) => boolean, string][] = [
      ["domain_size", (v) => equalsNumber(v, domainSize), String(domainSize)],
      ["keep_weight", (v) => v === String(weights.keepWeight), JSON.stringify(String(weights.keepWeight))],
      ["lie_weight", (v) => v === String(weights.lieWeight), JSON.stringify(String(weights.lieWeight))],
      ["total_weight", (v) => v === String(d.totalWeight), JSON.stringify(String(d.totalWeight))],
      ["epsilon", (v) => equalsNumber(v, d.epsilon), String(d.epsilon)],
      ["epsilon_requested", (v) => equalsNumber(v, schema.epsilon), String(schema.epsilon)],
      ["keep_probability", (v) => equalsNumber(v, d.keepProbability), String(d.keepProbability)],
      ["lie_probability", (v) => equalsNumber(v, d.lieProbability), String(d.lieProbability)],
    ];
    for (const [key, matches, value] of expected) {
      if (!matches(obj[key])) {
        throw new ValidationError(`card.${key}`, `${value} (E at the card's epsilon and domain)`, "inconsistent");
      }
    }
    const { keepWeight: a, lieWeight: l } = weights;
    // Defence in depth: the conditions the privacy guarantee rests on, checked on their own.
    if (!(
      1n <= l
      && l < a
      && d.totalWeight <= SPACE
      && ratioAtMostExp(a, l, schema.epsilon)
      && d.epsilon <= schema.epsilon
    )) {
      throw new ValidationError(
        "card.keep_weight",
        "1 <= L < A, A + (|D| - 1) L <= 2^62 and A <= L e^epsilon",
        "violated",
      );
    }
    checkShuffleBlock(obj, schema, d.epsilon);
    return new MechanismCard(
      schema,
      schema.epsilon,
      d.epsilon,
      domainSize,
      a,
      l,
      d.totalWeight,
      d.keepProbability,
      d.lieProbability,
    );
  }
}
