/**
 * conformance/collections.json (discovery part): strings encode to the reference's codes, discovery cards
 * verify, a device's ledger secret gives its round key, round and turn, its string the round's cell; a round
 * that uses a frequency oracle is refused; the round key is the ledger's own and stable.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { DiscoveryCard, REPORT, ROUND_KEY_CONTEXT, roundOf } from "../src/discovery-card.js";
import { ValidationError } from "../src/errors.js";
import type { JsonObject } from "../src/json.js";
import { deviceKey, FileLedger } from "../src/node/ledger.js";
import { OracleCard } from "../src/oracle-card.js";
import { StringEncoding } from "../src/string-encoding.js";
import { cases, fromHex, hex, str, vectors } from "./vectors.js";

const doc = vectors("collections.json");

test("round keys: HMAC-SHA256 of the context and the name under the ledger secret, as the reference's", () => {
  assert.equal(doc["round_key_context"], ROUND_KEY_CONTEXT);
  for (const c of cases(doc, "device_keys")) {
    const secret = fromHex(str(c["secret"]));
    assert.equal(hex(deviceKey(secret, ROUND_KEY_CONTEXT, str(c["collection"]))), c["round_key"], str(c["id"]));
  }
});

for (const c of cases(doc, "string_codes")) {
  test(`string code: ${str(c["id"])}`, () => {
    const alphabet = c["alphabet"];
    const enc = new StringEncoding(Number(c["max_length"]), typeof alphabet === "string" ? alphabet : undefined);
    if (c["field"] === undefined) {
      assert.equal(hex(enc.encode(c["value"], 0)), c["code"]);
    } else {
      assert.throws(
        () => enc.encode(c["value"], 0),
        (e: unknown) =>
          e instanceof ValidationError
          && e.field === c["field"]
          && (str(c["value"]).length < 4 || !e.message.includes(str(c["value"]))),
      );
    }
  });
}

test("a lone surrogate has no UTF-8 form and is refused, naming values", () => {
  assert.throws(
    () => new StringEncoding(8).encode("a\ud800", 3),
    (e: unknown) => e instanceof ValidationError && e.field === "values" && e.position === 3,
  );
});

for (const c of cases(doc, "discovery_cards")) {
  test(`discovery card: ${str(c["id"])}`, async () => {
    const card = DiscoveryCard.parse(str(c["card_json"]));
    assert.equal(card.round === undefined ? null : BigInt(card.round), c["round"]);
    assert.equal(card.open?.collection ?? null, c["round_collection"]);
    for (const route of c["routes"] as JsonObject[]) {
      const key = deviceKey(fromHex(str(route["secret"])), ROUND_KEY_CONTEXT, card.name);
      assert.equal(BigInt(await card.deviceRound(key)), route["round"]);
      assert.equal(await card.turn(key), route["status"]);
    }
    for (const r of c["rounds_of"] as JsonObject[]) {
      assert.equal(BigInt(await roundOf(fromHex(str(r["key"])), card.salt, card.schedule.rounds)), r["round"]);
    }
    const cells = c["cells"] as JsonObject[];
    if (cells.length) {
      const columns: Record<string, string[]> = { word: cells.map((x) => str(x["value"])) };
      for (const a of card.publicAttributes) columns[a.name] = cells.map(() => "north");
      const rows = card.roundRows(columns);
      assert.deepEqual(
        rows["cell"],
        cells.map((x) => x["cell"]),
      );
    }
    if (c["mechanism"] === null) {
      assert.throws(
        () => card.roundCard(),
        (e: unknown) => e instanceof ValidationError && e.field === "round",
      );
    } else {
      // E's card, or the oracle's (OLH, HR): verified in full, the device perturbs with it.
      const round = card.roundCard();
      assert.equal(round.schema.name, c["round_collection"]);
      assert.equal(round.version, `${str(c["mechanism"])}/1`);
      assert.equal(round instanceof OracleCard, c["mechanism"] !== "E");
    }
  });
}

test("a tampered discovery card names its field", () => {
  const base = JSON.parse(
    str(cases(doc, "discovery_cards").find((c) => c["id"] === "round2-abc-public")!["card_json"]),
  ) as Record<string, unknown>;
  const fieldOf = (changes: Record<string, unknown>): string => {
    try {
      DiscoveryCard.parse(JSON.stringify({ ...base, ...changes }));
    } catch (e) {
      if (e instanceof ValidationError) return e.field;
    }
    return "accepted";
  };
  assert.equal(fieldOf({}), "accepted");
  assert.equal(fieldOf({ mechanism_version: "discovery/2" }), "card.mechanism_version");
  assert.equal(fieldOf({ round: 1 }), "card.candidates"); // another round's prefixes have another width
  assert.equal(fieldOf({ candidates: ["6c", "00", "c0"] }), "candidates");
  assert.equal(fieldOf({ round_collection: "elsewhere" }), "card.round_collection");
  assert.equal(fieldOf({ schedule: { ...(base["schedule"] as object), rounds: 9 } }), "card.schedule");
  const card = base["card"] as Record<string, unknown>;
  const schema = card["schema"] as Record<string, unknown>;
  assert.equal(fieldOf({ card: { ...card, schema: { ...schema, epsilon: 8.0 } } }), "card.card");
});

const scratch = mkdtempSync(join(tmpdir(), "ldpsynth-discovery-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

test("a ledger's round key is stable across reopening, its own, and not its view key", () => {
  const path = join(mkdtempSync(join(scratch, "a-")), "ledger.json");
  const a = new FileLedger(path);
  assert.deepEqual(new FileLedger(path).roundKey("d"), a.roundKey("d"));
  assert.notDeepEqual(a.roundKey("d"), new FileLedger(join(mkdtempSync(join(scratch, "b-")), "l.json")).roundKey("d"));
  assert.notDeepEqual(a.roundKey("d"), a.viewKey("d"));
  assert.equal(REPORT, "report");
});
