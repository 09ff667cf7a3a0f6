/**
 * Strings as fixed-length codes, and a round's cell of a code (the reference's
 * `ldpsynth.shared.heavy_hitters.encoding` and `device.RoundSpec.cells_of`, bit for bit).
 *
 * A value is at most `maxLength` symbols of s bits, padded with symbol 0; its code is the big-endian bit
 * string of B = s·maxLength bits in ⌈B/8⌉ bytes (bits after B zero). UTF-8 (no alphabet): a symbol is a byte
 * of utf8(v) truncated to the longest prefix of at most `maxLength` bytes that ends on a character boundary;
 * U+0000 and lone surrogates are refused. An alphabet of A distinct characters: symbol i + 1 is its i-th
 * character, s = bit length of A; a value is cut to its first `maxLength` characters; a character outside
 * the alphabet is refused. Errors name `values` and the row, never the value.
 *
 * Round r publishes C sorted candidate prefixes P_1 < … < P_C of b = `startBits` bits and the width w; a
 * device with code x reports the cell y(x) = i·2^w + x[b, b + w) when x[0, b) = P_i, else C·2^w ("other";
 * round 0 has the empty prefix alone and no "other" cell).
 */
import { ValidationError } from "./errors.js";

export const MAX_LENGTH = 64;
export const MAX_BITS = 512;
export const MAX_FRAGMENT_BITS = 32;

/** A string attribute's encoding (module comment). */
export class StringEncoding {
  private readonly index: Map<string, number> | undefined;

  constructor(
    readonly maxLength: number,
    readonly alphabet?: string,
  ) {
    if (!Number.isSafeInteger(maxLength) || maxLength < 1 || maxLength > MAX_LENGTH) {
      throw new ValidationError("max_length", `an integer in [1, ${MAX_LENGTH}]`, "out of range");
    }
    if (alphabet !== undefined) {
      const chars = Array.from(alphabet);
      if (!chars.length || new Set(chars).size !== chars.length || chars.length > 255) {
        throw new ValidationError("alphabet", "a string of 1 to 255 distinct characters", "got another value");
      }
      this.index = new Map(chars.map((ch, i) => [ch, i + 1]));
      if (this.bits > MAX_BITS) {
        throw new ValidationError(
          "max_length",
          `at most ${Math.floor(MAX_BITS / this.symbolBits)} characters for this alphabet`,
          `got ${maxLength}`,
        );
      }
    }
  }

  /** s: 8 (UTF-8), or the bit length of the alphabet's size. */
  get symbolBits(): number {
    return this.index === undefined ? 8 : this.index.size.toString(2).length;
  }

  /** B, the bits of a code. */
  get bits(): number {
    return this.symbolBits * this.maxLength;
  }

  get codeBytes(): number {
    return Math.ceil(this.bits / 8);
  }

  /** The `maxLength` symbols of one string (padded), or a ValidationError naming `values` at `position`. */
  symbolsOf(value: unknown, position?: number): Uint8Array {
    const out = new Uint8Array(this.maxLength);
    if (this.index !== undefined) {
      const legal = `strings over the collection's alphabet of ${this.index.size} characters`;
      if (typeof value !== "string") throw new ValidationError("values", legal, "not a string", position);
      Array.from(value)
        .slice(0, this.maxLength)
        .forEach((ch, i) => {
          const symbol = this.index!.get(ch);
          if (symbol === undefined) {
            throw new ValidationError("values", legal, "a character outside the alphabet", position);
          }
          out[i] = symbol;
        });
      return out;
    }
    const legal = "strings of Unicode scalar values without U+0000 (UTF-8, truncated to whole characters)";
    if (typeof value !== "string") throw new ValidationError("values", legal, "not a string", position);
    if (/\p{Cs}/u.test(value)) throw new ValidationError("values", legal, "a lone surrogate", position);
    const data = new TextEncoder().encode(value);
    if (data.includes(0)) throw new ValidationError("values", legal, "contains U+0000 (the padding byte)", position);
    let end = Math.min(data.length, this.maxLength);
    if (data.length > this.maxLength) while (end > 0 && (data[end]! & 0xc0) === 0x80) end -= 1;
    out.set(data.subarray(0, end));
    return out;
  }

  /** The code of one string: `codeBytes` bytes. */
  encode(value: unknown, position?: number): Uint8Array {
    const symbols = this.symbolsOf(value, position);
    if (this.index === undefined) return symbols;
    const s = this.symbolBits;
    const out = new Uint8Array(this.codeBytes);
    symbols.forEach((symbol, i) => {
      for (let k = 0; k < s; k++) {
        if ((symbol >> (s - 1 - k)) & 1) {
          const bit = i * s + k;
          out[bit >> 3]! |= 0x80 >> (bit & 7);
        }
      }
    });
    return out;
  }
}

/** Bits [start, start + width) of a code (big-endian bit order), in [0, 2^width). */
export function bitFragment(code: Uint8Array, start: number, width: number): number {
  if (!Number.isSafeInteger(width) || width < 1 || width > MAX_FRAGMENT_BITS) {
    throw new ValidationError("width", `an integer in [1, ${MAX_FRAGMENT_BITS}]`, "out of range");
  }
  let word = 0n;
  const last = Math.floor((start + width - 1) / 8);
  for (let column = Math.floor(start / 8); column <= last; column++) word = (word << 8n) | BigInt(code[column]!);
  return Number((word >> BigInt(8 * (last + 1) - (start + width))) & ((1n << BigInt(width)) - 1n));
}

/** The first `bits` bits of a code as ⌈bits/8⌉ bytes, the bits after them zero, in hex. */
export function prefixHex(code: Uint8Array, bits: number): string {
  const out = code.slice(0, Math.ceil(bits / 8));
  if (bits % 8) out[out.length - 1]! &= (0xff << (8 - (bits % 8))) & 0xff;
  return Array.from(out, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** What a device needs of a round: the candidates' prefix length, the width, the sorted candidates (hex). */
export interface RoundCells {
  readonly startBits: number;
  readonly widthBits: number;
  readonly candidates: readonly string[];
}

/** The cell y(x) of a code in the round (module comment). */
export function cellOf(round: RoundCells, code: Uint8Array): number {
  const fragment = bitFragment(code, round.startBits, round.widthBits);
  if (round.startBits === 0) return fragment;
  const i = round.candidates.indexOf(prefixHex(code, round.startBits));
  return i < 0 ? round.candidates.length * 2 ** round.widthBits : i * 2 ** round.widthBits + fragment;
}
