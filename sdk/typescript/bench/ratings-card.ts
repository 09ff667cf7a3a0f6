/**
 * The collection both device benchmarks measure (bench/perturb-encode.ts in Node,
 * bench/browser-perturb-encode.ts in Chromium): MovieLens-like ratings with |D| = 40 at ε = 1, and its
 * mechanism card as the server would publish it (weights from the SDK's own derivation).
 */
import type { JsonObject } from "../src/json.js";
import { derive, weightCandidates } from "../src/weights.js";

export const RATINGS_SCHEMA: JsonObject = {
  name: "ratings",
  epsilon: 1.0,
  attributes: [
    { name: "movie", type: "integer", min: 1n, max: 1682n, public: true },
    { name: "rating", type: "integer", min: 1n, max: 5n },
    { name: "watched", type: "binary" },
    { name: "genre", type: "categorical", values: ["drama", "comedy", "horror", "other"] },
  ],
};

const w = weightCandidates(1.0, 40n)[0]!;
const d = derive(w, 40n);

/** The card's fields (BigInts where the card holds integers). */
export const RATINGS_CARD: JsonObject = {
  format: "ldpsynth.mechanism-card/1",
  mechanism: "E",
  version: "E/1",
  schema: RATINGS_SCHEMA,
  domain_size: 40n,
  keep_weight: String(w.keepWeight),
  lie_weight: String(w.lieWeight),
  total_weight: String(d.totalWeight),
  epsilon: d.epsilon,
  epsilon_requested: 1.0,
  keep_probability: d.keepProbability,
  lie_probability: d.lieProbability,
};
