/**
 * The Collection message a device fetches (docs/contract.md §6, GetCollection): its card is parsed
 * and verified, and must agree with the message's name and mechanism version.
 */
import { fromBinary } from "@bufbuild/protobuf";
import { parseCard } from "./any-card.js";
import { ValidationError } from "./errors.js";
import { CollectionSchema, type Collection } from "./gen/ldpsynth/v1/collection_pb.js";
import type { CollectionInfo } from "./reports.js";

export function collectionInfo(msg: Collection): CollectionInfo {
  const card = parseCard(msg.cardJson);
  if (card.schema.name !== msg.name || card.version !== msg.mechanismVersion) {
    throw new ValidationError(
      "collection",
      "a card whose schema name and version match the message",
      "inconsistent collection message",
    );
  }
  const limits = msg.limits;
  return {
    card,
    limits: {
      maxRowsPerClient: limits?.maxRowsPerClient ?? 0n,
      maxBatchReports: limits?.maxBatchReports ?? 0,
      maxMessageBytes: limits?.maxMessageBytes ?? 0,
    },
    ...(msg.sealing === undefined ? {} : { sealing: msg.sealing }),
  };
}

export function decodeCollection(bytes: Uint8Array): CollectionInfo {
  return collectionInfo(fromBinary(CollectionSchema, bytes));
}

/**
 * The collection a server answered a GetCollection for `name` with (collectionInfo: its card verified);
 * ValidationError naming `collection` when it answered with another collection.
 */
export function answeredCollection(msg: Collection, name: string): CollectionInfo {
  const info = collectionInfo(msg);
  if (info.card.schema.name !== name) {
    throw new ValidationError(
      "collection",
      `the collection asked for (${JSON.stringify(name)})`,
      "the server answered with another collection",
    );
  }
  return info;
}
