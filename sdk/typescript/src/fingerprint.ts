/**
 * What a collection's reports mean, as one stable text: the schema, the mechanism version, |D| and E's
 * exact weights (a numeric or an oracle card: its mechanism fields, the sampler's integers among them). A ledger hashes
 * it (SHA-256) into the collection's fingerprint, which every memo key binds, so a re-issued card never
 * reuses another card's reports.
 */
import type { Card } from "./any-card.js";
import type { JsonValue } from "./json.js";
import { NumericCard } from "./numeric-card.js";
import { OracleCard } from "./oracle-card.js";

export function collectionIdentity(card: Card): string {
  if (card instanceof NumericCard || card instanceof OracleCard) {
    return canonical({ schema: card.schema.toJson(), version: card.version, ...card.fields });
  }
  return canonical({
    schema: card.schema.toJson(),
    version: card.version,
    domain_size: card.domainSize,
    keep_weight: String(card.keepWeight),
    lie_weight: String(card.lieWeight),
  });
}

/** JSON with sorted keys and bigints as integers (a stable text of a JSON value). */
function canonical(value: JsonValue): string {
  if (typeof value === "bigint") return value.toString();
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(value[k]!)}`)
      .join(",")}}`;
  }
  return JSON.stringify(value);
}
