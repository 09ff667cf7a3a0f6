/**
 * A collection's card, whichever mechanism it states: E ({@link MechanismCard}), a frequency oracle (OUE, OLH,
 * HR: {@link OracleCard}) or a numeric attribute's HM or SW ({@link NumericCard}), told apart by the schema in it, as the reference's `MechanismCard.from_json`
 * does; and the device's perturbation of raw private codes under either.
 */
import { CARD_FORMAT, MechanismCard } from "./card.js";
import { ValidationError } from "./errors.js";
import { isJsonObject, parseJson, type JsonValue } from "./json.js";
import { NumericCard } from "./numeric-card.js";
import { OracleCard } from "./oracle-card.js";
import { perturb } from "./sampler.js";
import { Schema } from "./schema.js";

export type Card = MechanismCard | NumericCard | OracleCard;

/** Parse and verify a card (its JSON text, or an object as `parseJson` returns it), E's or a numeric one. */
export function parseCard(input: string | JsonValue): Card {
  const obj = typeof input === "string" ? parseJson(input, "card", "a JSON mechanism card") : input;
  if (!isJsonObject(obj) || obj["format"] !== CARD_FORMAT) {
    throw new ValidationError("card.format", JSON.stringify(CARD_FORMAT), "not a mechanism card of this format");
  }
  const schema = Schema.parse(obj["schema"]);
  if (schema.numeric !== undefined) return NumericCard.verify(obj, schema);
  return schema.mechanism === "E" ? MechanismCard.parse(obj) : OracleCard.verify(obj, schema);
}

/**
 * The perturbed reports of raw private codes under the card's mechanism (an oracle's report as one bigint: its
 * layout in oracles.ts), from the platform's CSPRNG only.
 */
export function perturbCodes(card: Card, codes: readonly bigint[]): bigint[] {
  return card instanceof MechanismCard ? perturb(card, codes) : card.perturb(codes);
}
