/** What the browser sealing test bundles: the sealing modules with the vectors' test hook (DeriveKeyPair). */
export { decodeCollection } from "../src/collection.js";
export { deriveKeyPair, hasX25519, importRecipientKey } from "../src/hpke.js";
export { reportPlaintext, sealingKey, sealPlaintext, sealReports } from "../src/sealing.js";
