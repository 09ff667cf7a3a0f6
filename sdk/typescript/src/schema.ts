/**
 * The collection schema (docs/contract.md §2) and its attributes' codes (§3): parsed and checked as
 * the reference does (`ldpsynth.shared.schema.Schema.from_json`), every error a SchemaError naming the
 * same field. Sizes and codes are bigints: a public domain may have 2^62 values.
 */
import { SchemaError, ValidationError, asSchemaError } from "./errors.js";
import { isJsonObject, parseJson, type JsonObject, type JsonValue } from "./json.js";
import { checkEpsilon } from "./validation.js";
import { ShuffleSpec } from "./shuffle-spec.js";
import { HybridMechanism, SquareWave } from "./numeric-samplers.js";
import { ORACLE_MAX_DOMAIN, ORACLE_NAMES, type OracleName } from "./oracles.js";
// The attribute kinds (./attributes.ts) stay names of this module, as they were before they had their own.
export {
  MAX_DOMAIN_SIZE,
  MAX_PRIVATE_DOMAIN_SIZE,
  MAX_BITS,
  MAX_CATEGORIES,
  NUMERIC_MECHANISMS,
  NUMERIC_CODE_BITS,
  Attribute,
  CategoricalAttribute,
  BinaryAttribute,
  IntegerAttribute,
  ContinuousAttribute,
  NumericAttribute,
  attributeFromJson,
  type AttributeType,
  type NumericMechanismName,
  type DecodedValue,
} from "./attributes.js";
import {
  MAX_DOMAIN_SIZE,
  MAX_PRIVATE_DOMAIN_SIZE,
  NUMERIC_MECHANISMS,
  Attribute,
  CategoricalAttribute,
  IntegerAttribute,
  ContinuousAttribute,
  NumericAttribute,
  attributeFromJson,
  type NumericMechanismName,
  type DecodedValue,
} from "./attributes.js";

/** Place values of a mixed-radix number, first digit most significant. */
function placeValues(sizes: readonly bigint[]): bigint[] {
  const out = sizes.map(() => 1n);
  for (let j = sizes.length - 2; j >= 0; j--) out[j] = out[j + 1]! * sizes[j + 1]!;
  return out;
}

/** A collection: its name, the ε asked for per row, its attributes in schema order, a shuffled one's `shuffle`. */
export class Schema {
  readonly privateAttributes: readonly Attribute[];
  readonly publicAttributes: readonly Attribute[];
  /** |D|, the product of the private attributes' sizes. */
  readonly privateDomainSize: bigint;
  /** Number of public keys (1 without public attributes). */
  readonly publicDomainSize: bigint;
  /** Mixed-radix place values of the private attributes (first most significant). */
  readonly privatePlaceValues: readonly bigint[];
  readonly publicPlaceValues: readonly bigint[];
  private readonly byName: Map<string, Attribute>;

  /** The collection's mechanism: E, a frequency oracle (OUE, OLH, HR), or a numeric attribute's (HM, SW). */
  readonly mechanism: "E" | OracleName | NumericMechanismName;
  /** The numeric attribute of a numeric collection (its one private attribute); undefined otherwise. */
  readonly numeric: NumericAttribute | undefined;

  constructor(
    readonly name: string,
    readonly epsilon: number,
    readonly attributes: readonly Attribute[],
    readonly shuffle?: ShuffleSpec,
    mechanism = "E",
  ) {
    if (typeof name !== "string" || name.length === 0 || [...name].length > 128) {
      throw new SchemaError("name", "a non-empty string of at most 128 characters", "missing, empty or too long");
    }
    asSchemaError(() => checkEpsilon(epsilon, "epsilon"));
    this.byName = new Map(attributes.map((a) => [a.name, a]));
    if (this.byName.size !== attributes.length) {
      throw new SchemaError("attributes", "distinct attribute names", "duplicate names");
    }
    this.privateAttributes = attributes.filter((a) => !a.isPublic);
    this.publicAttributes = attributes.filter((a) => a.isPublic);
    if (this.privateAttributes.length === 0) {
      throw new SchemaError("attributes", "at least one private attribute", "all attributes are public");
    }
    this.numeric = this.privateAttributes.find((a): a is NumericAttribute => a instanceof NumericAttribute);
    this.mechanism = this.checkMechanism(mechanism);
    this.privateDomainSize =
      this.numeric === undefined
        ? this.privateAttributes.reduce((n, a) => n * a.size, 1n)
        : BigInt(numericSampler(this.numeric.mechanism, epsilon).reports);
    this.publicDomainSize = this.publicAttributes.reduce((n, a) => n * a.size, 1n);
    if (this.mechanism !== "E" && this.numeric === undefined) this.checkOracle(this.mechanism as OracleName);
    if (this.privateDomainSize > MAX_PRIVATE_DOMAIN_SIZE) {
      throw new SchemaError(
        "attributes",
        `a private domain of at most ${MAX_PRIVATE_DOMAIN_SIZE} values (2^28: every `
          + "query holds a weight per value of D and a query batch at most that many weights)",
        `got |D| = ${this.privateDomainSize}`,
      );
    }
    if (this.publicDomainSize > MAX_DOMAIN_SIZE) {
      throw new SchemaError("attributes", "a public domain of at most 2^62 values", "too large");
    }
    this.privatePlaceValues = placeValues(this.privateAttributes.map((a) => a.size));
    this.publicPlaceValues = placeValues(this.publicAttributes.map((a) => a.size));
  }

  /**
   * The reference's rule of a frequency oracle's schema: |D| at most the oracle's largest. It may be shuffled
   * (its card's shuffle block then states FMT21's clone bound: docs/shuffle-accountant.md §9).
   */
  private checkOracle(mechanism: OracleName): void {
    const largest = ORACLE_MAX_DOMAIN[mechanism];
    if (this.privateDomainSize > largest) {
      throw new SchemaError(
        "mechanism",
        `E, or ${mechanism} over a private domain of at most ${largest} values`,
        `got |D| = ${this.privateDomainSize}`,
      );
    }
  }

  /**
   * The reference's rules of a schema's mechanism: E or a frequency oracle this SDK samples (OUE, OLH, HR), or
   * in a collection with a numeric attribute that attribute's mechanism, with exactly one private attribute
   * (`Schema._check_numeric`); any of them may be shuffled (docs/shuffle-accountant.md §9).
   */
  private checkMechanism(mechanism: string): "E" | OracleName | NumericMechanismName {
    const numeric = this.numeric;
    if (numeric === undefined) {
      if ((NUMERIC_MECHANISMS as readonly string[]).includes(mechanism)) {
        throw new SchemaError(
          "mechanism",
          "E (HM and SW are the mechanisms of a numeric attribute: set them on the attribute)",
          `got ${JSON.stringify(mechanism)}`,
        );
      }
      if ((ORACLE_NAMES as readonly string[]).includes(mechanism)) return mechanism as OracleName;
      if (mechanism !== "E") {
        throw new SchemaError(
          "mechanism",
          "E, OUE, OLH or HR (this SDK perturbs with these and the numeric HM and SW)",
          `got ${JSON.stringify(mechanism)}`,
        );
      }
      return "E";
    }
    if (this.privateAttributes.length !== 1) {
      throw new SchemaError(
        "attributes",
        "exactly one private attribute in a collection with a numeric attribute "
          + "(the numeric one, plus any public attributes: a report carries one number)",
        `got ${this.privateAttributes.length} private attributes`,
      );
    }
    if (mechanism !== "E" && mechanism !== numeric.mechanism) {
      throw new SchemaError(
        "mechanism",
        `absent or ${JSON.stringify(numeric.mechanism)} (the mechanism of the numeric attribute ${JSON.stringify(numeric.name)})`,
        `got ${JSON.stringify(mechanism)}`,
      );
    }
    asSchemaError(() => numericSampler(numeric.mechanism, this.epsilon));
    return numeric.mechanism;
  }

  /**
   * Parse and check a schema: JSON text (read within the JSON limits), or an object as
   * {@link parseJson} returns it (integer fields as bigints).
   */
  static parse(input: string | JsonValue | undefined): Schema {
    const obj = typeof input === "string" ? asSchemaError(() => parseJson(input, "schema", "a JSON object")) : input;
    if (!isJsonObject(obj))
      throw new SchemaError("schema", "a JSON object with name, epsilon, attributes", "not an object");
    const extra = Object.keys(obj)
      .filter((k) => !["name", "epsilon", "attributes", "shuffle", "mechanism"].includes(k))
      .sort();
    if (extra.length) {
      throw new SchemaError(
        "schema",
        "fields name, epsilon, attributes, shuffle, mechanism",
        `unknown fields ${JSON.stringify(extra)}`,
      );
    }
    const attrs = obj["attributes"];
    if (!Array.isArray(attrs) || attrs.length === 0) {
      throw new SchemaError("attributes", "a non-empty list of attribute objects", "missing or empty");
    }
    if (!("epsilon" in obj)) throw new SchemaError("epsilon", "a finite number > 0", "missing");
    const epsilon = asSchemaError(() => checkEpsilon(obj["epsilon"], "epsilon"));
    const attributes = attrs.map((a, i) => attributeFromJson(a, i));
    const shuffle = "shuffle" in obj ? ShuffleSpec.parse(obj["shuffle"]) : undefined;
    const mechanism = "mechanism" in obj ? obj["mechanism"] : "E";
    if (typeof mechanism !== "string") throw new SchemaError("mechanism", "a mechanism's name", "not a string");
    return new Schema(obj["name"] as string, epsilon, attributes, shuffle, mechanism);
  }

  attribute(name: string): Attribute {
    const attr = this.byName.get(name);
    if (attr === undefined) throw new ValidationError("attribute", "an attribute of the schema", "unknown attribute");
    return attr;
  }

  /** The private code (index into D) of per-attribute private codes, in the private attributes' order. */
  privateCodeOf(digits: readonly bigint[]): bigint {
    return combine(this.privateAttributes, this.privatePlaceValues, digits);
  }

  /** The aggregator's public key of per-attribute public codes (0 without public attributes). */
  publicKeyOf(digits: readonly bigint[]): bigint {
    return combine(this.publicAttributes, this.publicPlaceValues, digits);
  }

  /**
   * The public keys of `n` rows' public codes (one column per public attribute, codes already checked):
   * the same mixed radix as {@link publicKeyOf}, not checked again; zeros without public attributes.
   * What a SealedBatch names as its `pool_key` (the reference's `Schema.fold_public_codes`).
   */
  foldPublicCodes(publicCodes: readonly (readonly bigint[])[], n: number): bigint[] {
    return Array.from({ length: n }, (_, i) =>
      publicCodes.reduce((key, column, j) => key + column[i]! * this.publicPlaceValues[j]!, 0n),
    );
  }

  /** Per-attribute private codes of a private code (the inverse of {@link privateCodeOf}). */
  privateDigits(code: bigint): bigint[] {
    if (typeof code !== "bigint" || code < 0n || code >= this.privateDomainSize) {
      throw new ValidationError("private_code", `integer codes in [0, ${this.privateDomainSize - 1n}]`, "out of range");
    }
    return this.privateAttributes.map((a, j) => (code / this.privatePlaceValues[j]!) % a.size);
  }

  /** The raw values of a private code: attribute name → value (continuous: the bucket's lower edge). */
  decodePrivate(code: bigint): Map<string, DecodedValue> {
    const digits = this.privateDigits(code);
    return new Map(this.privateAttributes.map((a, j) => [a.name, a.decode(digits[j]!)]));
  }

  /** The schema as JSON-ready data (integers as bigints). */
  toJson(): JsonObject {
    const attrs = this.attributes.map((a): JsonObject => {
      const out: JsonObject = { name: a.name, type: a.type };
      if (a instanceof CategoricalAttribute) out["values"] = [...a.values];
      if (a instanceof IntegerAttribute) Object.assign(out, { min: a.min, max: a.max });
      if (a instanceof ContinuousAttribute) Object.assign(out, { lo: a.lo, hi: a.hi, bits: BigInt(a.bits) });
      if (a instanceof NumericAttribute) {
        Object.assign(out, { range: [a.lo, a.hi], mechanism: a.mechanism });
        if (a.step !== undefined) out["step"] = a.step;
      }
      out["public"] = a.isPublic;
      return out;
    });
    const out: JsonObject = { name: this.name, epsilon: this.epsilon, attributes: attrs };
    if (this.mechanism !== "E" && this.numeric === undefined) out["mechanism"] = this.mechanism;
    if (this.shuffle !== undefined) out["shuffle"] = this.shuffle.toJson();
    return out;
  }
}

/** The exact sampler of a numeric mechanism at ε with the default grid (the report domain is its `reports`). */
export function numericSampler(mechanism: NumericMechanismName, epsilon: number): HybridMechanism | SquareWave {
  return mechanism === "HM" ? new HybridMechanism(epsilon) : new SquareWave(epsilon);
}

function combine(group: readonly Attribute[], places: readonly bigint[], digits: readonly bigint[]): bigint {
  if (digits.length !== group.length) {
    throw new ValidationError("codes", `one code per attribute (${group.length})`, `got ${digits.length}`);
  }
  let total = 0n;
  group.forEach((attr, j) => {
    total += attr.checkCode(digits[j]!) * places[j]!;
  });
  return total;
}
