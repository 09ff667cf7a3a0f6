/** The JSON reader: exact integers, the reference's limits, and its quirks (NaN accepted, last key wins). */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ValidationError } from "../src/errors.js";
import { parseJson } from "../src/json.js";
import { exactInteger, pythonFloat, pythonInt, realValue } from "../src/raw-values.js";

const parse = (text: string): unknown => parseJson(text, "doc", "a JSON document");

test("integer literals are exact bigints, other numbers floats", () => {
  assert.deepEqual(parse("[5, 5.0, -0, 9223372036854775807, 1e2, -1.5E-3]"), [
    5n,
    5,
    0n,
    9223372036854775807n,
    100,
    -0.0015,
  ]);
  assert.deepEqual(
    { ...(parse('{"a": "\\u00e9\\n\\"", "b": [true, false, null]}') as object) },
    { a: 'é\n"', b: [true, false, null] },
  );
  assert.ok(Number.isNaN(parse("NaN")));
  assert.equal(parse("-Infinity"), -Infinity);
  const obj = parse('{"__proto__": 1, "k": 1, "k": 2}') as Record<string, unknown>;
  assert.equal(obj["k"], 2n);
  assert.equal(Object.getPrototypeOf(obj), null);
  assert.equal(obj["__proto__"], 1n);
});

test("limits and syntax errors name the field", () => {
  const refused = (text: string, legal: RegExp): void => {
    assert.throws(
      () => parse(text),
      (e: unknown) => e instanceof ValidationError && e.field === "doc" && legal.test(e.legal),
    );
  };
  refused("[".repeat(65) + "]".repeat(65), /nested at most 64/);
  refused("9".repeat(309), /at most 308 digits/);
  refused("1e400", /float64 range/);
  for (const bad of ["", "{", "[1,]", "01", "{'a': 1}", '"\t"', "[1] x", "+1", ".5", "tru"])
    refused(bad, /a JSON document/);
  assert.deepEqual(parse("[".repeat(64) + "]".repeat(64)), parse("[".repeat(64) + "]".repeat(64)));
  assert.equal(parse("9".repeat(308)), BigInt("9".repeat(308)));
});

test("raw strings read as Python's int() and float() read them", () => {
  assert.equal(pythonInt(" +42 "), 42n);
  assert.equal(pythonInt("1_000"), 1000n);
  for (const bad of ["", "1_", "_1", "1__0", "0x10", "4.0", "1e3"]) assert.equal(pythonInt(bad), undefined, bad);
  assert.equal(pythonFloat("4.0"), 4);
  assert.equal(pythonFloat(" .5 "), 0.5);
  assert.equal(pythonFloat("1."), 1);
  assert.equal(pythonFloat("-INF"), -Infinity);
  assert.ok(Number.isNaN(pythonFloat("nan")!));
  for (const bad of ["", ".", "e5", "0x1p3", "Infinityy", "1e", "1,5"]) assert.equal(pythonFloat(bad), undefined, bad);
  assert.equal(exactInteger("1e20"), 100000000000000000000n);
  assert.equal(exactInteger("98765432109876543210987"), 98765432109876543210987n);
  assert.equal(exactInteger(2.5), undefined);
  assert.equal(exactInteger(null), undefined);
  assert.ok(Number.isNaN(realValue("abc")));
});
