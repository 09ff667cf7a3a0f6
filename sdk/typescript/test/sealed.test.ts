/**
 * conformance/sealed.json (docs/contract.md §16): the plaintext and info of every case, the sealed
 * bytes with the case's ephemeral key (RFC 9180 DeriveKeyPair(ikm_e)), the SealedBatch wire bytes (with
 * their pool_key), the cut into batches of one public key each, SealedAck decoding and the device's checks of Collection.sealing. Opening a sealed report is the
 * aggregator's job (the SDK implements no open): the must_not_open and invalid cases are the
 * replicas' and are checked in the Python suite; here a device's own seals (fresh ephemeral keys)
 * are checked by their length, their enc and their difference from each other. Shuffled oracle and numeric
 * collections (`mechanism_cases`): a number in 8 bytes (OLH, HR, HM, SW), OUE's bit set in ceil(|D|/8) bytes.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { create } from "@bufbuild/protobuf";
import { parseCard } from "../src/any-card.js";
import { decodeCollection } from "../src/collection.js";
import { ValidationError } from "../src/errors.js";
import { SealingSchema, type Sealing } from "../src/gen/ldpsynth/v1/collection_pb.js";
import { deriveKeyPair, importRecipientKey, SUITE_ID } from "../src/hpke.js";
import type { JsonObject } from "../src/json.js";
import { oracleOf, validateReports, type CollectionInfo, type Reports } from "../src/reports.js";
import { decodeSealedAck, encodeSealedBatch, sealedParts } from "../src/sealed-batching.js";
import { Schema } from "../src/schema.js";
import {
  keyId,
  plaintextBytes,
  reportPlaintext,
  sealedReportBytes,
  sealingInfo,
  sealingKey,
  sealPlaintext,
  sealReports,
  SUITE_NAME,
} from "../src/sealing.js";
import { cases, fromHex, hex, str, vectors } from "./vectors.js";

const doc = vectors("sealed.json");
const key = doc["key"] as JsonObject;
const publicKey = fromHex(str(key["public_key"]));
const collection = doc["collection"] as JsonObject;
const published = (): CollectionInfo => decodeCollection(fromHex(str(collection["hex"])));

function reportOf(c: JsonObject): Reports {
  return {
    reportIds: fromHex(str(c["report_id"])),
    privateCodes: [BigInt(str(c["private_code"]))],
    publicCodes: (c["public_codes"] as string[]).map((code) => [BigInt(code)]),
  };
}

test("the suite: suite_id, the key pair from DeriveKeyPair(ikm), the key id", async () => {
  const suite = doc["suite"] as JsonObject;
  assert.equal(suite["name"], SUITE_NAME);
  assert.equal(hex(SUITE_ID), suite["suite_id"]);
  assert.equal(hex(sealingInfo("")), suite["info_prefix"]);
  const pair = await deriveKeyPair(fromHex(str(key["ikm"])));
  assert.equal(hex(pair.publicKey), key["public_key"]);
  assert.equal(hex(await keyId(publicKey)), key["key_id"]);
});

for (const c of cases(doc, "cases")) {
  test(`sealed report: ${str(c["id"])}`, async () => {
    const plaintext = reportPlaintext(reportOf(c), 0, str(c["mechanism_version"]));
    assert.equal(hex(plaintext), c["plaintext"]);
    assert.equal(hex(sealingInfo(str(c["collection"]))), c["info"]);
    const ephemeral = await deriveKeyPair(fromHex(str(c["ikm_e"])));
    assert.equal(hex(ephemeral.publicKey), c["enc"]);
    const sealed = await sealPlaintext(await importRecipientKey(publicKey), str(c["collection"]), plaintext, ephemeral);
    assert.equal(hex(sealed.subarray(0, 32)), c["enc"]);
    assert.equal(hex(sealed.subarray(32)), c["ct"]);
    assert.equal(hex(sealed), c["sealed"]);
  });
}

for (const c of cases(doc, "mechanism_cases")) {
  test(`sealed report of a shuffled ${str(c["mechanism"])} collection: ${str(c["id"])}`, async () => {
    const card = parseCard(str(c["card_json"]));
    const version = str(c["mechanism_version"]);
    assert.equal(card.version, version);
    const oracle = oracleOf(card);
    const reports: Reports = {
      reportIds: fromHex(str(c["report_id"])),
      privateCodes: [BigInt(str(c["report"]))],
      publicCodes: (c["public_codes"] as string[]).map((code) => [BigInt(code)]),
      oracle,
    };
    validateReports(card.schema, reports); // the report is one this device's sampler may give
    const plaintext = reportPlaintext(reports, 0, version);
    assert.equal(hex(plaintext), c["plaintext"]);
    assert.equal(BigInt(plaintextBytes(card.schema, version, oracle)), c["plaintext_bytes"]);
    assert.equal(BigInt(sealedReportBytes(card.schema, version, oracle)), c["sealed_report_bytes"]);
    const ephemeral = await deriveKeyPair(fromHex(str(c["ikm_e"])));
    const sealed = await sealPlaintext(await importRecipientKey(publicKey), card.schema.name, plaintext, ephemeral);
    assert.equal(hex(sealed), c["sealed"]);
  });
}

test("a report too large for its collection's layout is refused, never truncated", () => {
  const c = cases(doc, "mechanism_cases").find((x) => x["id"] === "OUE-largest")!;
  const card = parseCard(str(c["card_json"]));
  const reports: Reports = {
    reportIds: fromHex(str(c["report_id"])),
    privateCodes: [1n << BigInt(8 * oracleOf(card)!.reportBytes)], // one bit past OUE's ceil(|D|/8) bytes
    publicCodes: [[0n]],
    oracle: oracleOf(card),
  };
  assert.throws(
    () => reportPlaintext(reports, 0, card.version),
    (e: unknown) => e instanceof ValidationError && e.field === "private_codes",
  );
  const number = { ...reports, privateCodes: [1n << 64n], oracle: undefined };
  assert.throws(
    () => reportPlaintext(number, 0, "HM/1"),
    (e: unknown) => e instanceof ValidationError && e.field === "private_codes",
  );
});

for (const batch of cases(doc, "sealed_batches")) {
  test(`SealedBatch bytes, pool_key in clear: ${str(batch["id"])}`, () => {
    const byId = new Map(cases(doc, "cases").map((c) => [str(c["id"]), c]));
    const members = (batch["reports"] as string[]).map((id) => byId.get(id)!);
    const reports = fromHex(members.map((c) => str(c["sealed"])).join(""));
    const bytes = encodeSealedBatch(
      str(batch["collection"]),
      fromHex(str(batch["key_id"])),
      BigInt(str(batch["sequence"])),
      reports,
      BigInt(str(batch["pool_key"])),
    );
    assert.equal(hex(bytes), batch["hex"]);
    // Every report of the batch holds its public key: here one public attribute or none, whose code is the key.
    for (const c of members)
      assert.equal(BigInt((c["public_codes"] as string[])[0] ?? "0"), BigInt(str(batch["pool_key"])));
  });
}

test("the worked example's batch names its public key: region 1 of the demo schema", () => {
  const demo = cases(doc, "sealed_batches")[0]!;
  assert.equal(demo["id"], "worked-example-contract-16");
  assert.deepEqual(published().card.schema.foldPublicCodes([[1n]], 1), [BigInt(str(demo["pool_key"]))]);
  assert.equal(str(demo["hex"]).length, 2 * 114);
});

for (const c of cases(doc, "batch_parts")) {
  test(`sealed reports cut into batches of one public key: ${str(c["id"])}`, () => {
    const parts = sealedParts((c["public_keys"] as string[]).map(BigInt), Number(c["capacity"]));
    const expected = (c["batches"] as JsonObject[]).map((b) => ({ pool_key: b["pool_key"], reports: b["reports"] }));
    assert.deepEqual(
      parts.map((p) => ({ pool_key: String(p.poolKey), reports: p.reports.map(BigInt) })),
      expected,
    );
  });
}

test("a public key is the public codes folded in schema order, as encoding.json states it", () => {
  const encoding = vectors("encoding.json");
  for (const e of cases(encoding, "cases")) {
    const schema = Schema.parse(e["schema"]);
    const rows = e["rows"] as JsonObject[];
    const m = schema.publicAttributes.length;
    const columns = Array.from({ length: m }, (_, j) => rows.map((r) => BigInt((r["public_codes"] as string[])[j]!)));
    assert.deepEqual(
      schema.foldPublicCodes(columns, rows.length),
      rows.map((r) => BigInt(str(r["public_key"]))),
      str(e["id"]),
    );
  }
});

test("SealedAck decodes", () => {
  for (const c of cases(doc, "sealed_acks")) {
    const ack = decodeSealedAck(fromHex(str(c["hex"])));
    assert.deepEqual([String(ack.sequence), BigInt(ack.accepted)], [c["sequence"], c["accepted"]]);
  }
});

test("Collection.sealing passes the device's checks; a device's own seals are fresh every time", async () => {
  const info = published();
  const sealing = await sealingKey(info);
  assert.equal(hex(sealing.keyId), key["key_id"]);
  const expected = (collection["sealing"] as JsonObject)["sealed_report_bytes"];
  assert.equal(BigInt(sealing.sealedReportBytes), expected);
  const c = cases(doc, "cases")[0]!;
  const report = reportOf(c);
  const twice: Reports = {
    reportIds: fromHex(str(c["report_id"]).repeat(2)),
    privateCodes: [...report.privateCodes, ...report.privateCodes],
    publicCodes: report.publicCodes.map((col) => [...col, ...col]),
  };
  const sealed = await sealReports(sealing, info.card.schema.name, info.card.version, twice);
  const width = sealing.sealedReportBytes;
  assert.equal(sealed.length, 2 * width);
  const [a, b] = [sealed.subarray(0, width), sealed.subarray(width)];
  assert.notEqual(hex(a.subarray(0, 32)), hex(b.subarray(0, 32)));
  assert.notEqual(hex(a.subarray(32)), hex(b.subarray(32)));
});

test("a collection whose sealing a device cannot use is refused naming the field", async () => {
  const info = published();
  const with_ = (
    fields: Partial<Pick<Sealing, "kemId" | "keyId" | "publicKey" | "sealedReportBytes">>,
  ): CollectionInfo => ({ ...info, sealing: create(SealingSchema, { ...info.sealing!, ...fields }) });
  const { sealing: _omitted, ...clear } = info;
  const refused = async (target: CollectionInfo, field: string): Promise<void> => {
    await assert.rejects(sealingKey(target), (err) => err instanceof ValidationError && err.field === field);
  };
  await refused(clear, "sealing");
  await refused(with_({ kemId: 0x0010 }), "sealing");
  await refused(with_({ publicKey: new Uint8Array(31) }), "sealing.public_key");
  await refused(with_({ keyId: new Uint8Array(16) }), "sealing.key_id");
  await refused(with_({ sealedReportBytes: info.sealing!.sealedReportBytes + 1 }), "sealing.sealed_report_bytes");
});
