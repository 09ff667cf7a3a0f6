/**
 * Exact non-negative rationals for ε bookkeeping: every float is one, so a sum of spends is kept
 * exactly and rounding can never under-count it. Written as Python's `str(Fraction)`: `p` or `p/q`.
 */
import { floatAsFraction, ratioToFloat } from "./float64.js";

export interface Fraction {
  readonly num: bigint;
  readonly den: bigint;
}

function gcd(a: bigint, b: bigint): bigint {
  while (b) [a, b] = [b, a % b];
  return a < 0n ? -a : a;
}

export function fraction(num: bigint, den = 1n): Fraction {
  if (den <= 0n) throw new RangeError("a fraction needs a positive denominator");
  const g = gcd(num, den) || 1n;
  return { num: num / g, den: den / g };
}

export const ZERO: Fraction = { num: 0n, den: 1n };

export function fromFloat(x: number): Fraction {
  const [p, q] = floatAsFraction(x);
  return fraction(p, q);
}

export function add(a: Fraction, b: Fraction): Fraction {
  return fraction(a.num * b.den + b.num * a.den, a.den * b.den);
}

export function times(a: Fraction, k: bigint): Fraction {
  return fraction(a.num * k, a.den);
}

/** The sign of a − b. */
export function compare(a: Fraction, b: Fraction): -1 | 0 | 1 {
  const d = a.num * b.den - b.num * a.den;
  return d < 0n ? -1 : d > 0n ? 1 : 0;
}

/** The nearest float (for display: the ledger keeps and compares the exact value). */
export function toFloat(a: Fraction): number {
  return a.num === 0n ? 0 : ratioToFloat(a.num, a.den);
}

export function format(a: Fraction): string {
  return a.den === 1n ? `${a.num}` : `${a.num}/${a.den}`;
}

const EXACT = /^-?[0-9]+(\/[0-9]+)?$/;

/** Parse what {@link format} writes; undefined for anything else (or a zero denominator). */
export function parse(text: unknown): Fraction | undefined {
  if (typeof text !== "string" || !EXACT.test(text)) return undefined;
  const [p, q] = text.split("/");
  const den = q === undefined ? 1n : BigInt(q);
  return den === 0n ? undefined : fraction(BigInt(p!), den);
}
