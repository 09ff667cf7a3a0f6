/** How many reports one ReportBatch may hold (docs/contract.md §6, "Size"), as the Python SDK cuts them. */
import { create, toBinary } from "@bufbuild/protobuf";
import { ValidationError } from "./errors.js";
import { ReportBatchSchema, type ReportBatch } from "./gen/ldpsynth/v1/collection_pb.js";
import { REPORT_ID_BYTES } from "./random.js";
import { oracleOf, reportBatch, type CollectionInfo, type Reports } from "./reports.js";

/** Bound on what a bytes field adds besides its payload: a one-byte tag and a length varint. */
const FIELD_HEADER = 1 + 5;

/**
 * Wire bytes of one report: a 16-byte id, 8 bytes per public code and `privateBytes` for its private part (E's
 * code: 8; a frequency oracle's fields: its `wireBytes`).
 */
export function reportBytes(publicAttributes: number, privateBytes = 8): number {
  return REPORT_ID_BYTES + 8 * publicAttributes + privateBytes;
}

/**
 * Reports per batch: at most `batchSize`, the collection's `max_batch_reports`, and as many as fit in
 * the smaller of its `max_message_bytes` and the channel's limit (a limit of 0 means "not set").
 */
export function batchCapacity(info: CollectionInfo, channelLimit: number, batchSize?: number): number {
  const schema = info.card.schema;
  const m = schema.publicAttributes.length;
  const oracle = oracleOf(info.card);
  const limits = [info.limits.maxMessageBytes, channelLimit].filter((x) => x > 0);
  const limit = Math.min(...limits);
  const envelope =
    toBinary(
      ReportBatchSchema,
      create(ReportBatchSchema, {
        collection: schema.name,
        mechanismVersion: info.card.version,
        sequence: (1n << 64n) - 1n,
      }),
    ).length
    + (1 + (oracle?.wireColumns ?? 1) + m) * FIELD_HEADER;
  return cappedCapacity(info, limit, envelope, reportBytes(m, oracle?.wireBytes), "one report", batchSize);
}

/**
 * Reports of `width` bytes that fit in `limit` after `envelope` bytes, capped by the collection's
 * `max_batch_reports` and `batchSize`; ValidationError naming `max_message_bytes` when not one fits
 * (`what`: the one report, in the message), or `batch_size` when it is not an integer >= 1.
 */
export function cappedCapacity(
  info: CollectionInfo,
  limit: number,
  envelope: number,
  width: number,
  what: string,
  batchSize?: number,
): number {
  const fit = Math.floor((limit - envelope) / width);
  if (fit < 1) {
    throw new ValidationError("max_message_bytes", `at least ${envelope + width} bytes (${what})`, `got ${limit}`);
  }
  const caps = [fit, info.limits.maxBatchReports || fit];
  if (batchSize !== undefined) {
    if (!Number.isSafeInteger(batchSize) || batchSize < 1) {
      throw new ValidationError("batch_size", "an integer >= 1", "out of range");
    }
    caps.push(batchSize);
  }
  return Math.min(...caps);
}

/** Reports `start` to `stop` (exclusive). */
function slice(reports: Reports, start: number, stop: number): Reports {
  return {
    reportIds: reports.reportIds.subarray(REPORT_ID_BYTES * start, REPORT_ID_BYTES * stop),
    privateCodes: reports.privateCodes.slice(start, stop),
    publicCodes: reports.publicCodes.map((col) => col.slice(start, stop)),
    oracle: reports.oracle,
  };
}

/**
 * A submission's reports cut once into batches of at most `capacity`, numbered 0, 1, ... (their
 * `sequence`): every retry resends a batch as it was first cut, with the same report ids.
 */
export function cutBatches(
  reports: Reports,
  capacity: number,
  collection: string,
  mechanismVersion: string,
): Map<bigint, ReportBatch> {
  const n = reports.privateCodes.length;
  const batches = new Map<bigint, ReportBatch>();
  for (let start = 0, seq = 0n; start < n; start += capacity, seq++) {
    batches.set(
      seq,
      reportBatch(slice(reports, start, Math.min(n, start + capacity)), collection, mechanismVersion, seq),
    );
  }
  return batches;
}
