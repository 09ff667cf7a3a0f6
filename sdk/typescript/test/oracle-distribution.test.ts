/**
 * The oracles' device path (crypto.getRandomValues) samples the exact law its card states: Pearson's chi-square of
 * every outcome of one true code against the law from the oracle's integers, α = 1e-6 per test (the CSPRNG cannot
 * be seeded, so a false alarm has probability 1e-6; every bin expects >= 200 reports). Each test also checks that
 * it would catch the law of a larger ε (its p-value there below α): a sampler leaking more than its ε fails.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  HadamardResponse,
  OptimizedLocalHashing,
  OptimizedUnaryEncoding,
  type FrequencyOracle,
} from "../src/oracles.js";
import { chiSquarePValue } from "./chi-square.js";

const ALPHA = 1e-6;
const DRAWS = 24_000;
const TWO_64 = 2 ** 64;

function popParity(v: number): number {
  let p = 0;
  for (; v; v &= v - 1) p ^= 1;
  return p;
}

/** Counts of each report (as an index of `laws`' outcomes) of DRAWS reports of code `x`. */
function observed(oracle: FrequencyOracle, x: bigint, outcomes: number, index: (r: bigint) => number): number[] {
  const counts = new Array<number>(outcomes).fill(0);
  for (const r of oracle.perturb(new Array<bigint>(DRAWS).fill(x))) counts[index(r)]! += 1;
  return counts;
}

function check(counts: number[], law: number[], wrong: number[]): void {
  const expected = law.map((p) => p * DRAWS);
  assert.ok(Math.min(...expected) >= 200, "every bin expects >= 200 reports");
  assert.ok(chiSquarePValue(counts, expected) > ALPHA, "the reports follow the card's law");
  assert.ok(
    chiSquarePValue(
      counts,
      wrong.map((p) => p * DRAWS),
    ) < ALPHA,
    "the test tells the law of a larger ε apart",
  );
}

test("HR samples its law: row j uniform on [1, K), the bit <j, x> kept with probability big/2^64", () => {
  const hrLaw = (eps: number): number[] => {
    const hr = new HadamardResponse(eps, 4n);
    const p = Number(hr.big) / TWO_64;
    // index 2j + b - 2 for j in 1..3, b in 0..1; x = 1
    return Array.from({ length: 6 }, (_, i) => {
      const j = (i >> 1) + 1;
      return ((i & 1) === popParity(j & 1) ? p : 1 - p) / 3;
    });
  };
  const hr = new HadamardResponse(1.0, 4n);
  check(
    observed(hr, 1n, 6, (r) => Number(r) - 2),
    hrLaw(1.0),
    hrLaw(1.5),
  );
});

test("OUE samples its law: the true bit 1 with probability 1/2, every other with small/2^64", () => {
  const oueLaw = (eps: number): number[] => {
    const q = Number(new OptimizedUnaryEncoding(eps, 4n).small) / TWO_64;
    // x = 2: bit 2 with 1/2, bits 0, 1, 3 with q, independently
    return Array.from({ length: 16 }, (_, set) =>
      [0, 1, 2, 3].reduce((acc, v) => acc * (v === 2 ? 0.5 : set & (1 << v) ? q : 1 - q), 1),
    );
  };
  const oue = new OptimizedUnaryEncoding(1.0, 4n);
  check(observed(oue, 2n, 16, Number), oueLaw(1.0), oueLaw(2.0));
});

test("OLH samples its law: a uniform seed, its hash kept with probability A/N, else another bucket uniformly", () => {
  const olh = new OptimizedLocalHashing(1.0, 4n);
  const g = olh.hashRange;
  const seeds = 2 ** (2 * olh.fieldBits);
  const olhLaw = (keep: number): number[] =>
    Array.from({ length: seeds * g }, (_, i) => {
      const seed = Math.floor(i / g);
      const z = i % g;
      return (z === olh.hash.hash(seed, 3) ? keep : (1 - keep) / (g - 1)) / seeds;
    });
  const p = Number(olh.keepWeight) / Number(olh.totalWeight);
  const larger = new OptimizedLocalHashing(2.0, 4n, olh.hashBits);
  check(
    observed(olh, 3n, seeds * g, Number),
    olhLaw(p),
    olhLaw(Number(larger.keepWeight) / Number(larger.totalWeight)),
  );
});
