/**
 * Exact float64 helpers: bit patterns, neighbours, the exact value of a float as a dyadic rational,
 * correctly rounded division of integers, and Python's float floor division (the reference's
 * `rational_weights` uses it).
 */

const view = new DataView(new ArrayBuffer(8));

/** The IEEE-754 bit pattern of `x` as 16 lowercase hex digits, sign first. */
export function floatBits(x: number): string {
  view.setFloat64(0, x);
  return view.getBigUint64(0).toString(16).padStart(16, "0");
}

/** The float with the bit pattern `bits` (16 hex digits). */
export function floatFromBits(bits: string): number {
  view.setBigUint64(0, BigInt(`0x${bits}`));
  return view.getFloat64(0);
}

/** The next float above `x` (finite `x`; +Infinity above the largest float). */
export function nextUp(x: number): number {
  if (Number.isNaN(x) || x === Infinity) return x;
  if (x === 0) return Number.MIN_VALUE;
  view.setFloat64(0, x);
  const bits = view.getBigUint64(0);
  view.setBigUint64(0, x > 0 ? bits + 1n : bits - 1n);
  return view.getFloat64(0);
}

/** The next float below `x`. */
export function nextDown(x: number): number {
  return -nextUp(-x);
}

/** Python's `math.ulp`: the gap from |x| to the next float away from zero (the last one's own gap at the top). */
export function ulp(x: number): number {
  const a = Math.abs(x);
  const up = nextUp(a);
  return up === Infinity ? a - nextDown(a) : up - a;
}

/** `x` (finite) exactly as `mantissa * 2^exponent`. */
export function dyadic(x: number): { mantissa: bigint; exponent: number } {
  view.setFloat64(0, x);
  const bits = view.getBigUint64(0);
  const sign = bits >> 63n ? -1n : 1n;
  const biased = Number((bits >> 52n) & 0x7ffn);
  const fraction = bits & 0xfffffffffffffn;
  if (biased === 0x7ff) throw new RangeError("not a finite number");
  if (biased === 0) return { mantissa: sign * fraction, exponent: -1074 };
  return { mantissa: sign * (fraction | (1n << 52n)), exponent: biased - 1075 };
}

/** `x` (finite) as the exact fraction `[numerator, denominator]`, denominator a power of two. */
export function floatAsFraction(x: number): [bigint, bigint] {
  const { mantissa, exponent } = dyadic(x);
  return exponent >= 0 ? [mantissa << BigInt(exponent), 1n] : [mantissa, 1n << BigInt(-exponent)];
}

function bitLength(n: bigint): number {
  return n === 0n ? 0 : n.toString(2).length;
}

/**
 * `p / q` (0 < p, 0 < q) rounded to the nearest float64, ties to even, as Python's `int / int`.
 * Results in the normal range only (every ratio this SDK divides is between 2^-64 and 2^64).
 */
export function ratioToFloat(p: bigint, q: bigint): number {
  if (p <= 0n || q <= 0n) throw new RangeError("ratioToFloat needs positive integers");
  // Scale by 2^s so that the integer quotient has exactly 53 bits, then round the rest half to even.
  let s = 53 - (bitLength(p) - bitLength(q));
  let [quotient, remainder, den] = scaledDivision(p, q, s);
  if (quotient >= 1n << 53n) {
    s -= 1;
    [quotient, remainder, den] = scaledDivision(p, q, s);
  }
  const twice = 2n * remainder;
  if (twice > den || (twice === den && (quotient & 1n) === 1n)) quotient += 1n;
  return Number(quotient) * 2 ** -s;
}

/** floor(p 2^s / q), the remainder, and the denominator it is a remainder of. */
function scaledDivision(p: bigint, q: bigint, s: number): [bigint, bigint, bigint] {
  const num = s >= 0 ? p << BigInt(s) : p;
  const den = s >= 0 ? q : q << BigInt(-s);
  return [num / den, num % den, den];
}

/**
 * Python's `vx // wx` for floats (CPython `float_floor_div`: fmod, then the quotient of the exact
 * difference, then a floor that rounds up when the fraction is above one half).
 */
export function pythonFloorDiv(vx: number, wx: number): number {
  const mod = vx % wx; // ECMAScript % on numbers is C's fmod: exact
  let div = (vx - mod) / wx;
  if (mod !== 0) {
    if (wx < 0 !== mod < 0) {
      div -= 1.0; // (CPython also adds wx to mod here; only the quotient is used)
    }
  }
  if (div === 0) return vx / wx < 0 ? -0 : 0;
  let floordiv = Math.floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}
