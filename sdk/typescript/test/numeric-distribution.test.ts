/**
 * The numeric samplers' output law against their exact law (numeric-samplers.ts `law()`), drawn through
 * the byte-source hook from a seeded SplitMix64 stream (fixed seeds: reproducible), with Pearson's
 * chi-square at ALPHA = 1e-6 per test (5 seeded configurations and one on the unseeded device path: a
 * spurious failure below 6e-6 if the streams were truly random), every expected count >= 5 (asserted by
 * chiSquarePValue), never retried. Each seeded sample is also tested against the law at ε + 0.5 (the same
 * reports, a sharper law), which must be rejected: the test has power.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  Duchi,
  HybridMechanism,
  PiecewiseMechanism,
  perturbNumeric,
  perturbNumericWithSource,
  ROUND_BITS,
  SlidingWindow,
  SquareWave,
  type GridLaw,
  type NumericSampler,
} from "../src/numeric-samplers.js";
import { chiSquarePValue } from "./chi-square.js";

const ALPHA = 1e-6;
const DRAWS = 60_000;
const MASK = (1n << 64n) - 1n;

/** SplitMix64 as a byte source (tests only: the device reads crypto.getRandomValues). */
function seededSource(seed: bigint): (n: number) => Uint8Array {
  let state = seed & MASK;
  return (n: number) => {
    const out = new Uint8Array(n);
    const view = new DataView(out.buffer);
    for (let k = 0; k < n; k += 8) {
      state = (state + 0x9e3779b97f4a7c15n) & MASK;
      let z = state;
      z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
      z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & MASK;
      view.setBigUint64(k, z ^ (z >> 31n), true);
    }
    return out;
  };
}

type Rows = (i: number) => number[];

function lawRows(law: GridLaw): Rows {
  return (i) => law.weights[i]!.map((w) => Number(w) / Number(law.denominator));
}

/**
 * The rows P[y | i] of `s`, or with `epsilon` instead of the sampler's own (the same window, grid and α:
 * the same reports, a sharper law), to check the chi-square test's power.
 */
function rowsOf(s: NumericSampler, epsilon?: number): Rows {
  if (epsilon === undefined) return lawRows(s.law());
  if (s instanceof Duchi) return lawRows(new Duchi(epsilon, Math.log2(s.steps)).law());
  if (s instanceof SlidingWindow) return lawRows(new SlidingWindow(epsilon, s.inputs, s.window).law());
  const h = s as HybridMechanism;
  const [pm, du, alpha] = [rowsOf(h.pm, epsilon), rowsOf(h.duchi, epsilon), Number(h.alphaWeight) / 2 ** 32];
  return (i) => [...pm(i).map((p) => alpha * p), ...du(i).map((p) => (1 - alpha) * p)];
}

/** P[y | x]: the rounding's two grid rows mixed (SW: x's bucket). */
function pmf(s: NumericSampler, x: number, epsilon?: number): number[] {
  const row = rowsOf(s, epsilon);
  if (s instanceof SquareWave) return row(Math.min(Math.floor((x + 1) * (s.buckets / 2)), s.buckets - 1));
  const steps = s instanceof HybridMechanism || s instanceof PiecewiseMechanism || s instanceof Duchi ? s.steps : 0;
  const t = (x + 1) * (steps / 2);
  const base = Math.min(Math.floor(t), steps - 1);
  const up = Math.floor((t - base) * 2 ** ROUND_BITS) / 2 ** ROUND_BITS;
  const [a, b] = [row(base), row(base + 1)];
  return a.map((p, y) => (1 - up) * p + up * b[y]!);
}

const CONFIGS: [string, (epsilon: number) => NumericSampler, number, number, bigint][] = [
  ["Duchi", (e) => new Duchi(e, 4), 0.5, 0.3, 11n],
  ["PM", (e) => new PiecewiseMechanism(e, 4), 1.0, -0.55, 12n],
  ["SW", (e) => new SquareWave(e, 4), 1.0, 0.2, 13n],
  ["HM", (e) => new HybridMechanism(e, 4), 1.0, 0.8, 14n],
  ["HM", (e) => new HybridMechanism(e, 4), 2.0, -1.0, 15n],
];

for (const [name, make, eps, x, seed] of CONFIGS) {
  test(`numeric law: ${name} at ε = ${eps}, x = ${x} (chi-square, α = ${ALPHA})`, () => {
    const s = make(eps);
    const out = perturbNumericWithSource(s, new Array<number>(DRAWS).fill(x), seededSource(seed));
    const counts = new Array<number>(s.reports).fill(0);
    for (const y of out) {
      assert.ok(Number.isInteger(y) && y >= 0 && y < s.reports, "a report outside the sampler's codes");
      counts[y]!++;
    }
    const keep = pmf(s, x)
      .map((p, y) => [p, y] as const)
      .filter(([p]) => p > 0);
    assert.equal(
      keep.reduce((n, [, y]) => n + counts[y]!, 0),
      DRAWS,
      "no report of probability 0",
    );
    const observed = keep.map(([, y]) => counts[y]!);
    assert.ok(
      chiSquarePValue(
        observed,
        keep.map(([p]) => p * DRAWS),
      ) > ALPHA,
      "the exact law",
    );
    const wrong = pmf(s, x, eps + 0.5);
    assert.ok(
      chiSquarePValue(
        observed,
        keep.map(([, y]) => wrong[y]! * DRAWS),
      ) < ALPHA,
      "the law of ε + 0.5 is rejected",
    );
  });
}

test(`numeric law: the device path (crypto.getRandomValues, unseeded) at HM ε = 1 (chi-square, α = ${ALPHA})`, () => {
  const s = new HybridMechanism(1.0, 4);
  const x = -0.3;
  const counts = new Array<number>(s.reports).fill(0);
  for (const y of perturbNumeric(s, new Array<number>(DRAWS).fill(x))) counts[y]!++;
  const p = pmf(s, x);
  assert.ok(
    chiSquarePValue(
      counts,
      p.map((q) => q * DRAWS),
    ) > ALPHA,
  );
});
