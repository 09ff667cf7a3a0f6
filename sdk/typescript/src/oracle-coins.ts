/**
 * Exact draws for many values at once, read from 64-bit little-endian words exactly as the reference's
 * `ldpsynth.shared.mechanisms.coins.Coins` reads them for one vectorized call (so a byte stream gives the
 * frequency oracles the same reports in both SDKs: conformance/oracles.json):
 *
 * - `below(b, n)`: n integers uniform on {0, …, b − 1}. b = 1 reads nothing. b <= 2^32 takes 32-bit halves of
 *   ⌈n/2⌉ words (the low half first); larger b whole words. A power of two keeps the low bits; any other b
 *   accepts a value below the largest multiple of b that fits (2^32 or 2^64) and reduces it modulo b, and the
 *   rejected positions are drawn again, in order, from fresh words, until none is left.
 * - `bernoulli(a, d, n)`: n booleans, each true with probability exactly a/d. d = 2^m compares a byte (the first
 *   n bytes of ⌈n/8⌉ words) with the top byte of a scaled to max(m, 8) bits, and on a tie (probability 1/256)
 *   the top max(m, 8) − 8 bits of one more word each (in order of the ties) with the rest of a; any other d is
 *   `below(d, n) < a`. a = 0 and a = d read nothing.
 *
 * No float decides an outcome (every number here is an integer below 2^53, or a bigint). The words come from a
 * {@link RandomSource}: the device passes `crypto.getRandomValues` (random.ts); tests a fixed byte stream.
 */
import type { RandomSource } from "./random.js";

const TWO_32 = 2 ** 32;
const TWO_64 = 1n << 64n;

function isPowerOfTwo(b: bigint): boolean {
  return b > 0n && (b & (b - 1n)) === 0n;
}

function bitLength(n: bigint): number {
  return n === 0n ? 0 : n.toString(2).length;
}

export class ArrayCoins {
  constructor(private readonly source: RandomSource) {}

  /** `count` words as bytes (8 each, little-endian). */
  private words(count: number): DataView {
    const bytes = this.source(8 * count);
    if (bytes.length !== 8 * count) throw new RangeError("the random source returned too few bytes");
    return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  /** `count` uniform 32-bit integers: the halves of ⌈count/2⌉ words, the low half first. */
  private uint32(count: number): number[] {
    const view = this.words(Math.ceil(count / 2));
    return Array.from({ length: count }, (_, i) => view.getUint32(4 * i, true));
  }

  /** `count` uniform bytes: the first `count` of ⌈count/8⌉ words. */
  bytes(count: number): Uint8Array {
    const view = this.words(Math.ceil(count / 8));
    return new Uint8Array(view.buffer, view.byteOffset, count);
  }

  /** `count` uniform 64-bit words as bigints. */
  private uint64(count: number): bigint[] {
    const view = this.words(count);
    return Array.from({ length: count }, (_, i) => view.getBigUint64(8 * i, true));
  }

  /** `count` integers uniform on [0, bound), 1 <= bound <= 2^53 (module comment). */
  below(bound: number, count: number): number[] {
    if (!(Number.isSafeInteger(bound) && bound >= 1)) throw new RangeError("below: bound outside [1, 2^53]");
    if (bound === 1) return new Array<number>(count).fill(0);
    return this.belowBig(BigInt(bound), count).map(Number);
  }

  /** `count` integers uniform on [0, bound), 1 <= bound <= 2^63, as bigints (module comment). */
  belowBig(bound: bigint, count: number): bigint[] {
    if (!(bound >= 1n && bound <= 1n << 63n)) throw new RangeError("below: bound outside [1, 2^63]");
    if (bound === 1n) return new Array<bigint>(count).fill(0n);
    const wide = bound > BigInt(TWO_32);
    if (isPowerOfTwo(bound)) {
      return wide
        ? this.uint64(count).map((w) => w & (bound - 1n))
        : this.uint32(count).map((u) => BigInt(u) & (bound - 1n));
    }
    if (!wide) {
      const b = Number(bound);
      const limit = TWO_32 - (TWO_32 % b);
      return this.rejection(count, (n) => this.uint32(n).map((u) => (u < limit ? u % b : -1))).map(BigInt);
    }
    return this.rejectionBig(count, bound, TWO_64 - (TWO_64 % bound));
  }

  /** Rounds of draws for the positions still rejected (-1), in order, until none is. */
  private rejection(count: number, draw: (n: number) => number[]): number[] {
    const out = new Array<number>(count);
    let todo = Array.from({ length: count }, (_, i) => i);
    while (todo.length) {
      const values = draw(todo.length);
      todo = todo.filter((row, k) => {
        if (values[k]! < 0) return true;
        out[row] = values[k]!;
        return false;
      });
    }
    return out;
  }

  private rejectionBig(count: number, bound: bigint, limit: bigint): bigint[] {
    const out = new Array<bigint>(count);
    let todo = Array.from({ length: count }, (_, i) => i);
    while (todo.length) {
      const words = this.uint64(todo.length);
      todo = todo.filter((row, k) => {
        if (words[k]! >= limit) return true;
        out[row] = words[k]! % bound;
        return false;
      });
    }
    return out;
  }

  /** `count` booleans, each true with probability exactly numerator/denominator, 0 <= a <= d <= 2^64. */
  bernoulli(numerator: bigint, denominator: bigint, count: number): boolean[] {
    if (!(denominator >= 1n && denominator <= TWO_64 && numerator >= 0n && numerator <= denominator)) {
      throw new RangeError("bernoulli: needs 0 <= numerator <= denominator <= 2^64");
    }
    if (numerator === 0n || numerator === denominator) return new Array<boolean>(count).fill(numerator === denominator);
    if (!isPowerOfTwo(denominator)) return this.belowBig(denominator, count).map((r) => r < numerator);
    const m = bitLength(denominator) - 1;
    const bits = Math.max(m, 8);
    const num = numerator << BigInt(bits - m);
    const restBits = bits - 8;
    const top = Number(num >> BigInt(restBits));
    const first = this.bytes(count);
    const out = Array.from(first, (b) => b < top);
    const ties: number[] = [];
    if (restBits) first.forEach((b, i) => b === top && ties.push(i));
    if (ties.length) {
      const rest = num & ((1n << BigInt(restBits)) - 1n);
      const words = this.uint64(ties.length);
      ties.forEach((i, k) => (out[i] = words[k]! >> BigInt(64 - restBits) < rest));
    }
    return out;
  }
}
