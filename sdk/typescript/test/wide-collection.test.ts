/**
 * conformance/collections.json (wide and device-key parts): wide cards verify and route a device (its ledger
 * secret → view key → view) as the reference does, tampered ones name their field, a view that uses a
 * frequency oracle is refused; the ledger's view key is stable and its own; rows are checked and projected.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { ValidationError } from "../src/errors.js";
import { deviceKey, FileLedger } from "../src/node/ledger.js";
import { VIEW_KEY_TAG, WideCard } from "../src/wide-card.js";
import { cases, fromHex, hex, str, vectors } from "./vectors.js";
import type { JsonObject } from "../src/json.js";

const doc = vectors("collections.json");

test("device keys: HMAC-SHA256 of the tag and the name under the ledger secret, as the reference's", () => {
  assert.equal(doc["view_key_tag"], VIEW_KEY_TAG);
  for (const c of cases(doc, "device_keys")) {
    const secret = fromHex(str(c["secret"]));
    assert.equal(hex(deviceKey(secret, VIEW_KEY_TAG, str(c["collection"]))), c["view_key"], str(c["id"]));
  }
  assert.throws(
    () => deviceKey(new Uint8Array(32), VIEW_KEY_TAG, ""),
    (e: unknown) => e instanceof ValidationError && e.field === "collection",
  );
});

for (const c of cases(doc, "wide_cards")) {
  test(`wide card: ${str(c["id"])}`, async () => {
    const card = WideCard.parse(str(c["card_json"]));
    assert.deepEqual(card.names, c["names"]);
    const mechanisms = c["mechanisms"] as string[];
    for (const route of c["routes"] as JsonObject[]) {
      const key = deviceKey(fromHex(str(route["secret"])), VIEW_KEY_TAG, card.name);
      const { index, name } = await card.route(key);
      assert.equal(BigInt(index), route["view"]);
      assert.equal(name, route["collection"]);
    }
    mechanisms.forEach((m, i) => {
      // E's card or the oracle's (OLH, OUE), verified in full: the device perturbs with it.
      const view = card.viewCard(i);
      assert.equal(view.schema.name, card.names[i]);
      assert.equal(view.version, `${m}/1`);
      assert.equal(view.epsilon <= card.epsilon, true);
    });
  });
}

for (const c of cases(doc, "bad_wide_cards")) {
  test(`bad wide card: ${str(c["id"])} names ${str(c["field"])}`, () => {
    assert.throws(
      () => WideCard.parse(str(c["card_json"])),
      (e: unknown) => e instanceof ValidationError && e.field === c["field"],
    );
  });
}

const scratch = mkdtempSync(join(tmpdir(), "ldpsynth-wide-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

test("a ledger's view key is stable across reopening, its own, and per collection", () => {
  const path = join(mkdtempSync(join(scratch, "a-")), "ledger.json");
  const a = new FileLedger(path);
  const b = new FileLedger(join(mkdtempSync(join(scratch, "b-")), "ledger.json"));
  assert.deepEqual(new FileLedger(path).viewKey("wide"), a.viewKey("wide"));
  assert.notDeepEqual(a.viewKey("wide"), b.viewKey("wide"));
  assert.notDeepEqual(a.viewKey("wide"), a.viewKey("wide2"));
});

test("project: every column checked first (unknown, missing, a bad value at its row), then the view's columns", () => {
  const card = WideCard.parse(
    str(cases(doc, "wide_cards").find((c) => c["id"] === "pairs-one-way-public")!["card_json"]),
  );
  const columns = { region: ["north", "south"], colour: ["red", "blue"], age: [18, 27], smoker: [0, 1] };
  const index = card.names.indexOf("wide-one-way/colour+smoker");
  assert.deepEqual(card.project(columns, index), {
    colour: ["red", "blue"],
    smoker: [0, 1],
    region: ["north", "south"],
  });
  const rows = [
    { region: "north", colour: "red", age: 18, smoker: 0 },
    { region: "south", colour: "blue", age: 27, smoker: 1 },
  ];
  assert.deepEqual(card.project(rows, index), card.project(columns, index));
  const fieldOf = (action: () => unknown): [string, number | undefined] => {
    try {
      action();
    } catch (e) {
      if (e instanceof ValidationError) return [e.field, e.position];
    }
    return ["accepted", undefined];
  };
  // age is in no view here but is still checked: a bad value anywhere refuses the rows.
  assert.deepEqual(
    fieldOf(() => card.project({ ...columns, age: [18, 99] }, index)),
    ["age", 1],
  );
  assert.deepEqual(
    fieldOf(() => card.project({ ...columns, income: [1, 2] }, index)),
    ["income", undefined],
  );
  const { smoker: _dropped, ...missing } = columns;
  assert.deepEqual(
    fieldOf(() => card.project(missing, index)),
    ["smoker", undefined],
  );
});
