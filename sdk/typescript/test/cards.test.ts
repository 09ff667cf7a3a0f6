/**
 * conformance/cards.json: cards verify, every field recomputes exactly, bad cards name their field; a shuffled
 * collection's card states the block its schema gives (the pool floor, F, the guarantee per party), with k-RR's
 * blanket bound for E and FMT21's clone bound for an oracle's or a numeric collection's card.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseCard } from "../src/any-card.js";
import { MechanismCard, shuffleBlock, shuffleBound } from "../src/card.js";
import { ValidationError } from "../src/errors.js";
import { faithfulExp } from "../src/exact-exp.js";
import { floatBits, floatFromBits } from "../src/float64.js";
import { parseJson, type JsonObject, type JsonValue } from "../src/json.js";
import { acceptBelow } from "../src/sampler.js";
import { Schema } from "../src/schema.js";
import { derive, weightCandidates } from "../src/weights.js";
import { big, cases, str, stringify, vectors } from "./vectors.js";

const doc = vectors("cards.json");

function float(v: unknown): number {
  const f = v as JsonObject;
  const x = floatFromBits(str(f["bits"]));
  assert.equal(floatBits(f["value"] as number), f["bits"], "the JSON number and the bits agree");
  return x;
}

for (const c of cases(doc, "cases")) {
  test(`card: ${str(c["id"])}`, () => {
    const card = MechanismCard.parse(str(c["card_json"]));
    const eps = float(c["epsilon_requested"]);
    const d = big(c["domain_size"]);
    assert.equal(card.epsilonRequested, eps);
    assert.equal(card.domainSize, d);
    assert.equal(String(card.keepWeight), c["keep_weight"]);
    assert.equal(String(card.lieWeight), c["lie_weight"]);
    assert.equal(String(card.totalWeight), c["total_weight"]);
    assert.equal(floatBits(card.epsilon), (c["epsilon"] as JsonObject)["bits"]);
    assert.equal(floatBits(card.keepProbability), (c["keep_probability"] as JsonObject)["bits"]);
    assert.equal(floatBits(card.lieProbability), (c["lie_probability"] as JsonObject)["bits"]);
    assert.equal(String(acceptBelow(card.totalWeight)), c["accept_below"]);
    // Recomputed from (ε, |D|) alone: the card's weights are among the candidates, and the derived
    // numbers follow from the weights alone.
    const candidates = weightCandidates(eps, d);
    const match = candidates.find(
      (w) => String(w.keepWeight) === c["keep_weight"] && String(w.lieWeight) === c["lie_weight"],
    );
    assert.ok(match, "the card's weights are recomputed");
    const derived = derive(match, d);
    assert.equal(floatBits(derived.epsilon), (c["epsilon"] as JsonObject)["bits"]);
    // The exp the reference used is one of the two faithful roundings; it is the nearest one
    // exactly when the vector says so.
    const used = float(c["exp_used"]);
    const [down, up] = faithfulExp(Math.min(eps, 45));
    assert.ok(used === down || used === up);
  });
}

for (const c of cases(doc, "refused")) {
  test(`card refused: eps=${(c["epsilon_requested"] as JsonObject)["hex"] as string}`, () => {
    const schema = Schema.parse(c["schema"]);
    assert.throws(
      () => weightCandidates(schema.epsilon, schema.privateDomainSize),
      (err: unknown) => err instanceof ValidationError && err.field === c["field"],
    );
  });
}

for (const c of cases(doc, "bad_cards")) {
  test(`bad card: ${str(c["id"])}`, () => {
    assert.throws(
      () => parseCard(str(c["card_json"])),
      (err: unknown) => err instanceof ValidationError && err.field === c["field"],
    );
  });
}

for (const c of cases(doc, "accepted_variants")) {
  test(`card variant accepted: ${str(c["id"])}`, () => {
    assert.equal(MechanismCard.parse(str(c["card_json"])).domainSize, 24n);
  });
}

/** A JSON value with its objects' keys sorted (as the reference writes a card). */
function sorted(value: JsonValue): JsonValue {
  if (Array.isArray(value)) return value.map(sorted);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((k) => [k, sorted(value[k]!)]),
  );
}

for (const c of cases(doc, "shuffled")) {
  test(`card of a shuffled collection: ${str(c["id"])}`, () => {
    const text = str(c["card_json"]);
    const card = MechanismCard.parse(text);
    const spec = card.schema.shuffle!;
    assert.deepEqual(
      [spec.injected, spec.honestPerPool, spec.independent],
      [c["assume_injected"], c["honest_reports_per_pool"], c["independent"]],
    );
    const stated = c["shuffle"] as JsonObject;
    assert.equal(spec.assumeInjected, stated["assume_injected"]);
    // The block this SDK computes is the card's, byte for byte once written as the reference writes it.
    const block = (parseJson(text, "card", "a card") as JsonObject)["shuffle"] as JsonObject;
    assert.equal(stringify(sorted(shuffleBlock(spec, card.epsilon))), stringify(sorted(block)));
  });
}

for (const c of cases(doc, "shuffled_mechanisms")) {
  test(`card of a shuffled ${str(c["mechanism"])} collection: the clone bound's block`, () => {
    const text = str(c["card_json"]);
    const card = parseCard(text);
    assert.equal(card.schema.mechanism, c["mechanism"]);
    assert.equal(shuffleBound(card.schema.mechanism), c["bound"]);
    const spec = card.schema.shuffle!;
    assert.deepEqual(
      [spec.injected, spec.honestPerPool, spec.independent],
      [c["assume_injected"], c["honest_reports_per_pool"], c["independent"]],
    );
    const block = (parseJson(text, "card", "a card") as JsonObject)["shuffle"] as JsonObject;
    assert.equal(stringify(sorted(shuffleBlock(spec, card.epsilon, card.schema.mechanism))), stringify(sorted(block)));
    // The same block with E's blanket sentence is another block: a card may not state E's bound for this mechanism.
    assert.notEqual(stringify(sorted(shuffleBlock(spec, card.epsilon))), stringify(sorted(block)));
  });
}

test("the vectors hold shuffled OLH, OUE and HM cards, and tampered ones naming card.shuffle fields", () => {
  const mechanisms = cases(doc, "shuffled_mechanisms").map((c) => c["mechanism"]);
  for (const m of ["OLH", "OUE", "HM"]) assert.ok(mechanisms.includes(m), m);
  const tampered = cases(doc, "bad_cards").filter((c) => /^(shuffled-)?(olh|hm)-/.test(str(c["id"])));
  assert.ok(tampered.length >= 4);
  assert.ok(tampered.every((c) => str(c["field"]).startsWith("card.shuffle")));
});

for (const c of cases(doc, "shuffled_variants")) {
  test(`card of a shuffled collection, written differently, accepted: ${str(c["id"])}`, () => {
    assert.ok(MechanismCard.parse(str(c["card_json"])).schema.shuffle);
  });
}

test("the vectors include cards where the platform's exp is not the nearest float", () => {
  const notNearest = cases(doc, "cases").filter((c) => (c["exp_used"] as JsonObject)["correctly_rounded"] === false);
  assert.ok(notNearest.length >= 1);
  for (const c of notNearest) {
    const eps = float(c["epsilon_requested"]);
    // Both faithful roundings give weights here, and they differ: accepting only the nearest would refuse the card.
    assert.equal(weightCandidates(eps, big(c["domain_size"])).length, 2, str(c["id"]));
  }
});
