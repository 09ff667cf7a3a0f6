/**
 * Which view of a wide row a device reports, and the cell of a view (the reference's
 * `ldpsynth.shared.wide.assignment.assign_view` and `wide.views.View.cells`, bit for bit).
 *
 * The view: w_r = the first 8 bytes of HMAC-SHA256 (RFC2104) of key ‖ r under the salt (r = 0, 1, …
 * as one byte) read as a big-endian u ∈ [0, 2^64); the first word below ⌊2^64/m⌋·m, taken modulo m,
 * is the view: exactly uniform over the m views (a word is rejected with probability below
 * m/2^64 ≤ 2^−32). The salt is the collection's and public; the view is a function of the device
 * key alone and spends no ε. The HMAC is Web Crypto's (`crypto.subtle`, Node >= 20 and browsers),
 * so the call is asynchronous.
 *
 * The cell of a view with sizes k_1 … k_ℓ: mixed radix, the last attribute fastest,
 * cell = Σ_i x_i Π_{m > i} k_m.
 */
import { ValidationError } from "./errors.js";

/** A collection's salt has at least this many bytes. */
export const MIN_SALT_BYTES = 16;
/** The largest number of views. */
export const MAX_VIEWS = 2 ** 32;
/** Words drawn at most (the reference gives up after 256 rejections: probability below 2^−4096). */
const MAX_ROUNDS = 256;
const TWO_64 = 1n << 64n;

/** Words at or above this are rejected: ⌊2^64/m⌋·m. */
export function viewAcceptBelow(count: number): bigint {
  const m = BigInt(count);
  return (TWO_64 / m) * m;
}

function checkInputs(salt: Uint8Array, deviceKey: Uint8Array, count: number): void {
  if (!(salt instanceof Uint8Array) || salt.length < MIN_SALT_BYTES) {
    const length = salt instanceof Uint8Array ? String(salt.length) : "-";
    throw new ValidationError("salt", `bytes, at least ${MIN_SALT_BYTES} of them`, `got bytes of length ${length}`);
  }
  if (!Number.isSafeInteger(count) || count < 1 || count > MAX_VIEWS) {
    throw new ValidationError("count", `an integer in [1, ${MAX_VIEWS}]`, "out of range");
  }
  if (!(deviceKey instanceof Uint8Array) || deviceKey.length === 0) {
    throw new ValidationError("device_key", "non-empty bytes", "got no bytes");
  }
}

/**
 * The view, in [0, count), from the words `word(0), word(1), …` (each a 64-bit integer): the first one
 * below {@link viewAcceptBelow}, modulo count. The rejection step alone, so that tests can feed it words.
 */
export async function selectView(count: number, word: (round: number) => Promise<bigint>): Promise<number> {
  const limit = viewAcceptBelow(count);
  for (let r = 0; r < MAX_ROUNDS; r++) {
    const w = await word(r);
    if (w < limit) return Number(w % BigInt(count));
  }
  throw new Error(`${MAX_ROUNDS} rejections in a row (probability below 2^-4096)`);
}

/** The view (in [0, count)) of the device `deviceKey` under the collection's `salt` (module comment). */
export async function assignView(salt: Uint8Array, deviceKey: Uint8Array, count: number): Promise<number> {
  checkInputs(salt, deviceKey, count);
  const subtle = globalThis.crypto.subtle;
  const key = await subtle.importKey("raw", new Uint8Array(salt), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const message = new Uint8Array(deviceKey.length + 1);
  message.set(deviceKey);
  return selectView(count, async (r) => {
    message[deviceKey.length] = r;
    const mac = new DataView(await subtle.sign("HMAC", key, message));
    return mac.getBigUint64(0, false);
  });
}

/**
 * The cell of a view: `codes[i]` in [0, sizes[i]) (each size >= 2), mixed radix with the last attribute
 * fastest. The number of cells must be a safe integer (below 2^53); the error names the position of a
 * bad code, never the code.
 */
export function viewCell(codes: readonly number[], sizes: readonly number[]): number {
  if (sizes.length === 0 || codes.length !== sizes.length) {
    throw new ValidationError("codes", `one code per attribute of the view (${sizes.length})`, "wrong length");
  }
  let cells = 1;
  sizes.forEach((k, i) => {
    if (!Number.isSafeInteger(k) || k < 2) throw new ValidationError(`sizes[${i}]`, "an integer >= 2", "out of range");
    cells *= k;
  });
  if (!Number.isSafeInteger(cells)) {
    throw new ValidationError("sizes", `a view of at most ${Number.MAX_SAFE_INTEGER} cells`, "too many cells");
  }
  let cell = 0;
  codes.forEach((x, i) => {
    const k = sizes[i]!;
    if (!Number.isSafeInteger(x) || x < 0 || x >= k) {
      throw new ValidationError("codes", `integer codes in [0, ${k - 1}]`, "out of range", i);
    }
    cell = cell * k + x;
  });
  return cell;
}
