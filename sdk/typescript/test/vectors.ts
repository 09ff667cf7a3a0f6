/** The conformance vectors (conformance/*.json at the repository's root), read exactly (integers as bigints). */
import { readFileSync } from "node:fs";
import { parseJson, type JsonObject, type JsonValue } from "../src/json.js";

const ROOT = new URL("../../../../conformance/", import.meta.url);

export function vectors(name: string): JsonObject {
  const doc = parseJson(readFileSync(new URL(name, ROOT), "utf-8"), name, "a vector file") as JsonObject;
  if (doc["format"] !== "ldpsynth.conformance/1") throw new Error(`${name}: unknown format`);
  return doc;
}

/** The cases of a list field, each with its id. */
export function cases(doc: JsonObject, field: string): JsonObject[] {
  return doc[field] as JsonObject[];
}

export function str(v: JsonValue | undefined): string {
  if (typeof v !== "string") throw new Error(`expected a string, got ${typeof v}`);
  return v;
}

export function big(v: JsonValue | undefined): bigint {
  return BigInt(str(v));
}

export function hex(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString("hex");
}

export function fromHex(text: string): Uint8Array {
  return new Uint8Array(Buffer.from(text, "hex"));
}

/** A random source that hands out a fixed byte stream in order, recording each call. */
export class ByteStream {
  read = 0;
  readonly rounds: number[] = [];
  constructor(readonly data: Uint8Array) {}
  readonly source = (n: number): Uint8Array => {
    if (this.read + n > this.data.length) throw new Error("read past the end of the vector's stream");
    this.rounds.push(n / 8);
    this.read += n;
    return this.data.slice(this.read - n, this.read);
  };
}

/** JSON text of a value as parseJson returns it: bigints as integer literals, numbers as float literals. */
export function stringify(value: JsonValue): string {
  if (typeof value === "bigint") return value.toString();
  if (typeof value === "number") {
    if (Number.isNaN(value)) return "NaN";
    if (!Number.isFinite(value)) return value > 0 ? "Infinity" : "-Infinity";
    const text = JSON.stringify(value);
    return /[.eE]/.test(text) ? text : `${text}.0`;
  }
  if (Array.isArray(value)) return `[${value.map(stringify).join(",")}]`;
  if (value !== null && typeof value === "object") {
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}:${stringify(v)}`)
      .join(",")}}`;
  }
  return JSON.stringify(value);
}
