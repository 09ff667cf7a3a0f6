/**
 * A numeric collection's mechanism card (docs/numeric.md; the reference's `MechanismCard.from_json` of
 * an HM or SW card, fields by `numeric_fields`): the schema's one private attribute is numeric, and the
 * card states its range and mechanism, ε asked for and delivered, the report domain K and the exact
 * sampler's grid and integer weights. Every field is recomputed from the schema with this SDK's exact
 * samplers (numeric-samplers.ts) and compared with Python's equality; the first that differs is named
 * (`card.sampler`, `card.epsilon`, ...). The weights the reference computed from its platform's exp are
 * pinned when they are one of the two faithful candidates (never otherwise). A shuffled collection's card has the
 * `shuffle` block the reference's `shuffle_block` gives at the delivered ε0 with FMT21's clone bound (card.ts
 * `checkShuffleBlock`; docs/shuffle-accountant.md §9).
 *
 * A report is the index of the sampler's output in [0, K): HM's K = K_PM + 2 (PM's cells, then Duchi's
 * −B, +B; Wang2019ICDE §III-C), SW's K its output cells (Li2020SIGMOD). It travels in
 * `ReportBatch.private_codes` as E's perturbed code does.
 */
import { checkShuffleBlock, pythonEquals } from "./card.js";
import { ValidationError } from "./errors.js";
import { isJsonObject, type JsonObject, type JsonValue } from "./json.js";
import {
  ALPHA_BITS,
  HybridMechanism,
  SquareWave,
  perturbNumeric,
  type IntegerWeights,
  type SlidingWindow,
} from "./numeric-samplers.js";
import type { NumericAttribute, NumericMechanismName, Schema } from "./schema.js";

/** A window's fields on the card (the reference's `_window`). */
function windowFields(s: SlidingWindow): JsonObject {
  return {
    reports: BigInt(s.reports),
    window: BigInt(s.window),
    keep_weight: String(s.keep),
    lie_weight: String(s.lie),
    denominator: String(s.denominator),
    epsilon: s.epsilon,
  };
}

/** The card's `sampler` block of a sampler (the reference's `NumericMechanism.card_fields`). */
export function samplerFields(s: HybridMechanism | SquareWave): JsonObject {
  if (s instanceof SquareWave) return { buckets: BigInt(s.buckets), ...windowFields(s) };
  return {
    input_points: BigInt(s.steps + 1),
    alpha: `${s.alphaWeight}/${1n << BigInt(ALPHA_BITS)}`,
    pm: windowFields(s.pm),
    duchi: {
      reports: 2n,
      keep_weight: String(s.duchi.keep),
      lie_weight: String(s.duchi.lie),
      denominator: String(s.duchi.denominator),
      epsilon: s.duchi.epsilon,
    },
  };
}

/** The weights a card's block states, when both are decimal strings. */
function stated(block: JsonValue | undefined): IntegerWeights | undefined {
  if (!isJsonObject(block)) return undefined;
  const keep = block["keep_weight"];
  const lie = block["lie_weight"];
  const decimal = (v: JsonValue | undefined): v is string => typeof v === "string" && /^[1-9][0-9]{0,19}$/.test(v);
  return decimal(keep) && decimal(lie) ? { keep: BigInt(keep), lie: BigInt(lie) } : undefined;
}

/** `build(pinned)` when the card's weights are a faithful candidate (else undefined), and `build()`. */
function builds<T>(build: (pinned?: IntegerWeights) => T, pinned: IntegerWeights | undefined): T[] {
  const out = [build()];
  if (pinned === undefined) return out;
  try {
    out.unshift(build(pinned));
  } catch (e) {
    if (!(e instanceof ValidationError && e.field === "weights")) throw e;
  }
  return out;
}

/**
 * The samplers the card's schema may have been computed with: the card's weights pinned where they are
 * faithful candidates, first, and the correctly rounded exp's (what a card that matches none is compared with), last.
 */
function samplersOf(
  mechanism: NumericMechanismName,
  epsilon: number,
  card: JsonObject,
): (HybridMechanism | SquareWave)[] {
  const block = card["sampler"];
  if (mechanism === "SW") return builds((w) => new SquareWave(epsilon, undefined, w), stated(block));
  const pm = stated(isJsonObject(block) ? block["pm"] : undefined);
  const duchi = stated(isJsonObject(block) ? block["duchi"] : undefined);
  return builds((p) => new HybridMechanism(epsilon, undefined, p === undefined ? {} : { pm: p }), pm).flatMap((h) =>
    builds(
      (d) =>
        new HybridMechanism(epsilon, undefined, { pm: { keep: h.pm.keep, lie: h.pm.lie }, ...(d ? { duchi: d } : {}) }),
      duchi,
    ),
  );
}

/**
 * The card's mechanism fields of a sampler (the reference's `numeric_fields`): the `numeric` block carries the
 * declared `step` only when there is one (cards without levels are unchanged).
 */
function numericFields(attribute: NumericAttribute, sampler: HybridMechanism | SquareWave): JsonObject {
  const numeric: JsonObject = {
    attribute: attribute.name,
    range: [attribute.lo, attribute.hi],
    mechanism: attribute.mechanism,
  };
  if (attribute.step !== undefined) numeric["step"] = attribute.step;
  return {
    numeric,
    epsilon_requested: sampler.epsilonRequested,
    epsilon: sampler.epsilon,
    domain_size: BigInt(sampler.reports),
    sampler: samplerFields(sampler),
  };
}

/** A verified numeric card: what a device needs to perturb (the sampler) and to charge (`epsilon`). */
export class NumericCard {
  private constructor(
    readonly schema: Schema,
    readonly attribute: NumericAttribute,
    readonly sampler: HybridMechanism | SquareWave,
    /** The card's mechanism fields as the reference states them (what the ledger's fingerprint binds). */
    readonly fields: JsonObject,
  ) {}

  /** HM or SW. */
  get mechanism(): NumericMechanismName {
    return this.attribute.mechanism;
  }

  /** What every ReportBatch of the collection names: `HM/1` or `SW/1`. */
  get version(): string {
    return `${this.mechanism}/1`;
  }

  /** The ε asked for (the schema's). */
  get epsilonRequested(): number {
    return this.sampler.epsilonRequested;
  }

  /** The ε delivered (the least float >= the law's worst log-ratio): what the ledger charges per new report. */
  get epsilon(): number {
    return this.sampler.epsilon;
  }

  /** K, the report domain. */
  get domainSize(): bigint {
    return BigInt(this.sampler.reports);
  }

  /** Verify the mechanism fields of a card object whose schema (already parsed) has a numeric attribute. */
  static verify(obj: JsonObject, schema: Schema): NumericCard {
    const attribute = schema.numeric;
    if (attribute === undefined) throw new RangeError("NumericCard.verify needs a numeric schema");
    if (obj["mechanism"] !== schema.mechanism) {
      throw new ValidationError(
        "card.mechanism",
        `${JSON.stringify(schema.mechanism)} (the schema's mechanism)`,
        "another mechanism",
      );
    }
    const version = `${schema.mechanism}/1`;
    if (obj["version"] !== version)
      throw new ValidationError("card.version", JSON.stringify(version), "another version");
    const candidates = samplersOf(attribute.mechanism, schema.epsilon, obj).map((sampler) => ({
      sampler,
      fields: numericFields(attribute, sampler),
    }));
    const matches = ({ fields }: { fields: JsonObject }): boolean =>
      Object.entries(fields).every(([key, value]) => pythonEquals(obj[key], value));
    const { sampler, fields } = candidates.find(matches) ?? candidates[candidates.length - 1]!;
    for (const [key, value] of Object.entries(fields)) {
      if (!pythonEquals(obj[key], value)) {
        throw new ValidationError(
          `card.${key}`,
          `${typeof value === "object" ? "the block" : String(value)} (${schema.mechanism} at the card's epsilon and domain)`,
          "inconsistent",
        );
      }
    }
    if (!(sampler.epsilon <= schema.epsilon)) {
      throw new ValidationError("card.epsilon", `at most ${schema.epsilon} (the schema's)`, "violated");
    }
    checkShuffleBlock(obj, schema, sampler.epsilon);
    return new NumericCard(schema, attribute, sampler, fields);
  }

  /** Output indices in [0, K) of raw fixed-point codes (the attribute's), from the platform's CSPRNG only. */
  perturb(codes: readonly bigint[]): bigint[] {
    const values = codes.map((c) => this.attribute.unit(c));
    return perturbNumeric(this.sampler, values).map(BigInt);
  }
}
