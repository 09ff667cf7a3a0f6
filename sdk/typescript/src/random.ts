/**
 * The only source of randomness of the SDK: the platform's CSPRNG through `crypto.getRandomValues`
 * (Web Crypto: browsers, Node >= 19 as `globalThis.crypto`). Nothing here can be seeded.
 */

/** Bytes per getRandomValues call allowed by the Web Crypto API. */
const MAX_CALL_BYTES = 65536;

/** Bytes of a report id. */
export const REPORT_ID_BYTES = 16;

/** A source of random bytes: returns exactly `n` fresh bytes. */
export type RandomSource = (n: number) => Uint8Array;

/** `n` bytes from the CSPRNG. */
export function secureRandomBytes(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let offset = 0; offset < n; offset += MAX_CALL_BYTES) {
    globalThis.crypto.getRandomValues(out.subarray(offset, Math.min(n, offset + MAX_CALL_BYTES)));
  }
  return out;
}

/**
 * `count` fresh 128-bit report ids (16 bytes each, concatenated) from the CSPRNG: random ids do not
 * link a device's reports, and a collision between any two of 2^40 reports has probability < 2^-48.
 */
export function newReportIds(count: number): Uint8Array {
  return secureRandomBytes(REPORT_ID_BYTES * count);
}
