/**
 * A shuffled collection's `shuffle` block of the schema (docs/contract.md §2; the reference's
 * `ldpsynth.shared.shuffle_spec.ShuffleSpec`): the central guarantee reports sent through a shuffler buy.
 * A device only needs to read it (the accountant is the aggregator's): parsed and checked with the
 * reference's fields, ranges and order, kept so the schema (and the ledger's fingerprint) says it, and
 * the terms of the guarantee per party derived from it as the reference derives them
 * (docs/shuffle-accountant.md §6): F, the reports of a pool assumed injected (`assume_injected`, by
 * default one device's quota), and the honest reports of a pool's floor, `min_batch − F`.
 */
import { asSchemaError, SchemaError } from "./errors.js";
import { isJsonObject, type JsonObject, type JsonValue } from "./json.js";
import { checkInt, checkReal } from "./validation.js";

/** Largest minimum batch, and most reports per device (the accountant's bounds). */
export const MAX_MIN_BATCH = 10n ** 12n;
export const MAX_ROWS_PER_DEVICE = 10n ** 6n;
export const SHUFFLERS = ["aggregator-operator", "independent"] as const;
export type ShufflerParty = (typeof SHUFFLERS)[number];
const FIELDS = ["delta", "min_batch", "rows_per_device", "shuffler", "assume_injected"];

export class ShuffleSpec {
  constructor(
    /** δ of the central (ε, δ), in (0, 1). */
    readonly delta: number,
    /** Fewest reports of one public key in any pool the aggregator stores. */
    readonly minBatch: bigint,
    readonly rowsPerDevice: bigint,
    /** Who runs the shuffler. */
    readonly shuffler: ShufflerParty,
    /** F as the block states it, in [0, minBatch − 1]; undefined: the default ({@link defaultInjected}). */
    readonly assumeInjected?: bigint,
  ) {}

  /**
   * Read and check a block as the reference's `ShuffleSpec.from_json`: the fields, then delta, min_batch,
   * rows_per_device, shuffler and assume_injected in that order. An absent field takes its default; a
   * field given as `null` is refused, except `assume_injected` (null: not stated), as in the reference.
   */
  static parse(obj: JsonValue | undefined): ShuffleSpec {
    const legal = "an object with delta, min_batch and optionally rows_per_device, shuffler, assume_injected";
    if (!isJsonObject(obj)) throw new SchemaError("shuffle", legal, "not an object");
    const extra = Object.keys(obj).filter((k) => !FIELDS.includes(k));
    if (extra.length) throw new SchemaError("shuffle", legal, `unknown fields ${JSON.stringify(extra.sort())}`);
    for (const field of ["delta", "min_batch"]) {
      if (!(field in obj)) throw new SchemaError(`shuffle.${field}`, legal, "missing");
    }
    const given = (field: string, fallback: JsonValue): JsonValue | undefined => (field in obj ? obj[field] : fallback);
    return asSchemaError(() => {
      const delta = checkReal(obj["delta"], "shuffle.delta", "a number in (0, 1)", (v) => v > 0 && v < 1);
      const minBatch = checkInt(obj["min_batch"], "shuffle.min_batch", 1n, MAX_MIN_BATCH);
      const rows = checkInt(given("rows_per_device", 1n), "shuffle.rows_per_device", 1n, MAX_ROWS_PER_DEVICE);
      const shuffler = given("shuffler", SHUFFLERS[0]);
      if (!SHUFFLERS.includes(shuffler as ShufflerParty)) {
        throw new SchemaError("shuffle.shuffler", `one of ${SHUFFLERS.join(", ")}`, "unknown value");
      }
      const injected = obj["assume_injected"] ?? null;
      return new ShuffleSpec(
        delta,
        minBatch,
        rows,
        shuffler as ShufflerParty,
        injected === null ? undefined : checkInt(injected, "shuffle.assume_injected", 0n, minBatch - 1n),
      );
    });
  }

  /** F when the block does not say: one device credential's quota, `rows_per_device` (below min_batch). */
  get defaultInjected(): bigint {
    return this.rowsPerDevice < this.minBatch - 1n ? this.rowsPerDevice : this.minBatch - 1n;
  }

  /** F: the reports per pool the central guarantee assumes are not honest. */
  get injected(): bigint {
    return this.assumeInjected ?? this.defaultInjected;
  }

  /** The fewest honest reports of one public key in any pool a party can isolate: `min_batch − F`. */
  get honestPerPool(): bigint {
    return this.minBatch - this.injected;
  }

  /** Whether the shuffler is run by an independent party (the central guarantee then holds against the operator). */
  get independent(): boolean {
    return this.shuffler === "independent";
  }

  toJson(): JsonObject {
    const out: JsonObject = {
      delta: this.delta,
      min_batch: this.minBatch,
      rows_per_device: this.rowsPerDevice,
      shuffler: this.shuffler,
    };
    if (this.assumeInjected !== undefined) out["assume_injected"] = this.assumeInjected;
    return out;
  }
}
