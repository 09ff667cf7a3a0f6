/**
 * A discovery collection's card (docs/heavy-hitters.md, "The collection mode"; the reference's
 * `ldpsynth.shared.heavy_hitters.collection.DiscoveryCard`): a string attribute's heavy hitters found round
 * by round, each round an ordinary sub-collection `<name>/round-<r>` whose one private attribute `cell` is an
 * integer in [0, D_r), D_r = C·2^w (+ 1 "other" cell after round 0).
 *
 * A device reports once, in its round r(key) = ⌊R·U/2^64⌋, U the first 8 bytes (big-endian) of
 * HMAC-SHA256(salt, key), key = HMAC-SHA256(ledger secret, "ldpsynth round key/1" ‖ name) (the ledger's
 * `roundKey`): only when its round is the open one, its string's cell against the round's candidates
 * (string-encoding.ts), to the round's sub-collection, charged under the discovery collection's name;
 * otherwise nothing is charged or sent and the status says "not your round yet" or "your round has passed".
 *
 * Verified here: the format and version, the schedule (recomputed from the schema), the round, the
 * candidates' shape and order, the round's sub-collection name, and its card: its schema recomputed (the cell
 * attribute inserted where the string is, the public attributes, ε, shuffle) and, for E, every number
 * (parseCard). A round's mechanism is the reference's least variance choice among E, HR and OLH (E whenever the
 * collection is shuffled); the device perturbs with it (another is refused naming `card.card.mechanism`). The discovery block's `top_k`, `threshold`, `cap` and `min_reports_per_round` are the
 * server's and are not checked here.
 */
import { parseCard, type Card } from "./any-card.js";
import { CARD_FORMAT, pythonEquals } from "./card.js";
import { SchemaError, ValidationError, asSchemaError } from "./errors.js";
import { isJsonObject, parseJson, type JsonObject, type JsonValue } from "./json.js";
import { IntegerAttribute, Schema, attributeFromJson, type Attribute } from "./schema.js";
import { ShuffleSpec } from "./shuffle-spec.js";
import { MAX_FRAGMENT_BITS, StringEncoding, cellOf, type RoundCells } from "./string-encoding.js";
import type { RawValue } from "./raw-values.js";
import type { Columns } from "./rows.js";
import { checkEpsilon, checkInt } from "./validation.js";
import { ORACLE_NAMES } from "./oracles.js";

export const DISCOVERY_CARD_FORMAT = "ldpsynth.discovery-card/1";
/** The `mechanism_version` GetCollection serves a discovery collection with. */
export const DISCOVERY_VERSION = "discovery/1";
/** The domain tag of a device's round key (HMAC-SHA256 under the ledger's secret of the tag and the name). */
export const ROUND_KEY_CONTEXT = "ldpsynth round key/1";
/** A round's private attribute. */
export const CELL = "cell";
/** The largest round domain D_r. */
export const MAX_DOMAIN = 2 ** 22;
export const REPORT = "report";
export const NOT_YET = "not your round yet";
export const PASSED = "your round has passed";
export type TurnStatus = typeof REPORT | typeof NOT_YET | typeof PASSED;

/** The string attribute of a discovery schema (the reference's `_string_attribute`). */
function stringAttribute(obj: JsonObject, position: number): [string, StringEncoding] {
  const name = obj["name"];
  if (typeof name !== "string" || !/^[\p{XID_Start}_]\p{XID_Continue}*$/u.test(name)) {
    throw new SchemaError(
      `attributes[${position}].name`,
      "a non-empty identifier (letters, digits, _)",
      "not an identifier",
    );
  }
  const where = `attributes[${name}]`;
  const extra = Object.keys(obj).filter(
    (k) => !["name", "type", "public", "max_length", "encoding", "alphabet"].includes(k),
  );
  if (extra.length) {
    throw new SchemaError(
      where,
      "fields name, type, public, max_length and encoding or alphabet",
      `unknown fields ${JSON.stringify(extra.sort())}`,
    );
  }
  if ("public" in obj && obj["public"] !== false) {
    throw new SchemaError(`${where}.public`, "false (the string is the collection's private attribute)", "not false");
  }
  if ("encoding" in obj === "alphabet" in obj)
    throw new SchemaError(where, "exactly one of encoding ('utf-8') and alphabet", "got both or neither");
  if ("encoding" in obj && obj["encoding"] !== "utf-8")
    throw new SchemaError(`${where}.encoding`, "one of utf-8", "unknown encoding");
  if (!("max_length" in obj)) throw new SchemaError(`${where}.max_length`, "an integer in [1, 64]", "missing");
  const alphabet = obj["alphabet"];
  if (alphabet !== undefined && typeof alphabet !== "string") {
    throw new SchemaError(`${where}.alphabet`, "a string of 1 to 255 distinct characters", "got another value");
  }
  return asSchemaError(() => {
    try {
      const length = checkInt(obj["max_length"], "max_length", 1n, 64n);
      return [name, new StringEncoding(Number(length), alphabet)];
    } catch (e) {
      if (e instanceof ValidationError) throw new ValidationError(`${where}.${e.field}`, e.legal, e.problem);
      throw e;
    }
  });
}

/** The rounds: b_0 = min(first_bits, B), b_r = min(b_{r−1} + g, B), R = 1 + ⌈(B − b_0)/g⌉. */
export class RoundSchedule {
  constructor(
    readonly totalBits: number,
    readonly firstBits: number,
    readonly fragmentBits: number,
  ) {}

  get rounds(): number {
    return 1 + Math.ceil((this.totalBits - Math.min(this.firstBits, this.totalBits)) / this.fragmentBits);
  }

  endBits(r: number): number {
    return Math.min(this.firstBits + r * this.fragmentBits, this.totalBits);
  }

  startBits(r: number): number {
    return r === 0 ? 0 : this.endBits(r - 1);
  }

  width(r: number): number {
    return this.endBits(r) - this.startBits(r);
  }

  toJson(): JsonObject {
    return {
      total_bits: BigInt(this.totalBits),
      first_bits: BigInt(this.firstBits),
      fragment_bits: BigInt(this.fragmentBits),
      rounds: BigInt(this.rounds),
    };
  }
}

/** The round (in [0, rounds)) of the device whose round key is `key`, under the discovery's `salt`. */
export async function roundOf(key: Uint8Array, salt: Uint8Array, rounds: number): Promise<number> {
  if (salt.length < 16) throw new ValidationError("salt", "at least 16 bytes", "too short");
  if (!key.length) throw new ValidationError("device_key", "non-empty bytes", "empty");
  const subtle = globalThis.crypto.subtle;
  const hmac = await subtle.importKey("raw", new Uint8Array(salt), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const u = new DataView(await subtle.sign("HMAC", hmac, new Uint8Array(key))).getBigUint64(0, false);
  return Number((BigInt(rounds) * u) >> 64n);
}

function hexBytes(text: string): Uint8Array {
  return Uint8Array.from(text.match(/../g) ?? [], (b) => parseInt(b, 16));
}

/** A verified discovery card (module comment). */
export class DiscoveryCard {
  private constructor(
    readonly name: string,
    readonly epsilon: number,
    readonly word: string,
    readonly encoding: StringEncoding,
    readonly publicAttributes: readonly Attribute[],
    readonly salt: Uint8Array,
    readonly schedule: RoundSchedule,
    /** The open round, or undefined when the discovery is finished. */
    readonly round: number | undefined,
    /** The open round's cells (its candidates), its sub-collection's name and card JSON. */
    readonly open: (RoundCells & { readonly collection: string; readonly card: JsonObject }) | undefined,
  ) {}

  /** Parse and verify a discovery card (its JSON text or an object as `parseJson` returns it); names the field. */
  static parse(input: string | JsonValue): DiscoveryCard {
    const obj = typeof input === "string" ? parseJson(input, "card", "a JSON discovery card") : input;
    if (!isJsonObject(obj) || obj["format"] !== DISCOVERY_CARD_FORMAT) {
      throw new ValidationError(
        "card.format",
        JSON.stringify(DISCOVERY_CARD_FORMAT),
        "not a discovery card of this format",
      );
    }
    if (obj["mechanism_version"] !== DISCOVERY_VERSION) {
      throw new ValidationError("card.mechanism_version", JSON.stringify(DISCOVERY_VERSION), "another version");
    }
    const schema = obj["schema"];
    if (!isJsonObject(schema))
      throw new SchemaError("schema", "a JSON object with name, epsilon, attributes, discovery", "not an object");
    const known = ["name", "epsilon", "attributes", "discovery", "shuffle"];
    const extra = Object.keys(schema).filter((k) => !known.includes(k));
    if (extra.length)
      throw new SchemaError(
        "schema",
        `fields ${known.join(", ")} (this SDK: no lifecycle fields)`,
        `unknown fields ${JSON.stringify(extra.sort())}`,
      );
    for (const key of ["epsilon", "discovery"]) {
      if (!(key in schema)) throw new SchemaError(key, "present in a discovery collection", "missing");
    }
    const attrs = schema["attributes"];
    if (!Array.isArray(attrs) || !attrs.length)
      throw new SchemaError("attributes", "a non-empty list of attribute objects", "missing or empty");
    const strings = attrs.flatMap((a, i) => (isJsonObject(a) && a["type"] === "string" ? [i] : []));
    if (strings.length !== 1) {
      throw new SchemaError(
        "attributes",
        "exactly one attribute of type 'string' (the one private attribute)",
        `got ${strings.length}`,
      );
    }
    const position = strings[0]!;
    const [word, encoding] = stringAttribute(attrs[position] as JsonObject, position);
    const others = attrs.flatMap((a, i) => (i === position ? [] : [attributeFromJson(a, i)]));
    const names = others.map((a) => a.name);
    if (names.includes(word) || new Set(names).size !== names.length)
      throw new SchemaError("attributes", "distinct attribute names", "duplicate names");
    if (names.includes(CELL))
      throw new SchemaError(
        "attributes",
        `no public attribute named '${CELL}' (each round's private attribute)`,
        "got one",
      );
    if (others.some((a) => !a.isPublic))
      throw new SchemaError(
        "attributes",
        `public attributes besides the string '${word}'`,
        "another private attribute",
      );
    const epsilon = asSchemaError(() => checkEpsilon(schema["epsilon"], "epsilon"));
    const shuffle = "shuffle" in schema ? ShuffleSpec.parse(schema["shuffle"]) : undefined;
    const block = schema["discovery"];
    if (!isJsonObject(block))
      throw new SchemaError("discovery", "an object with first_bits, fragment_bits, salt, ...", "not an object");
    const [firstBits, fragmentBits] = asSchemaError(() => [
      Number(checkInt(block["first_bits"], "discovery.first_bits", 1n, 22n)),
      Number(checkInt(block["fragment_bits"], "discovery.fragment_bits", 1n, BigInt(MAX_FRAGMENT_BITS))),
    ]);
    const saltHex = block["salt"];
    if (typeof saltHex !== "string" || !/^(?:[0-9a-f]{2}){16,}$/.test(saltHex)) {
      throw new SchemaError("discovery.salt", "lowercase hex of at least 16 bytes (32 digits)", "malformed");
    }
    const schedule = new RoundSchedule(encoding.bits, firstBits, fragmentBits);
    const name = schema["name"];
    const longest = 128 - `/round-${schedule.rounds - 1}`.length;
    if (typeof name !== "string" || !name || [...name].length > longest) {
      throw new SchemaError("name", `a non-empty string of at most ${longest} characters`, "too long or empty");
    }
    if (!pythonEquals(obj["schedule"], schedule.toJson()))
      throw new ValidationError("card.schedule", "the schema's schedule", "inconsistent");
    const publics = others;
    const r = obj["round"];
    if (r === null || r === undefined) {
      if (!pythonEquals(obj["candidates"], []) || "card" in obj || "round_collection" in obj) {
        throw new ValidationError("card.candidates", "empty, with no card, when the discovery is finished", "present");
      }
      return new DiscoveryCard(
        name,
        epsilon,
        word,
        encoding,
        publics,
        hexBytes(saltHex),
        schedule,
        undefined,
        undefined,
      );
    }
    const round = Number(checkInt(r, "card.round", 0n, BigInt(schedule.rounds - 1)));
    const startBits = schedule.startBits(round);
    const widthBits = schedule.width(round);
    const width = Math.ceil(startBits / 8);
    const candidates = obj["candidates"];
    const legal = `a non-empty list of hex strings of ${width} bytes`;
    if (!Array.isArray(candidates) || !candidates.length || !candidates.every((c) => typeof c === "string")) {
      throw new ValidationError("card.candidates", legal, "not a list of strings");
    }
    if (!candidates.every((c) => new RegExp(`^[0-9a-f]{${2 * width}}$`).test(c)))
      throw new ValidationError("card.candidates", legal, "malformed");
    if (startBits % 8 && candidates.some((c) => parseInt(c.slice(-2), 16) & ((1 << (8 - (startBits % 8))) - 1))) {
      throw new ValidationError(
        "card.candidates",
        `prefixes of ${startBits} bits (later bits zero)`,
        "bits set past the prefix",
      );
    }
    if (startBits === 0 && candidates.length !== 1)
      throw new ValidationError("candidates", "the empty prefix alone in round 0", `got ${candidates.length} rows`);
    if (candidates.some((c, i) => i > 0 && !(candidates[i - 1]! < c))) {
      throw new ValidationError("candidates", "distinct prefixes in increasing order", "not sorted or repeated");
    }
    const domain = candidates.length * 2 ** widthBits + (startBits > 0 ? 1 : 0);
    if (domain > MAX_DOMAIN)
      throw new ValidationError("candidates", `C * 2^width + 1 <= ${MAX_DOMAIN}`, `got ${domain}`);
    const collection = `${name}/round-${round}`;
    if (obj["round_collection"] !== collection)
      throw new ValidationError("card.round_collection", JSON.stringify(collection), "inconsistent");
    const card = obj["card"];
    const attributes = [...publics];
    attributes.splice(position, 0, new IntegerAttribute(CELL, false, 0n, BigInt(domain - 1)));
    const expected = new Schema(collection, epsilon, attributes, shuffle).toJson();
    if (!isJsonObject(card) || card["format"] !== CARD_FORMAT || !isJsonObject(card["schema"])) {
      throw new ValidationError("card.card", "the mechanism card of the round's sub-collection", "inconsistent");
    }
    const { mechanism = "E", ...stated } = card["schema"];
    if (!pythonEquals(stated, expected) || card["mechanism"] !== mechanism) {
      throw new ValidationError(
        "card.card",
        "the mechanism card of the round's sub-collection (recomputed from the schema, round and candidates)",
        "inconsistent",
      );
    }
    return new DiscoveryCard(name, epsilon, word, encoding, publics, hexBytes(saltHex), schedule, round, {
      startBits,
      widthBits,
      candidates: candidates,
      collection,
      card,
    });
  }

  /** The round of the device whose round key is `key`. */
  deviceRound(key: Uint8Array): Promise<number> {
    return roundOf(key, this.salt, this.schedule.rounds);
  }

  /** Whether the device of round key `key` reports now, later, or no more (the reference's `device_turn`). */
  async turn(key: Uint8Array): Promise<TurnStatus> {
    const r = await this.deviceRound(key);
    if (this.round === undefined || r < this.round) return PASSED;
    return r === this.round ? REPORT : NOT_YET;
  }

  /**
   * The verified card of the open round (E's or an oracle's: parseCard); ValidationError naming
   * `card.card.mechanism` when the round uses a mechanism this SDK does not sample, `round` when the discovery
   * is finished.
   */
  roundCard(): Card {
    if (this.open === undefined) throw new ValidationError("round", "an open round", "the discovery is finished");
    const card = this.open.card;
    if (!["E", ...ORACLE_NAMES].includes(card["mechanism"] as string)) {
      throw new ValidationError(
        "card.card.mechanism",
        "E, OUE, OLH or HR (the mechanisms this SDK samples)",
        `round ${this.round} uses ${JSON.stringify(card["mechanism"])}; nothing was charged or sent`,
      );
    }
    return parseCard(card);
  }

  /**
   * The rows of the open round's sub-collection of a device's rows of the discovery collection (the string
   * column and the public ones): the string replaced by its cell, the public columns as given (the reference's
   * `round_rows`); ValidationError naming `rows` for other columns, `values` for a bad string.
   */
  roundRows(columns: Columns): Columns {
    if (this.open === undefined) throw new ValidationError("round", "an open round", "the discovery is finished");
    const expected = [this.word, ...this.publicAttributes.map((a) => a.name)].sort();
    const given = Object.keys(columns).sort();
    if (given.join("\u0000") !== expected.join("\u0000")) {
      throw new ValidationError("rows", `the columns ${JSON.stringify(expected)}`, `got ${JSON.stringify(given)}`);
    }
    const words: readonly RawValue[] = columns[this.word]!;
    const open = this.open;
    const cells = words.map((v, i) => BigInt(cellOf(open, this.encoding.encode(v, i))));
    return { ...Object.fromEntries(Object.entries(columns).filter(([k]) => k !== this.word)), [CELL]: cells };
  }
}
