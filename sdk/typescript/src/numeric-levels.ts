/**
 * A numeric attribute's declared levels (the reference's `ldpsynth.shared.numeric.levels.NumericLevels`):
 * `step` on [lo, hi] means the values are lo, lo + step, …, hi.
 *
 * With N = (hi − lo)/step an integer (to {@link INTEGRAL_TOLERANCE} relative) in [1, {@link MAX_INTERVALS}], the
 * L = N + 1 levels are v_k = lo + k·((hi − lo)/N), k = 0 … N, the last one hi exactly. A value v is on level k when
 * |(v − lo)/step − k| <= {@link LEVEL_TOLERANCE} (decimal steps such as 0.1 are not exact in binary) and is then
 * replaced by v_k, so the device and the aggregator put it in the same SW bucket (docs/numeric.md, "Declared levels").
 */
import { ValidationError } from "./errors.js";
import { roundHalfEven } from "./numeric-samplers.js";
import { checkReal } from "./validation.js";

/** Most steps N = (hi − lo)/step: at most 256 levels, SW's input buckets. */
export const MAX_INTERVALS = 255;
/** How far (hi − lo)/step may be from an integer, relative to it. */
export const INTEGRAL_TOLERANCE = 1e-9;
/** How far (v − lo)/step may be from an integer for v to be on a level (in steps). */
export const LEVEL_TOLERANCE = 1e-6;
/** The legal range of `step`, as the reference states it. */
export const STEP_LEGAL = `a number > 0 with (hi - lo)/step an integer in [1, ${MAX_INTERVALS}]`;

/** The levels of [lo, hi] every `step`; errors name `field` (e.g. `attributes[rating].step`). */
export class NumericLevels {
  /** N = (hi − lo)/step. */
  readonly intervals: number;
  /** v_0 … v_N. */
  readonly values: readonly number[];

  constructor(
    readonly lo: number,
    readonly hi: number,
    readonly step: number,
    readonly field = "step",
  ) {
    checkReal(step, field, STEP_LEGAL, (v) => v > 0);
    const ratio = (hi - lo) / step;
    const n = Number.isFinite(ratio) ? roundHalfEven(ratio) : 0;
    if (!(n >= 1 && n <= MAX_INTERVALS) || Math.abs(ratio - n) > INTEGRAL_TOLERANCE * n) {
      throw new ValidationError(field, STEP_LEGAL, "(hi - lo)/step is not an integer in range");
    }
    this.intervals = n;
    const width = (hi - lo) / n;
    this.values = Array.from({ length: n + 1 }, (_, k) => (k === n ? hi : lo + k * width));
  }

  /** L = N + 1. */
  get count(): number {
    return this.intervals + 1;
  }

  /** The level k of a value, or −1 when it is off the levels (NaN, outside the range or between two). */
  index(value: number): number {
    const t = (value - this.lo) / this.step;
    if (!Number.isFinite(t)) return -1;
    const k = roundHalfEven(t);
    return Math.abs(t - k) <= LEVEL_TOLERANCE && k >= 0 && k <= this.intervals ? k : -1;
  }
}
