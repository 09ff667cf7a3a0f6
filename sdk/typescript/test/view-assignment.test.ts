/** conformance/wide.json: the view a device reports (HMAC-SHA256 rejection sampling) and a view's cell. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ValidationError } from "../src/errors.js";
import { assignView, MIN_SALT_BYTES, selectView, viewAcceptBelow, viewCell } from "../src/view-assignment.js";
import { cases, fromHex, str, vectors } from "./vectors.js";

const doc = vectors("wide.json");

test("wide: the salt's minimum length is the reference's", () => {
  assert.equal(BigInt(MIN_SALT_BYTES), doc["min_salt_bytes"]);
});

test("wide: every assignment vector gives the reference's view", async () => {
  const all = cases(doc, "assignments");
  assert.ok(all.length >= 200);
  for (const c of all) {
    const count = Number(str(c["count"]));
    assert.equal(String(viewAcceptBelow(count)), c["accept_below"], str(c["id"]));
    const view = await assignView(fromHex(str(c["salt"])), fromHex(str(c["device_key"])), count);
    assert.equal(String(view), c["view"], str(c["id"]));
  }
});

test("wide: the vectors cover counts 1, 2, 3, 28, 1000 and 2^32, and spread the views", () => {
  const all = cases(doc, "assignments");
  const counts = new Set(all.map((c) => str(c["count"])));
  for (const m of ["1", "2", "3", "28", "1000", String(2 ** 32)]) assert.ok(counts.has(m), m);
  const of28 = new Set(all.filter((c) => c["count"] === "28").map((c) => c["view"]));
  assert.ok(of28.size >= 20, "the views of 28 are spread");
});

test("wide: refusals name the reference's field", async () => {
  for (const c of cases(doc, "refused")) {
    const count = Number(str(c["count"]));
    await assert.rejects(
      assignView(fromHex(str(c["salt"])), fromHex(str(c["device_key"])), count),
      (err: unknown) => err instanceof ValidationError && err.field === c["field"],
      str(c["id"]),
    );
  }
});

test("wide: a rejected word is skipped and the next round decides (the rejection step)", async () => {
  // count 3: 2^64 mod 3 = 1, so only the word 2^64 − 1 is rejected.
  const limit = viewAcceptBelow(3);
  assert.equal(limit, (1n << 64n) - 1n);
  const rounds: number[] = [];
  const words = [limit, limit, 7n];
  const view = await selectView(3, (r) => {
    rounds.push(r);
    return Promise.resolve(words[r]!);
  });
  assert.equal(view, 1);
  assert.deepEqual(rounds, [0, 1, 2]);
  await assert.rejects(
    selectView(3, () => Promise.resolve(limit)),
    /256 rejections/,
  );
});

test("wide: view cells are the reference's mixed radix", () => {
  for (const c of cases(doc, "cells")) {
    const sizes = (c["sizes"] as bigint[]).map(Number);
    const rows = (c["rows"] as bigint[][]).map((row) => row.map(Number));
    assert.deepEqual(
      rows.map((row) => String(viewCell(row, sizes))),
      c["cells"],
      str(c["id"]),
    );
  }
});

test("wide: a bad code is refused naming its position, never its value", () => {
  assert.throws(
    () => viewCell([2, 12345], [3, 7]),
    (err: unknown) =>
      err instanceof ValidationError && err.field === "codes" && err.position === 1 && !err.message.includes("12345"),
  );
  assert.throws(() => viewCell([0], [3, 7]), ValidationError);
  assert.throws(() => viewCell([0, 0], [2 ** 30, 2 ** 30]), ValidationError);
});
