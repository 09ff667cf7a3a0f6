/**
 * A wide collection's card (docs/wide.md, "The collection mode"; the reference's
 * `ldpsynth.shared.wide.collection.WideCard`): a schema with a `views` block, the assignment rule and salt,
 * and per view the ordinary sub-collection `<name>/<a>+<b>` a device of that view reports to, with its card.
 *
 * A device reports one view: i = assignView(salt, key, m) (view-assignment.ts), key = HMAC-SHA256(ledger
 * secret, "ldpsynth view key/1" ‖ name) (the ledger's `viewKey`); it submits its rows' projection on the
 * view's attributes and every public one to the view's sub-collection, whose served card must be the one this
 * card states; the ledger charges the wide collection's ε under the wide collection's name.
 *
 * Verified here: the format, version, schema (attributes, views block, shuffle), the views (their attributes
 * and sub-collection names, recomputed from the schema), the assignment block, and every view card's schema
 * (the view's attributes and the public ones, the wide ε and shuffle). The view card of the device's own view
 * is verified in full when it is used ({@link WideCard.viewCard}: parseCard, every number of E's or the
 * oracle's card recomputed). Which mechanism each view uses (the reference's `best_mechanism`: E, OLH or OUE,
 * the least variance) is not recomputed: the device perturbs with the one its view card names (E, OUE, OLH or
 * HR; another is refused, naming the view card's mechanism, before anything is charged). Every view's ε is
 * verified against the wide ε by its card, whatever it is.
 */
import { parseCard, type Card } from "./any-card.js";
import { CARD_FORMAT, pythonEquals } from "./card.js";
import { SchemaError, ValidationError } from "./errors.js";
import type { Collection } from "./gen/ldpsynth/v1/collection_pb.js";
import { isJsonObject, parseJson, type JsonObject, type JsonValue } from "./json.js";
import type { RawValue } from "./raw-values.js";
import type { Columns, Row } from "./rows.js";
import { MAX_PRIVATE_DOMAIN_SIZE, NumericAttribute, Schema, attributeFromJson, type Attribute } from "./schema.js";
import { ShuffleSpec } from "./shuffle-spec.js";
import { MIN_SALT_BYTES, assignView } from "./view-assignment.js";
import { asSchemaError } from "./errors.js";
import { ORACLE_NAMES } from "./oracles.js";
import { checkEpsilon } from "./validation.js";

export const WIDE_CARD_FORMAT = "ldpsynth.wide-card/1";
/** The `mechanism_version` GetCollection serves a wide collection with. */
export const VIEWS_VERSION = "views/1";
/** Between the wide collection's name and a view's attributes in a sub-collection's name. */
export const SEPARATOR = "/";
/** The domain tag of a device's view key (HMAC-SHA256 under the ledger's secret of the tag and the name). */
export const VIEW_KEY_TAG = "ldpsynth view key/1";
/** The assignment rule a wide card states. */
export const ASSIGNMENT_RULE =
  "view = the first w below floor(2^64/m)*m, mod m, of w_r = the first 8 bytes (big-endian) of "
  + "HMAC-SHA256(salt, device_key || byte r), r = 0, 1, ...; m = the number of views";
const FIELDS = ["name", "epsilon", "attributes", "views", "shuffle"];
const HEX = /^(?:[0-9a-fA-F]{2})+$/;

function hexBytes(text: string): Uint8Array {
  return Uint8Array.from(text.match(/../g)!.map((b) => parseInt(b, 16)));
}

function hexOf(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

function stringList(v: JsonValue | undefined): v is string[] {
  return Array.isArray(v) && v.every((a) => typeof a === "string");
}

function checkPrivate(name: string, priv: readonly string[], field: string): void {
  if (!priv.includes(name)) {
    throw new SchemaError(field, `one of the private attributes ${JSON.stringify(priv)}`, "not a private attribute");
  }
}

/** The views (attribute names) of a `views` block over the private attributes `priv` (the reference's `ViewSpec`). */
function resolveViews(block: JsonValue | undefined, priv: readonly string[]): { salt: Uint8Array; views: string[][] } {
  if (!isJsonObject(block)) {
    throw new SchemaError("views", "an object with kind, salt and attributes, one_way or views", "not an object");
  }
  const extra = Object.keys(block).filter((k) => !["kind", "salt", "attributes", "one_way", "views"].includes(k));
  if (extra.length) {
    throw new SchemaError(
      "views",
      "fields kind, salt, attributes, one_way, views",
      `unknown fields ${JSON.stringify(extra.sort())}`,
    );
  }
  const kind = block["kind"];
  for (const key of kind === "list" ? ["attributes", "one_way"] : kind === "pairs" ? ["views"] : []) {
    if (key in block) throw new SchemaError(`views.${key}`, `absent with kind ${JSON.stringify(kind)}`, "present");
  }
  const salt = block["salt"];
  if (typeof salt !== "string" || !HEX.test(salt)) {
    throw new SchemaError(
      "views.salt",
      `a hex string of at least ${MIN_SALT_BYTES} bytes`,
      salt === undefined ? "missing" : "not hex",
    );
  }
  const attrs = block["attributes"];
  if (attrs !== undefined && !stringList(attrs)) {
    throw new SchemaError("views.attributes", "a list of private attribute names", "not a list of strings");
  }
  const listed = block["views"] ?? [];
  if (!Array.isArray(listed) || !listed.every(stringList)) {
    throw new SchemaError(
      "views.views",
      "a list of views, each a list of private attribute names",
      "not a list of lists of strings",
    );
  }
  if (kind !== "pairs" && kind !== "list") throw new SchemaError("views.kind", "one of pairs, list", "unknown kind");
  const bytes = hexBytes(salt);
  if (bytes.length < MIN_SALT_BYTES)
    throw new SchemaError("views.salt", `hex of at least ${MIN_SALT_BYTES} bytes`, "too short");
  const oneWay = block["one_way"] ?? false;
  if (typeof oneWay !== "boolean") throw new SchemaError("views.one_way", "true or false", "not a boolean");
  if (kind === "list") {
    const views = listed;
    if (!views.length) {
      throw new SchemaError(
        "views.views",
        "a non-empty list of views (lists of private attribute names)",
        "missing or empty",
      );
    }
    views.forEach((view, i) => {
      if (!view.length)
        throw new SchemaError(`views.views[${i}]`, "a non-empty list of private attribute names", "empty");
      view.forEach((name, j) => checkPrivate(name, priv, `views.views[${i}][${j}]`));
      if (new Set(view).size !== view.length)
        throw new SchemaError(`views.views[${i}]`, "distinct attribute names", "a name repeats");
    });
    if (new Set(views.map((v) => [...v].sort().join("+"))).size !== views.length) {
      throw new SchemaError("views.views", "distinct views (as sets of attributes)", "a view repeats");
    }
    return { salt: bytes, views };
  }
  const chosen = attrs ?? [...priv];
  chosen.forEach((name, j) => checkPrivate(name, priv, `views.attributes[${j}]`));
  if (new Set(chosen).size !== chosen.length)
    throw new SchemaError("views.attributes", "distinct attribute names", "a name repeats");
  if (chosen.length < 2) {
    throw new SchemaError("views.attributes", "at least 2 private attributes (kind 'pairs')", `got ${chosen.length}`);
  }
  const ones = oneWay ? chosen.map((a) => [a]) : [];
  return { salt: bytes, views: [...ones, ...chosen.flatMap((a, i) => chosen.slice(i + 1).map((b) => [a, b]))] };
}

/** One view: its private attributes, its sub-collection's schema (E's; the card says the mechanism) and card JSON. */
export interface WideView {
  readonly attributes: readonly string[];
  readonly schema: Schema;
  readonly card: JsonObject;
}

/** A verified wide card (module comment). */
export class WideCard {
  private constructor(
    readonly name: string,
    readonly epsilon: number,
    readonly attributes: readonly Attribute[],
    readonly salt: Uint8Array,
    readonly views: readonly WideView[],
  ) {}

  /** The sub-collections' names, in view order. */
  get names(): string[] {
    return this.views.map((v) => v.schema.name);
  }

  /** Parse and verify a wide card (its JSON text or an object as `parseJson` returns it); names the field. */
  static parse(input: string | JsonValue): WideCard {
    const obj = typeof input === "string" ? parseJson(input, "card", "a JSON wide card") : input;
    if (!isJsonObject(obj) || obj["format"] !== WIDE_CARD_FORMAT) {
      throw new ValidationError("card.format", JSON.stringify(WIDE_CARD_FORMAT), "not a wide card of this format");
    }
    if (obj["version"] !== VIEWS_VERSION)
      throw new ValidationError("card.version", JSON.stringify(VIEWS_VERSION), "another version");
    const schema = obj["schema"];
    if (!isJsonObject(schema))
      throw new SchemaError("schema", "a JSON object with name, epsilon, attributes, views", "not an object");
    const extra = Object.keys(schema).filter((k) => !FIELDS.includes(k));
    if (extra.length) {
      throw new SchemaError(
        "schema",
        `fields ${FIELDS.join(", ")} (this SDK: no lifecycle fields)`,
        `unknown fields ${JSON.stringify(extra.sort())}`,
      );
    }
    if (!("views" in schema)) throw new SchemaError("views", "a views block (kind, salt, ...)", "missing");
    const attrs = schema["attributes"];
    if (!Array.isArray(attrs) || !attrs.length)
      throw new SchemaError("attributes", "a non-empty list of attribute objects", "missing or empty");
    if (!("epsilon" in schema)) throw new SchemaError("epsilon", "a finite number > 0", "missing");
    const epsilon = asSchemaError(() => checkEpsilon(schema["epsilon"], "epsilon"));
    const shuffle = "shuffle" in schema ? ShuffleSpec.parse(schema["shuffle"]) : undefined;
    const attributes = attrs.map((a, i) => attributeFromJson(a, i));
    const name = schema["name"];
    if (typeof name !== "string" || !name)
      throw new SchemaError("name", "a non-empty string of at most 128 characters", "missing or empty");
    if (new Set(attributes.map((a) => a.name)).size !== attributes.length)
      throw new SchemaError("attributes", "distinct attribute names", "duplicate names");
    const numeric = attributes.find((a) => a instanceof NumericAttribute);
    if (numeric) {
      throw new SchemaError(
        `attributes[${numeric.name}].type`,
        "categorical, binary, integer or continuous in a collection with views",
        "got numeric",
      );
    }
    const byName = new Map(attributes.map((a) => [a.name, a]));
    const publics = attributes.filter((a) => a.isPublic);
    const { salt, views } = resolveViews(
      schema["views"],
      attributes.filter((a) => !a.isPublic).map((a) => a.name),
    );
    const viewSchemas = views.map((view, i) => {
      const size = view.reduce((n, a) => n * byName.get(a)!.size, 1n);
      if (size > MAX_PRIVATE_DOMAIN_SIZE)
        throw new SchemaError(`views[${i}]`, `a view of at most ${MAX_PRIVATE_DOMAIN_SIZE} cells`, `got ${size}`);
      const sub = `${name}${SEPARATOR}${view.join("+")}`;
      if ([...sub].length > 128) {
        throw new SchemaError(
          "name",
          "a name short enough that every view's sub-collection name (name/a+b) has at most 128 characters",
          `view ${i} has ${[...sub].length}`,
        );
      }
      return new Schema(sub, epsilon, [...view.map((a) => byName.get(a)!), ...publics], shuffle);
    });
    const listed = obj["views"];
    const expected: JsonObject = {
      format: WIDE_CARD_FORMAT,
      version: VIEWS_VERSION,
      schema,
      assignment: { rule: ASSIGNMENT_RULE, salt: hexOf(salt), views: BigInt(views.length) },
      views: views.map((view, i) => {
        const entry = Array.isArray(listed) ? listed[i] : undefined;
        const stated = isJsonObject(entry) && isJsonObject(entry["card"]) ? entry["card"] : {};
        const mechanism = isJsonObject(stated["schema"]) ? stated["schema"]["mechanism"] : undefined;
        // The view card's schema is recomputed; its mechanism's numbers are verified when it is used (viewCard).
        const viewSchema = viewSchemas[i]!.toJson();
        if (mechanism !== undefined && mechanism !== "E") viewSchema["mechanism"] = mechanism;
        return {
          attributes: view,
          collection: viewSchemas[i]!.name,
          card: { ...stated, format: CARD_FORMAT, mechanism: mechanism ?? "E", schema: viewSchema },
        };
      }),
    };
    same(obj, expected, "card");
    const out = views.map((view, i): WideView => ({
      attributes: view,
      schema: viewSchemas[i]!,
      card: (listed as JsonObject[])[i]!["card"] as JsonObject,
    }));
    return new WideCard(name, epsilon, attributes, salt, out);
  }

  /** `{ index, name }` of the view (and its sub-collection) of the device `deviceKey`. */
  async route(deviceKey: Uint8Array): Promise<{ index: number; name: string }> {
    const index = await assignView(this.salt, deviceKey, this.views.length);
    return { index, name: this.views[index]!.schema.name };
  }

  /**
   * The verified card of view `index` (parseCard of the card this wide card states: E's or an oracle's);
   * ValidationError naming the view card's mechanism when the view uses one this SDK does not sample.
   */
  viewCard(index: number): Card {
    const card = this.views[index]!.card;
    if (!["E", ...ORACLE_NAMES].includes(card["mechanism"] as string)) {
      throw new ValidationError(
        `card.views[${index}].card.mechanism`,
        "E, OUE, OLH or HR (the mechanisms this SDK samples)",
        `the view ${JSON.stringify(this.views[index]!.schema.name)} uses ${JSON.stringify(card["mechanism"])}; nothing was charged or sent`,
      );
    }
    return parseCard(card);
  }

  /**
   * The columns of view `index`'s sub-collection (its private attributes, every public one) of the wide rows
   * (columns or row objects), every value of every attribute checked first (a ValidationError naming an
   * unknown or missing attribute, or a bad value at its position; never the value).
   */
  project(rows: Columns | readonly Row[], index: number): Columns {
    const columns: Columns = Array.isArray(rows) ? toColumns(this, rows as readonly Row[]) : (rows as Columns);
    const known = this.attributes.map((a) => a.name);
    for (const name of Object.keys(columns)) {
      if (!known.includes(name)) {
        throw new ValidationError(
          name,
          `one of the attributes of ${JSON.stringify(this.name)}: ${[...known].sort().join(", ")}`,
          "not an attribute of the collection",
        );
      }
    }
    for (const attr of this.attributes) {
      const column = columns[attr.name];
      if (column === undefined) throw new ValidationError(attr.name, attr.legalRange, "missing column");
      if (!Array.isArray(column))
        throw new ValidationError(attr.name, "a sequence of raw values, one per row", "not a column");
      (column as readonly RawValue[]).forEach((v, i) => attr.encode(v, i));
    }
    return Object.fromEntries(this.views[index]!.schema.attributes.map((a) => [a.name, columns[a.name]!]));
  }
}

/**
 * The verified wide card of a GetCollection answer for `name`; ValidationError naming `collection` when the
 * server answered with another collection or version.
 */
export function wideOf(message: Collection, name: string): WideCard {
  const card = WideCard.parse(message.cardJson);
  if (card.name !== name || message.name !== name || message.mechanismVersion !== VIEWS_VERSION) {
    throw new ValidationError(
      "collection",
      `the wide collection asked for (${JSON.stringify(name)}, version ${VIEWS_VERSION})`,
      "the server answered with another collection",
    );
  }
  return card;
}

/** ValidationError naming the first path (keys sorted) where `found` differs from `expected` (the reference's `_same`). */
function same(found: JsonValue | undefined, expected: JsonValue | undefined, path: string): void {
  if (isJsonObject(expected) && isJsonObject(found)) {
    for (const key of [...new Set([...Object.keys(expected), ...Object.keys(found)])].sort()) {
      same(found[key], expected[key], `${path}.${key}`);
    }
  } else if (Array.isArray(expected) && Array.isArray(found) && expected.length === found.length) {
    expected.forEach((e, i) => same(found[i], e, `${path}[${i}]`));
  } else if (!pythonEquals(found, expected) || (typeof found === "boolean") !== (typeof expected === "boolean")) {
    const shown =
      typeof expected === "bigint"
        ? String(expected)
        : JSON.stringify(expected, (_, v: unknown) => (typeof v === "bigint" ? Number(v) : v));
    throw new ValidationError(
      path,
      `${(shown ?? "absent").slice(0, 200)} (recomputed from the card's schema)`,
      "inconsistent",
    );
  }
}

function toColumns(card: WideCard, rows: readonly Row[]): Columns {
  const out: Record<string, Row[string][]> = {};
  rows.forEach((row, i) => {
    for (const [name, value] of Object.entries(row)) {
      if (!card.attributes.some((a) => a.name === name)) {
        throw new ValidationError(
          name,
          `one of the attributes of ${JSON.stringify(card.name)}`,
          "not an attribute of the collection",
          i,
        );
      }
      (out[name] ??= []).push(value);
    }
    for (const attr of card.attributes) {
      if (!Object.hasOwn(row, attr.name)) throw new ValidationError(attr.name, attr.legalRange, "missing value", i);
    }
  });
  return out;
}
