/**
 * JSON from the outside (schemas, cards), read within the reference's limits (`ldpsynth.shared.jsonio`):
 * at most 64 levels of nesting, integers of at most 308 digits, no number that overflows float64.
 *
 * Unlike `JSON.parse`, integer literals (no fraction, no exponent) are read exactly, as `bigint`:
 * the schema's `min`/`max` may be anywhere in [-2^63, 2^63 - 1], and whether a field was written
 * `5` or `5.0` matters (the reference refuses `5.0` for `min`, `max` and `bits`). Other numbers are
 * `number`s, correctly rounded. Like Python's reader, `NaN`, `Infinity` and `-Infinity` are
 * accepted here; the fields that need finite numbers refuse them by name. Objects have no
 * prototype, so a key such as `__proto__` is an ordinary key; a repeated key keeps its last value.
 */
import { ValidationError } from "./errors.js";

export type JsonValue = null | boolean | number | bigint | string | JsonValue[] | JsonObject;
export interface JsonObject {
  [key: string]: JsonValue;
}

/** Deepest nesting of arrays and objects accepted. */
export const MAX_JSON_DEPTH = 64;
/** Most digits of a JSON integer (every such integer is a finite float64). */
export const MAX_INT_DIGITS = 308;

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;
const SIMPLE_STRING = /[^"\\\u0000-\u001f]*/y;

class Reader {
  private pos = 0;
  private depth = 0;

  constructor(
    private readonly text: string,
    private readonly field: string,
    private readonly expected: string,
  ) {}

  fail(problem: string): never {
    throw new ValidationError(this.field, this.expected, `invalid JSON (${problem} at offset ${this.pos})`);
  }

  document(): JsonValue {
    this.space();
    const value = this.value();
    this.space();
    if (this.pos !== this.text.length) this.fail("extra data");
    return value;
  }

  private space(): void {
    const t = this.text;
    while (this.pos < t.length) {
      const c = t.charCodeAt(this.pos);
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
      this.pos++;
    }
  }

  private value(): JsonValue {
    const t = this.text;
    const c = t[this.pos];
    if (c === "{") return this.object();
    if (c === "[") return this.array();
    if (c === '"') return this.string();
    for (const [word, value] of [
      ["true", true],
      ["false", false],
      ["null", null],
      ["NaN", NaN],
      ["Infinity", Infinity],
      ["-Infinity", -Infinity],
    ] as const) {
      if (t.startsWith(word, this.pos)) {
        this.pos += word.length;
        return value;
      }
    }
    return this.number();
  }

  private enter(): void {
    if (++this.depth > MAX_JSON_DEPTH) {
      throw new ValidationError(this.field, `JSON nested at most ${MAX_JSON_DEPTH} levels deep`, "nested deeper");
    }
    this.pos++;
    this.space();
  }

  private object(): JsonObject {
    this.enter();
    const out: JsonObject = Object.create(null) as JsonObject;
    if (this.text[this.pos] === "}") {
      this.pos++;
      this.depth--;
      return out;
    }
    for (;;) {
      if (this.text[this.pos] !== '"') this.fail("expected a property name");
      const key = this.string();
      this.space();
      if (this.text[this.pos] !== ":") this.fail("expected ':'");
      this.pos++;
      this.space();
      out[key] = this.value();
      this.space();
      const c = this.text[this.pos++];
      if (c === "}") break;
      if (c !== ",") this.fail("expected ',' or '}'");
      this.space();
    }
    this.depth--;
    return out;
  }

  private array(): JsonValue[] {
    this.enter();
    const out: JsonValue[] = [];
    if (this.text[this.pos] === "]") {
      this.pos++;
      this.depth--;
      return out;
    }
    for (;;) {
      out.push(this.value());
      this.space();
      const c = this.text[this.pos++];
      if (c === "]") break;
      if (c !== ",") this.fail("expected ',' or ']'");
      this.space();
    }
    this.depth--;
    return out;
  }

  private string(): string {
    const t = this.text;
    this.pos++; // the opening quote
    let out = "";
    for (;;) {
      SIMPLE_STRING.lastIndex = this.pos;
      SIMPLE_STRING.test(t);
      out += t.slice(this.pos, SIMPLE_STRING.lastIndex);
      this.pos = SIMPLE_STRING.lastIndex;
      const c = t[this.pos];
      if (c === '"') {
        this.pos++;
        return out;
      }
      if (c !== "\\") this.fail(c === undefined ? "unterminated string" : "control character in a string");
      const e = t[this.pos + 1];
      const simple: Record<string, string> = {
        '"': '"',
        "\\": "\\",
        "/": "/",
        b: "\b",
        f: "\f",
        n: "\n",
        r: "\r",
        t: "\t",
      };
      if (e !== undefined && e in simple) {
        out += simple[e];
        this.pos += 2;
      } else if (e === "u" && /^[0-9a-fA-F]{4}$/.test(t.slice(this.pos + 2, this.pos + 6))) {
        out += String.fromCharCode(parseInt(t.slice(this.pos + 2, this.pos + 6), 16));
        this.pos += 6;
      } else {
        this.fail("invalid escape");
      }
    }
  }

  private number(): number | bigint {
    NUMBER.lastIndex = this.pos;
    const match = NUMBER.exec(this.text);
    if (match === null || match[0] === "-" || match[0] === "") this.fail("expected a value");
    const literal = match[0];
    this.pos += literal.length;
    if (match[1] === undefined && match[2] === undefined) {
      const digits = literal.length - (literal.startsWith("-") ? 1 : 0);
      if (digits > MAX_INT_DIGITS) {
        throw new ValidationError(
          this.field,
          `JSON integers of at most ${MAX_INT_DIGITS} digits`,
          `an integer of ${digits} digits`,
        );
      }
      return BigInt(literal);
    }
    const value = Number(literal);
    if (!Number.isFinite(value)) {
      throw new ValidationError(
        this.field,
        "JSON numbers within the float64 range (|x| <= 1.7976931348623157e308)",
        "a number that overflows float64",
      );
    }
    return value;
  }
}

/**
 * Parse `text` within the limits above. Errors are {@link ValidationError}s naming `field`, with
 * `expected` as the legal range when the text is not JSON.
 */
export function parseJson(text: string, field: string, expected: string): JsonValue {
  return new Reader(text, field, expected).document();
}
