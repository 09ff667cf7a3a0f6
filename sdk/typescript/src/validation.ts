/**
 * Checks of one JSON value against its legal range, stated as the reference states them
 * (`ldpsynth.shared.validation`). Each returns the value converted or throws a ValidationError
 * naming the field.
 */
import { ValidationError } from "./errors.js";
import type { JsonValue } from "./json.js";

function typeName(value: unknown): string {
  if (value === null || value === undefined) return "NoneType";
  if (typeof value === "bigint") return "int";
  if (typeof value === "number") return "float";
  if (typeof value === "boolean") return "bool";
  if (typeof value === "string") return "str";
  return Array.isArray(value) ? "list" : "dict";
}

/** A real number (an integer or a float, not a boolean) as a float; finite; with optional bounds. */
export function checkReal(
  value: JsonValue | undefined,
  field: string,
  legal: string,
  inRange: (v: number) => boolean = () => true,
): number {
  if (typeof value !== "number" && typeof value !== "bigint") {
    throw new ValidationError(field, legal, `got a ${typeName(value)}`);
  }
  const v = Number(value);
  if (!Number.isFinite(v) || !inRange(v)) throw new ValidationError(field, legal, "out of range");
  return v;
}

/** ε and the like: a finite number > 0. */
export function checkEpsilon(value: JsonValue | undefined, field = "epsilon"): number {
  return checkReal(value, field, "a finite number > 0", (v) => v > 0);
}

/** An integer literal (not a float such as `5.0`, not a boolean) in [low, high]. */
export function checkInt(
  value: JsonValue | undefined,
  field: string,
  low: bigint,
  high: bigint,
  legal?: string,
): bigint {
  const stated = legal ?? `an integer in [${low}, ${high}]`;
  if (typeof value !== "bigint") throw new ValidationError(field, stated, `got a ${typeName(value)}`);
  if (value < low || value > high) throw new ValidationError(field, stated, "out of range");
  return value;
}

export function checkBool(value: JsonValue | undefined, field: string): boolean {
  if (typeof value !== "boolean") throw new ValidationError(field, "true or false", `got a ${typeName(value)}`);
  return value;
}
