/**
 * Raw values as a device passes them, read the way the reference reads them (docs/contract.md §3):
 * numbers, bigints, booleans and strings. Strings follow Python's `int()` and `float()` (surrounding
 * whitespace ignored, `_` between digits, `inf`/`nan` spelled out), so that a CSV cell or a string
 * value encodes to the same code in every SDK.
 */

/** What a row may hold for one attribute. */
export type RawValue = string | number | bigint | boolean | null | undefined;

const PY_INT = /^[+-]?[0-9](?:_?[0-9])*$/;
const DIGITS = "[0-9](?:_?[0-9])*";
const PY_FLOAT = new RegExp(`^[+-]?(?:${DIGITS}(?:\\.(?:${DIGITS})?)?|\\.${DIGITS})(?:[eE][+-]?${DIGITS})?$`);
const PY_SPECIAL = /^([+-]?)(inf|infinity|nan)$/i;

/** Python's `float(text)`, or undefined where Python raises. */
export function pythonFloat(text: string): number | undefined {
  const t = text.trim();
  const special = PY_SPECIAL.exec(t);
  if (special) {
    if (special[2]!.toLowerCase() === "nan") return NaN;
    return special[1] === "-" ? -Infinity : Infinity;
  }
  if (!PY_FLOAT.test(t)) return undefined;
  return Number(t.replace(/_/g, ""));
}

/** Python's `int(text)` (base 10), or undefined where Python raises. */
export function pythonInt(text: string): bigint | undefined {
  const t = text.trim();
  if (!PY_INT.test(t)) return undefined;
  return BigInt(t.replace(/_/g, ""));
}

/** A raw value as an exact integer (an integral number, or a numeric string), else undefined. */
export function exactInteger(value: RawValue): bigint | undefined {
  if (typeof value === "bigint") return value;
  if (typeof value === "boolean") return value ? 1n : 0n;
  if (typeof value === "number") return Number.isFinite(value) && Number.isInteger(value) ? BigInt(value) : undefined;
  if (typeof value !== "string") return undefined;
  const asInt = pythonInt(value);
  if (asInt !== undefined) return asInt;
  const asFloat = pythonFloat(value);
  return asFloat !== undefined && Number.isFinite(asFloat) && Number.isInteger(asFloat) ? BigInt(asFloat) : undefined;
}

/** A raw value as a float (NaN where it is not a number at all). */
export function realValue(value: RawValue): number {
  if (typeof value === "number") return value;
  if (typeof value === "bigint") return Number(value);
  if (typeof value === "boolean") return value ? 1 : 0;
  if (typeof value === "string") return pythonFloat(value) ?? NaN;
  return NaN;
}

/** A categorical value as text, as Python's `str` makes it for the types both sides share; else undefined. */
export function categoryText(value: RawValue): string | undefined {
  if (typeof value === "string") return value;
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "boolean") return value ? "True" : "False";
  if (typeof value === "number" && Number.isSafeInteger(value)) return String(value);
  return undefined;
}
