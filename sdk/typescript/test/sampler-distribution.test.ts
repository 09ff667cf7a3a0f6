/**
 * The device sampler's output law against the exact pmf of eq. 16 (A/N for the true code, L/N for
 * each other), drawing from the real CSPRNG (`perturb`, crypto.getRandomValues), which cannot be
 * seeded: every test uses a large sample and Pearson's chi-square at ALPHA = 1e-6, with every
 * expected count >= 5 (asserted), and is never retried. This file runs 12 such tests, so a
 * spurious failure has probability below 1.2e-5. Each sample is also tested against a wrong pmf
 * (E at ε + 0.5), which must be rejected: the test has power.
 */
import assert from "node:assert/strict";
import { mock, test } from "node:test";
import { MechanismCard } from "../src/card.js";
import { newReportIds } from "../src/random.js";
import { perturb } from "../src/sampler.js";
import { derive, weightCandidates } from "../src/weights.js";
import { chiSquarePValue, gammaQ } from "./chi-square.js";

const ALPHA = 1e-6;
const DRAWS = 200_000;

function card(epsilon: number, domainSize: number): MechanismCard {
  return MechanismCard.parse({
    format: "ldpsynth.mechanism-card/1",
    mechanism: "E",
    version: "E/1",
    schema: {
      name: "chi",
      epsilon,
      attributes: [{ name: "x", type: "integer", min: 0n, max: BigInt(domainSize - 1) }],
    },
    ...cardNumbers(epsilon, domainSize),
  });
}

/** A card's numbers from the SDK's own recomputation (parse() then verifies them). */
function cardNumbers(epsilon: number, domainSize: number): Record<string, string | number | bigint> {
  const w = weightCandidates(epsilon, BigInt(domainSize))[0]!;
  const d = derive(w, BigInt(domainSize));
  return {
    domain_size: BigInt(domainSize),
    keep_weight: String(w.keepWeight),
    lie_weight: String(w.lieWeight),
    total_weight: String(d.totalWeight),
    epsilon: d.epsilon,
    epsilon_requested: epsilon,
    keep_probability: d.keepProbability,
    lie_probability: d.lieProbability,
  };
}

function expected(c: MechanismCard, x: number, draws: number): number[] {
  const k = Number(c.domainSize);
  const keep = Number(c.keepWeight) / Number(c.totalWeight);
  const lie = Number(c.lieWeight) / Number(c.totalWeight);
  return Array.from({ length: k }, (_, y) => draws * (y === x ? keep : lie));
}

function counts(outputs: readonly bigint[], k: number): number[] {
  const out = new Array<number>(k).fill(0);
  for (const y of outputs) {
    assert.ok(y >= 0n && y < BigInt(k), "an output outside the domain");
    out[Number(y)]!++;
  }
  return out;
}

// (ε, |D|, true code): the worked example, a binary domain, a fifth of the words rejected (ε 0.7,
// |D| 3), a larger domain; the true code at both ends and inside.
const CONFIGS: [number, number, number][] = [
  [1.0, 24, 14],
  [1.0, 24, 0],
  [0.5, 2, 0],
  [0.5, 2, 1],
  [0.7, 3, 0],
  [0.7, 3, 2],
  [3.0, 5, 4],
  [0.1, 5, 2],
  [4.0, 64, 63],
  [4.0, 64, 31],
  [2.0, 1000, 500],
  [0.05, 3, 1],
];

for (const [eps, k, x] of CONFIGS) {
  test(`perturb follows eq. 16: eps=${eps}, |D|=${k}, x=${x}`, () => {
    const c = card(eps, k);
    const draws = k === 1000 ? 1_000_000 : DRAWS;
    const out = perturb(c, new Array<bigint>(draws).fill(BigInt(x)));
    const observed = counts(out, k);
    const p = chiSquarePValue(observed, expected(c, x, draws));
    assert.ok(p >= ALPHA, `p = ${p} < ${ALPHA}`);
    // Power: the same sample is far from E at a clearly different ε.
    const wrong = card(eps + 0.5, k);
    assert.ok(chiSquarePValue(observed, expected(wrong, x, draws)) < ALPHA, "the test cannot tell a wrong pmf");
  });
}

test("the chi-square p-value is right on known values", () => {
  // Q(1, x) = e^-x; Q(1/2, x) = erfc(sqrt x); chi2 with 1 dof at 3.841458820694124 has p = 0.05.
  assert.ok(Math.abs(gammaQ(1, 2.5) - Math.exp(-2.5)) < 1e-14);
  assert.ok(Math.abs(gammaQ(0.5, 3.841458820694124 / 2) - 0.05) < 1e-12);
  assert.ok(Math.abs(chiSquarePValue([50, 50], [50, 50]) - 1) < 1e-15);
  assert.ok(chiSquarePValue([0, 100], [50, 50]) < 1e-20);
});

test("perturb and report ids draw from crypto.getRandomValues", () => {
  const spy = mock.method(globalThis.crypto, "getRandomValues");
  try {
    perturb(card(1.0, 24), [3n, 4n]);
    assert.ok(spy.mock.callCount() >= 1);
    const before = spy.mock.callCount();
    const ids = newReportIds(5000); // 80,000 bytes: more than one call's 65,536
    assert.equal(spy.mock.callCount() - before, 2);
    assert.equal(ids.length, 80_000);
    const seen = new Set<string>();
    for (let i = 0; i < 5000; i++) seen.add(Buffer.from(ids.subarray(16 * i, 16 * i + 16)).toString("hex"));
    assert.equal(seen.size, 5000);
  } finally {
    spy.mock.restore();
  }
});
