/**
 * Per-value cost of the exact numeric samplers on the device path (perturbNumeric: crypto.getRandomValues,
 * BigInt draws), at ε = 1 on the default grids, one value per call and in batches, beside a bare
 * getRandomValues of 8 bytes. npm run bench:numeric; prints µs per value (goal: <= 50 µs per value).
 */
import { secureRandomBytes } from "../src/random.js";
import { NumericRange } from "../src/numeric-range.js";
import {
  Duchi,
  HybridMechanism,
  PiecewiseMechanism,
  perturbNumeric,
  SquareWave,
  type NumericSampler,
} from "../src/numeric-samplers.js";

const VALUES = 20_000;
const REPEATS = 5;
const range = new NumericRange(1, 5, "rating");
const unit = range.toUnit(Array.from({ length: VALUES }, (_, i) => 1 + ((i * 7919) % 4001) / 1000));

/** The best of REPEATS runs, in µs per value. */
function best(run: () => void): number {
  run(); // warm up
  let out = Infinity;
  for (let r = 0; r < REPEATS; r++) {
    const start = process.hrtime.bigint();
    run();
    out = Math.min(out, Number(process.hrtime.bigint() - start) / 1e3 / VALUES);
  }
  return out;
}

const samplers: [string, NumericSampler][] = [
  ["Duchi", new Duchi(1)],
  ["PM", new PiecewiseMechanism(1)],
  ["HM", new HybridMechanism(1)],
  ["SW", new SquareWave(1)],
];
console.log(`node ${process.version}; ${VALUES} values, best of ${REPEATS}; µs per value`);
console.log(
  `${"bare getRandomValues(8)".padEnd(28)} ${best(() => unit.forEach(() => secureRandomBytes(8))).toFixed(2)}`,
);
let worst = 0;
for (const [name, s] of samplers) {
  const single = best(() => unit.forEach((x) => perturbNumeric(s, [x])));
  const batch = best(() => perturbNumeric(s, unit));
  worst = Math.max(worst, single, batch);
  console.log(
    `${name.padEnd(6)} one per call ${single.toFixed(2).padStart(7)}`
      + `   batch of ${VALUES} ${batch.toFixed(2).padStart(7)}`,
  );
}
const scale = best(() => range.toUnit(unit.map((x) => 3 + 2 * x)));
console.log(`${"range check + scale".padEnd(28)} ${scale.toFixed(3)}`);
console.log(`largest per-value cost ${worst.toFixed(2)} µs: goal <= 50 µs ${worst <= 50 ? "met" : "MISSED"}`);
