/**
 * Sealed reports in SealedBatch messages (docs/contract.md §16, "SealedBatch"): how many one batch
 * may hold, as the Python SDK's `sealed_batch_capacity` counts them, and a submission's sealed
 * reports cut once into batches numbered 0, 1, ..., resent as first cut on every retry. A batch
 * holds reports of one public key, which it names in clear (`pool_key`: the shuffler pools per
 * public key, and the replicas drop a report of another key): the reports are cut per key, the keys
 * in order of first appearance, each key's reports in their order (the Python SDK's `sealed_parts`).
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { cappedCapacity } from "./batching.js";
import { ValidationError } from "./errors.js";
import { SealedBatchSchema, type SealedBatch } from "./gen/ldpsynth/v1/collection_pb.js";
import { SealedAckSchema } from "./gen/ldpsynth/v1/shuffler_pb.js";
import type { CollectionInfo } from "./reports.js";
import { KEY_ID_BYTES } from "./sealing.js";

/** Bound on what a bytes field adds besides its payload: a one-byte tag and a length varint. */
const FIELD_HEADER = 1 + 5;

/** The SealedBatch of `reports` (sealed reports back to back), every one of public key `poolKey`. */
export function sealedBatch(
  collection: string,
  keyId: Uint8Array,
  sequence: bigint,
  reports: Uint8Array,
  poolKey: bigint,
): SealedBatch {
  return create(SealedBatchSchema, { collection, keyId, sequence, reports, poolKey });
}

export function encodeSealedBatch(
  collection: string,
  keyId: Uint8Array,
  sequence: bigint,
  reports: Uint8Array,
  poolKey: bigint,
): Uint8Array {
  return toBinary(SealedBatchSchema, sealedBatch(collection, keyId, sequence, reports, poolKey));
}

export function decodeSealedAck(bytes: Uint8Array): { sequence: bigint; accepted: number } {
  const { sequence, accepted } = fromBinary(SealedAckSchema, bytes);
  return { sequence, accepted };
}

/**
 * Sealed reports of `width` bytes per SealedBatch: at most `batchSize`, the collection's
 * `max_batch_reports`, and as many as fit in the smaller of its `max_message_bytes` and the
 * channel's limit (a limit of 0 means "not set").
 */
export function sealedBatchCapacity(
  info: CollectionInfo,
  width: number,
  channelLimit: number,
  batchSize?: number,
): number {
  const limit = Math.min(...[info.limits.maxMessageBytes, channelLimit].filter((x) => x > 0));
  const envelope = toBinary(
    SealedBatchSchema,
    sealedBatch(
      info.card.schema.name,
      new Uint8Array(KEY_ID_BYTES).fill(0xff),
      (1n << 64n) - 1n,
      new Uint8Array(0),
      (1n << 64n) - 1n,
    ),
  ).length;
  return cappedCapacity(info, limit, envelope + FIELD_HEADER, width, "one sealed report", batchSize);
}

/** One batch of a submission: its public key and the indices of its reports. */
export interface SealedPart {
  readonly poolKey: bigint;
  readonly reports: readonly number[];
}

/**
 * Reports of public keys `poolKeys` (one per report) cut into batches of at most `capacity` reports of
 * one key each: the keys in order of first appearance, each key's reports in their order.
 */
export function sealedParts(poolKeys: readonly bigint[], capacity: number): SealedPart[] {
  const byKey = new Map<bigint, number[]>();
  poolKeys.forEach((key, i) => {
    const rows = byKey.get(key);
    if (rows) rows.push(i);
    else byKey.set(key, [i]);
  });
  const parts: SealedPart[] = [];
  for (const [poolKey, rows] of byKey) {
    for (let start = 0; start < rows.length; start += capacity) {
      parts.push({ poolKey, reports: rows.slice(start, start + capacity) });
    }
  }
  return parts;
}

/**
 * `sealed` (n × width bytes) cut into SealedBatches of at most `capacity` reports of one public key
 * each ({@link sealedParts}; `poolKeys`: the public key of each report, `Schema.foldPublicCodes`),
 * numbered 0, 1, ....
 */
export function cutSealedBatches(
  sealed: Uint8Array,
  width: number,
  capacity: number,
  collection: string,
  keyId: Uint8Array,
  poolKeys: readonly bigint[],
): Map<bigint, SealedBatch> {
  if (poolKeys.length * width !== sealed.length) {
    throw new ValidationError(
      "pool_keys",
      `one public key per sealed report (${sealed.length / width})`,
      `got ${poolKeys.length}`,
    );
  }
  const batches = new Map<bigint, SealedBatch>();
  sealedParts(poolKeys, capacity).forEach((part, seq) => {
    const reports = new Uint8Array(part.reports.length * width);
    part.reports.forEach((i, k) => reports.set(sealed.subarray(i * width, (i + 1) * width), k * width));
    batches.set(BigInt(seq), sealedBatch(collection, keyId, BigInt(seq), reports, part.poolKey));
  });
  return batches;
}
