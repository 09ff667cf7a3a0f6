/** conformance/sampler.json: mechanism E on a given byte stream (the test hook, not the package's API). */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ValidationError } from "../src/errors.js";
import { acceptBelow, perturbWithSource } from "../src/sampler.js";
import * as sdk from "../src/index.js";
import { big, ByteStream, cases, fromHex, str, vectors } from "./vectors.js";

const doc = vectors("sampler.json");

for (const c of cases(doc, "cases")) {
  test(`sampler: ${str(c["id"])}`, () => {
    const weights = {
      domainSize: big(c["domain_size"]),
      keepWeight: big(c["keep_weight"]),
      lieWeight: big(c["lie_weight"]),
      totalWeight: big(c["total_weight"]),
    };
    assert.equal(String(acceptBelow(weights.totalWeight)), c["accept_below"]);
    const stream = new ByteStream(fromHex(str(c["random_hex"])));
    const out = perturbWithSource(weights, (c["codes"] as string[]).map(BigInt), stream.source);
    assert.deepEqual(out.map(String), c["outputs"]);
    assert.equal(stream.read, stream.data.length, "every byte of the stream is read");
    assert.equal(stream.read, 8 * Number(c["words_read"]));
    assert.deepEqual(stream.rounds, (c["rounds"] as bigint[]).map(Number));
  });
}

test("the byte-source hook is not part of the package's API", () => {
  assert.ok(!("perturbWithSource" in sdk));
  assert.equal(typeof sdk.perturb, "function");
});

test("out-of-domain codes are refused before any randomness is drawn, naming the position", () => {
  const weights = {
    domainSize: 24n,
    keepWeight: 469186693326110464n,
    lieWeight: 172604138545886560n,
    totalWeight: 4439081879881501344n,
  };
  let calls = 0;
  const source = (n: number): Uint8Array => {
    calls++;
    return new Uint8Array(n);
  };
  for (const [codes, position] of [
    [[0n, 24n], 1],
    [[-1n], 0],
  ] as const) {
    assert.throws(
      () => perturbWithSource(weights, codes, source),
      (err: unknown) =>
        err instanceof ValidationError
        && err.field === "codes"
        && err.position === position
        && !err.message.includes("24,")
        && err.legal === "integer codes in [0, 23]",
    );
  }
  assert.equal(calls, 0);
  assert.throws(
    () => perturbWithSource({ ...weights, totalWeight: weights.totalWeight + 1n }, [0n], source),
    (err: unknown) => err instanceof ValidationError && err.field === "weights",
  );
});
