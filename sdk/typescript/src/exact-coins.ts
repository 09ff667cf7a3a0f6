/**
 * Exact draws for one value at a time from 64-bit little-endian words, as the reference's
 * `ldpsynth.shared.mechanisms.coins.Coins` draws them for a call on one value (so a byte stream gives
 * the same draws in both SDKs: conformance/numeric.json `streams`):
 *
 * - `below(b)`: uniform on {0, …, b − 1}. b = 1 reads nothing; a power of two takes the low bits of one
 *   word (of its low 32 bits when b <= 2^32); any other b rejects the words at or above the largest
 *   multiple of b below 2^64 (2^32 for b <= 2^32, on the word's low 32 bits) and reduces modulo b.
 * - `bernoulli(a, 2^m)` (m >= 8): true with probability exactly a/2^m: the word's first byte against
 *   the top byte of a (scaled to m bits), and on a tie (probability 1/256) the top m − 8 bits of one
 *   more word against the rest of a. a = 0 and a = 2^m read nothing.
 *
 * No float decides an outcome. The words come from a {@link RandomSource}: the device passes
 * `crypto.getRandomValues` (random.ts); tests pass a fixed byte stream.
 */
import type { RandomSource } from "./random.js";

const TWO_32 = 1n << 32n;
const TWO_64 = 1n << 64n;
const MASK_32 = TWO_32 - 1n;

function isPowerOfTwo(b: bigint): boolean {
  return b > 0n && (b & (b - 1n)) === 0n;
}

function bitLength(n: bigint): number {
  return n === 0n ? 0 : n.toString(2).length;
}

export class Coins {
  constructor(private readonly source: RandomSource) {}

  /** One uniform 64-bit word (8 bytes, little-endian). */
  word(): bigint {
    const bytes = this.source(8);
    if (bytes.length !== 8) throw new RangeError("the random source returned too few bytes");
    return new DataView(bytes.buffer, bytes.byteOffset, 8).getBigUint64(0, true);
  }

  /** Uniform on [0, bound), 1 <= bound <= 2^63, exactly (module comment). */
  below(bound: bigint): bigint {
    if (!(bound >= 1n && bound <= 1n << 63n)) throw new RangeError("below: bound outside [1, 2^63]");
    if (bound === 1n) return 0n;
    const wide = bound > TWO_32;
    if (isPowerOfTwo(bound)) return (wide ? this.word() : this.word() & MASK_32) & (bound - 1n);
    const span = wide ? TWO_64 : TWO_32;
    const limit = span - (span % bound);
    for (;;) {
      const w = wide ? this.word() : this.word() & MASK_32;
      if (w < limit) return w % bound;
    }
  }

  /** True with probability exactly numerator/denominator, the denominator a power of two >= 2^8 or any
   * integer (then {@link below}); 0 <= numerator <= denominator <= 2^64. */
  bernoulli(numerator: bigint, denominator: bigint): boolean {
    if (!(denominator >= 1n && denominator <= TWO_64 && numerator >= 0n && numerator <= denominator)) {
      throw new RangeError("bernoulli: needs 0 <= numerator <= denominator <= 2^64");
    }
    if (numerator === 0n || numerator === denominator) return numerator === denominator;
    if (!isPowerOfTwo(denominator)) return this.below(denominator) < numerator;
    const m = bitLength(denominator) - 1;
    const bits = Math.max(m, 8);
    const num = numerator << BigInt(bits - m);
    const restBits = BigInt(bits - 8);
    const top = num >> restBits;
    const first = this.word() & 0xffn;
    if (first !== top || restBits === 0n) return first < top;
    return this.word() >> (64n - restBits) < (num & ((1n << restBits) - 1n));
  }
}
