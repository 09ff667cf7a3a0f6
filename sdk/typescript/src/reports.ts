/**
 * Reports as they leave a device (docs/contract.md §5-§6): fresh random ids, the perturbed private
 * codes and the public codes, in columns; and their ReportBatch message, byte for byte what the
 * reference sends (conformance/wire.json).
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { perturbCodes, type Card } from "./any-card.js";
import { ValidationError } from "./errors.js";
import { OracleCard } from "./oracle-card.js";
import type { FrequencyOracle } from "./oracles.js";
import { newReportIds, REPORT_ID_BYTES } from "./random.js";
import type { EncodedRows } from "./rows.js";
import type { Schema } from "./schema.js";
import {
  BatchAckSchema,
  GetCollectionRequestSchema,
  ReportBatchSchema,
  type ReportBatch,
  type Sealing,
} from "./gen/ldpsynth/v1/collection_pb.js";

/** n reports in columns. */
export interface Reports {
  /** n × 16 bytes: one random id per report. */
  readonly reportIds: Uint8Array;
  /** The perturbed private code of each report, in [0, |D|); a frequency oracle's report (oracles.ts). */
  readonly privateCodes: readonly bigint[];
  /** The frequency oracle whose reports `privateCodes` holds (they travel in its fields); undefined for E, HM, SW. */
  readonly oracle?: FrequencyOracle | undefined;
  /** One column per public attribute (schema order), n codes each. */
  readonly publicCodes: readonly (readonly bigint[])[];
}

/**
 * New reports of encoded rows: every private code perturbed with the card's mechanism (E's exact
 * weights or a numeric sampler, the platform's CSPRNG) and given a fresh random id. Memoization and the privacy budget
 * are the ledger's (not here): call this only for rows the ledger has charged.
 */
export function newReports(card: Card, rows: EncodedRows): Reports {
  return {
    reportIds: newReportIds(rows.privateCodes.length),
    privateCodes: perturbCodes(card, rows.privateCodes),
    publicCodes: rows.publicCodes,
    oracle: oracleOf(card),
  };
}

/** The card's frequency oracle, if it is an oracle's card. */
export function oracleOf(card: Card): FrequencyOracle | undefined {
  return card instanceof OracleCard ? card.oracle : undefined;
}

/** Check shapes and that every code is in its range (what the server checks); names the field. */
export function validateReports(schema: Schema, reports: Reports): void {
  const n = reports.privateCodes.length;
  if (reports.reportIds.length !== REPORT_ID_BYTES * n) {
    throw new ValidationError("report_ids", `${REPORT_ID_BYTES} bytes per report`, "wrong length");
  }
  const m = schema.publicAttributes.length;
  if (reports.publicCodes.length !== m || reports.publicCodes.some((c) => c.length !== n)) {
    throw new ValidationError("public_codes", `${m} columns of ${n} codes (one per public attribute)`, "wrong shape");
  }
  const low = reports.oracle?.reportLow ?? 0n;
  const bound = reports.oracle?.reportBound ?? schema.privateDomainSize;
  const what = reports.oracle ? `${reports.oracle.name} reports` : "codes";
  reports.privateCodes.forEach((c, i) => {
    if (typeof c !== "bigint" || c < low || c >= bound) {
      throw new ValidationError("private_codes", `integer ${what} in [${low}, ${bound - 1n}]`, "out of range", i);
    }
  });
  schema.publicAttributes.forEach((attr, j) => {
    reports.publicCodes[j]!.forEach((c, i) => {
      if (typeof c !== "bigint" || c < 0n || c >= attr.size) {
        throw new ValidationError(
          `public_codes[${attr.name}]`,
          `integer codes in [0, ${attr.size - 1n}]`,
          "out of range",
          i,
        );
      }
    });
  });
}

/** Codes as n × 8 bytes, unsigned 64-bit little-endian. */
export function uint64Column(codes: readonly bigint[]): Uint8Array {
  const out = new Uint8Array(8 * codes.length);
  const view = new DataView(out.buffer);
  codes.forEach((c, i) => view.setBigUint64(8 * i, c, true));
  return out;
}

/** The ReportBatch message of `reports` (columns, little-endian codes; an oracle's reports in its fields). */
export function reportBatch(
  reports: Reports,
  collection: string,
  mechanismVersion: string,
  sequence: bigint,
): ReportBatch {
  return create(ReportBatchSchema, {
    collection,
    mechanismVersion,
    sequence,
    reportIds: reports.reportIds,
    ...(reports.oracle
      ? reports.oracle.wire(reports.privateCodes)
      : { privateCodes: uint64Column(reports.privateCodes) }),
    publicCodes: reports.publicCodes.map(uint64Column),
  });
}

/** The serialised ReportBatch. */
export function encodeReportBatch(
  reports: Reports,
  collection: string,
  mechanismVersion: string,
  sequence: bigint,
): Uint8Array {
  return toBinary(ReportBatchSchema, reportBatch(reports, collection, mechanismVersion, sequence));
}

/** The serialised GetCollectionRequest. */
export function encodeGetCollectionRequest(collection: string): Uint8Array {
  return toBinary(GetCollectionRequestSchema, create(GetCollectionRequestSchema, { collection }));
}

export interface BatchAckFields {
  readonly sequence: bigint;
  readonly accepted: number;
  readonly duplicates: number;
}

export function decodeBatchAck(bytes: Uint8Array): BatchAckFields {
  const { sequence, accepted, duplicates } = fromBinary(BatchAckSchema, bytes);
  return { sequence, accepted, duplicates };
}

export interface Limits {
  /** Reports one credential may store in the collection (0: unlimited). */
  readonly maxRowsPerClient: bigint;
  readonly maxBatchReports: number;
  readonly maxMessageBytes: number;
}

export interface CollectionInfo {
  readonly card: Card;
  readonly limits: Limits;
  /** The aggregator's sealing key as published (contract §16); checked only by a device that seals (sealingKey). */
  readonly sealing?: Sealing | undefined;
}
