/**
 * Mechanism E on the device, exactly (docs/contract.md §5): R uniform on {0, ..., N − 1} by rejection
 * sampling of 64-bit little-endian words, keep the true code x if R < A, else report the
 * ⌊(R − A)/L⌋-th code other than x. The output law is exactly A/N for x and L/N for every other code.
 *
 * Words are read in rounds, as the reference reads them: one per code in order, then one per code
 * still rejected, in order, until none is; so a given byte stream gives the same outputs in every
 * SDK (conformance/sampler.json). The byte source is a parameter of {@link perturbWithSource} only:
 * the package exports {@link perturb}, which always reads `crypto.getRandomValues`.
 */
import { ValidationError } from "./errors.js";
import { secureRandomBytes, type RandomSource } from "./random.js";

const TWO_64 = 1n << 64n;

/** The weights the sampler needs (a verified card has them). */
export interface SamplerWeights {
  readonly domainSize: bigint;
  readonly keepWeight: bigint;
  readonly lieWeight: bigint;
  readonly totalWeight: bigint;
}

/** Words at or above this are rejected: 2^64 − (2^64 mod N). */
export function acceptBelow(totalWeight: bigint): bigint {
  return TWO_64 - (TWO_64 % totalWeight);
}

/** Check every code before any randomness is drawn (the message names the position, not the value). */
function checkCodes(codes: readonly bigint[], domainSize: bigint): void {
  codes.forEach((x, i) => {
    if (typeof x !== "bigint" || x < 0n || x >= domainSize) {
      throw new ValidationError("codes", `integer codes in [0, ${domainSize - 1n}]`, "out of range", i);
    }
  });
}

/** E applied to every code with random words read from `source`. Not exported by the package. */
export function perturbWithSource(w: SamplerWeights, codes: readonly bigint[], source: RandomSource): bigint[] {
  const { domainSize, keepWeight: a, lieWeight: l, totalWeight: n } = w;
  if (!(1n <= l && l < a && n === a + (domainSize - 1n) * l && n <= 1n << 62n)) {
    throw new ValidationError("weights", "1 <= L < A and N = A + (|D| - 1) L <= 2^62", "inconsistent");
  }
  checkCodes(codes, domainSize);
  const limit = acceptBelow(n);
  const out = new Array<bigint>(codes.length);
  let todo = codes.map((_, i) => i);
  while (todo.length) {
    const bytes = source(8 * todo.length);
    if (bytes.length !== 8 * todo.length) throw new RangeError("the random source returned too few bytes");
    const words = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    const rejected: number[] = [];
    todo.forEach((row, k) => {
      const u = words.getBigUint64(8 * k, true);
      if (u >= limit) {
        rejected.push(row);
        return;
      }
      const r = u % n;
      const x = codes[row]!;
      if (r < a) {
        out[row] = x;
      } else {
        const j = (r - a) / l;
        out[row] = j < x ? j : j + 1n;
      }
    });
    todo = rejected;
  }
  return out;
}

/** E applied to every code, drawing only from the platform's CSPRNG (`crypto.getRandomValues`). */
export function perturb(w: SamplerWeights, codes: readonly bigint[]): bigint[] {
  return perturbWithSource(w, codes, secureRandomBytes);
}
