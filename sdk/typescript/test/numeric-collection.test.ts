/**
 * conformance/collections.json (numeric part): HM and SW cards verify and recompute exactly, tampered ones name
 * their field, a numeric attribute's values encode to the reference's fixed-point codes; on a device, a numeric
 * card perturbs with its exact sampler into [0, K), charges its delivered ε and memoizes by the raw code.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { parseCard, perturbCodes } from "../src/any-card.js";
import { MechanismCard, pythonEquals } from "../src/card.js";
import { ValidationError } from "../src/errors.js";
import { floatBits } from "../src/float64.js";
import type { JsonObject } from "../src/json.js";
import { prepareReports } from "../src/node/device.js";
import { FileLedger } from "../src/node/ledger.js";
import { NumericCard } from "../src/numeric-card.js";
import { encodeColumns, type Columns } from "../src/rows.js";
import { Schema } from "../src/schema.js";
import { cases, str, vectors } from "./vectors.js";

const doc = vectors("collections.json");

for (const c of cases(doc, "numeric_cards")) {
  test(`numeric card: ${str(c["id"])}`, () => {
    const card = parseCard(str(c["card_json"]));
    assert.ok(card instanceof NumericCard);
    assert.equal(card.version, c["version"]);
    assert.equal(String(card.domainSize), c["domain_size"]);
    assert.equal(floatBits(card.epsilon), (c["epsilon"] as JsonObject)["bits"]);
    assert.equal(floatBits(card.epsilonRequested), (c["epsilon_requested"] as JsonObject)["bits"]);
    assert.equal(card.schema.privateDomainSize, card.domainSize);
    assert.ok(card.epsilon <= card.schema.epsilon);
    // MechanismCard (E only) refuses it, naming the mechanism or the version.
    assert.throws(
      () => MechanismCard.parse(str(c["card_json"])),
      (e: unknown) => e instanceof ValidationError && ["card.version", "card.mechanism"].includes(e.field),
    );
  });
}

for (const c of cases(doc, "bad_numeric_cards")) {
  test(`bad numeric card: ${str(c["id"])} names ${str(c["field"])}`, () => {
    assert.throws(
      () => parseCard(str(c["card_json"])),
      (e: unknown) => e instanceof ValidationError && e.field === c["field"],
    );
  });
}

for (const c of cases(doc, "numeric_codes")) {
  test(`numeric codes: ${str(c["id"])}`, () => {
    const schema = Schema.parse(c["schema"]);
    // The schema's JSON (a declared step included) is the reference's.
    assert.ok(pythonEquals(schema.toJson(), c["schema"]));
    const columns = { x: c["values"] } as unknown as Columns;
    if (c["field"] === undefined) {
      assert.deepEqual(encodeColumns(schema, columns).privateCodes.map(String), c["codes"]);
    } else {
      assert.throws(
        () => encodeColumns(schema, columns),
        (e: unknown) =>
          e instanceof ValidationError
          && e.field === c["field"]
          && e.position === Number(c["position"])
          && (c["legal"] === undefined || e.legal === c["legal"]),
      );
    }
  });
}

const scratch = mkdtempSync(join(tmpdir(), "ldpsynth-numeric-"));
after(() => rmSync(scratch, { recursive: true, force: true }));

function cardOf(id: string): NumericCard {
  const c = cases(doc, "numeric_cards").find((x) => x["id"] === id)!;
  return parseCard(str(c["card_json"])) as NumericCard;
}

test("a numeric card perturbs into [0, K) from the CSPRNG: both of HM's components and SW's whole range", () => {
  for (const card of [cardOf("HM-eps=4.0-range=[-5.5, 12.25]"), cardOf("SW-eps=1.0-range=[0.0, 100.0]")]) {
    const codes = encodeColumns(card.schema, {
      x: Array.from({ length: 2000 }, (_, i) => card.attribute.lo + (i % 7)),
    }).privateCodes;
    const out = perturbCodes(card, codes);
    assert.equal(out.length, codes.length);
    assert.ok(out.every((y) => y >= 0n && y < card.domainSize));
    if (card.mechanism === "HM") {
      // α = 1 − e^{−2} ≈ 0.86: both PM's cells (< K − 2) and Duchi's ±B (K − 2, K − 1) appear in 2000 draws
      // (each missing with probability below 1e-100: this cannot fail by chance).
      assert.ok(out.some((y) => y < card.domainSize - 2n));
      assert.ok(out.some((y) => y >= card.domainSize - 2n));
    }
  }
});

test("a numeric submission charges the delivered ε per new report and memoizes by the value's code", () => {
  const card = cardOf("HM-eps=1.0-range=[0.0, 100.0]-public");
  const ledger = new FileLedger(join(mkdtempSync(join(scratch, "case-")), "ledger.json"));
  const rows = encodeColumns(card.schema, { region: ["north", "south", "north"], x: [12.5, 12.5, 12.5] });
  const first = prepareReports(card, rows, ledger);
  assert.equal(first.memoized, 1); // the identical third row
  assert.equal(first.reports.privateCodes.length, 2);
  assert.equal(first.epsilonSpent, 2 * card.epsilon);
  assert.equal(ledger.spent(card.schema.name), 2 * card.epsilon);
  assert.ok(first.reports.privateCodes.every((y) => y >= 0n && y < card.domainSize));
  const again = prepareReports(card, rows, ledger);
  assert.equal(again.memoized, 3);
  assert.equal(again.epsilonSpent, 0);
  assert.deepEqual(again.reports.privateCodes, first.reports.privateCodes);
  assert.deepEqual(again.reports.reportIds, first.reports.reportIds);
});

test("a numeric schema's rules: one private attribute, the attribute's mechanism, shuffled or not", () => {
  const attr = { name: "x", type: "numeric", range: [0, 1] };
  const field = (json: object): string => {
    try {
      Schema.parse(JSON.stringify(json));
    } catch (e) {
      if (e instanceof ValidationError) return e.field;
    }
    return "accepted";
  };
  assert.equal(field({ name: "n", epsilon: 1.0, attributes: [attr] }), "accepted");
  assert.equal(field({ name: "n", epsilon: 1.0, attributes: [attr, { name: "b", type: "binary" }] }), "attributes");
  assert.equal(field({ name: "n", epsilon: 1.0, mechanism: "SW", attributes: [attr] }), "mechanism");
  assert.equal(field({ name: "n", epsilon: 1.0, attributes: [{ ...attr, public: true }] }), "attributes[x].public");
  assert.equal(
    field({ name: "n", epsilon: 1.0, attributes: [{ ...attr, mechanism: "PM" }] }),
    "attributes[x].mechanism",
  );
  assert.equal(field({ name: "n", epsilon: 1.0, attributes: [{ ...attr, range: [1, 0] }] }), "attributes[x].range.hi");
  assert.equal(
    field({ name: "n", epsilon: 1.0, mechanism: "HM", attributes: [{ name: "b", type: "binary" }] }),
    "mechanism",
  );
  assert.equal(
    field({ name: "n", epsilon: 1.0, mechanism: "SS", attributes: [{ name: "b", type: "binary" }] }),
    "mechanism",
  );
  assert.equal(
    field({ name: "n", epsilon: 1.0, mechanism: "OLH", attributes: [{ name: "b", type: "binary" }] }),
    "accepted",
  );
  assert.equal(field({ name: "n", epsilon: 1.0, mechanism: "OLH", attributes: [attr] }), "mechanism");
  assert.equal(field({ name: "n", epsilon: 1e-300, attributes: [attr] }), "epsilon");
  // Shuffled: its card states FMT21's clone bound (docs/shuffle-accountant.md §9); the block is checked as E's.
  const shuffle = { delta: 1e-6, min_batch: 10 };
  assert.equal(field({ name: "n", epsilon: 1.0, attributes: [attr], shuffle }), "accepted");
  assert.equal(
    field({ name: "n", epsilon: 1.0, attributes: [attr], shuffle: { ...shuffle, delta: 1 } }),
    "shuffle.delta",
  );
});
