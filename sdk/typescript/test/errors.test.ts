/** conformance/errors.json: bad schemas and bad rows are refused naming the same field (and row). */
import assert from "node:assert/strict";
import { test } from "node:test";
import { SchemaError, ValidationError } from "../src/errors.js";
import type { JsonObject } from "../src/json.js";
import type { RawValue } from "../src/raw-values.js";
import { encodeColumns, encodeRows } from "../src/rows.js";
import { Schema } from "../src/schema.js";
import { cases, str, vectors } from "./vectors.js";

const doc = vectors("errors.json");

function caught(action: () => unknown): ValidationError {
  try {
    action();
  } catch (err) {
    if (err instanceof ValidationError) return err;
    throw err;
  }
  assert.fail("expected a ValidationError");
}

for (const c of cases(doc, "schema_errors")) {
  test(`bad schema: ${str(c["id"])}`, () => {
    const err = caught(() => Schema.parse(str(c["schema_json"])));
    assert.ok(err instanceof SchemaError, "a SchemaError");
    assert.equal(err.field, c["field"]);
    if (c["legal"] !== undefined) assert.equal(err.legal, c["legal"]);
    assert.match(err.message, /; legal range: ./);
  });
}

const rowsSchema = Schema.parse(doc["rows_schema"]);

for (const c of cases(doc, "row_errors")) {
  test(`bad rows: ${str(c["id"])}`, () => {
    const columns = c["columns"] as Record<string, RawValue[]>;
    const err = caught(() => encodeColumns(rowsSchema, columns));
    assert.equal(err.field, c["field"]);
    assert.equal(err.position ?? null, c["position"] === null ? null : Number(c["position"]));
    for (const secret of c["must_not_contain"] as string[]) assert.ok(!err.message.includes(secret), secret);
  });
}

test("bad values in row objects name the attribute and the row, never the value", () => {
  const good = (doc["row_errors"] as JsonObject[]).length; // the file is not empty
  assert.ok(good > 10);
  const rows = [
    { movie: 3n, region: "eu", rating: 1n, watched: 0n, score: 0.5, genre: "drama" },
    { movie: 3n, region: "eu", rating: 987654n, watched: 0n, score: 0.5, genre: "drama" },
  ];
  const err = caught(() => encodeRows(rowsSchema, rows));
  assert.deepEqual([err.field, err.position, err.legal], ["rating", 1, "an integer in [1, 5]"]);
  assert.ok(!err.message.includes("987654"));
  const extra = caught(() => encodeRows(rowsSchema, [{ ...rows[0]!, salary: 1 }]));
  assert.deepEqual([extra.field, extra.position], ["salary", 0]);
  const { watched: _omitted, ...missing } = rows[0]!;
  const absent = caught(() => encodeRows(rowsSchema, [rows[0]!, missing]));
  assert.deepEqual([absent.field, absent.position], ["watched", 1]);
});
