/** conformance/oracles.json: OUE, OLH and HR cards verified, reports of given byte streams, wire fields, OLH's hash. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseCard, perturbCodes } from "../src/any-card.js";
import { pythonEquals } from "../src/card.js";
import { ValidationError } from "../src/errors.js";
import type { JsonObject } from "../src/json.js";
import { OracleCard } from "../src/oracle-card.js";
import { OptimizedLocalHashing, dyadicSplit } from "../src/oracles.js";
import { ratioAtMostExp } from "../src/exact-exp.js";
import { reportBatch } from "../src/reports.js";
import { ByteStream, big, cases, fromHex, hex, str, vectors } from "./vectors.js";

const doc = vectors("oracles.json");

function oracleCard(c: JsonObject): OracleCard {
  const card = parseCard(c["card"] as JsonObject);
  assert.ok(card instanceof OracleCard);
  return card;
}

for (const c of cases(doc, "cases")) {
  const id = str(c["id"]);
  const codes = (c["codes"] as string[]).map(BigInt);

  test(`oracles ${id}: the card verifies, and its fields are the reference's`, () => {
    const card = oracleCard(c);
    const stated = c["card"] as JsonObject;
    assert.equal(card.version, stated["version"]);
    assert.equal(card.epsilon, stated["epsilon"]);
    for (const [key, value] of Object.entries(card.fields)) assert.ok(pythonEquals(stated[key], value), key);
    assert.deepEqual(Object.keys(card.fields).sort(), [
      "domain_size",
      "epsilon",
      "epsilon_requested",
      "protocol",
      "report_bytes",
      "sampler",
    ]);
  });

  test(`oracles ${id}: the byte stream gives the reference's reports, every byte read`, () => {
    const card = oracleCard(c);
    const stream = new ByteStream(fromHex(str(c["random_hex"])));
    const reports = card.oracle.perturbWithSource(codes, stream.source);
    assert.deepEqual(reports.map(String), c["reports"]);
    assert.equal(stream.read, stream.data.length);
  });

  test(`oracles ${id}: the wire fields are the reference's`, () => {
    const card = oracleCard(c);
    const reports = (c["reports"] as string[]).map(BigInt);
    const batch = reportBatch(
      { reportIds: new Uint8Array(16 * reports.length), privateCodes: reports, publicCodes: [], oracle: card.oracle },
      "x",
      card.version,
      0n,
    );
    const wire = c["wire"] as Record<string, string>;
    const fields: Record<string, Uint8Array> = {
      report_bitmaps: batch.reportBitmaps,
      olh_seeds: batch.olhSeeds,
      olh_buckets: batch.olhBuckets,
      hadamard_reports: batch.hadamardReports,
    };
    for (const [name, bytes] of Object.entries(fields)) assert.equal(hex(bytes), wire[name] ?? "", name);
    assert.equal(batch.privateCodes.length, 0);
  });

  if (c["hashes"] !== undefined) {
    test(`oracles ${id}: OLH's hash of given seeds and codes`, () => {
      const oracle = oracleCard(c).oracle as OptimizedLocalHashing;
      for (const h of c["hashes"] as JsonObject[]) {
        assert.equal(BigInt(oracle.hash.hash(Number(big(h["seed"])), Number(big(h["code"])))), big(h["bucket"]));
      }
    });
  }

  test(`oracles ${id}: a code outside D is refused before any randomness is read`, () => {
    const card = oracleCard(c);
    const bad = [0n, card.domainSize];
    assert.throws(
      () =>
        card.oracle.perturbWithSource(bad, () => {
          throw new Error("read randomness");
        }),
      (e: unknown) => e instanceof ValidationError && e.field === "codes" && e.position === 1,
    );
  });

  test(`oracles ${id}: the CSPRNG path gives reports in the layout's range`, () => {
    const card = oracleCard(c);
    for (const r of perturbCodes(card, codes)) assert.ok(r >= card.oracle.reportLow && r < card.oracle.reportBound);
  });
}

test("oracles: a card whose sampler or epsilon is tampered with is refused, naming the field", () => {
  for (const c of cases(doc, "cases")) {
    const stated = c["card"] as JsonObject;
    const sampler = { ...(stated["sampler"] as JsonObject) };
    const key = { OUE: "other_bit", OLH: "keep_weight", HR: "keep_bit" }[str(stated["mechanism"])]!;
    sampler[key] = stated["mechanism"] === "OLH" ? "1" : "1/2";
    assert.throws(
      () => parseCard({ ...stated, sampler }),
      (e: unknown) => e instanceof ValidationError && e.field === "card.sampler",
      str(c["id"]),
    );
    assert.throws(
      () => parseCard({ ...stated, epsilon: (stated["epsilon"] as number) * 2 }),
      (e: unknown) => e instanceof ValidationError && e.field === "card.epsilon",
    );
  }
});

test("oracles: a card whose schema asks for less epsilon than its sampler delivers is refused", () => {
  // The deliberate violation: the stated sampler's coins were computed for ε = 1, the schema now says 0.5.
  const c = cases(doc, "cases").find((x) => str(x["id"]) === "HR-eps1-k100")!;
  const stated = c["card"] as JsonObject;
  const schema = { ...(stated["schema"] as JsonObject), epsilon: 0.5 };
  assert.throws(
    () => parseCard({ ...stated, schema, epsilon_requested: 0.5 }),
    (e: unknown) => e instanceof ValidationError && e.field.startsWith("card."),
  );
});

test("oracles: dyadicSplit is the least small with big/small <= e^eps, exactly", () => {
  for (const eps of [1e-3, 0.2, 1.0, 3.0, 20.0]) {
    const [b, s] = dyadicSplit(eps);
    assert.equal(b + s, 1n << 64n);
    assert.ok(ratioAtMostExp(b, s, eps));
    assert.ok(!ratioAtMostExp(b + 1n, s - 1n, eps));
  }
  assert.throws(
    () => dyadicSplit(2 ** -70),
    (e: unknown) => e instanceof ValidationError && e.field === "epsilon",
  );
});
