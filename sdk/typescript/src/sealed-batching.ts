/**
 * Sealed reports in SealedBatch messages (docs/contract.md §16, "SealedBatch"): how many one batch
 * may hold, as the Python SDK's `sealed_batch_capacity` counts them, and a submission's sealed
 * reports cut once into batches numbered 0, 1, ..., resent as first cut on every retry.
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { cappedCapacity } from "./batching.js";
import { SealedBatchSchema, type SealedBatch } from "./gen/ldpsynth/v1/collection_pb.js";
import { SealedAckSchema } from "./gen/ldpsynth/v1/shuffler_pb.js";
import type { CollectionInfo } from "./reports.js";
import { KEY_ID_BYTES } from "./sealing.js";

/** Bound on what a bytes field adds besides its payload: a one-byte tag and a length varint. */
const FIELD_HEADER = 1 + 5;

/** The SealedBatch of `reports` (sealed reports back to back). */
export function sealedBatch(collection: string, keyId: Uint8Array, sequence: bigint, reports: Uint8Array): SealedBatch {
  return create(SealedBatchSchema, { collection, keyId, sequence, reports });
}

export function encodeSealedBatch(collection: string, keyId: Uint8Array, sequence: bigint,
  reports: Uint8Array): Uint8Array {
  return toBinary(SealedBatchSchema, sealedBatch(collection, keyId, sequence, reports));
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
export function sealedBatchCapacity(info: CollectionInfo, width: number, channelLimit: number,
  batchSize?: number): number {
  const limit = Math.min(...[info.limits.maxMessageBytes, channelLimit].filter((x) => x > 0));
  const envelope = toBinary(SealedBatchSchema, sealedBatch(info.card.schema.name, new Uint8Array(KEY_ID_BYTES).fill(0xff),
    (1n << 64n) - 1n, new Uint8Array(0))).length;
  return cappedCapacity(info, limit, envelope + FIELD_HEADER, width, "one sealed report", batchSize);
}

/** `sealed` (n × width bytes) cut into SealedBatches of at most `capacity` reports, numbered 0, 1, .... */
export function cutSealedBatches(sealed: Uint8Array, width: number, capacity: number, collection: string,
  keyId: Uint8Array): Map<bigint, SealedBatch> {
  const batches = new Map<bigint, SealedBatch>();
  const step = width * capacity;
  for (let start = 0, seq = 0n; start < sealed.length; start += step, seq++) {
    batches.set(seq, sealedBatch(collection, keyId, seq, sealed.subarray(start, Math.min(sealed.length, start + step))));
  }
  return batches;
}
