/**
 * Rigorous comparisons of e^x with rationals, in BigInt interval arithmetic: the privacy checks of a
 * card (A <= L e^ε, the delivered ε is the smallest float >= ln(A/L)) never trust a float exp or log.
 *
 * e^x (x >= 0 a float, so an exact dyadic rational) is enclosed in [lo, hi] / 2^W by a Taylor series
 * on x / 2^s followed by s squarings, every step rounded outwards. When the enclosure cannot decide a
 * comparison, W is doubled: e^x is irrational for every rational x != 0, so it never equals a ratio of
 * integers and the loop ends (x = 0 is decided exactly).
 */
import { dyadic, floatAsFraction, nextDown, nextUp } from "./float64.js";

/** Beyond this x the enclosure would be needlessly large: every caller compares with ratios <= 2^64. */
const MAX_EXPONENT = 1000;
/** e^44 > 2^63.4, so for x >= 44 e^x exceeds every ratio up to 2^63. */
const BIG_X = 44;

function bitLength(n: bigint): number {
  return n === 0n ? 0 : n.toString(2).length;
}

function ceilDiv(a: bigint, b: bigint): bigint {
  return (a + b - 1n) / b;
}

/** [lo, hi] with lo <= e^x * 2^w <= hi, for 0 <= x <= MAX_EXPONENT. */
function expEnclosure(x: number, w: number): [bigint, bigint] {
  const { mantissa, exponent } = dyadic(x);
  const one = 1n << BigInt(w);
  if (mantissa === 0n) return [one, one];
  // y = x / 2^s < 2^-8
  const s = Math.max(0, bitLength(mantissa) + exponent + 8);
  const shift = exponent - s + w; // y * 2^w = mantissa * 2^shift
  const yLo = shift >= 0 ? mantissa << BigInt(shift) : mantissa >> BigInt(-shift);
  const yHi = shift >= 0 ? yLo : ceilDiv(mantissa, 1n << BigInt(-shift));
  let termLo = one;
  let termHi = one;
  let sumLo = one;
  let sumHi = one;
  for (let k = 1n; termHi > 1n; k++) {
    termLo = (termLo * yLo) / (k << BigInt(w));
    termHi = ceilDiv(termHi * yHi, k << BigInt(w));
    sumLo += termLo;
    sumHi += termHi;
  }
  // The tail after the last term is below that term (y < 1/2): termHi <= 1 bounds it, plus rounding.
  sumHi += 2n;
  let lo = sumLo;
  let hi = sumHi;
  for (let i = 0; i < s; i++) {
    lo = (lo * lo) >> BigInt(w);
    hi = ceilDiv(hi * hi, one);
  }
  return [lo, hi];
}

/**
 * The sign of e^x - p/q, exactly: 1 if e^x > p/q, -1 if e^x < p/q, 0 only when x = 0 and p = q.
 * `x` is a finite float >= 0; `p` >= 0, `q` > 0.
 */
export function compareExp(x: number, p: bigint, q: bigint): -1 | 0 | 1 {
  if (!(x >= 0) || !Number.isFinite(x)) throw new RangeError("compareExp needs a finite x >= 0");
  if (q <= 0n || p < 0n) throw new RangeError("compareExp needs p >= 0 and q > 0");
  if (x === 0) return p === q ? 0 : p < q ? 1 : -1;
  if (x >= BIG_X && p <= q << 63n) return 1;
  if (x > MAX_EXPONENT) throw new RangeError("compareExp: x too large");
  for (let w = 128; ; w *= 2) {
    const [lo, hi] = expEnclosure(x, w);
    const target = p << BigInt(w); // compare e^x 2^w with p 2^w / q, i.e. (lo, hi) * q with p 2^w
    if (lo * q > target) return 1;
    if (hi * q < target) return -1;
  }
}

/** Whether A/L <= e^x, exactly (the privacy condition of a card: the loss ln(A/L) is at most x). */
export function ratioAtMostExp(a: bigint, l: bigint, x: number): boolean {
  return compareExp(x, a, l) >= 0;
}

/** The sign of e^x - y for floats x >= 0 and y > 0, exactly. */
function compareExpWithFloat(x: number, y: number): -1 | 0 | 1 {
  const [p, q] = floatAsFraction(y);
  return compareExp(x, p, q);
}

/**
 * The two faithful roundings of e^x (0 <= x <= 709): the largest float <= e^x and the smallest float
 * >= e^x. A libm `exp` accurate to within one ulp returns one of them (glibc's is not always the
 * nearest one); they are equal only at x = 0.
 */
export function faithfulExp(x: number): [number, number] {
  if (x === 0) return [1, 1];
  let down = Math.exp(x);
  while (compareExpWithFloat(x, down) < 0) down = nextDown(down);
  while (compareExpWithFloat(x, nextUp(down)) > 0) down = nextUp(down);
  return [down, nextUp(down)];
}

/** The smallest float x with e^x >= p/q (p > q > 0): ln(p/q) rounded up, as the card's `epsilon`. */
export function leastFloatAtLeastLn(p: bigint, q: bigint): number {
  if (!(p > q && q > 0n)) throw new RangeError("leastFloatAtLeastLn needs p > q > 0");
  // A first guess within a few ulps, then exact steps.
  const d = p - q;
  let x = Math.log1p(Number(d) / Number(q));
  if (!(x > 0)) x = Number.MIN_VALUE;
  while (compareExp(x, p, q) < 0) x = nextUp(x);
  for (;;) {
    const below = nextDown(x);
    if (below <= 0 || compareExp(below, p, q) < 0) return x;
    x = below;
  }
}
