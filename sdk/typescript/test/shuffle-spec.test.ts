/** A shuffled collection's schema (`shuffle` block, docs/contract.md §2): read, checked as the reference does. */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { SchemaError } from "../src/errors.js";
import { Schema } from "../src/schema.js";

const SURVEY = readFileSync(new URL("../../../../docker/collections/survey-shuffled.json", import.meta.url), "utf-8");

test("the survey's shuffle block is read, defaults filled, and written back", () => {
  const schema = Schema.parse(SURVEY);
  assert.deepEqual(
    [schema.shuffle?.delta, schema.shuffle?.minBatch, schema.shuffle?.rowsPerDevice, schema.shuffle?.shuffler],
    [1e-9, 500n, 1n, "independent"],
  );
  assert.deepEqual(schema.toJson()["shuffle"], {
    delta: 1e-9,
    min_batch: 500n,
    rows_per_device: 1n,
    shuffler: "independent",
  });
  assert.equal(Schema.parse(schema.toJson()).shuffle?.minBatch, 500n);
  const plain = Schema.parse(JSON.stringify({ ...JSON.parse(SURVEY), shuffle: undefined }));
  assert.equal("shuffle" in plain.toJson(), false);
});

test("a bad shuffle block is a SchemaError naming the field", () => {
  const bad = (shuffle: unknown, field: string): void => {
    const text = JSON.stringify({ ...JSON.parse(SURVEY), shuffle });
    assert.throws(
      () => Schema.parse(text),
      (err) => err instanceof SchemaError && err.field === field,
    );
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
  bad({ delta: 1e-9, min_batch: 5, rows_per_device: null }, "shuffle.rows_per_device");
  bad({ delta: 1e-9, min_batch: 5, shuffler: null }, "shuffle.shuffler");
  bad({ delta: 1e-9, min_batch: 5, assume_injected: 5 }, "shuffle.assume_injected");
  bad({ delta: 1e-9, min_batch: 5, assume_injected: -1 }, "shuffle.assume_injected");
  bad({ delta: 1e-9, min_batch: 5, assume_injected: "1" }, "shuffle.assume_injected");
});

test("assume_injected: F stated or by default one device's quota, below min_batch; the pool floor min_batch - F", () => {
  const spec = (shuffle: object) => Schema.parse(JSON.stringify({ ...JSON.parse(SURVEY), shuffle })).shuffle!;
  const terms = (s: ReturnType<typeof spec>) => [s.assumeInjected, s.injected, s.honestPerPool, s.independent];
  assert.deepEqual(terms(spec({ delta: 1e-9, min_batch: 500 })), [undefined, 1n, 499n, false]);
  assert.deepEqual(terms(spec({ delta: 1e-9, min_batch: 500, rows_per_device: 3, shuffler: "independent" })), [
    undefined,
    3n,
    497n,
    true,
  ]);
  assert.deepEqual(terms(spec({ delta: 1e-9, min_batch: 2, rows_per_device: 3 })), [undefined, 1n, 1n, false]);
  assert.deepEqual(terms(spec({ delta: 1e-9, min_batch: 500, assume_injected: 0 })), [0n, 0n, 500n, false]);
  assert.deepEqual(terms(spec({ delta: 1e-9, min_batch: 500, assume_injected: null })), [undefined, 1n, 499n, false]);
  const stated = spec({ delta: 1e-9, min_batch: 500, assume_injected: 499 });
  assert.deepEqual(stated.toJson(), {
    delta: 1e-9,
    min_batch: 500n,
    rows_per_device: 1n,
    shuffler: "aggregator-operator",
    assume_injected: 499n,
  });
  assert.equal("assume_injected" in spec({ delta: 1e-9, min_batch: 500 }).toJson(), false);
});
