/**
 * A numeric attribute's declared range [lo, hi] and the affine map onto the samplers' [−1, 1]
 * (the reference's `ldpsynth.shared.numeric.scale.NumericRange`):
 *
 *   x = 2(v − lo)/(hi − lo) − 1,  computed as (v − lo)/((hi − lo)/2) − 1 and clipped to [−1, 1]
 *   (rounding only: the range was checked).
 *
 * A value outside [lo, hi], NaN or ±∞ is refused, never clipped (a clipped value biases the mean
 * silently); the error names the field, the first bad position and the range, never the value.
 */
import { ValidationError } from "./errors.js";

/**
 * Python's `repr` of a finite float (the reference states ranges with it): the shortest digits that
 * round-trip, positional for decimal exponents in [−4, 16), else `d.ddde±XX`.
 */
export function pythonRepr(x: number): string {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? "nan" : x > 0 ? "inf" : "-inf";
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const [mantissa, exp] = x.toExponential().split("e") as [string, string];
  const e = Number(exp);
  const sign = mantissa.startsWith("-") ? "-" : "";
  const digits = mantissa.replace("-", "").replace(".", "");
  if (e < -4 || e >= 16) {
    const rest = digits.length > 1 ? `.${digits.slice(1)}` : "";
    return `${sign}${digits[0]}${rest}e${e < 0 ? "-" : "+"}${String(Math.abs(e)).padStart(2, "0")}`;
  }
  if (e < 0) return `${sign}0.${"0".repeat(-e - 1)}${digits}`;
  const whole = digits.slice(0, e + 1).padEnd(e + 1, "0");
  const fraction = digits.slice(e + 1);
  return `${sign}${whole}.${fraction || "0"}`;
}

/** A bound as the reference writes it in a legal range: an integer without a point, else exactly. */
function shown(bound: number): string {
  return Number.isInteger(bound) && Math.abs(bound) < 2 ** 53 ? String(bound) : pythonRepr(bound);
}

/** The declared range [lo, hi] of the numeric attribute `field` (lo < hi, finite, hi − lo finite). */
export class NumericRange {
  readonly lo: number;
  readonly hi: number;
  readonly field: string;

  constructor(lo: number, hi: number, field = "value") {
    if (typeof lo !== "number" || !Number.isFinite(lo)) {
      throw new ValidationError(`${field}.lo`, "a finite number", "out of range");
    }
    if (typeof hi !== "number" || !Number.isFinite(hi) || !(hi > lo)) {
      throw new ValidationError(`${field}.hi`, `a finite number > ${shown(lo)}`, "out of range");
    }
    if (!Number.isFinite(hi - lo)) {
      throw new ValidationError(`${field}.hi`, "a range whose width hi - lo is a finite float", "hi - lo overflows");
    }
    this.lo = lo;
    this.hi = hi;
    this.field = field;
  }

  /** (hi − lo)/2: the factor from the unit scale's spreads to the value scale's. */
  get halfWidth(): number {
    return (this.hi - this.lo) / 2.0;
  }

  /** The legal range as the reference states it, e.g. `a number in [1, 5]`. */
  get legal(): string {
    return `a number in [${shown(this.lo)}, ${shown(this.hi)}]`;
  }

  /** The values mapped onto [−1, 1]; throws naming the field, the first bad position and the range. */
  toUnit(values: readonly number[]): number[] {
    const bad = values.findIndex((v) => typeof v !== "number" || !(v >= this.lo && v <= this.hi));
    if (bad >= 0) throw new ValidationError(this.field, this.legal, "a value outside the declared range", bad);
    const half = this.halfWidth;
    return values.map((v) => Math.min(1.0, Math.max(-1.0, (v - this.lo) / half - 1.0)));
  }
}
