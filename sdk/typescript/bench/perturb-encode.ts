/**
 * Per-report cost of the device path in Node: encode rows (validate + mixed radix), perturb with E
 * (crypto.getRandomValues, BigInt rejection sampling), draw report ids, serialise the ReportBatch;
 * and sealing for a shuffler (HPKE on WebCrypto, one seal per report: contract §16).
 * npm run bench; prints reports/s for each stage and for the whole path.
 */
import { MechanismCard } from "../src/card.js";
import { encodeReportBatch, newReports } from "../src/reports.js";
import { encodeColumns } from "../src/rows.js";
import { generateKeyPair, importRecipientKey } from "../src/hpke.js";
import { sealedReportBytes, sealReports } from "../src/sealing.js";
import { perturb } from "../src/sampler.js";
import { RATINGS_CARD } from "./ratings-card.js";

const ROWS = 65_536;
const card = MechanismCard.parse(RATINGS_CARD);
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
  console.log(
    `${label.padEnd(34)} ${Math.round(perSecond).toLocaleString("en-US").padStart(12)} reports/s`
      + `  (${((seconds / (rounds * ROWS)) * 1e6).toFixed(2)} us/report)`,
  );
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

// Sealing is asynchronous (WebCrypto): timed on its own, over fewer reports.
const SEALED = 4096;
const recipient = await importRecipientKey((await generateKeyPair()).publicKey);
const key = { recipient, keyId: new Uint8Array(16), sealedReportBytes: sealedReportBytes(card.schema, card.version) };
const few = {
  reportIds: reports.reportIds.subarray(0, 16 * SEALED),
  privateCodes: reports.privateCodes.slice(0, SEALED),
  publicCodes: reports.publicCodes.map((col) => col.slice(0, SEALED)),
};
await sealReports(key, "ratings", "E/1", few); // warm up
const sealStart = process.hrtime.bigint();
await sealReports(key, "ratings", "E/1", few);
const sealSeconds = Number(process.hrtime.bigint() - sealStart) / 1e9;
console.log(
  `${"seal (HPKE X25519/AES-128-GCM)".padEnd(34)} ${Math.round(SEALED / sealSeconds)
    .toLocaleString("en-US")
    .padStart(12)} reports/s  (${((sealSeconds / SEALED) * 1e6).toFixed(2)} us/report)`,
);
