/**
 * @ldpsynth/sdk: the device side of ldpsynth (docs/contract.md). Validate and encode a row, perturb
 * its private code with mechanism E exactly (the card's rational weights, `crypto.getRandomValues`
 * only), give each report a random 128-bit id, and build the ReportBatch the aggregator takes.
 */
export { ValidationError, SchemaError } from "./errors.js";
export { parseJson, MAX_JSON_DEPTH, MAX_INT_DIGITS, type JsonValue, type JsonObject } from "./json.js";
export type { RawValue } from "./raw-values.js";
export {
  Schema,
  Attribute,
  CategoricalAttribute,
  BinaryAttribute,
  IntegerAttribute,
  ContinuousAttribute,
  NumericAttribute,
  NUMERIC_MECHANISMS,
  NUMERIC_CODE_BITS,
  MAX_DOMAIN_SIZE,
  MAX_PRIVATE_DOMAIN_SIZE,
  MAX_BITS,
  MAX_CATEGORIES,
  type AttributeType,
  type DecodedValue,
} from "./schema.js";
export { MechanismCard, CARD_FORMAT, MECHANISM_VERSION } from "./card.js";
export { NumericCard } from "./numeric-card.js";
export { OracleCard } from "./oracle-card.js";
export { HadamardResponse, OptimizedLocalHashing, OptimizedUnaryEncoding, type FrequencyOracle } from "./oracles.js";
export { parseCard, perturbCodes, type Card } from "./any-card.js";
export { WideCard, WIDE_CARD_FORMAT, VIEWS_VERSION, VIEW_KEY_TAG, type WideView } from "./wide-card.js";
export {
  DiscoveryCard,
  RoundSchedule,
  roundOf,
  DISCOVERY_CARD_FORMAT,
  DISCOVERY_VERSION,
  ROUND_KEY_CONTEXT,
  REPORT,
  NOT_YET,
  PASSED,
  type TurnStatus,
} from "./discovery-card.js";
export { StringEncoding, cellOf, bitFragment, type RoundCells } from "./string-encoding.js";
export { encodeColumns, encodeRows, type Columns, type Row, type EncodedRows } from "./rows.js";
export { perturb, acceptBelow, type SamplerWeights } from "./sampler.js";
export { newReportIds, REPORT_ID_BYTES } from "./random.js";
export {
  newReports,
  validateReports,
  reportBatch,
  encodeReportBatch,
  encodeGetCollectionRequest,
  decodeBatchAck,
  uint64Column,
  type Reports,
  type BatchAckFields,
  type Limits,
  type CollectionInfo,
} from "./reports.js";
export { collectionInfo, decodeCollection } from "./collection.js";
export { batchCapacity, reportBytes } from "./batching.js";
export { assignView, viewCell, MIN_SALT_BYTES } from "./view-assignment.js";
export { NumericRange } from "./numeric-range.js";
export { MAX_INTERVALS, NumericLevels } from "./numeric-levels.js";
export {
  Duchi,
  PiecewiseMechanism,
  SquareWave,
  HybridMechanism,
  perturbNumeric,
  type NumericSampler,
  type GridLaw,
} from "./numeric-samplers.js";
// The protobuf messages the API above takes or returns, as types; the rest of src/gen/ stays internal.
export type { Collection, ReportBatch, SealedBatch, Sealing } from "./gen/ldpsynth/v1/collection_pb.js";
export {
  sealingKey,
  sealReports,
  sealingInfo,
  keyId,
  plaintextBytes,
  privateBytes,
  sealedReportBytes,
  reportPlaintext,
  SUITE_NAME,
  KEY_ID_BYTES,
  type SealingKey,
} from "./sealing.js";
export {
  sealedBatchCapacity,
  cutSealedBatches,
  sealedParts,
  sealedBatch,
  encodeSealedBatch,
  decodeSealedAck,
  type SealedPart,
} from "./sealed-batching.js";
