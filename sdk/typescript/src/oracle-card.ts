/**
 * A frequency oracle's mechanism card (OUE, OLH, HR; the reference's `MechanismCard.from_json` of a card whose
 * fields `oracle_fields` writes): the schema names the oracle, and the card states its reference, ε asked for
 * and delivered, |D|, the pure protocol's exact support probabilities (`protocol`), the sampler's integers
 * (`sampler`: OUE's coins, OLH's hash family and weights, HR's size and coin) and `report_bytes`. Every field is
 * recomputed from the schema with this SDK's oracles (oracles.ts) and compared with Python's equality; the
 * first that differs is named (`card.sampler`, `card.epsilon`, ...). OLH's hash bits and weights, which the
 * reference derives from its platform's float exp, are pinned when the card's are one of the faithful
 * candidates (never otherwise). The privacy condition is checked on its own too: the delivered ε (the least
 * float at least the exact law's worst log-ratio) is at most the schema's. A shuffled collection's card has the
 * `shuffle` block the reference's `shuffle_block` gives at that ε0 with FMT21's clone bound (card.ts
 * `checkShuffleBlock`; docs/shuffle-accountant.md §9).
 */
import { checkShuffleBlock, pythonEquals } from "./card.js";
import { ValidationError } from "./errors.js";
import type { JsonObject } from "./json.js";
import { oracleCandidates, type FrequencyOracle, type OracleName } from "./oracles.js";
import type { Schema } from "./schema.js";

/** The paper (and section) of each oracle: the card's informational `reference`, as the reference states it. */
export const ORACLE_REFERENCES: Record<OracleName, string> = {
  OUE:
    "Wang, Blocki, Li, Jha: Locally Differentially Private Protocols for Frequency Estimation (USENIX Security "
    + "2017), section 4.3 (optimized unary encoding)",
  OLH:
    "Wang, Blocki, Li, Jha: Locally Differentially Private Protocols for Frequency Estimation (USENIX Security "
    + "2017), section 4.4 (optimized local hashing), with the GF(2^t)-linear hash family of the card's sampler",
  HR:
    "The Hadamard mechanism: one coefficient of the value's Hadamard row, randomized (the binary case of local "
    + "hashing with the hash v -> <j, v>; compared with Acharya, Sun, Zhang, AISTATS 2019)",
};

/** A verified oracle card: what a device needs to perturb (the oracle) and to charge (`epsilon`). */
export class OracleCard {
  private constructor(
    readonly schema: Schema,
    readonly oracle: FrequencyOracle,
    /** The card's mechanism fields as the reference states them (what the ledger's fingerprint binds). */
    readonly fields: JsonObject,
  ) {}

  get mechanism(): OracleName {
    return this.oracle.name;
  }

  /** What every ReportBatch of the collection names: `OUE/1`, `OLH/1` or `HR/1`. */
  get version(): string {
    return `${this.mechanism}/1`;
  }

  get epsilonRequested(): number {
    return this.oracle.epsilonRequested;
  }

  /** The ε delivered: what the ledger charges per new report. */
  get epsilon(): number {
    return this.oracle.epsilon;
  }

  /** |D|, the private domain the oracle reports on. */
  get domainSize(): bigint {
    return this.oracle.domainSize;
  }

  /** Verify the fields of a card object whose schema (already parsed) names a frequency oracle. */
  static verify(obj: JsonObject, schema: Schema): OracleCard {
    const name = schema.mechanism as OracleName;
    if (obj["mechanism"] !== name) {
      throw new ValidationError(
        "card.mechanism",
        `${JSON.stringify(name)} (the schema's mechanism)`,
        "another mechanism",
      );
    }
    if (obj["version"] !== `${name}/1`) {
      throw new ValidationError("card.version", JSON.stringify(`${name}/1`), "another version");
    }
    const candidates = oracleCandidates(name, schema.epsilon, schema.privateDomainSize).map((oracle) => ({
      oracle,
      fields: { reference: ORACLE_REFERENCES[name], ...oracle.fields() },
    }));
    const matches = ({ fields }: { fields: JsonObject }): boolean =>
      Object.entries(fields).every(([key, value]) => pythonEquals(obj[key], value));
    const { oracle, fields } = candidates.find(matches) ?? candidates[0]!;
    for (const [key, value] of Object.entries(fields)) {
      if (!pythonEquals(obj[key], value)) {
        throw new ValidationError(
          `card.${key}`,
          `${typeof value === "object" ? "the block" : String(value)} (${name} at the card's epsilon and domain)`,
          "inconsistent",
        );
      }
    }
    if (!(oracle.epsilon <= schema.epsilon)) {
      throw new ValidationError("card.epsilon", `at most ${schema.epsilon} (the schema's)`, "violated");
    }
    checkShuffleBlock(obj, schema, oracle.epsilon);
    return new OracleCard(schema, oracle, oracle.fields());
  }

  /** The reports of raw private codes (one bigint each: the reference's layout), from the platform's CSPRNG only. */
  perturb(codes: readonly bigint[]): bigint[] {
    return this.oracle.perturb(codes);
  }
}
