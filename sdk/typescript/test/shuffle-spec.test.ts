/** A shuffled collection's schema (`shuffle` block, docs/contract.md §2): read, checked as the reference does. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { SchemaError } from "../src/errors.js";
import { Schema } from "../src/schema.js";

const SURVEY = readFileSync(new URL("../../../../docker/collections/survey-shuffled.json", import.meta.url), "utf-8");

test("the survey's shuffle block is read, defaults filled, and written back", () => {
  const schema = Schema.parse(SURVEY);
  assert.deepEqual([schema.shuffle?.delta, schema.shuffle?.minBatch, schema.shuffle?.rowsPerDevice, schema.shuffle?.shuffler],
    [1e-9, 500n, 1n, "independent"]);
  assert.deepEqual(schema.toJson()["shuffle"], { delta: 1e-9, min_batch: 500n, rows_per_device: 1n, shuffler: "independent" });
  assert.equal(Schema.parse(schema.toJson()).shuffle?.minBatch, 500n);
  const plain = Schema.parse(JSON.stringify({ ...JSON.parse(SURVEY), shuffle: undefined }));
  assert.equal("shuffle" in plain.toJson(), false);
});

test("a bad shuffle block is a SchemaError naming the field", () => {
  const bad = (shuffle: unknown, field: string): void => {
    const text = JSON.stringify({ ...JSON.parse(SURVEY), shuffle });
    assert.throws(() => Schema.parse(text), (err) => err instanceof SchemaError && err.field === field);
  };
  bad([], "shuffle");
  bad({ delta: 1e-9, min_batch: 5, extra: 1 }, "shuffle");
  bad({ min_batch: 5 }, "shuffle.delta");
  bad({ delta: 1e-9 }, "shuffle.min_batch");
  bad({ delta: 1, min_batch: 5 }, "shuffle.delta");
  bad({ delta: 1e-9, min_batch: 0 }, "shuffle.min_batch");
  bad({ delta: 1e-9, min_batch: 5.5 }, "shuffle.min_batch");
  bad({ delta: 1e-9, min_batch: 5, rows_per_device: 1000001 }, "shuffle.rows_per_device");
  bad({ delta: 1e-9, min_batch: 5, shuffler: "nobody" }, "shuffle.shuffler");
});
