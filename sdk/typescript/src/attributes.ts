/**
 * A collection's attributes (docs/contract.md §3): the kinds, their codes and their JSON, parsed and checked as the
 * reference does (`ldpsynth.shared.attributes`), every error a SchemaError naming the same field.
 */
import { SchemaError, ValidationError, asSchemaError } from "./errors.js";
import { isJsonObject, type JsonValue } from "./json.js";
import { categoryText, exactInteger, realValue, type RawValue } from "./raw-values.js";
import { checkBool, checkInt, checkReal } from "./validation.js";
import { ulp } from "./float64.js";
import { NumericLevels, STEP_LEGAL } from "./numeric-levels.js";
import { NumericRange, pythonRepr } from "./numeric-range.js";
import { roundHalfEven } from "./numeric-samplers.js";

/** Largest domain of one attribute, and of the public attributes together. */
export const MAX_DOMAIN_SIZE = 1n << 62n;
/** Largest private domain |D| (a query holds one weight per value of D, a query batch at most 2^28). */
export const MAX_PRIVATE_DOMAIN_SIZE = 1n << 28n;
export const MAX_BITS = 24;
export const MAX_CATEGORIES = 1 << 20;
const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;

export type AttributeType = "categorical" | "binary" | "integer" | "continuous" | "numeric";
/** The mechanisms of a numeric attribute (the reference's `NUMERIC_MECHANISMS`). */
export const NUMERIC_MECHANISMS = ["HM", "SW"] as const;
export type NumericMechanismName = (typeof NUMERIC_MECHANISMS)[number];
/** A numeric attribute's code is its value x on [−1, 1] in fixed point: round((x + 1)·2^NUMERIC_CODE_BITS). */
export const NUMERIC_CODE_BITS = 52;
/** A decoded value: the category, 0/1, the integer, or a continuous bucket's lower edge. */
export type DecodedValue = string | bigint | number;

/** One column of a collection; its values are encoded as codes 0 .. size - 1. */
export abstract class Attribute {
  constructor(
    readonly name: string,
    readonly isPublic: boolean,
  ) {}
  abstract readonly type: AttributeType;
  /** Number of distinct codes. */
  abstract get size(): bigint;
  /** The legal range of a raw value, as error messages state it. */
  abstract get legalRange(): string;
  /** The code of a raw value, or undefined when the value is illegal. */
  abstract codeOf(value: RawValue): bigint | undefined;
  /** The raw value of a code (a continuous bucket's lower edge). */
  abstract decode(code: bigint): DecodedValue;

  /** The code of `value`; an illegal value throws naming this attribute and `position`, never the value. */
  encode(value: RawValue, position?: number): bigint {
    const code = this.codeOf(value);
    if (code === undefined) throw new ValidationError(this.name, this.legalRange, "illegal value", position);
    return code;
  }

  checkCode(code: bigint, field: string = this.name): bigint {
    if (typeof code !== "bigint" || code < 0n || code >= this.size) {
      throw new ValidationError(field, `integer codes in [0, ${this.size - 1n}]`, "out of range");
    }
    return code;
  }
}

export class CategoricalAttribute extends Attribute {
  readonly type = "categorical";
  private readonly index: Map<string, number>;

  constructor(
    name: string,
    isPublic: boolean,
    readonly values: readonly string[],
  ) {
    super(name, isPublic);
    if (values.length < 2 || values.length > MAX_CATEGORIES) {
      throw new SchemaError(
        `attributes[${name}].values`,
        `2 to ${MAX_CATEGORIES} distinct strings`,
        `got ${values.length}`,
      );
    }
    this.index = new Map(values.map((v, i) => [v, i]));
    if (this.index.size !== values.length) {
      throw new SchemaError(`attributes[${name}].values`, "distinct strings", "duplicates");
    }
  }

  get size(): bigint {
    return BigInt(this.values.length);
  }

  get legalRange(): string {
    const shown = this.values
      .slice(0, 8)
      .map((v) => JSON.stringify(v))
      .join(", ");
    return `one of {${shown}${this.values.length > 8 ? ", ..." : ""}} (${this.values.length} values)`;
  }

  codeOf(value: RawValue): bigint | undefined {
    const text = categoryText(value);
    const i = text === undefined ? undefined : this.index.get(text);
    return i === undefined ? undefined : BigInt(i);
  }

  decode(code: bigint): string {
    return this.values[Number(this.checkCode(code))]!;
  }
}

const TRUE = new Set(["1", "true", "True", "TRUE", "yes"]);
const FALSE = new Set(["0", "false", "False", "FALSE", "no"]);

export class BinaryAttribute extends Attribute {
  readonly type = "binary";

  get size(): bigint {
    return 2n;
  }

  get legalRange(): string {
    return "0 or 1";
  }

  codeOf(value: RawValue): bigint | undefined {
    if (typeof value === "boolean") return value ? 1n : 0n;
    if (typeof value === "number" || typeof value === "bigint") {
      return value == 0 ? 0n : value == 1 ? 1n : undefined; // == on purpose: 0, -0 and 0n alike
    }
    if (typeof value === "string") {
      const t = value.trim();
      return TRUE.has(t) ? 1n : FALSE.has(t) ? 0n : undefined;
    }
    return undefined;
  }

  decode(code: bigint): bigint {
    return this.checkCode(code);
  }
}

export class IntegerAttribute extends Attribute {
  readonly type = "integer";

  constructor(
    name: string,
    isPublic: boolean,
    readonly min: bigint,
    readonly max: bigint,
  ) {
    super(name, isPublic);
    if (!(min < max) || max - min + 1n > MAX_DOMAIN_SIZE) {
      throw new SchemaError(
        `attributes[${name}]`,
        `integers with min < max and at most ${MAX_DOMAIN_SIZE} values`,
        `got min=${min}, max=${max}`,
      );
    }
  }

  get size(): bigint {
    return this.max - this.min + 1n;
  }

  get legalRange(): string {
    return `an integer in [${this.min}, ${this.max}]`;
  }

  codeOf(value: RawValue): bigint | undefined {
    const v = exactInteger(value);
    return v === undefined || v < this.min || v > this.max ? undefined : v - this.min;
  }

  decode(code: bigint): bigint {
    return this.checkCode(code) + this.min;
  }
}

export class ContinuousAttribute extends Attribute {
  readonly type = "continuous";
  /** Bucket width (hi - lo) / 2^bits, in float64. */
  readonly width: number;
  private readonly buckets: number;

  constructor(
    name: string,
    isPublic: boolean,
    readonly lo: number,
    readonly hi: number,
    readonly bits: number,
  ) {
    super(name, isPublic);
    if (!(lo < hi) || !Number.isFinite(hi - lo)) {
      throw new SchemaError(
        `attributes[${name}]`,
        "lo < hi with a finite hi - lo",
        "got lo >= hi or an infinite width",
      );
    }
    if (!Number.isInteger(bits) || bits < 1 || bits > MAX_BITS) {
      throw new SchemaError(`attributes[${name}].bits`, `an integer in [1, ${MAX_BITS}]`, "out of range");
    }
    this.buckets = 2 ** bits;
    this.width = (hi - lo) / this.buckets;
    const scale = Math.max(Math.abs(lo), Math.abs(hi), hi - lo);
    if (!(this.width > 8 * ulp(scale))) {
      throw new SchemaError(
        `attributes[${name}].bits`,
        `an integer in [1, ${MAX_BITS}] with (hi - lo)/2^bits above 8 ` + "float ulps of max(|lo|, |hi|)",
        `got ${bits}`,
      );
    }
  }

  get size(): bigint {
    return BigInt(this.buckets);
  }

  get legalRange(): string {
    return `a number in [${this.lo}, ${this.hi}]`;
  }

  private lowerEdge(code: number): number {
    return this.lo + code * this.width;
  }

  codeOf(value: RawValue): bigint | undefined {
    const x = realValue(value);
    if (!Number.isFinite(x) || x < this.lo || x > this.hi) return undefined;
    const last = this.buckets - 1;
    let code = Math.min(Math.max(Math.floor(((x - this.lo) / (this.hi - this.lo)) * this.buckets), 0), last);
    // The division can land one bucket off at an edge: the edge rule decides (docs/contract.md §3).
    if (this.lowerEdge(code) > x) code -= 1;
    const up = Math.min(code + 1, last);
    if (up > code && this.lowerEdge(up) <= x) code += 1;
    return BigInt(code);
  }

  decode(code: bigint): number {
    return this.lowerEdge(Number(this.checkCode(code)));
  }
}

/**
 * A number on the declared range [lo, hi], collected by the numeric mechanism `mechanism` (HM or SW;
 * the reference's `NumericAttribute`). Not bucketed: the device maps a value to
 * x = 2(v − lo)/(hi − lo) − 1 ∈ [−1, 1] ({@link NumericRange}: NaN, ±∞ and values out of the range are
 * refused, never clipped) and keeps it as the fixed-point code c = round_half_even((x + 1)·2^52),
 * 0 <= c <= 2^53: the code a report is memoized for. The mechanism perturbs x = c/2^52 − 1.
 *
 * `step` (optional) declares the levels lo, lo + step, …, hi ({@link NumericLevels}): a value off them is refused
 * like one outside the range, and a value on level k is encoded as v_k exactly (docs/numeric.md, "Declared levels").
 */
export class NumericAttribute extends Attribute {
  readonly type = "numeric";
  readonly range: NumericRange;
  /** The declared levels (`step`), or undefined. */
  readonly levels: NumericLevels | undefined;

  constructor(
    name: string,
    isPublic: boolean,
    readonly lo: number,
    readonly hi: number,
    readonly mechanism: NumericMechanismName = "HM",
    readonly step?: number,
  ) {
    super(name, isPublic);
    const where = `attributes[${name}]`;
    if (isPublic) {
      throw new SchemaError(
        `${where}.public`,
        "false (a numeric attribute is private: it is perturbed by its mechanism)",
        "got true",
      );
    }
    this.range = asSchemaError(() => new NumericRange(lo, hi, `${where}.range`));
    if (!(NUMERIC_MECHANISMS as readonly string[]).includes(mechanism)) {
      throw new SchemaError(`${where}.mechanism`, `one of ${NUMERIC_MECHANISMS.join(", ")}`, "unknown mechanism");
    }
    this.levels =
      step === undefined ? undefined : asSchemaError(() => new NumericLevels(lo, hi, step, `${where}.step`));
  }

  /** 2^53 + 1 fixed-point codes on [−1, 1]. */
  get size(): bigint {
    return (2n << BigInt(NUMERIC_CODE_BITS)) + 1n;
  }

  get legalRange(): string {
    const range = `a number in [${pythonRepr(this.lo)}, ${pythonRepr(this.hi)}]`;
    if (this.step === undefined) return range;
    return `${range} on the levels every ${pythonRepr(this.step)} from ${pythonRepr(this.lo)}`;
  }

  /** The fixed-point code; undefined for NaN, ±∞, a value outside [lo, hi] or off the declared levels. */
  codeOf(value: RawValue): bigint | undefined {
    let v = realValue(value);
    if (!(v >= this.lo && v <= this.hi)) return undefined;
    if (this.levels !== undefined) {
      const k = this.levels.index(v);
      if (k < 0) return undefined;
      v = this.levels.values[k]!;
    }
    const [x] = this.range.toUnit([v]) as [number];
    return BigInt(roundHalfEven((x + 1.0) * 2 ** NUMERIC_CODE_BITS));
  }

  /** The value on [−1, 1] of a code. */
  unit(code: bigint): number {
    return Number(this.checkCode(code)) / 2 ** NUMERIC_CODE_BITS - 1.0;
  }

  /** lo + (x + 1)(hi − lo)/2 of the code's x. */
  decode(code: bigint): number {
    return this.lo + (this.unit(code) + 1.0) * this.range.halfWidth;
  }
}

const IDENTIFIER = /^[\p{XID_Start}_]\p{XID_Continue}*$/u;
const KNOWN_FIELDS: Record<AttributeType, readonly string[]> = {
  categorical: ["values"],
  binary: [],
  integer: ["min", "max"],
  continuous: ["lo", "hi", "bits"],
  numeric: ["range", "mechanism", "step"],
};
/** Fields a type may leave out (a default applies, or none: a numeric attribute without `step`). */
const OPTIONAL_FIELDS: Partial<Record<AttributeType, readonly string[]>> = {
  continuous: ["bits"],
  numeric: ["mechanism", "step"],
};

export function attributeFromJson(obj: JsonValue, position: number): Attribute {
  const where = `attributes[${position}]`;
  if (!isJsonObject(obj)) {
    throw new SchemaError(where, "an object with name, type and its type's fields", "not an object");
  }
  const name = obj["name"];
  if (typeof name !== "string" || !IDENTIFIER.test(name)) {
    throw new SchemaError(`${where}.name`, "a non-empty identifier (letters, digits, _)", "not an identifier");
  }
  const isPublic = asSchemaError(() =>
    checkBool("public" in obj ? obj["public"] : false, `attributes[${name}].public`),
  );
  const kind = obj["type"];
  if (typeof kind !== "string" || !Object.hasOwn(KNOWN_FIELDS, kind)) {
    throw new SchemaError(
      `attributes[${name}].type`,
      "one of categorical, binary, integer, continuous, numeric",
      "unknown type",
    );
  }
  const known = KNOWN_FIELDS[kind as AttributeType];
  const extra = Object.keys(obj)
    .filter((k) => !["name", "type", "public", ...known].includes(k))
    .sort();
  if (extra.length) {
    throw new SchemaError(
      `attributes[${name}]`,
      `fields name, type, public, ${[...known].sort().join(", ")}`,
      `unknown fields ${JSON.stringify(extra)}`,
    );
  }
  const missing = known.filter((k) => !(k in obj) && !OPTIONAL_FIELDS[kind as AttributeType]?.includes(k));
  if (missing.length) {
    throw new SchemaError(
      `attributes[${name}]`,
      `the fields ${JSON.stringify([...known].sort())}`,
      `missing ${JSON.stringify(missing.sort())}`,
    );
  }
  switch (kind as AttributeType) {
    case "categorical": {
      const values = obj["values"];
      if (!Array.isArray(values) || !values.every((v) => typeof v === "string")) {
        throw new SchemaError(`attributes[${name}].values`, "a list of strings", "wrong type");
      }
      return new CategoricalAttribute(name, isPublic, values);
    }
    case "binary":
      return new BinaryAttribute(name, isPublic);
    case "integer": {
      const legal = "an integer in [-2^63, 2^63 - 1]";
      const [min, max] = asSchemaError(() => [
        checkInt(obj["min"], `attributes[${name}].min`, INT64_MIN, INT64_MAX, legal),
        checkInt(obj["max"], `attributes[${name}].max`, INT64_MIN, INT64_MAX, legal),
      ]);
      return new IntegerAttribute(name, isPublic, min, max);
    }
    case "continuous": {
      const [lo, hi] = asSchemaError(() => [
        checkReal(obj["lo"], `attributes[${name}].lo`, "a finite number"),
        checkReal(obj["hi"], `attributes[${name}].hi`, "a finite number"),
      ]);
      if (!(lo < hi) || !Number.isFinite(hi - lo)) {
        throw new SchemaError(
          `attributes[${name}]`,
          "lo < hi with a finite hi - lo",
          "got lo >= hi or an infinite width",
        );
      }
      const bits = asSchemaError(() =>
        checkInt("bits" in obj ? obj["bits"] : 4n, `attributes[${name}].bits`, 1n, BigInt(MAX_BITS)),
      );
      return new ContinuousAttribute(name, isPublic, lo, hi, Number(bits));
    }
    case "numeric": {
      const bounds = obj["range"];
      if (
        !Array.isArray(bounds)
        || bounds.length !== 2
        || !bounds.every((b) => typeof b === "number" || typeof b === "bigint")
      ) {
        throw new SchemaError(
          `attributes[${name}].range`,
          "a list [lo, hi] of two finite numbers, lo < hi",
          "wrong type",
        );
      }
      const step = obj["step"];
      if ("step" in obj && typeof step !== "number" && typeof step !== "bigint") {
        throw new SchemaError(`attributes[${name}].step`, STEP_LEGAL, "wrong type");
      }
      const mechanism = "mechanism" in obj ? obj["mechanism"] : "HM";
      if (typeof mechanism !== "string" || !(NUMERIC_MECHANISMS as readonly string[]).includes(mechanism)) {
        throw new SchemaError(
          `attributes[${name}].mechanism`,
          `one of ${NUMERIC_MECHANISMS.join(", ")}`,
          "unknown mechanism",
        );
      }
      const [lo, hi] = bounds.map(Number) as [number, number];
      const levels = step === undefined ? undefined : Number(step);
      return new NumericAttribute(name, isPublic, lo, hi, mechanism as NumericMechanismName, levels);
    }
  }
}
