/**
 * A device's raw rows, validated and encoded to codes (docs/contract.md §3), as the reference's
 * `encode_columns` does: the columns must be exactly the schema's attributes (an unknown column could
 * be a private field the schema does not protect), all of one length; every value is checked before
 * anything is perturbed. Errors name the attribute, the row and the legal range, never the value.
 */
import { ValidationError } from "./errors.js";
import type { RawValue } from "./raw-values.js";
import type { Schema } from "./schema.js";

/** Raw rows as columns: attribute name → one raw value per row. */
export type Columns = Readonly<Record<string, readonly RawValue[]>>;
/** One raw row: attribute name → raw value. */
export type Row = Readonly<Record<string, RawValue>>;

/** Rows encoded to codes, still on the device. */
export interface EncodedRows {
  /** One column per public attribute (schema order): the codes sent in clear. */
  readonly publicCodes: readonly (readonly bigint[])[];
  /** The raw private code of each row (index into D). Never leaves the device: only its perturbation does. */
  readonly privateCodes: readonly bigint[];
}

function columnLength(name: string, column: unknown): number {
  const legal = "a sequence (or 1-d array) of raw values, one per row";
  if (!Array.isArray(column)) throw new ValidationError(name, legal, "not a column");
  if (column.some((v) => typeof v === "object" && v !== null))
    throw new ValidationError(name, legal, "not a flat column");
  return column.length;
}

/** Validate raw columns against the schema and encode them. */
export function encodeColumns(schema: Schema, columns: Columns): EncodedRows {
  const names = schema.attributes.map((a) => a.name);
  for (const name of Object.keys(columns)) {
    if (!names.includes(name)) {
      throw new ValidationError(
        name,
        `one of the attributes of ${JSON.stringify(schema.name)}: ${names.join(", ")}`,
        "not an attribute of the collection",
      );
    }
  }
  for (const attr of schema.attributes) {
    if (!Object.hasOwn(columns, attr.name)) throw new ValidationError(attr.name, attr.legalRange, "missing column");
  }
  const first = schema.attributes[0]!;
  const n = columnLength(first.name, columns[first.name]);
  for (const attr of schema.attributes.slice(1)) {
    const length = columnLength(attr.name, columns[attr.name]);
    if (length !== n) {
      throw new ValidationError(
        attr.name,
        `a column of ${n} rows (as many as ${JSON.stringify(first.name)})`,
        `got ${length} rows`,
      );
    }
  }
  const encode = (name: string): bigint[] => {
    const attr = schema.attribute(name);
    return columns[name]!.map((value, i) => attr.encode(value, i));
  };
  const publicCodes = schema.publicAttributes.map((a) => encode(a.name));
  const digits = schema.privateAttributes.map((a) => encode(a.name));
  const places = schema.privatePlaceValues;
  const privateCodes = Array.from({ length: n }, (_, i) =>
    digits.reduce((code, column, j) => code + column[i]! * places[j]!, 0n),
  );
  return { publicCodes, privateCodes };
}

/** Validate raw rows (objects with exactly the schema's attributes) and encode them. */
export function encodeRows(schema: Schema, rows: readonly Row[]): EncodedRows {
  const columns: Record<string, RawValue[]> = Object.fromEntries(schema.attributes.map((a) => [a.name, []]));
  rows.forEach((row, i) => {
    for (const name of Object.keys(row)) {
      if (!Object.hasOwn(columns, name)) {
        throw new ValidationError(
          name,
          `one of the attributes of ${JSON.stringify(schema.name)}`,
          "not an attribute of the collection",
          i,
        );
      }
    }
    for (const attr of schema.attributes) {
      if (!Object.hasOwn(row, attr.name)) throw new ValidationError(attr.name, attr.legalRange, "missing value", i);
      columns[attr.name]!.push(row[attr.name]);
    }
  });
  if (rows.length === 0) return { publicCodes: schema.publicAttributes.map(() => []), privateCodes: [] };
  return encodeColumns(schema, columns);
}

/** A device's rows as a client's submit takes them, columns or row objects, encoded (encodeColumns, encodeRows). */
export function encodeSubmission(schema: Schema, rows: Columns | readonly Row[]): EncodedRows {
  return Array.isArray(rows) ? encodeRows(schema, rows as readonly Row[]) : encodeColumns(schema, rows as Columns);
}
