/**
 * Per-report cost of the device path in Node: encode rows (validate + mixed radix), perturb with E
 * (crypto.getRandomValues, BigInt rejection sampling), draw report ids, serialise the ReportBatch.
 * npm run bench; prints reports/s for each stage and for the whole path.
 */
import { MechanismCard } from "../src/card.js";
import type { JsonObject } from "../src/json.js";
import { encodeReportBatch, newReports } from "../src/reports.js";
import { encodeColumns } from "../src/rows.js";
import { perturb } from "../src/sampler.js";
import { derive, weightCandidates } from "../src/weights.js";

const ROWS = 65_536;
const schema: JsonObject = {
  name: "ratings", epsilon: 1.0, attributes: [
    { name: "movie", type: "integer", min: 1n, max: 1682n, public: true },
    { name: "rating", type: "integer", min: 1n, max: 5n },
    { name: "watched", type: "binary" },
    { name: "genre", type: "categorical", values: ["drama", "comedy", "horror", "other"] }],
};
const w = weightCandidates(1.0, 40n)[0]!;
const d = derive(w, 40n);
const card = MechanismCard.parse({
  format: "ldpsynth.mechanism-card/1", mechanism: "E", version: "E/1", schema, domain_size: 40n,
  keep_weight: String(w.keepWeight), lie_weight: String(w.lieWeight), total_weight: String(d.totalWeight),
  epsilon: d.epsilon, epsilon_requested: 1.0, keep_probability: d.keepProbability, lie_probability: d.lieProbability,
});
const columns = {
  movie: Array.from({ length: ROWS }, (_, i) => (i % 1682) + 1),
  rating: Array.from({ length: ROWS }, (_, i) => (i % 5) + 1),
  watched: Array.from({ length: ROWS }, (_, i) => i % 2),
  genre: Array.from({ length: ROWS }, (_, i) => ["drama", "comedy", "horror", "other"][i % 4]!),
};

function rate(label: string, rounds: number, run: () => void): number {
  run(); // warm up
  const start = process.hrtime.bigint();
  for (let i = 0; i < rounds; i++) run();
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  const perSecond = (rounds * ROWS) / seconds;
  console.log(`${label.padEnd(34)} ${Math.round(perSecond).toLocaleString("en-US").padStart(12)} reports/s`
    + `  (${((seconds / (rounds * ROWS)) * 1e6).toFixed(2)} us/report)`);
  return perSecond;
}

const encoded = encodeColumns(card.schema, columns);
rate("encode (validate + mixed radix)", 5, () => encodeColumns(card.schema, columns));
rate("perturb (E, CSPRNG, BigInt)", 5, () => perturb(card, encoded.privateCodes));
const reports = newReports(card, encoded);
rate("serialise ReportBatch", 5, () => encodeReportBatch(reports, "ratings", "E/1", 0n));
rate("whole path (encode+perturb+ids+batch)", 5, () => {
  encodeReportBatch(newReports(card, encodeColumns(card.schema, columns)), "ratings", "E/1", 0n);
});
