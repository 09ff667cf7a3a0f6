/** conformance/wire.json: the protobuf bytes a device sends and reads, and the whole device path. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { MechanismCard } from "../src/card.js";
import { decodeCollection } from "../src/collection.js";
import type { JsonObject } from "../src/json.js";
import type { RawValue } from "../src/raw-values.js";
import {
  decodeBatchAck,
  encodeGetCollectionRequest,
  encodeReportBatch,
  validateReports,
  type Reports,
} from "../src/reports.js";
import { encodeColumns } from "../src/rows.js";
import { perturbWithSource } from "../src/sampler.js";
import { ByteStream, cases, fromHex, hex, str, vectors } from "./vectors.js";

const doc = vectors("wire.json");

function reportsOf(batch: JsonObject): Reports {
  return {
    reportIds: fromHex((batch["report_ids"] as string[]).join("")),
    privateCodes: (batch["private_codes"] as string[]).map(BigInt),
    publicCodes: (batch["public_codes"] as string[][]).map((col) => col.map(BigInt)),
  };
}

for (const c of cases(doc, "report_batches")) {
  test(`ReportBatch bytes: ${str(c["id"])}`, () => {
    const bytes = encodeReportBatch(
      reportsOf(c),
      str(c["collection"]),
      str(c["mechanism_version"]),
      BigInt(str(c["sequence"])),
    );
    assert.equal(hex(bytes), c["hex"]);
  });
}

test("GetCollectionRequest bytes", () => {
  for (const c of cases(doc, "get_collection_requests")) {
    assert.equal(hex(encodeGetCollectionRequest(str(c["collection"]))), c["hex"]);
  }
});

test("BatchAck decodes", () => {
  for (const c of cases(doc, "batch_acks")) {
    const ack = decodeBatchAck(fromHex(str(c["hex"])));
    assert.deepEqual(
      [String(ack.sequence), BigInt(ack.accepted), BigInt(ack.duplicates)],
      [c["sequence"], c["accepted"], c["duplicates"]],
    );
  }
});

test("Collection decodes and its card verifies", () => {
  for (const c of cases(doc, "collections")) {
    const info = decodeCollection(fromHex(str(c["hex"])));
    assert.equal(info.card.schema.name, c["name"]);
    assert.equal(info.card.version, c["mechanism_version"]);
    const limits = c["limits"] as JsonObject;
    assert.equal(String(info.limits.maxRowsPerClient), limits["max_rows_per_client"]);
    assert.equal(BigInt(info.limits.maxBatchReports), limits["max_batch_reports"]);
    assert.equal(BigInt(info.limits.maxMessageBytes), limits["max_message_bytes"]);
  }
});

for (const c of cases(doc, "device")) {
  test(`device path: ${str(c["id"])}`, () => {
    const card = MechanismCard.parse(str(c["card_json"]));
    const encoded = encodeColumns(card.schema, c["columns"] as Record<string, RawValue[]>);
    assert.deepEqual(encoded.privateCodes.map(String), c["private_codes"]);
    const stream = new ByteStream(fromHex(str(c["random_hex"])));
    const perturbed = perturbWithSource(card, encoded.privateCodes, stream.source);
    assert.deepEqual(perturbed.map(String), c["perturbed"]);
    assert.equal(stream.read, stream.data.length);
    const batch = c["batch"] as JsonObject;
    const reports: Reports = {
      reportIds: reportsOf(batch).reportIds,
      privateCodes: perturbed,
      publicCodes: encoded.publicCodes,
    };
    validateReports(card.schema, reports);
    assert.equal(hex(encodeReportBatch(reports, card.schema.name, card.version, 0n)), batch["hex"]);
  });
}
