/**
 * HPKE (RFC 9180) base mode, single shot, for one suite only: DHKEM(X25519, HKDF-SHA256), HKDF-SHA256,
 * AES-128-GCM (ids 0x0020, 0x0001, 0x0001), on WebCrypto alone (`crypto.subtle`: X25519, HMAC-SHA256,
 * AES-GCM), so that Node and browsers seal the same bytes with no dependency. Sealing only: opening
 * is the aggregator's job.
 */
import { ValidationError } from "./errors.js";

export const KEM_ID = 0x0020;
export const KDF_ID = 0x0001;
export const AEAD_ID = 0x0001;
/** Bytes of enc, of a public key, of a private key, of the AEAD tag (RFC 9180 §7.1, §7.3). */
export const ENC_BYTES = 32;
export const PUBLIC_KEY_BYTES = 32;
const PRIVATE_KEY_BYTES = 32;
export const TAG_BYTES = 16;
const KEY_BYTES = 16;
const NONCE_BYTES = 12;
const HASH_BYTES = 32;

const ascii = (text: string): Bytes => new TextEncoder().encode(text);
const i2osp2 = (n: number): Bytes => new Uint8Array([n >> 8, n & 0xff]);

/** Bytes WebCrypto takes (backed by an ArrayBuffer). */
export type Bytes = Uint8Array<ArrayBuffer>;

/** `parts` in one new buffer. */
export function concat(...parts: readonly Uint8Array[]): Bytes {
  const out = new Uint8Array(parts.reduce((sum, p) => sum + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** RFC 9180 §5.1: suite_id of the whole suite ("HPKE" || kem || kdf || aead). */
export const SUITE_ID = concat(ascii("HPKE"), i2osp2(KEM_ID), i2osp2(KDF_ID), i2osp2(AEAD_ID));
/** RFC 9180 §4.1: suite_id of the KEM ("KEM" || kem_id). */
const KEM_SUITE_ID = concat(ascii("KEM"), i2osp2(KEM_ID));
const VERSION_LABEL = ascii("HPKE-v1");
/** PKCS #8 prefix of a raw X25519 private key (RFC 8410 §7): WebCrypto imports private keys no other way. */
const PKCS8_X25519 = Uint8Array.from([
  0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x6e, 0x04, 0x22, 0x04, 0x20,
]);

const subtle = (): SubtleCrypto => globalThis.crypto.subtle;

async function hmac(key: Bytes, data: Bytes): Promise<Bytes> {
  const k = await subtle().importKey("raw", key, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  return new Uint8Array(await subtle().sign("HMAC", k, data));
}

/** RFC 5869 Extract; an empty salt is HashLen zeros (the same HMAC key once padded). */
function extract(salt: Bytes, ikm: Bytes): Promise<Bytes> {
  return hmac(salt.length ? salt : new Uint8Array(HASH_BYTES), ikm);
}

/** RFC 5869 Expand. */
async function expand(prk: Bytes, info: Bytes, length: number): Promise<Bytes> {
  const out = new Uint8Array(length);
  let block: Bytes = new Uint8Array(0);
  for (let i = 1, at = 0; at < length; i++, at += HASH_BYTES) {
    block = await hmac(prk, concat(block, info, new Uint8Array([i])));
    out.set(block.subarray(0, Math.min(HASH_BYTES, length - at)), at);
  }
  return out;
}

/** RFC 9180 §4: LabeledExtract and LabeledExpand under `suiteId`. */
function labeledExtract(suiteId: Bytes, salt: Bytes, label: string, ikm: Uint8Array): Promise<Bytes> {
  return extract(salt, concat(VERSION_LABEL, suiteId, ascii(label), ikm));
}

function labeledExpand(suiteId: Bytes, prk: Bytes, label: string, info: Uint8Array, length: number): Promise<Bytes> {
  return expand(prk, concat(i2osp2(length), VERSION_LABEL, suiteId, ascii(label), info), length);
}

/** An X25519 key pair as WebCrypto holds it, with the public key serialised (RFC 9180 SerializePublicKey). */
export interface EphemeralKey {
  readonly privateKey: CryptoKey;
  readonly publicKey: Uint8Array;
}

let x25519: Promise<boolean> | undefined;

/** Whether this platform's WebCrypto has X25519 (Node ≥ 20; Chromium ≥ 133, Firefox ≥ 130, Safari ≥ 17). */
export function hasX25519(): Promise<boolean> {
  x25519 ??= (async () => {
    try {
      await subtle().generateKey({ name: "X25519" }, false, ["deriveBits"]);
      return true;
    } catch {
      return false;
    }
  })();
  return x25519;
}

/** ValidationError naming `sealing` unless WebCrypto has X25519: a platform that lacks it cannot seal. */
export async function requireX25519(): Promise<void> {
  if (!globalThis.crypto?.subtle || !(await hasX25519())) {
    throw new ValidationError(
      "sealing",
      "a platform whose WebCrypto has X25519 (Node >= 20, Chromium >= 133, " + "Firefox >= 130, Safari >= 17)",
      "this platform's crypto.subtle has no X25519: it cannot seal reports",
    );
  }
}

/** A fresh ephemeral key from the platform's CSPRNG (RFC 9180 GenerateKeyPair). */
export async function generateKeyPair(): Promise<EphemeralKey> {
  const pair = (await subtle().generateKey({ name: "X25519" }, false, ["deriveBits"])) as CryptoKeyPair;
  return { privateKey: pair.privateKey, publicKey: new Uint8Array(await subtle().exportKey("raw", pair.publicKey)) };
}

/** RFC 9180 §7.1.3 DeriveKeyPair(ikm) for X25519: deterministic, for test vectors only. */
export async function deriveKeyPair(ikm: Uint8Array): Promise<EphemeralKey> {
  const prk = await labeledExtract(KEM_SUITE_ID, new Uint8Array(0), "dkp_prk", ikm);
  const sk = await labeledExpand(KEM_SUITE_ID, prk, "sk", new Uint8Array(0), PRIVATE_KEY_BYTES);
  const privateKey = await subtle().importKey("pkcs8", concat(PKCS8_X25519, sk), { name: "X25519" }, true, [
    "deriveBits",
  ]);
  const jwk = await subtle().exportKey("jwk", privateKey);
  const publicKey = new Uint8Array(
    atob(jwk.x!.replace(/-/g, "+").replace(/_/g, "/"))
      .split("")
      .map((c) => c.charCodeAt(0)),
  );
  return { privateKey, publicKey };
}

/** A recipient's public key, imported once for many seals. */
export interface RecipientKey {
  readonly bytes: Uint8Array;
  readonly key: CryptoKey;
}

export async function importRecipientKey(publicKey: Uint8Array): Promise<RecipientKey> {
  if (publicKey.length !== PUBLIC_KEY_BYTES) {
    throw new ValidationError(
      "sealing.public_key",
      `${PUBLIC_KEY_BYTES} bytes (an X25519 public key)`,
      `got ${publicKey.length} bytes`,
    );
  }
  const key = await subtle().importKey("raw", concat(publicKey), { name: "X25519" }, true, []);
  return { bytes: publicKey, key };
}

/** RFC 9180 §4.1 Encap with the given ephemeral key: (shared_secret, enc). */
async function encap(recipient: RecipientKey, ephemeral: EphemeralKey): Promise<Bytes> {
  const dh = new Uint8Array(
    await subtle().deriveBits({ name: "X25519", public: recipient.key }, ephemeral.privateKey, 8 * 32),
  );
  const kemContext = concat(ephemeral.publicKey, recipient.bytes);
  const prk = await labeledExtract(KEM_SUITE_ID, new Uint8Array(0), "eae_prk", dh);
  return labeledExpand(KEM_SUITE_ID, prk, "shared_secret", kemContext, HASH_BYTES);
}

/**
 * RFC 9180 §5.1 key_schedule_context in base mode (mode 0x00, empty psk_id) for `info`: the same for
 * every seal under one info, so computed once for a batch.
 */
export async function keyScheduleContext(info: Uint8Array): Promise<Bytes> {
  const empty = new Uint8Array(0);
  const pskIdHash = await labeledExtract(SUITE_ID, empty, "psk_id_hash", empty);
  const infoHash = await labeledExtract(SUITE_ID, empty, "info_hash", info);
  return concat(new Uint8Array([0x00]), pskIdHash, infoHash);
}

/** RFC 9180 §5.1 KeySchedule in base mode (no psk), given its context: the AEAD key and base_nonce. */
async function keySchedule(sharedSecret: Bytes, context: Bytes): Promise<{ key: Bytes; nonce: Bytes }> {
  const empty = new Uint8Array(0);
  const secret = await labeledExtract(SUITE_ID, sharedSecret, "secret", empty);
  return {
    key: await labeledExpand(SUITE_ID, secret, "key", context, KEY_BYTES),
    nonce: await labeledExpand(SUITE_ID, secret, "base_nonce", context, NONCE_BYTES),
  };
}

/**
 * RFC 9180 §6.1 SealBase(pkR, info, aad = "", pt) with the ephemeral key given, `context` being
 * keyScheduleContext(info): enc || ct, the first (and only) message of the HPKE context, so its
 * nonce is base_nonce.
 */
export async function sealBase(
  recipient: RecipientKey,
  context: Bytes,
  plaintext: Uint8Array,
  ephemeral: EphemeralKey,
): Promise<Uint8Array> {
  const sharedSecret = await encap(recipient, ephemeral);
  const { key, nonce } = await keySchedule(sharedSecret, context);
  const aesKey = await subtle().importKey("raw", key, { name: "AES-GCM" }, false, ["encrypt"]);
  const ct = new Uint8Array(
    await subtle().encrypt({ name: "AES-GCM", iv: nonce, tagLength: 8 * TAG_BYTES }, aesKey, concat(plaintext)),
  );
  return concat(ephemeral.publicKey, ct);
}
