/**
 * A shuffled collection's `shuffle` block of the schema (docs/contract.md §2; the reference's
 * `ldpsynth.shared.shuffle_spec.ShuffleSpec`): the central guarantee reports sent through a shuffler buy.
 * A device only needs to read it (the accountant is the aggregator's): parsed and checked with the
 * reference's fields and ranges, kept so the schema (and the ledger's fingerprint) says it.
 */
import { asSchemaError, SchemaError } from "./errors.js";
import { isJsonObject, type JsonObject, type JsonValue } from "./json.js";
import { checkInt, checkReal } from "./validation.js";

/** Largest minimum batch, and most reports per device (the accountant's bounds). */
export const MAX_MIN_BATCH = 10n ** 12n;
export const MAX_ROWS_PER_DEVICE = 10n ** 6n;
export const SHUFFLERS = ["aggregator-operator", "independent"] as const;
export type ShufflerParty = (typeof SHUFFLERS)[number];

export class ShuffleSpec {
  constructor(
    /** δ of the central (ε, δ), in (0, 1). */
    readonly delta: number,
    /** Fewest reports a released group may hold. */
    readonly minBatch: bigint,
    readonly rowsPerDevice: bigint,
    /** Who runs the shuffler. */
    readonly shuffler: ShufflerParty,
  ) {}

  static parse(obj: JsonValue | undefined): ShuffleSpec {
    const legal = "an object with delta, min_batch and optionally rows_per_device, shuffler";
    if (!isJsonObject(obj)) throw new SchemaError("shuffle", legal, "not an object");
    const extra = Object.keys(obj).filter((k) => !["delta", "min_batch", "rows_per_device", "shuffler"].includes(k));
    if (extra.length) throw new SchemaError("shuffle", legal, `unknown fields ${JSON.stringify(extra.sort())}`);
    for (const field of ["delta", "min_batch"]) {
      if (!(field in obj)) throw new SchemaError(`shuffle.${field}`, legal, "missing");
    }
    const shuffler = obj["shuffler"] ?? SHUFFLERS[0];
    if (!SHUFFLERS.includes(shuffler as ShufflerParty)) {
      throw new SchemaError("shuffle.shuffler", `one of ${SHUFFLERS.join(", ")}`, "unknown value");
    }
    return asSchemaError(() => new ShuffleSpec(
      checkReal(obj["delta"], "shuffle.delta", "a number in (0, 1)", (v) => v > 0 && v < 1),
      checkInt(obj["min_batch"], "shuffle.min_batch", 1n, MAX_MIN_BATCH),
      checkInt(obj["rows_per_device"] ?? 1n, "shuffle.rows_per_device", 1n, MAX_ROWS_PER_DEVICE),
      shuffler as ShufflerParty));
  }

  toJson(): JsonObject {
    return { delta: this.delta, min_batch: this.minBatch, rows_per_device: this.rowsPerDevice, shuffler: this.shuffler };
  }
}
