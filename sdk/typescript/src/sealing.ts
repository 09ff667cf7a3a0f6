/**
 * Sealed reports for a shuffler (docs/contract.md §16; the Python reference is
 * ldpsynth/shared/sealing.py): each report sealed on its own to the aggregator's key with HPKE
 * (RFC 9180 base mode, src/hpke.ts), under `info` = "ldpsynth.v1/sealed-report" || 0x00 ||
 * collection, with an empty aad and a fresh ephemeral key per seal. The plaintext has a fixed length
 * for a collection:
 *
 *     offset   bytes  field
 *     0        1      v, the length of the mechanism version (1..255)
 *     1        v      the mechanism version, ASCII ("E/1")
 *     1+v      16     report id
 *     17+v     r      the report's private part: r = 8, a uint64 little-endian (E's perturbed code, HM's
 *                     and SW's output index, OLH's seed << s | bucket, HR's report); r = ceil(|D|/8), OUE's
 *                     bit set (bit v % 8 of byte v / 8 for value v: its report's bigint little-endian)
 *     17+v+r   8m     the m public codes, schema order, uint64 little-endian each
 *
 * and a sealed report is enc (32) || ciphertext || tag (16): 32 + 17 + v + r + 8m + 16 bytes.
 */
import { ValidationError } from "./errors.js";
import type { Sealing } from "./gen/ldpsynth/v1/collection_pb.js";
import {
  AEAD_ID,
  concat,
  ENC_BYTES,
  generateKeyPair,
  importRecipientKey,
  KDF_ID,
  KEM_ID,
  keyScheduleContext,
  PUBLIC_KEY_BYTES,
  requireX25519,
  sealBase,
  SUITE_ID,
  TAG_BYTES,
  type EphemeralKey,
  type RecipientKey,
} from "./hpke.js";
import { REPORT_ID_BYTES } from "./random.js";
import type { FrequencyOracle } from "./oracles.js";
import { oracleOf, type CollectionInfo, type Reports } from "./reports.js";
import type { Schema } from "./schema.js";

export const SUITE_NAME = "DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM";
export const KEY_ID_BYTES = 16;
/** What `info` starts with: the protocol and what is sealed; then the collection name. */
const INFO_PREFIX = new TextEncoder().encode("ldpsynth.v1/sealed-report\x00");

/** The key to seal to, checked against the collection (contract §16): its public key and key id. */
export interface SealingKey {
  readonly recipient: RecipientKey;
  readonly keyId: Uint8Array;
  /** Bytes of every sealed report of the collection. */
  readonly sealedReportBytes: number;
}

/** The HPKE `info` of reports sealed for `collection`. */
export function sealingInfo(collection: string): Uint8Array {
  return concat(INFO_PREFIX, new TextEncoder().encode(collection));
}

function versionBytes(mechanismVersion: string): Uint8Array {
  if (!/^[\x00-\x7f]{1,255}$/.test(mechanismVersion)) {
    throw new ValidationError("mechanism_version", "1 to 255 ASCII characters", "not ASCII or bad length");
  }
  return new TextEncoder().encode(mechanismVersion);
}

/** r, the bytes of a report's private part: OUE's bit set (its `report_bytes`), else one uint64. */
export function privateBytes(oracle?: FrequencyOracle): number {
  return oracle?.name === "OUE" ? oracle.reportBytes : 8;
}

/** Bytes of one report's plaintext in `schema`'s collection (`oracle`: the collection's frequency oracle, if any). */
export function plaintextBytes(schema: Schema, mechanismVersion: string, oracle?: FrequencyOracle): number {
  return (
    1
    + versionBytes(mechanismVersion).length
    + REPORT_ID_BYTES
    + privateBytes(oracle)
    + 8 * schema.publicAttributes.length
  );
}

/** Bytes of one sealed report (enc || ct) in `schema`'s collection. */
export function sealedReportBytes(schema: Schema, mechanismVersion: string, oracle?: FrequencyOracle): number {
  return ENC_BYTES + plaintextBytes(schema, mechanismVersion, oracle) + TAG_BYTES;
}

/** The plaintext of report `i` of `reports` (the layout above). */
export function reportPlaintext(reports: Reports, i: number, mechanismVersion: string): Uint8Array {
  const version = versionBytes(mechanismVersion);
  const m = reports.publicCodes.length;
  const r = privateBytes(reports.oracle);
  const out = new Uint8Array(1 + version.length + REPORT_ID_BYTES + r + 8 * m);
  const view = new DataView(out.buffer);
  out[0] = version.length;
  out.set(version, 1);
  let at = 1 + version.length;
  out.set(reports.reportIds.subarray(REPORT_ID_BYTES * i, REPORT_ID_BYTES * (i + 1)), at);
  at += REPORT_ID_BYTES;
  let report = reports.privateCodes[i]!;
  for (let b = 0; b < r; b++, report >>= 8n) out[at + b] = Number(report & 0xffn);
  if (report !== 0n) {
    throw new ValidationError("private_codes", `a report of ${r} bytes`, "too large for its collection's layout", i);
  }
  at += r;
  reports.publicCodes.forEach((col, j) => view.setBigUint64(at + 8 * j, col[i]!, true));
  return out;
}

/** The 16-byte key id of an X25519 public key under this suite: SHA-256(suite_id || pkR)[0:16]. */
export async function keyId(publicKey: Uint8Array): Promise<Uint8Array> {
  const digest = await globalThis.crypto.subtle.digest("SHA-256", concat(SUITE_ID, publicKey));
  return new Uint8Array(digest).slice(0, KEY_ID_BYTES);
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/**
 * The key a collection publishes (`Collection.sealing`), after the device's checks of contract §16:
 * the suite's ids, a 32-byte key, the key id's formula, the collection's sealed report size; and
 * that this platform can seal (WebCrypto X25519). ValidationError naming `sealing` otherwise: a
 * device calls this before it charges anything, and seals nothing it cannot account for.
 */
export async function sealingKey(info: CollectionInfo): Promise<SealingKey> {
  const sealing: Sealing | undefined = info.sealing;
  const name = info.card.schema.name;
  if (sealing === undefined) {
    throw new ValidationError(
      "sealing",
      "a collection that publishes a sealing key (Collection.sealing)",
      `collection ${JSON.stringify(name)} takes no sealed reports; submit without a shuffler to send in clear`,
    );
  }
  await requireX25519(); // before any WebCrypto call: a page without crypto.subtle (not a secure context) too
  if (sealing.kemId !== KEM_ID || sealing.kdfId !== KDF_ID || sealing.aeadId !== AEAD_ID) {
    const ids = [sealing.kemId, sealing.kdfId, sealing.aeadId].map((x) => `0x${x.toString(16).padStart(4, "0")}`);
    throw new ValidationError(
      "sealing",
      `the suite ${SUITE_NAME} (ids 0x0020, 0x0001, 0x0001)`,
      `got ids ${ids.join(", ")}`,
    );
  }
  if (sealing.publicKey.length !== PUBLIC_KEY_BYTES) {
    throw new ValidationError(
      "sealing.public_key",
      `${PUBLIC_KEY_BYTES} bytes (an X25519 public key)`,
      `got ${sealing.publicKey.length} bytes`,
    );
  }
  if (!equalBytes(sealing.keyId, await keyId(sealing.publicKey))) {
    throw new ValidationError("sealing.key_id", "SHA-256(suite_id || public_key)[0:16]", "does not match the key");
  }
  const expected = sealedReportBytes(info.card.schema, info.card.version, oracleOf(info.card));
  if (sealing.sealedReportBytes !== expected) {
    throw new ValidationError(
      "sealing.sealed_report_bytes",
      `${expected} for this collection`,
      `got ${sealing.sealedReportBytes}`,
    );
  }
  return { recipient: await importRecipientKey(sealing.publicKey), keyId: sealing.keyId, sealedReportBytes: expected };
}

/** One report's plaintext sealed to `recipient` for `collection` with the ephemeral key given (vectors). */
export async function sealPlaintext(
  recipient: RecipientKey,
  collection: string,
  plaintext: Uint8Array,
  ephemeral: EphemeralKey,
): Promise<Uint8Array> {
  return sealBase(recipient, await keyScheduleContext(sealingInfo(collection)), plaintext, ephemeral);
}

/** Seals in flight at once: WebCrypto's calls are asynchronous (Node runs them on its thread pool). */
const SEALS_IN_FLIGHT = 64;

/**
 * Every report sealed on its own to `key` for `collection`, each with a fresh ephemeral key from
 * the platform's CSPRNG (two seals of one report share no byte): n × sealedReportBytes bytes.
 */
export async function sealReports(
  key: SealingKey,
  collection: string,
  mechanismVersion: string,
  reports: Reports,
): Promise<Uint8Array> {
  const n = reports.privateCodes.length;
  const out = new Uint8Array(n * key.sealedReportBytes);
  const context = await keyScheduleContext(sealingInfo(collection));
  const sealOne = async (i: number): Promise<void> => {
    const sealed = await sealBase(
      key.recipient,
      context,
      reportPlaintext(reports, i, mechanismVersion),
      await generateKeyPair(),
    );
    if (sealed.length !== key.sealedReportBytes) {
      throw new ValidationError(
        "sealing.sealed_report_bytes",
        `${key.sealedReportBytes} for this collection`,
        `a report sealed to ${sealed.length} bytes`,
        i,
      );
    }
    out.set(sealed, i * key.sealedReportBytes);
  };
  for (let start = 0; start < n; start += SEALS_IN_FLIGHT) {
    await Promise.all(Array.from({ length: Math.min(SEALS_IN_FLIGHT, n - start) }, (_, k) => sealOne(start + k)));
  }
  return out;
}
